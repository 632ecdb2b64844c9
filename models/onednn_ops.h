// The CPU encoder's oneDNN primitives: linear layers (matmul with fused bias,
// GELU and residual add) and LayerNorm, made once at load and reused by
// every batch.
//
// Shape classes. oneDNN's fast matmul kernels (brgemm) are generated for a
// fixed row count; with a run-time row count it falls back to a slower GEMM.
// A packed batch has any number of token rows, so each op holds primitives
// for a fixed set of row counts — 1024, 512, ..., 16 and every count below
// 16 — and runs a batch of T rows as pieces of those sizes (RowPieces):
// whole 1024-row pieces, then the binary digits of the rest down to 16, then
// one exact tail. Every row computed is a real token; no primitive is made
// after load.
//
// Batch-invariant mode (`fixed_rows` > 0 at Create): every batch runs as
// pieces of exactly that many rows, through the one primitive made for it,
// and the caller pads the rows to a multiple of it. oneDNN chooses its
// kernel (and with it the order of each row's sums) by the row count and by
// how it splits the work over threads, so with pieces of varying sizes a
// row's result depends in its last bits on what it was computed with. In
// this mode the primitive is made for one thread and each piece runs on one
// thread of the caller's OpenMP team (the pieces spread over the team), so
// the same kernel computes every row of every batch in the same way, and a
// row's result depends on that row alone. The scratchpad then holds one
// slice per thread (ScratchpadBytes(threads)). Small batches use fewer
// threads: one piece, one thread.
//
// INT8 (LinearOptions::int8): the weights are quantized to s8 per output
// channel at load and each piece's activations to u8 per token as it runs
// (models/quantize.h); oneDNN multiplies them into int32 sums, which are
// scaled back to FP32 with the bias and the activation by hand, in one
// pass that also adds the residual (accumulate): y (+)= act(x · Wᵀ + b), as
// in FP32. Input and
// output stay FP32, so the op drops in where an FP32 one was.
//
// Memory: weights are reordered once into the layout the matmul prefers and
// held by the op (counted by WeightBytes). Primitives use a user scratchpad:
// the caller passes a buffer of ScratchpadBytes() (from the caching
// allocator), so oneDNN allocates nothing per batch. An INT8 op also keeps a
// piece's codes and int32 sums there: ScratchpadBytes() + rows ×
// ScratchpadBytesPerRow() for a Run of up to `rows` rows (at most the
// largest piece).
//
// Thread-safety: immutable after Create; Run may be called concurrently
// with distinct scratchpads and outputs. oneDNN runs each piece on the
// calling thread's OpenMP team.
#ifndef INFER_MODELS_ONEDNN_OPS_H_
#define INFER_MODELS_ONEDNN_OPS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/activation.h"

namespace infer::cpu {

// The row counts a primitive is made for, largest first.
const std::vector<int64_t>& PieceSizes();
// The next piece of a batch with `rows` rows left (rows > 0).
int64_t NextPiece(int64_t rows);

// Element types the ops take: FP32, or BF16 (raw 16-bit words).
enum class ElementType { kF32, kBf16 };
size_t ElementBytes(ElementType type);

struct LinearOptions {
  int64_t in = 0, out = 0;
  ElementType input = ElementType::kF32;  // the activations and the weights
  ElementType output = ElementType::kF32;
  LinearActivation activation = LinearActivation::kNone;  // on the result, after the bias
  bool accumulate = false;  // dst += result (the residual add) instead of dst = result
  // > 0: batch-invariant mode, pieces of exactly this many rows (see above).
  int64_t fixed_rows = 0;
  // Dynamic INT8 (see above); input and output must be FP32.
  bool int8 = false;
};

// y[rows, out] (=|+=) act(x[rows, in] · W^T + b), W as [out, in].
class OnednnLinear {
 public:
  // `w` is [out, in] FP32 (Hugging Face's layout), `b` [out] or null (no
  // bias). Converted to the input type and reordered once. FAILED_PRECONDITION naming the ISA when
  // oneDNN has no kernel for the types on this CPU.
  static absl::StatusOr<std::unique_ptr<OnednnLinear>> Create(const dnnl::engine& engine,
                                                              const LinearOptions& options,
                                                              const float* w, const float* b);

