// Encoding: what a tokenizer gives for one text or a pair, position by
// position: ids, type ids, token strings, byte offsets into the text the
// position came from (0,0 for added special tokens), whether the position is
// a special token, and the attention mask (all ones: no padding here).
#ifndef INFER_MODELS_TEXT_ENCODING_H_
#define INFER_MODELS_TEXT_ENCODING_H_

#include <cstddef>
#include <cstdint>
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

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_ENCODING_H_
