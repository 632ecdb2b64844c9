// Arbitrary bytes as a tokenizer.json: loading must give a tokenizer or an
// error, never a crash, a hang or an allocation the document's size does
// not justify. A tokenizer that loads then encodes a few texts (and the
// input itself, as text), and each encoding must be consistent: one entry
// per position in every field, ids below vocab_size, offsets inside the text;
// decoding the ids (and ids it does not have) must not crash either.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/text/hf_tokenizer.h"

namespace {

void Check(const infer::text::HfTokenizer& t, absl::string_view text) {
  infer::text::EncodeOptions options;
  auto e = t.Encode(text, std::nullopt, options);
  if (!e.ok()) return;
  const size_t n = e->ids.size();
  if (e->type_ids.size() != n || e->tokens.size() != n || e->offsets.size() != n ||
      e->special_tokens_mask.size() != n || e->attention_mask.size() != n) {
    __builtin_trap();
  }
  // Decoding what was encoded, and ids the tokenizer does not have.
  std::vector<int32_t> ids = e->ids;
  ids.push_back(-1);
  ids.push_back(static_cast<int32_t>(t.vocab_size()));
  (void)t.Decode(ids, false);
  (void)t.Decode(ids, true);
  for (size_t i = 0; i < n; ++i) {
    if (e->ids[i] < 0 || e->ids[i] >= t.vocab_size()) __builtin_trap();
    if (e->offsets[i].start > e->offsets[i].end || e->offsets[i].end > text.size()) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  auto t = infer::text::HfTokenizer::FromJson(json, "fuzz.json");
  if (!t.ok()) return 0;
  for (absl::string_view text : {absl::string_view("Hello, world! naïve 東京 😀  x"),
                                 absl::string_view(""), absl::string_view("[CLS] <s> ab ab ab")}) {
    Check(**t, text);
  }
  if (infer::text::ValidUtf8(json) && size < 4096) Check(**t, json);
  return 0;
}
