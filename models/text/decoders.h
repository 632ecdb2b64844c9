// Decoders of a tokenizer.json ("decoder"): turn a sequence of token
// strings back into text, as Hugging Face `tokenizers` does. Types and
// fields are its own:
//   ByteLevel, Metaspace {replacement, prepend_scheme}, WordPiece {prefix, cleanup}
//   BPEDecoder {suffix}, ByteFallback, Fuse, Strip {content, start, stop}
//   Replace {pattern: {String | Regex}, content}, Sequence {decoders}
// Any other type is refused by name. Immutable after creation; thread-safe.
#ifndef INFER_MODELS_TEXT_DECODERS_H_
#define INFER_MODELS_TEXT_DECODERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace infer::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings in place (the pieces are joined afterwards).
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
};

// From a tokenizer.json "decoder" object (not null).
absl::StatusOr<std::unique_ptr<Decoder>> DecoderFromJson(const nlohmann::json& j);

// `bytes` as UTF-8, each maximal invalid subsequence replaced by U+FFFD (the
// substitution Rust's String::from_utf8_lossy makes).
std::string Utf8Lossy(absl::string_view bytes);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_DECODERS_H_
