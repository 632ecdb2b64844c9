// Tokenizer: text to a model's token ids, and back, as the model's reference
// tokenizer (Hugging Face's `tokenizers`) does it. A model that takes text
// owns one and calls it from Model::Preprocess, so the contract is the
// Model's: every method may be called from any number of threads at once,
// with no lock, and gives the same answer on every thread.
//
// Implementation: text::HfTokenizer (models/text/hf_tokenizer.h), built
// from a folder's tokenizer.json or vocab.txt by LoadFolderTokenizer
// (models/text/load_tokenizer.h). A model family loads its tokenizer from
// the model's folder; nothing else names an implementation.
#ifndef INFER_MODELS_TEXT_TOKENIZER_H_
#define INFER_MODELS_TEXT_TOKENIZER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/text/encoding.h"

namespace infer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // `text`, or `text` and its `pair`, position by position: ids, type ids,
  // tokens, offsets, the special-token and attention masks, sequence ids;
  // with the model's special tokens unless options say otherwise, truncated
  // when options ask (right or left; longest_first, only_first or
  // only_second for a pair). INVALID_ARGUMENT for text that is not valid
  // UTF-8, and for a truncation that cannot be met.
  virtual absl::StatusOr<text::Encoding> Encode(absl::string_view text,
                                                std::optional<absl::string_view> pair,
                                                const text::EncodeOptions& options) const = 0;

  // The ids alone of one text with its special tokens (Encode's .ids, cut
  // to `truncation` when set), without building the rest: the serving path.
  virtual absl::StatusOr<std::vector<int32_t>> EncodeIds(
      absl::string_view text, const std::optional<text::Truncation>& truncation) const = 0;

  // The serving path for pairs: for each of `seconds`, the ids and type ids
  // Encode(first, seconds[i]) gives with the special tokens, cut to
  // `truncation` when set, with `first` tokenized once (a rerank query
  // against many passages). INVALID_ARGUMENT as Encode; for a pair with
  // seconds[i], the message begins "element i: ".
  virtual absl::StatusOr<std::vector<text::PairIds>> EncodePairIds(
      absl::string_view first, const std::vector<absl::string_view>& seconds,
      const std::optional<text::Truncation>& truncation) const = 0;

  // `ids` back to text, leaving out ids the tokenizer does not have and,
  // with skip_special_tokens, the special tokens.
  virtual std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const = 0;

  // The id a padded position holds.
  virtual int64_t pad_id() const = 0;
  // How many ids there are: every id Encode gives is below it.
  virtual int64_t vocab_size() const = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_TEXT_TOKENIZER_H_
