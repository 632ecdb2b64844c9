// TransformerEncoderCpu: the transformer encoder (models/transformer/encoder.h)
// on the CPU, in FP32, BF16 or INT8, over packed batches, for every block a
// TransformerSpec names.
//
// Per layer, on the batch's real tokens only ([tokens, hidden], no padding):
//   n   = Norm(x)                 pre-norm only (hand-written kernel)
//   qkv = n · Wqkv + b            one oneDNN matmul (Q, K and V fused)
//   q,k = RoPE(RMSNorm(q, k))     where the spec has them (cpu_kernels)
//   ctx = attention(qkv)          per sequence over its own length, fused
//                                 scores / masks / bias / softmax / values
//   x  += ctx · Wo + b            matmul with the residual add fused (sum)
//   x   = LayerNorm(x)            post-norm only: oneDNN layer normalization
//   h   = act(n · W1 + b)         matmul with the activation fused, or for a
//                                 gated FFN one matmul to [tokens, 2 × inter]
//                                 and act(a) ⊙ b by hand
//   x  += h · W2 + b              matmul, residual fused
//   x   = LayerNorm(x)            post-norm only
// then the final norm (pre-norm families) and pooling. With [CLS] or
// last-token pooling and no token states asked for, the last layer computes
// Q, K and V for every token (one fused matmul; the keys and values are
// needed) but attention, the output projection, the FFN, the norms and the
// final norm for the one pooled token per sequence (Keep). In BF16 the matmul
// inputs and weights are BF16 (AMX or AVX512_BF16 where the CPU has them)
// with FP32 accumulation; the residual stream x, the norms' statistics,
// the softmax and pooling stay FP32 (attention's products take BF16 inputs
// in sequences of 128 tokens or more where the CPU has AVX512_BF16:
// AttentionArgs::bf16_products), and the matmul inputs are rounded to
// BF16 once per norm. In INT8 each linear layer quantizes its FP32 input per
// token and multiplies it by s8 weights (models/onednn_ops.h,
// models/quantize.h); everything else is as in FP32.
//
// Threads: every step runs on the calling thread's OpenMP team of
// `threads` (oneDNN and the hand-written kernels share the one libgomp
// pool), so one Encode uses the compute pool alone and nothing else spawns
// threads. oneDNN primitives are made at load for fixed row counts
// (models/onednn_ops.h); no primitive is made per batch.
//
// Batch-invariant mode (EncoderCpuOptions::batch_invariant): a sequence's
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
// served model) and the call has a stream, else from the heap (tests, tools,
// the host-side conveniences below, the precision gate); PeakBytes counts it
// block by block, oneDNN's scratchpad included (user scratchpad mode).
// Weights live in host memory, prepacked once (WeightBytes).
//
// Immutable after Create; Encode is thread-safe.
#ifndef INFER_MODELS_TRANSFORMER_ENCODER_CPU_H_
#define INFER_MODELS_TRANSFORMER_ENCODER_CPU_H_

#include <array>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/onednn_ops.h"
#include "models/transformer/cpu_kernels.h"
#include "models/transformer/dense_head.h"
#include "models/transformer/encoder.h"
#include "models/transformer/splade_head.h"
#include "models/transformer/transformer_weights.h"

namespace infer {

// The CPU kernels' code for a spec's activation (the ops' fused one).
cpu::LinearActivation LinearActivationOf(ActivationKind kind);

struct EncoderCpuOptions {
  Precision precision = Precision::kFp32;  // kFp32, kBf16 or kInt8
  int threads = 0;                         // 0: DefaultCpuThreads()
  // A sequence's embedding does not depend on its batch-mates, to the bit.
  bool batch_invariant = false;
  // Load also reads the checkpoint's masked-LM head (splade()).
  bool masked_lm_head = false;
};

class TransformerEncoderCpu final : public TransformerEncoder {
 public:
  // `allocator` may be null: scratch then comes from the heap.
  // FAILED_PRECONDITION when a dimension is beyond the kernels (head size
  // over 128) or oneDNN cannot compute the precision on this CPU.
  static absl::StatusOr<std::unique_ptr<TransformerEncoderCpu>> Create(
      TransformerWeights weights, const EncoderCpuOptions& options,
      CachingAllocator* allocator = nullptr);
  static absl::StatusOr<std::unique_ptr<TransformerEncoderCpu>> Load(
      const std::string& dir, const EncoderCpuOptions& options = EncoderCpuOptions(),
      CachingAllocator* allocator = nullptr);

