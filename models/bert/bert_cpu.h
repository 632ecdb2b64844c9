// BertEncoderCpu: the BERT encoder (models/bert/bert_encoder.h) on the CPU, in
// FP32 or BF16, over packed batches.
//
// Per layer, on the batch's real tokens only ([tokens, hidden], no padding):
//   qkv = x · Wqkv + b            one oneDNN matmul (Q, K and V fused)
//   ctx = attention(qkv)          per sequence over its own length, fused
//                                 scores / softmax / values (bert_cpu_kernels)
//   x  += ctx · Wo + b            matmul with the residual add fused (sum)
//   x   = LayerNorm(x)            oneDNN layer normalization
//   h   = GELU(x · W1 + b)        matmul with bias and erf-GELU fused
//   x  += h · W2 + b              matmul, residual fused
//   x   = LayerNorm(x)
// In BF16 the matmul inputs and weights are BF16 (AMX or AVX512_BF16 where
// the CPU has them) with FP32 accumulation; the residual stream x, the
// LayerNorms, attention and pooling stay FP32, and x is rounded to BF16 once
// per LayerNorm for the next matmul.
//
// Threads: every step runs on the calling thread's OpenMP team of
// `threads` (oneDNN and the hand-written kernels share the one libgomp
// pool), so one Encode uses the compute pool alone and nothing else spawns
// threads. oneDNN primitives are made at load for fixed row counts
// (models/onednn_ops.h); no primitive is made per batch.
//
// Batch-invariant mode (BertCpuOptions::batch_invariant): a sequence's
// embedding is bit-identical whatever it is batched with. Every op but the
// matmuls and LayerNorms already computes a row, or a sequence, on its own
// in a fixed order (embedding sums, attention per sequence and head, GELU,
// pooling). The matmuls and LayerNorms run as pieces of exactly
// kInvariantRows rows (models/onednn_ops.h), the batch's tokens padded with
// zero rows to a multiple of it; the padding rows are computed and never
// read. The cost is the padding and the smaller pieces (README, "Batch
// invariance").
//
// Memory: scratch comes from the context's allocator when one is given (the
// served model), else from the heap (tests, tools); PeakBytes counts it
// block by block, oneDNN's scratchpad included (user scratchpad mode).
// Weights live in host memory, prepacked once (WeightBytes).
//
// Immutable after Create; Encode is thread-safe.
#ifndef INFER_MODELS_BERT_BERT_CPU_H_
#define INFER_MODELS_BERT_BERT_CPU_H_

#include <array>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/bert/bert_cpu_kernels.h"
#include "models/bert/bert_encoder.h"
#include "models/onednn_ops.h"

namespace infer {

struct BertCpuOptions {
  Precision precision = Precision::kFp32;  // kFp32 or kBf16
  int threads = 0;                         // 0: DefaultCpuThreads()
  // A sequence's embedding does not depend on its batch-mates, to the bit.
  bool batch_invariant = false;
};

class BertEncoderCpu final : public BertEncoder {
 public:
  // `allocator` may be null: scratch then comes from the heap.
  // FAILED_PRECONDITION when a dimension is beyond the kernels (head size
  // over 128) or oneDNN cannot compute the precision on this CPU.
  static absl::StatusOr<std::unique_ptr<BertEncoderCpu>> Create(
      BertWeights weights, const BertCpuOptions& options, CachingAllocator* allocator = nullptr);
  static absl::StatusOr<std::unique_ptr<BertEncoderCpu>> Load(
      const std::string& dir, const BertCpuOptions& options = BertCpuOptions(),
      CachingAllocator* allocator = nullptr);

  // Host-side convenience: checks the inputs (shapes, id range, length),
  // packs the [batch, seq] ids by `mask` and returns [batch, hidden]
  // embeddings.
  absl::StatusOr<std::vector<float>> Encode(absl::Span<const int64_t> ids,
                                            absl::Span<const int64_t> mask, int64_t batch,
                                            int64_t seq, bool normalize,
                                            BertPooling pooling = BertPooling::kMean) const;

  // The piece of batch-invariant mode, in rows (tokens).
  static constexpr int64_t kInvariantRows = 16;

  const BertConfig& config() const override { return config_; }
  Precision precision() const override { return precision_; }
  bool batch_invariant() const { return batch_invariant_; }
  int threads() const { return threads_; }
  // The matmul kernel oneDNN chose (e.g. "brg:avx512_core_bf16") and the
  // attention kernel's instruction set, for logs.
  std::string Implementation() const override;
  // Host bytes of the weights as prepacked, embeddings included.
  int64_t WeightBytes() const override { return weight_bytes_; }
  int64_t PeakBytes(const BatchShape& shape) const override;
  absl::Status Encode(Stream* stream, const PackedSequencesView& batch, BertPooling pooling,
                      bool normalize, float* out) const override;

 private:
  struct Layer {
    std::unique_ptr<cpu::OnednnLinear> qkv, attn_out, ffn_in, ffn_out;
    std::unique_ptr<cpu::OnednnLayerNorm> attn_norm, ffn_norm;
  };

  // One Encode's scratch buffers, by index into ScratchBytes' result.
  enum Buffer { kX, kXBf16, kQkv, kContext, kIntermediate, kAttention, kScratchpad, kBuffers };

  BertEncoderCpu() = default;
  bool bf16() const { return precision_ == Precision::kBf16; }
  // The rows the matmuls compute for a batch of `tokens` real tokens: the
  // tokens, padded in batch-invariant mode.
  int64_t ComputedRows(int64_t tokens) const;
  // Bytes of each scratch buffer of one Encode (0: not used). A fixed array:
  // PeakBytes runs for every candidate batch the queue plans.
  std::array<int64_t, kBuffers> ScratchBytes(int64_t tokens, int64_t longest) const;

  BertConfig config_;
  Precision precision_ = Precision::kFp32;
  int threads_ = 1;
  bool batch_invariant_ = false;
  cpu::SimdLevel simd_ = cpu::SimdLevel::kBaseline;
  CachingAllocator* allocator_ = nullptr;  // borrowed; may be null
  dnnl::engine engine_;
  std::vector<float> word_, position_, token_type_;  // FP32 embedding tables
  std::unique_ptr<cpu::OnednnLayerNorm> embed_norm_;
  std::vector<Layer> layers_;
  size_t scratchpad_bytes_ = 0;  // the largest any primitive needs
  int64_t weight_bytes_ = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_BERT_BERT_CPU_H_
