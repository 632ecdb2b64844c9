// Per-token FP8 (E4M3) quantization of FP16 activations for the CUDA
// encoder's FP8 linear layers (models/cuda_lt_linear.h, LtFp8Linear), and its
// host-side twin for weights. Plain CUDA types only, so the host compiler
// can include this.
//
// A row r of `cols` values gets scale s_r = amax_r / 448 (E4M3's largest
// finite value; 1 for an all-zero row) and codes q = E4M3(x / s_r), rounded
// to nearest even and saturated, so x ≈ q · s_r. cuBLASLt then multiplies the
// codes and applies the row's scale and the weight row's scale to each
// product's FP32 sum (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F).
#ifndef INFER_MODELS_FP8_QUANTIZE_CUDA_CUH_
#define INFER_MODELS_FP8_QUANTIZE_CUDA_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace infer::cuda {

inline constexpr float kE4m3Max = 448.0f;

// codes [rows, cols] (row-major, row stride cols) and scales [rows] from x
// [rows, cols] FP16 with row stride ld >= cols. Enqueues one kernel on
// `stream`; capturable. cudaErrorInvalidValue for negative sizes, ld < cols,
// or more rows than a grid holds; cudaSuccess without launching for 0 rows.
cudaError_t LaunchQuantizeRowsFp8(cudaStream_t stream, const __half* x, int64_t rows, int64_t cols,
                                  int64_t ld, uint8_t* codes, float* scales);

// The same on the host, for weights ([rows, cols] FP32, row-major): E4M3
// bytes and per-row scales.
void QuantizeRowsFp8Host(const std::vector<float>& x, int64_t rows, int64_t cols,
                         std::vector<uint8_t>* codes, std::vector<float>* scales);

}  // namespace infer::cuda

#endif  // INFER_MODELS_FP8_QUANTIZE_CUDA_CUH_
