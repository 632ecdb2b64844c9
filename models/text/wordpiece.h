// WordPieceTokenizer: BERT's tokenizer, as Hugging Face's BertTokenizer does
// it, so text sent to an encoder maps to the token ids it was trained on.
//
// 1. Basic tokenization: decode UTF-8; drop NUL, U+FFFD and control and
//    format characters; map whitespace to spaces; put spaces around CJK
//    ideographs; lower-case and strip accents (when lower-casing); split on
//    whitespace and around punctuation.
// 2. WordPiece: for each word, greedy longest-match-first against the vocab,
//    continuations prefixed "##"; a word with no match, or longer than
//    max_chars_per_word characters, becomes [UNK].
//
// Unicode coverage without ICU: lower-casing covers ASCII, Latin-1, Latin
// Extended-A, Greek and Cyrillic; accent stripping decomposes Latin-1 and
// Latin Extended-A letters and drops combining marks (U+0300-U+036F);
// punctuation follows the Unicode P* categories by table. Text outside those
// ranges passes through unchanged (as the reference does for most scripts).
//
// The server's tokenizer before tokenizer.json support, kept as the baseline
// of bench/tokenizer_vs_hf.py and as the id source of encoder tests; models
// load theirs with LoadFolderTokenizer (models/text/load_tokenizer.h), which
// turns a vocab.txt into Hugging Face's exact pipeline. Immutable after
// creation; thread-safe.
#ifndef INFER_MODELS_TEXT_WORDPIECE_H_
#define INFER_MODELS_TEXT_WORDPIECE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer {

class WordPieceTokenizer final {
 public:
  struct Options {
    bool lower_case = true;
    int max_chars_per_word = 100;
  };

  // Reads a vocab.txt (one token per line, id = line number). NOT_FOUND for a
  // missing file; INVALID_ARGUMENT when [CLS], [SEP], [UNK] or [PAD] is
  // missing or a token repeats.
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> FromVocabFile(const std::string& path,
                                                                           const Options& options);
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> FromVocab(
      std::vector<std::string> tokens, const Options& options);

  // [CLS] + the word pieces of `text` + [SEP]. INVALID_ARGUMENT for text
  // that is not valid UTF-8.
  absl::StatusOr<std::vector<int64_t>> Encode(absl::string_view text) const;

  // Step 1 alone (for tests): the words, lower-cased and split.
  absl::StatusOr<std::vector<std::string>> BasicTokenize(absl::string_view text) const;

  int64_t cls_id() const { return cls_; }
  int64_t sep_id() const { return sep_; }
  int64_t unk_id() const { return unk_; }
  int64_t pad_id() const { return pad_; }
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  WordPieceTokenizer(std::vector<std::string> tokens, const Options& options);
  void WordPieces(const std::u32string& word, std::vector<int64_t>* ids) const;

  const Options options_;
  std::vector<std::string> tokens_;
  absl::flat_hash_map<std::string, int64_t> ids_;
  int64_t cls_ = -1, sep_ = -1, unk_ = -1, pad_ = -1;
};

}  // namespace infer

#endif  // INFER_MODELS_TEXT_WORDPIECE_H_
