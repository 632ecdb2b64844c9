// Encoding: what a tokenizer gives for one text or a pair, position by
// position: ids, type ids, token strings, byte offsets into the text the
// position came from (0,0 for added special tokens), whether the position is
// a special token, and the attention mask (all ones: no padding here).
#ifndef INFER_MODELS_TEXT_ENCODING_H_
#define INFER_MODELS_TEXT_ENCODING_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "models/text/normalized_string.h"

namespace infer::text {

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  std::vector<std::string> tokens;
  std::vector<Offsets> offsets;  // bytes of the text (or pair text) the token came from
  std::vector<uint8_t> special_tokens_mask;
  std::vector<uint8_t> attention_mask;
  // Which text each position came from: 0, 1 (the pair), -1 (added special).
  std::vector<int8_t> sequence_ids;

  size_t size() const { return ids.size(); }

  // Keeps `max_length` positions: the first ones (right truncation removes
  // from the end) or the last ones (left).
  void Truncate(size_t max_length, bool left) {
    if (ids.size() <= max_length) return;
    const size_t from = left ? ids.size() - max_length : 0;
    auto cut = [&](auto& v) {
      v.erase(v.begin() + from + max_length, v.end());
      v.erase(v.begin(), v.begin() + from);
    };
    cut(ids);
    cut(type_ids);
    cut(tokens);
    cut(offsets);
    cut(special_tokens_mask);
    cut(attention_mask);
    cut(sequence_ids);
  }

  // A copy of `n` positions from `from` on.
  Encoding Slice(size_t from, size_t n) const {
    Encoding e;
    auto copy = [&](auto& to, const auto& v) {
      to.assign(v.begin() + static_cast<std::ptrdiff_t>(from),
                v.begin() + static_cast<std::ptrdiff_t>(from + n));
    };
    copy(e.ids, ids);
    copy(e.type_ids, type_ids);
    copy(e.tokens, tokens);
    copy(e.offsets, offsets);
    copy(e.special_tokens_mask, special_tokens_mask);
    copy(e.attention_mask, attention_mask);
    copy(e.sequence_ids, sequence_ids);
    return e;
  }

  void Reserve(size_t n) {
    ids.reserve(n);
    type_ids.reserve(n);
    tokens.reserve(n);
    offsets.reserve(n);
    special_tokens_mask.reserve(n);
    attention_mask.reserve(n);
    sequence_ids.reserve(n);
  }

  void Append(const Encoding& o) {
    auto add = [](auto& v, const auto& w) { v.insert(v.end(), w.begin(), w.end()); };
    add(ids, o.ids);
    add(type_ids, o.type_ids);
    add(tokens, o.tokens);
    add(offsets, o.offsets);
    add(special_tokens_mask, o.special_tokens_mask);
    add(attention_mask, o.attention_mask);
    add(sequence_ids, o.sequence_ids);
  }

  // `o` at the end, emptied (its tokens moved), every position given type
  // id `type_id`.
  void AppendMoved(Encoding* o, int32_t type_id) {
    auto add = [](auto& v, const auto& w) { v.insert(v.end(), w.begin(), w.end()); };
    add(ids, o->ids);
    type_ids.insert(type_ids.end(), o->size(), type_id);
    tokens.insert(tokens.end(), std::make_move_iterator(o->tokens.begin()),
                  std::make_move_iterator(o->tokens.end()));
    add(offsets, o->offsets);
    add(special_tokens_mask, o->special_tokens_mask);
    add(attention_mask, o->attention_mask);
    add(sequence_ids, o->sequence_ids);
    *o = Encoding();
  }

  // One special token at the end.
  void AddSpecial(int32_t id, const std::string& token, int32_t type_id) {
    ids.push_back(id);
    type_ids.push_back(type_id);
    tokens.push_back(token);
    offsets.push_back({0, 0});
    special_tokens_mask.push_back(1);
    attention_mask.push_back(1);
    sequence_ids.push_back(-1);
  }
};

// What a model needs of an encoded pair: its ids and type ids.
struct PairIds {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
};

enum class TruncationStrategy { kLongestFirst, kOnlyFirst, kOnlySecond };

struct Truncation {
  // Positions in all, the special tokens included.
  size_t max_length = 0;
  TruncationStrategy strategy = TruncationStrategy::kLongestFirst;
  bool left = false;  // remove from the start instead of the end
};

struct EncodeOptions {
  bool add_special_tokens = true;
  std::optional<Truncation> truncation;
  // Offsets in characters (code points) instead of bytes, as Python's
  // `tokenizers` reports them.
  bool char_offsets = false;
};

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_ENCODING_H_
