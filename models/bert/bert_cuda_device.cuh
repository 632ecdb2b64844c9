// Device helpers the BERT encoder's element-wise kernels share
// (bert_cuda_layer_norm.cu, bert_cuda_gelu_pool.cu): launch constants, warp
// and block sums, 16-byte FP16 <-> FP32 conversions. Private to those files.
#ifndef INFER_MODELS_BERT_BERT_CUDA_DEVICE_CUH_
#define INFER_MODELS_BERT_BERT_CUDA_DEVICE_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace infer::cuda::device {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowThreads = 256;  // threads per row: scalar LayerNorm, block LayerNorm, pooling
constexpr int kV = 8;             // halves per 16-byte access
// CUDA's grid limits.
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridY = 65535;

inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Sum of `v` over the block, returned to every thread. `red` holds 32
// floats; the leading barrier makes back-to-back calls safe.
__device__ inline float BlockSum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    float w = lane < warps ? red[lane] : 0.0f;
    w = WarpSum(w);
    if (lane == 0) red[0] = w;
  }
  __syncthreads();
  return red[0];
}

// ---- 16-byte FP16 <-> FP32 helpers ----------------------------------------

__device__ __forceinline__ void ToFloat8(const uint4& raw, float (&f)[kV]) {
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < kV / 2; ++i) {
    const float2 p = __half22float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ uint4 ToHalf8(const float (&f)[kV]) {
  uint4 raw;
  __half2* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
  for (int i = 0; i < kV / 2; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
  return raw;
}

// Eight floats from a 16-byte aligned, read-only `p`.
__device__ __forceinline__ void LoadFloat8(const float* p, float (&f)[kV]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p));
  const float4 b = __ldg(reinterpret_cast<const float4*>(p + 4));
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
  f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

}  // namespace infer::cuda::device

#endif  // INFER_MODELS_BERT_BERT_CUDA_DEVICE_CUH_
