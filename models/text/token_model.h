// The model of a tokenizer.json ("model"): turns one pre-tokenized piece
// into tokens. Hugging Face `tokenizers`' three subword algorithms:
//   WordPiece {vocab, unk_token, continuing_subword_prefix, max_input_chars_per_word}
//   BPE {vocab, merges, unk_token, continuing_subword_prefix, end_of_word_suffix,
//        fuse_unk, byte_fallback, ignore_merges; dropout refused unless 0}
//   Unigram {vocab: [[piece, score]...], unk_id, byte_fallback}
// Immutable after creation; thread-safe.
#ifndef INFER_MODELS_TEXT_TOKEN_MODEL_H_
#define INFER_MODELS_TEXT_TOKEN_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/text/pre_tokenizers.h"
#include "nlohmann/json_fwd.hpp"

namespace infer::text {

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  // Appends the tokens of `piece` (non-empty, valid UTF-8), with offsets
  // into it.
  virtual void Tokenize(absl::string_view piece, std::vector<Token>* out) const = 0;
  // Every id is below it (ids need not be dense).
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<int32_t> TokenToId(absl::string_view token) const = 0;
  // nullptr for an id the model does not have.
  virtual const std::string* IdToToken(int32_t id) const = 0;
};

// From a tokenizer.json "model" object. INVALID_ARGUMENT naming the type or
// field that is unknown, malformed or inconsistent (a merge of tokens that
// are not in the vocabulary, an unknown token missing from it).
absl::StatusOr<std::unique_ptr<TokenModel>> TokenModelFromJson(const nlohmann::json& j);

// A vocabulary: token -> id and back. Shared by the model types.
class Vocab {
 public:
  // The number of entries about to be added: ids must then stay below
  // twice that plus 1024 (real vocabularies are dense), so a file cannot
  // make the id table far larger than itself.
  void Expect(size_t entries) { max_id_ = std::min<int64_t>(2 * entries + 1024, int64_t{1} << 24); }
  // Refuses negative ids, ids past the bound, and a token or id given twice.
  absl::Status Add(std::string token, int64_t id);
  std::optional<int32_t> Find(absl::string_view token) const {
    auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* Token(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens_.size() && has_[id] ? &tokens_[id]
                                                                           : nullptr;
  }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  size_t max_token_bytes() const { return max_bytes_; }

 private:
  absl::flat_hash_map<std::string, int32_t> ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> has_;
  size_t max_bytes_ = 0;
  int64_t max_id_ = int64_t{1} << 24;
};

// byte_fallback's pieces: ids[b] is the id of "<0xNN>" for byte b, or -1.
void FindByteTokens(const Vocab& vocab, int32_t ids[256]);

absl::StatusOr<std::unique_ptr<TokenModel>> WordPieceFromJson(const nlohmann::json& j);
absl::StatusOr<std::unique_ptr<TokenModel>> BpeFromJson(const nlohmann::json& j);
absl::StatusOr<std::unique_ptr<TokenModel>> UnigramFromJson(const nlohmann::json& j);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_TOKEN_MODEL_H_