  // `rows` must be a multiple of fixed_rows in batch-invariant mode.
  absl::Status Run(dnnl::stream& stream, const void* x, int64_t rows, void* y,
                   void* scratchpad) const;

  // For a Run on a team of `threads` (batch-invariant mode needs a slice
  // per thread), plus ScratchpadBytesPerRow() per row of the Run's largest
  // piece.
  size_t ScratchpadBytes(int threads = 1) const;
  size_t ScratchpadBytesPerRow() const;
  // Bytes of scratch for a Run of `rows` rows on a team of `threads`.
  size_t ScratchpadBytesFor(int64_t rows, int threads = 1) const;
  int64_t WeightBytes() const { return weight_bytes_; }
  // oneDNN's name for the kernel of the largest piece, e.g. "brg:avx512_core".
  const std::string& implementation() const { return implementation_; }

 private:
  OnednnLinear() = default;

  struct Piece {
    dnnl::matmul primitive;
    dnnl::memory::desc src, dst, scratchpad;
  };

  // The INT8 path (onednn_int8_linear.cc).
  static absl::StatusOr<std::unique_ptr<OnednnLinear>> CreateInt8(const dnnl::engine& engine,
                                                                  const LinearOptions& options,
                                                                  const float* w, const float* b);
  absl::Status RunInt8(dnnl::stream& stream, const void* x, int64_t rows, void* y,
                       void* scratchpad) const;
  size_t Int8ScratchpadBytes(int threads) const;
  size_t Int8BytesPerRow() const;
  // One INT8 piece of `rows` rows from `x` to `y`, its buffers in `scratch`.
  void RunInt8Piece(dnnl::stream& stream, const Piece& piece, int64_t rows, const float* x,
                    float* y, void* scratch, int threads) const;

  LinearOptions options_;
  dnnl::engine engine_;
  std::vector<Piece> pieces_;  // in PieceSizes() order, or the one fixed piece
  dnnl::memory weights_, bias_;
  // INT8: each output channel's weight scale and sum of codes
  // (models/quantize.h).
  std::vector<float> col_scale_;
  std::vector<int32_t> col_sum_;
  size_t scratchpad_bytes_ = 0;
  int64_t weight_bytes_ = 0;
  std::string implementation_;
};

// x[rows, hidden] = LayerNorm(x) * gamma + beta, FP32, in place.
class OnednnLayerNorm {
 public:
  // `beta` null: none (zero). `fixed_rows` > 0: batch-invariant mode, as for
  // OnednnLinear.
  static absl::StatusOr<std::unique_ptr<OnednnLayerNorm>> Create(const dnnl::engine& engine,
                                                                 int64_t hidden, float epsilon,
                                                                 const float* gamma,
                                                                 const float* beta,
                                                                 int64_t fixed_rows = 0);

  absl::Status Run(dnnl::stream& stream, float* x, int64_t rows, void* scratchpad) const;

  size_t ScratchpadBytes(int threads = 1) const;
  int64_t WeightBytes() const { return 2 * hidden_ * static_cast<int64_t>(sizeof(float)); }

 private:
  OnednnLayerNorm() = default;

  struct Piece {
    dnnl::layer_normalization_forward primitive;
    dnnl::memory::desc data, scratchpad;
  };

  int64_t hidden_ = 0;
  int64_t fixed_rows_ = 0;
  dnnl::engine engine_;
  std::vector<Piece> pieces_;  // in PieceSizes() order, or the one fixed piece
  dnnl::memory gamma_, beta_;
  size_t scratchpad_bytes_ = 0;
};

}  // namespace infer::cpu

#endif  // INFER_MODELS_ONEDNN_OPS_H_
