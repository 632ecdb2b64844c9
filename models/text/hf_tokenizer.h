// HfTokenizer: a Hugging Face tokenizer.json, run in C++ with the ids,
// type ids and offsets the original `tokenizers` library gives.
//
// The pipeline, as the file describes it: added tokens are found first
// (AddedVocabulary), the rest is normalized (normalizers.h), cut into words
// (pre_tokenizers.h) and tokenized (token_model.h); the text, or the text
// and its pair, is then truncated if asked, and the post-processor adds the
// special tokens (post_processors.h). Every component type the file names
// must be one this implements: anything else is refused at load, naming it.
//
// Decode runs the file's "decoder" the same way.
//
// Differences from the original, by design: the file's "truncation" and
// "padding" sections are not applied (a caller asks for truncation per
// encode, and the engine pads batches itself); text that is not valid UTF-8
// is refused (INVALID_ARGUMENT), where the original cannot receive it at all
// (Rust strings are UTF-8). Offsets are byte offsets, or character offsets
// as Python's `tokenizers` reports them (EncodeOptions::char_offsets).
//
// Immutable after load; every method may be called from any number of
// threads at once, with no lock.
#ifndef INFER_MODELS_TEXT_HF_TOKENIZER_H_
#define INFER_MODELS_TEXT_HF_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/text/added_vocabulary.h"
#include "models/text/decoders.h"
#include "models/text/encoding.h"
#include "models/text/normalizers.h"
#include "models/text/post_processors.h"
#include "models/text/pre_tokenizers.h"
#include "models/text/token_model.h"
#include "models/text/tokenizer.h"
#include "nlohmann/json_fwd.hpp"

namespace infer::text {

class HfTokenizer final : public Tokenizer {
 public:
  // NOT_FOUND for a missing file; INVALID_ARGUMENT, naming the file and the
  // component, for anything malformed or not supported.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromFile(const std::string& path);
  // `what` names the document in errors.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromJson(absl::string_view json,
                                                               absl::string_view what);
  // From a parsed document (one built in memory, e.g. from a vocab.txt).
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromDocument(const nlohmann::json& j,
                                                                   absl::string_view what);

  // Tokenizer (tokenizer.h).
  absl::StatusOr<Encoding> Encode(absl::string_view text, std::optional<absl::string_view> pair,
                                  const EncodeOptions& options) const override;
  absl::StatusOr<std::vector<int32_t>> EncodeIds(
      absl::string_view text, const std::optional<Truncation>& truncation) const override;
  absl::StatusOr<std::vector<PairIds>> EncodePairIds(
      absl::string_view first, const std::vector<absl::string_view>& seconds,
      const std::optional<Truncation>& truncation) const override;
  // Through the file's decoder (without one, the tokens joined with spaces).
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  int64_t pad_id() const override { return pad_id_; }
  // Above every id Encode can give: the model's, the added tokens' and the
  // post-processor's.
  int64_t vocab_size() const override { return vocab_size_; }

  std::optional<int32_t> TokenToId(absl::string_view token) const;
  const std::string* IdToToken(int32_t id) const;

 private:
  HfTokenizer() = default;
  Encoding EncodeOne(absl::string_view text, int32_t type_id, int8_t sequence_id,
                     bool char_offsets) const;

  std::unique_ptr<Normalizer> normalizer_;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer_;  // may be null
  std::unique_ptr<TokenModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;  // may be null
  std::unique_ptr<Decoder> decoder_;               // may be null
  AddedVocabulary added_;
  int64_t pad_id_ = 0;
  int64_t vocab_size_ = 0;
};

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_HF_TOKENIZER_H_