  // Host-side convenience: checks the inputs (shapes, id and type range,
  // length), packs the [batch, seq] ids by `mask`, with their token types
  // (`types`, [batch, seq], or empty: all 0), and returns [batch, hidden]
  // embeddings.
  absl::StatusOr<std::vector<float>> Encode(absl::Span<const int64_t> ids,
                                            absl::Span<const int64_t> mask, int64_t batch,
                                            int64_t seq, bool normalize,
                                            Pooling pooling = Pooling::kMean,
                                            absl::Span<const int64_t> types = {}) const;
  // The same, returning the last hidden state of every real token,
  // [tokens, hidden] in packed order (the final norm applied): what
  // transformers' last_hidden_state holds at the unmasked positions.
  absl::StatusOr<std::vector<float>> HiddenStates(absl::Span<const int64_t> ids,
                                                  absl::Span<const int64_t> mask, int64_t batch,
                                                  int64_t seq,
                                                  absl::Span<const int64_t> types = {}) const;

  // SPLADE's sparse vectors, [batch, vocab] FP32 with zeros for the absent
  // terms, from the masked-LM head (FAILED_PRECONDITION without one) as the
  // served model computes them: the last hidden states, then splade().
  absl::StatusOr<std::vector<float>> Sparse(absl::Span<const int64_t> ids,
                                            absl::Span<const int64_t> mask, int64_t batch,
                                            int64_t seq, const SpladePooling& pooling,
                                            absl::Span<const int64_t> types = {}) const;

  // The classification head's logits, [batch, labels], on each sequence's
  // first token, or the mean of its tokens (ClassifierPooling; spec().labels;
  // FAILED_PRECONDITION without a head), as
  // transformers' *ForSequenceClassification gives them.
  absl::StatusOr<std::vector<float>> Classify(absl::Span<const int64_t> ids,
                                              absl::Span<const int64_t> mask, int64_t batch,
                                              int64_t seq,
                                              absl::Span<const int64_t> types = {}) const;
  const DenseHead* classifier() const override {
    return classifier_.empty() ? nullptr : &classifier_;
  }
  // Made when the weights hold a masked-LM head (TransformerWeights::masked_lm).
  const SpladeHead* splade() const override { return splade_.get(); }
  bool HasTokenStates() const override { return true; }

  // The piece of batch-invariant mode, in rows (tokens).
  static constexpr int64_t kInvariantRows = 16;

  const TransformerSpec& spec() const override { return spec_; }
  Precision precision() const override { return precision_; }
  bool batch_invariant() const { return batch_invariant_; }
  int threads() const { return threads_; }
  // The matmul kernel oneDNN chose (e.g. "brg:avx512_core_bf16") and the
  // attention kernel's instruction set, for logs.
  std::string Implementation() const override;
  // Host bytes of the weights as prepacked, embeddings and position tables
  // included.
  int64_t WeightBytes() const override { return weight_bytes_; }
  int64_t PeakBytes(const BatchShape& shape) const override;
  absl::Status Encode(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                      bool normalize, float* out) const override;
  absl::Status EncodeWithStates(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                                bool normalize, float* out, float* states) const override;

 private:
  // A norm's parameters, run by the hand-written kernel; `onednn` also holds
  // it as a oneDNN primitive where the norm runs in place as a LayerNorm.
  struct Norm {
    std::vector<float> gamma, beta;  // beta empty: none
    std::unique_ptr<cpu::OnednnLayerNorm> onednn;
    bool present() const { return !gamma.empty(); }
  };
  struct Layer {
    std::unique_ptr<cpu::OnednnLinear> qkv, attn_out, ffn_in, ffn_out;
    Norm attn_norm, ffn_norm;
    std::vector<float> q_norm, k_norm;  // [head_dim] or empty
    int rope = -1;                      // index into rope_, or none
  };
  // cos and sin of position × frequency, [positions, head_dim / 2] each.
  struct RopeTable {
    double theta = 0;
    std::vector<float> cos, sin;
  };

