// Design: one 256-thread block per row. Pass 1 takes the row's absolute
// maximum (a block reduction); pass 2 scales and converts with cuda_fp8.h's
// saturating round-to-nearest-even conversion. The row (at most a few
// thousand FP16 values) is read twice, the second time from L1/L2.
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

#include "models/fp8_quantize_cuda.cuh"

namespace infer::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void QuantizeRowsFp8Kernel(const __half* __restrict__ x, int cols, int64_t ld,
                                      uint8_t* __restrict__ codes, float* __restrict__ scales) {
  __shared__ float red[kThreads / 32];
  const int64_t r = blockIdx.x;
  const __half* row = x + r * ld;
  float amax = 0.0f;
  for (int j = threadIdx.x; j < cols; j += kThreads)
    amax = fmaxf(amax, fabsf(__half2float(row[j])));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = red[0];
  for (int w = 1; w < kThreads / 32; ++w) amax = fmaxf(amax, red[w]);
  // A non-finite activation stays non-finite (NaN codes), as in FP16.
  const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
  const float inv = 1.0f / scale;
  uint8_t* out = codes + r * cols;
  for (int j = threadIdx.x; j < cols; j += kThreads) {
    out[j] = static_cast<uint8_t>(
        __nv_cvt_float_to_fp8(__half2float(row[j]) * inv, __NV_SATFINITE, __NV_E4M3));
  }
  if (threadIdx.x == 0) scales[r] = scale;
}

}  // namespace

cudaError_t LaunchQuantizeRowsFp8(cudaStream_t stream, const __half* x, int64_t rows, int64_t cols,
                                  int64_t ld, uint8_t* codes, float* scales) {
  if (rows < 0 || cols < 0 || ld < cols || rows > 2147483647 || cols > 2147483647) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  QuantizeRowsFp8Kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      x, static_cast<int>(cols), ld, codes, scales);
  return cudaGetLastError();
}

void QuantizeRowsFp8Host(const std::vector<float>& x, int64_t rows, int64_t cols,
                         std::vector<uint8_t>* codes, std::vector<float>* scales) {
  codes->resize(rows * cols);
  scales->resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t j = 0; j < cols; ++j) amax = std::max(amax, std::fabs(x[r * cols + j]));
    const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
    const float inv = 1.0f / scale;
    for (int64_t j = 0; j < cols; ++j) {
      (*codes)[r * cols + j] = static_cast<uint8_t>(
          __nv_cvt_float_to_fp8(x[r * cols + j] * inv, __NV_SATFINITE, __NV_E4M3));
    }
    (*scales)[r] = scale;
  }
}

}  // namespace infer::cuda
