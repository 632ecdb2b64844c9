// LtLinear: one linear layer of an FP16 encoder as a cuBLASLt matmul whose
// epilogue adds the bias, and applies GELU where one follows, in the GEMM's
// own output stage:
//
//   y[rows, out] = act(x[rows, in] · W^T + b)      (row-major, FP16 in and
//                                                    out, FP32 accumulation)
//
// with W stored [out, in] (as PyTorch stores it) and b [out] in FP16. In
// cuBLAS's column-major terms that is y^T = W · x^T with op(A) = T, the
// layout cuBLASLt wants for every data type (FP8 included). Compared with
// cublasGemmEx followed by a bias + GELU kernel, the intermediate is written
// once instead of written, read and written again.
//
// GELU: cuBLASLt documents its epilogue as GELU without naming the form
// (erf, as BERT is trained with, or the tanh approximation). The two differ
// by at most 4.7e-4 absolute (near x = -2.7), about the rounding FP16
// already adds to an activation of magnitude 1 (half an ULP: 4.9e-4). The
// GPU tests compare this path with the erf kernel on the same weights
// (models/bert/bert_cuda_graphs_test.cc).
//
// Shapes: the matrix layouts depend on `rows` and are made per call; the
// algorithm is asked of cuBLASLt's heuristic per call, within the stream's
// GEMM workspace (runtime/cuda_device.h: NativeGemmWorkspace). cuBLASLt
// caches heuristic answers by shape, so a repeated shape costs a lookup.
// Calls are capturable into CUDA graphs (the workspace is fixed per stream).
//
// LtFp8Linear: the same product with FP8 (E4M3) inputs, for precision fp8
// on compute capability 8.9 or later: W's codes [out, in] with one FP32
// scale per output channel (quantized at load), x's codes [rows, in] with
// one scale per row (per token; models/fp8_quantize_cuda.cuh), FP32
// accumulation, each sum times both scales (cuBLASLt's outer-vector scale
// mode), FP16 out, no epilogue (the encoder's kernels add the biases, as
// they do for cublasGemmEx's output).
//
// Thread-safety: Run is const and may be called from several threads at
// once, each with its own stream. Only built with CUDA (INFER_WITH_CUDA).
#ifndef INFER_MODELS_CUDA_LT_LINEAR_H_
#define INFER_MODELS_CUDA_LT_LINEAR_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace infer {

class LtLinear {
 public:
  enum class Epilogue { kBias, kBiasGelu };

  // `bias` is a device pointer to `out` FP16 values, borrowed: it must
  // outlive this object. FAILED_PRECONDITION when cuBLASLt offers no
  // algorithm for this layer at `probe_rows` rows (checked here, at load,
  // so that a configuration the library cannot run is refused before
  // serving rather than at the first batch).
  static absl::StatusOr<std::unique_ptr<LtLinear>> Create(int64_t out, int64_t in, const void* bias,
                                                          Epilogue epilogue, int64_t probe_rows);
  ~LtLinear();
  LtLinear(const LtLinear&) = delete;
  LtLinear& operator=(const LtLinear&) = delete;

  // Enqueues y = act(x · W^T + b) on `stream` (a compute stream). `w` is
  // the FP16 [out, in] weight, `x` [rows, in] and `y` [rows, out] FP16.
  absl::Status Run(Stream* stream, const void* w, const void* x, int64_t rows, void* y) const;

  int64_t out() const { return out_; }
  int64_t in() const { return in_; }

 private:
  struct Desc;
  LtLinear(int64_t out, int64_t in, std::unique_ptr<Desc> desc);

  const int64_t out_, in_;
  std::unique_ptr<Desc> desc_;
};

class LtFp8Linear {
 public:
  // FAILED_PRECONDITION when cuBLASLt offers no FP8 algorithm with
  // per-channel and per-token scales for this layer at `probe_rows` rows
  // (an older GPU or library), or `in` is not a multiple of 16 (cuBLASLt's
  // FP8 leading-dimension rule).
  static absl::StatusOr<std::unique_ptr<LtFp8Linear>> Create(int64_t out, int64_t in,
                                                             int64_t probe_rows);

  // Enqueues y[rows, out] (FP16) = (x_codes · w_codes^T) scaled by
  // x_scales[row] · w_scales[col], on `stream` (a compute stream). w_codes
  // [out, in] and x_codes [rows, in] are E4M3 bytes; w_scales [out] and
  // x_scales [rows] FP32; all device memory, codes 16-byte aligned.
  absl::Status Run(Stream* stream, const void* w_codes, const float* w_scales, const void* x_codes,
                   const float* x_scales, int64_t rows, void* y) const;

  int64_t out() const { return out_; }
  int64_t in() const { return in_; }

 private:
  LtFp8Linear(int64_t out, int64_t in) : out_(out), in_(in) {}
  const int64_t out_, in_;
};

}  // namespace infer

#endif  // INFER_MODELS_CUDA_LT_LINEAR_H_
