// BertEncoderCpu: the BERT encoder forward pass in FP32 on the CPU
// (OpenBLAS GEMMs), with mean pooling over the attention mask and optional
// L2 normalisation — the sentence-transformers recipe of all-MiniLM-L6-v2.
//
//   x = LayerNorm(word[ids] + position[0..S) + token_type[0])
//   per layer: x = LayerNorm(x + Wo · MultiHeadAttention(x, mask))
//              x = LayerNorm(x + W2 · GELU(W1 · x))        (GELU: erf form)
//   embedding[b] = mean of x[b, s] over s with mask[b, s] = 1
//
// This is the CPU reference of the encoder and the building block of the
// served encoder model. Immutable after Load; Encode is thread-safe.
#ifndef INFER_MODELS_BERT_CPU_H_
#define INFER_MODELS_BERT_CPU_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/checkpoint.h"

namespace infer {

class BertEncoderCpu {
 public:
  // Loads `dir`/config.json and `dir`/model.safetensors (Hugging Face BERT
  // layout, with or without the "bert." prefix). INVALID_ARGUMENT naming the
  // tensor when one is missing or has the wrong shape.
  static absl::StatusOr<std::unique_ptr<BertEncoderCpu>> Load(const std::string& dir);

  // `ids` and `mask` are [batch, seq] row-major; mask is 1 for real tokens.
  // Returns [batch, hidden] pooled embeddings, L2-normalised if `normalize`.
  absl::StatusOr<std::vector<float>> Encode(absl::Span<const int64_t> ids,
                                            absl::Span<const int64_t> mask, int64_t batch,
                                            int64_t seq, bool normalize) const;

  const BertConfig& config() const { return config_; }
  // Bytes of all weights (FP32, host memory).
  int64_t weight_bytes() const;

 private:
  struct Linear {
    std::vector<float> w;  // [out, in], as Hugging Face stores it
    std::vector<float> b;  // [out]
    int64_t out = 0, in = 0;
  };
  struct Norm {
    std::vector<float> gamma, beta;
  };
  struct Layer {
    Linear q, k, v, attn_out, ffn_in, ffn_out;
    Norm attn_norm, ffn_norm;
  };

  BertEncoderCpu() = default;
  // y[rows, out] = x[rows, in] · W^T + b
  static void Apply(const Linear& l, const float* x, int64_t rows, float* y);
  void LayerNorm(const Norm& n, float* x, int64_t rows) const;

  BertConfig config_;
  std::vector<float> word_, position_, token_type_;
  Norm embed_norm_;
  std::vector<Layer> layers_;
};

}  // namespace infer

#endif  // INFER_MODELS_BERT_CPU_H_
