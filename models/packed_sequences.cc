#include "models/packed_sequences.h"

#include <algorithm>

namespace infer {

int64_t CountRealTokens(const int64_t* mask, int64_t n) {
  if (mask == nullptr) return n;
  int64_t real = 0;
  for (int64_t i = 0; i < n; ++i) real += mask[i] != 0;
  return real;
}

void AppendPackedRows(const int64_t* ids, const int64_t* mask, const int64_t* types, int64_t rows,
                      int64_t seq, const PackedLayout& layout, int32_t* buffer, int64_t* row,
                      int64_t* token, int64_t* longest, int64_t* width,
                      int64_t position_padding_id) {
  int32_t* out_ids = buffer + layout.ids();
  int32_t* out_positions = buffer + layout.positions();
  int32_t* out_types = layout.with_types ? buffer + layout.types() : nullptr;
  int32_t* offsets = buffer + layout.offsets();
  if (*row == 0) offsets[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t begin = *token;
    int64_t counted = 0;  // RoBERTa's: the row's tokens so far that are not padding
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t i = r * seq + s;
      const bool padding = ids[i] == position_padding_id;
      if (!padding) ++counted;
      if (mask != nullptr && mask[i] == 0) continue;
      const int64_t position = position_padding_id < 0 ? s : padding ? -1 : counted - 1;
      out_ids[*token] = static_cast<int32_t>(ids[i]);
      out_positions[*token] = static_cast<int32_t>(position);
      if (out_types != nullptr)
        out_types[*token] = types != nullptr ? static_cast<int32_t>(types[i]) : 0;
      *width = std::max(*width, position + 1);
      ++*token;
    }
    *longest = std::max(*longest, *token - begin);
    offsets[++*row] = static_cast<int32_t>(*token);
  }
}

PackedSequences::PackedSequences(const int64_t* ids, const int64_t* mask, int64_t rows, int64_t seq,
                                 const int64_t* types, int64_t position_padding_id)
    : layout_{rows, CountRealTokens(mask, rows * seq), types != nullptr},
      buffer_(layout_.bytes() / sizeof(int32_t)) {
  int64_t row = 0, token = 0;
  AppendPackedRows(ids, mask, types, rows, seq, layout_, buffer_.data(), &row, &token, &longest_,
                   &width_, position_padding_id);
}

PackedSequencesView PackedLayout::View(const int32_t* buffer, const int32_t* host_offsets,
                                       int64_t longest, int64_t width) const {
  PackedSequencesView v;
  v.ids = buffer + ids();
  v.positions = buffer + positions();
  v.offsets = buffer + offsets();
  v.types = with_types ? buffer + types() : nullptr;
  v.host_offsets = host_offsets;
  v.rows = rows;
  v.tokens = tokens;
  v.longest = longest;
  v.width = width;
  return v;
}

PackedSequencesView PackedSequences::view() const {
  return layout_.View(buffer_.data(), buffer_.data() + layout_.offsets(), longest_, width_);
}

}  // namespace infer
