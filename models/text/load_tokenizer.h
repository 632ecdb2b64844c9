// The tokenizer of a Hugging Face model folder, as transformers'
// AutoTokenizer (the fast, `tokenizers`-backed one) builds it:
//
//   - tokenizer.json when the folder has one: the file is the contract
//     (hf_tokenizer.h runs it);
//   - else vocab.txt, converted as transformers' BertTokenizerFast converts
//     a BERT vocabulary (its BertConverter), into the same pipeline a
//     tokenizer.json would describe: BertNormalizer (clean text, CJK
//     characters spaced, accents stripped when lower-casing unless
//     strip_accents says otherwise, lower case), BertPreTokenizer, WordPiece
//     ("##" continuations, [UNK], 100 characters a word at most), [CLS] A
//     [SEP] / [CLS] A [SEP] B [SEP] with type ids 0 and 1, the WordPiece
//     decoder, and [PAD] [UNK] [CLS] [SEP] [MASK] as special added tokens
//     (those the vocabulary has). tokenizer_config.json's do_lower_case,
//     tokenize_chinese_chars and strip_accents apply, as they do there.
//
// Either way, tokenizer_config.json's model_max_length is reported (the
// models' maximum sequence length follows sentence-transformers' order:
// sentence_bert_config.json, then this, then the position table).
#ifndef INFER_MODELS_TEXT_LOAD_TOKENIZER_H_
#define INFER_MODELS_TEXT_LOAD_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "models/text/hf_tokenizer.h"

namespace infer::text {

struct BertVocabOptions {
  bool lowercase = true;
  bool chinese_chars = true;
  // Unset: strip accents when lower-casing (BertNormalizer's default).
  std::optional<bool> strip_accents;
};

// vocab.txt (one token per line, its id the line number) as the pipeline
// above. NOT_FOUND for a missing file; INVALID_ARGUMENT naming the line for
// a token given twice or not UTF-8, and when [UNK], [CLS] or [SEP] is
// missing.
absl::StatusOr<std::unique_ptr<HfTokenizer>> BertTokenizerFromVocab(
    const std::string& vocab_path, const BertVocabOptions& options);

struct FolderTokenizer {
  std::unique_ptr<HfTokenizer> tokenizer;
  std::string source;  // the file it came from: ".../tokenizer.json" or ".../vocab.txt"
  // tokenizer_config.json's model_max_length; unset when absent or one of
  // transformers' "no limit" sentinels (1e30 and the like).
  std::optional<int64_t> model_max_length;
};

// The folder's tokenizer, as above. NOT_FOUND when it has neither
// tokenizer.json nor vocab.txt; INVALID_ARGUMENT, naming the file, for one
// that is malformed.
absl::StatusOr<FolderTokenizer> LoadFolderTokenizer(const std::string& dir);

// `path` as the tools take it: a model folder (its tokenizer, as above) or a
// tokenizer.json file.
absl::StatusOr<std::unique_ptr<HfTokenizer>> LoadTokenizer(const std::string& path);

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_LOAD_TOKENIZER_H_
