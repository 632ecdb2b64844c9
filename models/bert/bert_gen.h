// Synthetic BERT checkpoints in the Hugging Face layout (config.json,
// model.safetensors, vocab.txt) with seeded weights, for tests and for
// performance work at shapes no bundled model has (BERT-base, BERT-large);
// and conversion of a real checkpoint to FP16 storage (half the bytes).
// Both write folders that TransformerEncoderCpu, the served "bert" backend and
// transformers.BertModel all load. Thread-compatible.
#ifndef INFER_MODELS_BERT_BERT_GEN_H_
#define INFER_MODELS_BERT_BERT_GEN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/bert/bert_config.h"
#include "models/checkpoint.h"

namespace infer {

// Named shapes: "tiny" (2 layers, hidden 32, for tests), "minilm-l6"
// (all-MiniLM-L6-v2), "bge-small", "bert-base", "bert-large".
// INVALID_ARGUMENT listing the names for any other.
absl::StatusOr<BertConfig> BertPreset(absl::string_view name);
std::vector<std::string> BertPresetNames();

struct BertGenOptions {
  BertConfig config;
  uint64_t seed = 1;
  std::string dtype = "F32";  // or "F16"
};

// Writes a checkpoint of `options.config`'s shape into `dir` (created if
// missing): weights drawn from the seed (BERT-like scales: matrices of
// standard deviation 0.02, LayerNorm gains near 1), and a synthetic WordPiece
// vocabulary of exactly vocab_size entries ([PAD]=0, [UNK], [CLS], [SEP],
// [MASK], characters, ## continuations, then made-up words; at least 128).
absl::Status GenerateBertCheckpoint(const std::string& dir, const BertGenOptions& options);

// Copies the checkpoint in `src` to `dst` with model.safetensors stored as
// `dtype` ("F16" halves it); config.json, and the tokenizer files
// (tokenizer.json, tokenizer_config.json, special_tokens_map.json, vocab.txt)
// and sentence-transformers' (sentence_bert_config.json,
// 1_Pooling/config.json) the source has, are copied as they are.
// Integer buffers (position_ids) are dropped: the encoders do not read them.
absl::Status ConvertCheckpoint(const std::string& src, const std::string& dst,
                               const std::string& dtype);

}  // namespace infer

#endif  // INFER_MODELS_BERT_BERT_GEN_H_
