// Post-processors of a tokenizer.json ("post_processor"): add the model's
// special tokens around the encoded text (or pair) and set type ids. Types
// and fields are Hugging Face `tokenizers`' own:
//   BertProcessing {cls, sep}, RobertaProcessing {cls, sep, trim_offsets, add_prefix_space}
//   TemplateProcessing {single, pair, special_tokens}
//   ByteLevel {trim_offsets, add_prefix_space} (offsets only), Sequence {processors}
// Any other type is refused by name. Immutable after creation; thread-safe.
#ifndef INFER_MODELS_TEXT_POST_PROCESSORS_H_
#define INFER_MODELS_TEXT_POST_PROCESSORS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/text/encoding.h"
#include "nlohmann/json_fwd.hpp"

namespace infer::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // How many special tokens Process adds to one text (is_pair false) or a
  // pair: truncation keeps room for them.
  virtual size_t AddedTokens(bool is_pair) const = 0;
  // Rewrites the encodings of a text, or of a text and its pair (each with
  // type ids 0 and 1 on entry); the caller concatenates what comes back.
  virtual void Process(std::vector<Encoding>* encodings, bool add_special_tokens) const = 0;
  // The ids alone of one text, its special tokens added: the ids
  // Process(…, true) gives for a single text (the fast path when nothing
  // but ids is wanted).
  virtual void ProcessIds(std::vector<int32_t>* ids) const = 0;
  // The largest id Process may add (-1: none). The file states these ids
  // itself, so they count towards the tokenizer's vocab_size.
  virtual int64_t MaxId() const = 0;
};

// From a tokenizer.json "post_processor" object (not null).
absl::StatusOr<std::unique_ptr<PostProcessor>> PostProcessorFromJson(const nlohmann::json& j);

// ByteLevel's offset trimming: a token's leading and trailing spaces (the
// byte-level stand-in of ' ', or whitespace) are left out of its offsets.
void TrimByteLevelOffsets(Encoding* e, bool add_prefix_space);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_POST_PROCESSORS_H_
