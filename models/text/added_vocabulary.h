// AddedVocabulary: the "added_tokens" of a tokenizer.json (special tokens
// such as [CLS] or <s>, and tokens added after training). They are found in
// the text before the model sees it and become one token each, never split:
// those with normalized false are matched in the text as sent, the others in
// the text after the normalizer (against their own normalized content).
// Matching is leftmost-longest, with each token's single_word, lstrip and
// rstrip options, as Hugging Face `tokenizers` does it.
//
// Immutable after creation; thread-safe.
#ifndef INFER_MODELS_TEXT_ADDED_VOCABULARY_H_
#define INFER_MODELS_TEXT_ADDED_VOCABULARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "models/text/normalizers.h"
#include "models/text/pre_tokenizers.h"

namespace infer::text {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `tokens` with their final ids; `normalizer` (may be null) gives the
  // normalized content of tokens with normalized true.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // `text` (valid UTF-8) in pieces: added tokens found (pieces with their one
  // token), and the rest normalized with `normalizer` (may be null).
  Pieces ExtractAndNormalize(absl::string_view text, const Normalizer* normalizer) const;

  std::optional<int32_t> Find(absl::string_view content) const;
  // Whether `content` is the content of a token marked special.
  bool IsSpecial(absl::string_view content) const;
  const AddedToken* ById(int32_t id) const;
  // The string an id stands for: the content, or for a token with
  // normalized true its normalized content (as the original's id_to_token).
  const std::string* TokenString(int32_t id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie of the patterns; leftmost-longest matching walks it from
  // each position.
  struct Trie {
    struct Node {
      absl::flat_hash_map<uint8_t, int32_t> next;
      int32_t token = -1;  // index into tokens_ of the pattern ending here
    };
    std::vector<Node> nodes;
    void Add(absl::string_view pattern, int32_t token);
    bool empty() const { return nodes.size() <= 1; }
  };
  struct Match {
    std::optional<int32_t> token;  // index into tokens_; nullopt: no token
    size_t start, end;
  };
  std::vector<Match> FindMatches(absl::string_view s, const Trie& trie) const;
  void SplitWith(Piece piece, const Trie& trie, Pieces* out) const;

  std::vector<AddedToken> tokens_;
  std::vector<std::string> strings_;                      // per token: what TokenString gives
  absl::flat_hash_map<std::string, int32_t> by_content_;  // -> index
  absl::flat_hash_map<int32_t, int32_t> by_id_;           // -> index
  absl::flat_hash_set<std::string> special_contents_;     // of the tokens marked special
  Trie raw_;         // normalized false: matched on the text as sent
  Trie normalized_;  // normalized true: matched after normalization
};

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_ADDED_VOCABULARY_H_
