// Tokenizer: text to a model's token ids, as the model's reference
// tokenizer (Hugging Face's) encodes it with its special tokens. A model
// that takes text owns one and calls it from Model::Preprocess, so the
// contract is the Model's: every method may be called from any number of
// threads at once, and gives the same answer on every thread.
//
// Implementations: WordPieceTokenizer (models/text/wordpiece.h, BERT's
// vocab.txt) and text::HfTokenizer (models/text/hf_tokenizer.h, a Hugging
// Face tokenizer.json). A model family chooses and loads its tokenizer from
// the model's folder; nothing else names an implementation.
#ifndef INFER_MODELS_TEXT_TOKENIZER_H_
#define INFER_MODELS_TEXT_TOKENIZER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The ids of `text`, the model's special tokens included (e.g. BERT's
  // [CLS] ... [SEP]). INVALID_ARGUMENT for text that is not valid UTF-8.
  virtual absl::StatusOr<std::vector<int64_t>> Encode(absl::string_view text) const = 0;
  // The id a padded position holds.
  virtual int64_t pad_id() const = 0;
  // How many ids there are: every id Encode gives is below it.
  virtual int64_t vocab_size() const = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_TEXT_TOKENIZER_H_
