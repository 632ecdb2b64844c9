// Pre-tokenizers of a tokenizer.json ("pre_tokenizer"): each cuts the
// normalized text into the pieces the model tokenizes one by one (words),
// and may rewrite them (Metaspace, ByteLevel). Types and fields are Hugging
// Face `tokenizers`' own:
//   BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation {behavior}
//   Metaspace {replacement, prepend_scheme: always|first|never, split}
//   ByteLevel {add_prefix_space, trim_offsets, use_regex}
//   Split {pattern: {String | Regex}, behavior, invert}, Digits {individual_digits}
//   Sequence {pretokenizers}
// Any other type is refused by name. Immutable after creation; thread-safe.
#ifndef INFER_MODELS_TEXT_PRE_TOKENIZERS_H_
#define INFER_MODELS_TEXT_PRE_TOKENIZERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/text/normalized_string.h"
#include "nlohmann/json_fwd.hpp"

namespace infer::text {

// A token of the model: its id, its string, and its byte range in the
// normalized piece it came from.
struct Token {
  int32_t id = 0;
  std::string value;
  Offsets offsets;
};

// The text in pieces. A piece with tokens is final: added tokens are
// matched before pre-tokenization and never cut again.
struct Piece {
  NormalizedString normalized;
  std::optional<std::vector<Token>> tokens;
};
using Pieces = std::vector<Piece>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void PreTokenize(Pieces* pieces) const = 0;
};

// From a tokenizer.json "pre_tokenizer" object (not null). INVALID_ARGUMENT
// naming the type or field that is unknown or malformed.
absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const nlohmann::json& j);

// The byte-level alphabet (GPT-2's): each byte's printable stand-in.
char32_t ByteToChar(uint8_t b);
// The byte a stand-in came from; -1 for a character outside the alphabet.
int CharToByte(char32_t c);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_PRE_TOKENIZERS_H_
