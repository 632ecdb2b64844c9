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
// Two implementations, each made by its encoder (TransformerEncoder::splade):
// SpladeHeadCpu below (oneDNN, on the calling thread's OpenMP team; the
// decoder in the encoder's precision, FP32, BF16 or dynamic INT8 as the
// encoder's linear layers, with FP32 logits, except INT8 on a CPU whose
// int8 kernels keep 7 bits of the weights, FP32 there; the transform in
// FP32) and the
// CUDA encoder's (models/transformer/splade_head_cuda.h: FP16 GEMMs with
// FP32 logits). Their buffers (states, scratch, out) are the device's
// memory.
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
#include "models/precision.h"
#include "models/transformer/transformer_spec.h"
#include "models/transformer/transformer_weights.h"
#include "runtime/device.h"

namespace infer {

// SpladePooling's settings (its config.json).
struct SpladePooling {
  bool sum = false;          // pooling_strategy "sum"; else "max"
  bool log1p_twice = false;  // activation_function "log1p_relu"; else "relu"
};

// transformers' activation of the head's transform: hidden_act for BERT's
// BertPredictionHeadTransform and DistilBERT's head; RoBERTa's lm_head
// (XLM-R's, CamemBERT's) always the erf GELU.
ActivationKind SpladeHeadActivation(const TransformerSpec& spec);

class SpladeHead {
 public:
  static constexpr int64_t kChunkTokens = 256;

  virtual ~SpladeHead() = default;
  virtual int64_t vocab() const = 0;
  virtual int64_t WeightBytes() const = 0;
  // Bytes of the one scratch buffer Run needs for a batch of `tokens`.
  virtual int64_t ScratchBytes(int64_t tokens) const = 0;
  // states [tokens, hidden] FP32 (packed, sequence s's rows from offsets[s]
  // to offsets[s + 1]) -> out [rows, vocab]; an empty sequence gets zeros,
  // and so does every row when tokens is 0 (states and scratch may then be
  // null). `offsets` is the host's copy, `device_offsets` the same on the
  // device (a GPU head reads it; the CPU's ignores it, as it does `stream`).
  // `scratch` holds ScratchBytes(tokens). Enqueued on `stream`.
  virtual absl::Status Run(Stream* stream, const float* states, const int32_t* offsets,
                           const int32_t* device_offsets, int64_t rows, int64_t tokens,
                           const SpladePooling& pooling, float* out, void* scratch) const = 0;
};

class SpladeHeadCpu final : public SpladeHead {
 public:
  // `head` must be present (TransformerWeights::MaskedLm); `precision` is
  // the encoder's, kFp32, kBf16 or kInt8 (INVALID_ARGUMENT otherwise).
  static absl::StatusOr<std::unique_ptr<SpladeHeadCpu>> Create(const dnnl::engine& engine,
                                                               const TransformerSpec& spec,
                                                               TransformerWeights::MaskedLm head,
                                                               int threads, Precision precision);

  int64_t vocab() const override { return vocab_; }
  // What the decoder computes in (see above).
  Precision decoder_precision() const { return precision_; }
  int64_t WeightBytes() const override { return weight_bytes_; }
  int64_t ScratchBytes(int64_t tokens) const override;
  absl::Status Run(Stream* stream, const float* states, const int32_t* offsets,
                   const int32_t* device_offsets, int64_t rows, int64_t tokens,
                   const SpladePooling& pooling, float* out, void* scratch) const override;

 private:
  SpladeHeadCpu() = default;
  size_t ScratchpadBytes(int64_t rows) const;

  dnnl::engine engine_;
  int threads_ = 1;
  int64_t hidden_ = 0, vocab_ = 0;
  Precision precision_ = Precision::kFp32;
  std::unique_ptr<cpu::OnednnLinear> dense_, decoder_;
  std::unique_ptr<cpu::OnednnLayerNorm> norm_;
  int64_t weight_bytes_ = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_SPLADE_HEAD_H_
