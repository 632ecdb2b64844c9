// TransformerEncoder: the forward pass of a transformer described by a
// TransformerSpec (models/transformer/transformer_spec.h) on one device,
// then pooling and optional L2 normalisation — the sentence-transformers
// recipe. For BERT (post-norm):
//
//   x = LayerNorm(word[ids] + position[0..S) + token_type[types])
//   per layer: x = LayerNorm(x + Wo · MultiHeadAttention(x, mask))
//              x = LayerNorm(x + W2 · GELU(W1 · x))        (GELU: erf form)
// and for a pre-norm family (ModernBERT, Qwen3):
//   x = word[ids] (then a norm, ModernBERT)
//   per layer: x = x + Wo · Attention(RoPE(Norm(x)))
//              x = x + W2 · (act(W1a · Norm(x)) ⊙ W1b · Norm(x))
//   x = Norm(x)
// with the spec's norm, activation, grouped KV heads, causal or
// sliding-window masks and relative position buckets. Then
//   embedding[b] = mean of x over sequence b's real tokens    (mean pooling)
//              or x of its first token ([CLS]) or its last token
//
// The input is a packed batch (models/packed_sequences.h): only real tokens,
// each with its position id, so no padding token reaches a GEMM and
// attention runs per sequence over its own length.
//
// Two implementations: FP32 or BF16 on the CPU with oneDNN, every block of
// the spec (models/transformer/encoder_cpu.h), and FP16 storage / FP32
// accumulation on CUDA with cuBLAS and fused kernels, every block of the
// spec too (a tuned path for BERT-shaped specs, TransformerSpec::IsBertShaped;
// models/transformer/encoder_cuda.h).
// Both take their activations from the device context's caching allocator
// on the stream they are given, so PeakBytes can be checked against the
// allocator's measured peak.
//
// Thread-safety: immutable after loading; Encode may run concurrently on
// different streams.
#ifndef INFER_MODELS_TRANSFORMER_ENCODER_H_
#define INFER_MODELS_TRANSFORMER_ENCODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "batching/batch_shape.h"
#include "models/packed_sequences.h"
#include "models/precision.h"
#include "models/transformer/dense_head.h"
#include "models/transformer/transformer_spec.h"
#include "runtime/device_context.h"

namespace infer {

// How a sequence's token states become its embedding: their mean, the
// first token's ([CLS]), or the last token's (decoder embedders).
enum class Pooling { kMean, kCls, kLastToken };
inline const char* PoolingName(Pooling pooling) {
  return pooling == Pooling::kMean ? "mean" : pooling == Pooling::kCls ? "cls" : "last_token";
}
// What a sequence-classification head reads: the first token's final state,
// the mean of the sequence's, or the last token's
// (TransformerSpec::classifier_pooling).
inline Pooling ClassifierPooling(const TransformerSpec& spec) {
  switch (spec.classifier_pooling) {
    case TransformerSpec::HeadPooling::kMean:
      return Pooling::kMean;
    case TransformerSpec::HeadPooling::kLast:
      return Pooling::kLastToken;
    case TransformerSpec::HeadPooling::kFirst:
      break;
  }
  return Pooling::kCls;
}

// CUDA Graphs for the CUDA encoder's small batches (models/bert/bert_cuda_graphs.h).
// Ignored on the CPU.
struct EncoderGraphOptions {
  bool enabled = true;
  // Batches of up to this many real tokens (and rows) replay a captured
  // graph; larger ones launch kernel by kernel. Sets the size of the graphs'
  // shared buffers.
  int64_t max_tokens = 2048;
};

struct EncoderOptions {
  // Resolved for the device by LoadEncoder (models/precision.h).
  Precision precision = Precision::kAuto;
  EncoderGraphOptions graphs;
  // The CUDA encoder's FFN input GEMM adds its bias and applies GELU in
  // cuBLASLt's epilogue (models/cuda_lt_linear.h) instead of a kernel of
  // its own after cublasGemmEx. Ignored on the CPU.
  bool cublaslt_epilogues = false;
  // A sequence's embedding is bit-identical whatever it is batched with
  // (models/transformer/encoder_cpu.h). The CPU encoder only: refused on CUDA.
  bool batch_invariant = false;
  // Also load the checkpoint's masked-LM head, for SPLADE (splade()), on
  // either device.
  bool masked_lm_head = false;
};

class SpladeHead;  // models/transformer/splade_head.h

class TransformerEncoder {
 public:
  virtual ~TransformerEncoder() = default;

  virtual const TransformerSpec& spec() const = 0;
  // What it computes in (never kAuto).
  virtual Precision precision() const = 0;
  // How it computes (kernels, threads), for logs.
  virtual std::string Implementation() const = 0;
  // Bytes the weights occupy on the device (by allocator block).
  virtual int64_t WeightBytes() const = 0;
  // Other bytes held from the allocator while loaded (the CUDA encoder's
  // graph buffers and capture workspace), by allocator block.
  virtual int64_t ResidentBytes() const { return 0; }
  // Bytes Encode draws from the allocator for a batch of this shape
  // (activations and workspace, by allocator block), not counting the
  // caller's packed input and output: never less than it uses for a batch
  // whose longest sequence is at most shape.length.
  virtual int64_t PeakBytes(const BatchShape& shape) const = 0;
  // The sequence-classification head of spec().labels (host FP32, on every
  // device, applied by the caller on the host to Encode's rows pooled by
  // ClassifierPooling(spec()), not normalised); null where the spec has
  // none.
  virtual const DenseHead* classifier() const { return nullptr; }
  // The SPLADE head on the masked-LM logits (EncoderOptions::masked_lm_head;
  // on the encoder's device, applied by the caller to EncodeWithStates'
  // states), or null.
  virtual const SpladeHead* splade() const { return nullptr; }
  // Whether EncodeWithStates is offered (the CPU's and the CUDA encoders').
  virtual bool HasTokenStates() const { return false; }
  // Enqueues the forward pass on `stream`. `batch` is in device memory (ids
  // already validated, positions below spec().MaxSequenceLength()); `out` is
  // [batch.rows, hidden] FP32 device memory. An empty sequence gets a zero
  // vector. Scratch memory is returned to the allocator on `stream` before
  // this returns (stream-ordered reuse).
  virtual absl::Status Encode(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                              bool normalize, float* out) const = 0;
  // Encode, also writing the last hidden state of every real token to
  // `states`, [batch.tokens, hidden] FP32 device memory in packed order (what
  // transformers' last_hidden_state holds at the unmasked positions, the
  // final norm applied). `out` may be null: no pooling. UNIMPLEMENTED where
  // HasTokenStates() is false.
  virtual absl::Status EncodeWithStates(Stream* stream, const PackedSequencesView& batch,
                                        Pooling pooling, bool normalize, float* out,
                                        float* states) const;
};

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_ENCODER_H_
