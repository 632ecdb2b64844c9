// A BERT-family config.json (Hugging Face's BertConfig): the fields the
// encoder needs, read and checked, and written back for generated models.
//
// Thread-compatible (plain functions and value types).
#ifndef INFER_MODELS_BERT_BERT_CONFIG_H_
#define INFER_MODELS_BERT_BERT_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace infer {

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

#endif  // INFER_MODELS_BERT_BERT_CONFIG_H_
