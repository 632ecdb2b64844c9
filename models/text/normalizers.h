// Normalizers of a tokenizer.json ("normalizer"): each rewrites the text
// before it is split, tracking offsets (NormalizedString). The types and
// their fields are Hugging Face `tokenizers`' own:
//   BertNormalizer {clean_text, handle_chinese_chars, strip_accents, lowercase}
//   NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip {strip_left, strip_right}
//   Replace {pattern: {String | Regex}, content}, Prepend {prepend}
//   Precompiled {precompiled_charsmap} (SentencePiece's rules; precompiled.cc)
//   Sequence {normalizers}
// Any other type is refused by name. Immutable after creation; thread-safe.
#ifndef INFER_MODELS_TEXT_NORMALIZERS_H_
#define INFER_MODELS_TEXT_NORMALIZERS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/text/normalized_string.h"
#include "nlohmann/json_fwd.hpp"

namespace infer::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(NormalizedString* s) const = 0;
};

// From a tokenizer.json "normalizer" object (not null). INVALID_ARGUMENT
// naming the type or field that is unknown or malformed.
absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const nlohmann::json& j);
// The Precompiled type alone (precompiled.cc).
absl::StatusOr<std::unique_ptr<Normalizer>> PrecompiledFromJson(const nlohmann::json& j);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_NORMALIZERS_H_