  // One Encode's scratch buffers, by index into ScratchBytes' result.
  enum Buffer {
    kX,             // FP32 residual stream
    kXIn,           // the matmuls' input: normalised (pre-norm) and/or BF16
    kQkv,           // FP32
    kContext,       // attention output, matmul input type
    kGate,          // a gated FFN's [rows, 2 × inter] FP32
    kIntermediate,  // matmul input type
    kAttention,     // the attention kernel's per-thread scratch
    kScratchpad,    // oneDNN's
    kBuffers
  };

  TransformerEncoderCpu() = default;
  bool bf16() const { return precision_ == Precision::kBf16; }
  // The rows the matmuls compute for a batch of `tokens` real tokens: the
  // tokens, padded in batch-invariant mode.
  int64_t ComputedRows(int64_t tokens) const;
  // Bytes of each scratch buffer of one Encode (0: not used). A fixed array:
  // PeakBytes runs for every candidate batch the queue plans.
  std::array<int64_t, kBuffers> ScratchBytes(int64_t tokens, int64_t longest) const;
  // Which tokens the last layer computes. Its keys and values need every
  // token, but [CLS] and last-token pooling read one row per sequence, so
  // for them the last layer's attention (one query per sequence), output
  // projection, FFN, norms and final norm run on that row alone; its fused
  // QKV matmul still runs on every token. For MiniLM-L6, 6 layers become
  // about 5.25 layers' work. In batch-invariant mode the kept rows have the
  // bits they have when every token is computed (a batch with a request
  // for token states computes every token).
  enum class Keep {
    kEveryToken,
    kFirstToken,  // each non-empty sequence's first token, compacted (KeepPooledRows)
    kLastToken,   // its last token, compacted
  };
  // The forward pass to the last hidden state: `x` [rows, hidden] FP32
  // from `scratch` (its kX buffer), or with `keep` naming one token per
  // sequence, that token's state for each non-empty sequence, in order, in
  // x's first rows.
  absl::Status Forward(const PackedSequencesView& batch, const std::array<void*, kBuffers>& p,
                       int64_t rows, Keep keep = Keep::kEveryToken) const;
  // Moves each non-empty sequence's kept row of x and of the attention
  // context `ctx` to row k (the k-th such sequence), zeroes the padding rows
  // batch-invariant mode adds after them, and returns the rows to compute
  // from then on: ComputedRows(number of non-empty sequences).
  int64_t KeepPooledRows(const PackedSequencesView& batch, Keep keep, float* x, void* ctx) const;

  TransformerSpec spec_;
  Precision precision_ = Precision::kFp32;
  int threads_ = 1;
  bool batch_invariant_ = false;
  cpu::SimdLevel simd_ = cpu::SimdLevel::kBaseline;
  CachingAllocator* allocator_ = nullptr;  // borrowed; may be null
  dnnl::engine engine_;
  std::vector<float> word_, position_, token_type_;  // FP32 embedding tables
  DenseHead classifier_;                             // spec_.labels' head, or empty
  std::unique_ptr<SpladeHeadCpu> splade_;            // the masked-LM head, or null
  // MPNet's relative position biases by head and distance,
  // [heads, 2 * max_position_embeddings - 1].
  std::vector<float> relative_bias_;
  std::vector<RopeTable> rope_;
  Norm embed_norm_, final_norm_;
  std::vector<Layer> layers_;
  size_t scratchpad_bytes_ = 0;      // the largest any primitive needs
  size_t scratchpad_row_bytes_ = 0;  // and per row of a piece (INT8 ops)
  int64_t weight_bytes_ = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_ENCODER_CPU_H_
