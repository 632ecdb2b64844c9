// SpladeHead: SPLADE's sparse lexical vector from a transformer's last hidden
// states, as sentence-transformers' SparseEncoder computes it (an
// MLMTransformer, then SpladePooling):
//
//   logits[t] = decoder · LayerNorm(act(dense · x[t] + b)) + b_dec   [vocab]
//   value[t]  = log(1 + ReLU(logits[t]))      (log1p once more: log1p_relu)
//   out[s]    = max (or sum) of value[t] over sequence s's real tokens
//
// The logits are vocabulary-wide (30k columns for BERT, 250k for XLM-R), so
// they are never held for the whole batch: tokens go through the head in
// chunks of at most kChunkTokens, and each chunk's logits are folded into
// the per-sequence result before the next. ScratchBytes counts the chunk's
// buffers; the caller's output is [rows, vocab].
//
// Max pooling takes the largest logit of each sequence and column first
// (log1p and ReLU are monotone), so each output value is transformed once;
// sum pooling transforms only the positive logits (ReLU makes the others 0).
//
// Matmuls and the LayerNorm run with oneDNN in FP32 (models/onednn_ops.h)
// on the calling thread's OpenMP team of `threads`.
//
// Thread-safety: immutable after Create; Run may be called concurrently
// with distinct scratch and output buffers.
#ifndef INFER_MODELS_TRANSFORMER_SPLADE_HEAD_H_
#define INFER_MODELS_TRANSFORMER_SPLADE_HEAD_H_

#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>

#include "absl/status/statusor.h"
#include "models/onednn_ops.h"
#include "models/transformer/transformer_spec.h"
#include "models/transformer/transformer_weights.h"

namespace infer {

// SpladePooling's settings (its config.json).
struct SpladePooling {
  bool sum = false;          // pooling_strategy "sum"; else "max"
  bool log1p_twice = false;  // activation_function "log1p_relu"; else "relu"
};

class SpladeHead {
 public:
  static constexpr int64_t kChunkTokens = 256;

  // `head` must be present (TransformerWeights::MaskedLm); its activation is
  // the spec's hidden_act for BERT, GELU for RoBERTa's lm_head.
  static absl::StatusOr<std::unique_ptr<SpladeHead>> Create(const dnnl::engine& engine,
                                                            const TransformerSpec& spec,
                                                            TransformerWeights::MaskedLm head,
                                                            int threads);

  int64_t vocab() const { return vocab_; }
  int64_t WeightBytes() const { return weight_bytes_; }
  // Bytes of the one scratch buffer Run needs for a batch of `tokens`.
  int64_t ScratchBytes(int64_t tokens) const;
  // states [tokens, hidden] (packed, sequence s's rows from offsets[s] to
  // offsets[s + 1]) -> out [rows, vocab]; an empty sequence gets zeros.
  // `scratch` holds ScratchBytes(tokens).
  absl::Status Run(const float* states, const int32_t* offsets, int64_t rows, int64_t tokens,
                   const SpladePooling& pooling, float* out, void* scratch) const;

 private:
  SpladeHead() = default;

  dnnl::engine engine_;
  int threads_ = 1;
  int64_t hidden_ = 0, vocab_ = 0;
  std::unique_ptr<cpu::OnednnLinear> dense_, decoder_;
  std::unique_ptr<cpu::OnednnLayerNorm> norm_;
  size_t scratchpad_bytes_ = 0;
  int64_t weight_bytes_ = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_SPLADE_HEAD_H_
