// Reading Hugging Face checkpoints: `model.safetensors` (tensors) and a
// BERT-family `config.json`. Every size and offset a file declares is checked
// against the file before it is used, so a corrupt or truncated file gives a
// clear error naming the file and the tensor, never a crash.
//
// Thread-compatible (plain functions and value types).
#ifndef INFER_MODELS_CHECKPOINT_H_
#define INFER_MODELS_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infer {

// One tensor of a safetensors file, converted to FP32 (from F32, F16 or BF16).
struct CheckpointTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The floating-point tensors of a safetensors file, by name (integer tensors,
// such as a position_ids buffer, are checked and skipped). INVALID_ARGUMENT
// (naming the file and tensor) for a malformed header, an unknown dtype, a
// shape that does not match the byte range, or a range outside the file;
// NOT_FOUND when the file cannot be read.
absl::StatusOr<std::map<std::string, CheckpointTensor>> ReadSafetensors(const std::string& path);
// The same, on the bytes of such a file; `path` only names it in messages.
absl::StatusOr<std::map<std::string, CheckpointTensor>> ParseSafetensors(const std::string& file,
                                                                         const std::string& path);

// Writes `tensors` as a safetensors file (tensors in name order, 8-byte
// aligned header), each stored as `dtype`: "F32" or "F16" (rounded to
// nearest even). INVALID_ARGUMENT for another dtype or a tensor whose values
// do not match its shape; INTERNAL when the file cannot be written.
absl::Status WriteSafetensors(const std::string& path,
                              const std::map<std::string, CheckpointTensor>& tensors,
                              const std::string& dtype);

// The fields of a BERT-family config.json that an encoder needs.
struct BertConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 2;  // Hugging Face's default when absent
  int64_t pad_token_id = 0;
  double layer_norm_eps = 1e-12;
  std::string hidden_act;  // "gelu" (erf form) is what BERT uses
};

// Parses and checks a config.json: required fields present and positive,
// hidden_size divisible by num_attention_heads, a supported activation.
// INVALID_ARGUMENT naming the file and field.
absl::StatusOr<BertConfig> ReadBertConfig(const std::string& path);
// The same, on the file's text; `path` only names it in messages.
absl::StatusOr<BertConfig> ParseBertConfig(const std::string& text, const std::string& path);

// Writes `config` as a Hugging Face BertModel config.json that ReadBertConfig
// (and transformers.BertModel) reads back.
absl::Status WriteBertConfig(const std::string& path, const BertConfig& config);

}  // namespace infer

#endif  // INFER_MODELS_CHECKPOINT_H_
