#include <cmath>

#include "models/bert_cuda_kernels.cuh"

namespace infer::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowThreads = 256;  // threads per row for the LayerNorm and pooling kernels

__device__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Sum of `v` over the block, returned to every thread. `red` holds 32
// floats; the leading barrier makes back-to-back calls safe.
__device__ float BlockSum(float v, float* red) {
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

// Normalises `row` (FP32 [hidden], in shared memory, each element written by
// the thread that reads it here) and writes gamma * z + beta to `out`.
__device__ void NormalizeRow(const float* row, int64_t hidden, const float* gamma,
                             const float* beta, float eps, float* red, __half* out) {
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) s += row[i];
  const float mean = BlockSum(s, red) / static_cast<float>(hidden);
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float d = row[i] - mean;
    v += d * d;
  }
  const float var = BlockSum(v, red) / static_cast<float>(hidden);
  const float inv = rsqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[i] = __float2half((row[i] - mean) * inv * gamma[i] + beta[i]);
  }
}

// One block per token row. Shared memory: hidden + 32 floats.
__global__ void EmbedLayerNormKernel(
    const int32_t* __restrict__ ids, const int32_t* __restrict__ positions,
    const __half* __restrict__ word, const __half* __restrict__ position,
    const __half* __restrict__ token_type, const float* __restrict__ gamma,
    const float* __restrict__ beta, float eps, int64_t hidden, __half* __restrict__ x) {
  extern __shared__ float shared[];
  float* row = shared;
  float* red = shared + hidden;
  const int64_t r = blockIdx.x;
  const __half* w = word + static_cast<int64_t>(ids[r]) * hidden;
  const __half* p = position + static_cast<int64_t>(positions[r]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    row[i] = __half2float(w[i]) + __half2float(p[i]) + __half2float(token_type[i]);
  }
  NormalizeRow(row, hidden, gamma, beta, eps, red, x + r * hidden);
}

// One block per token row. Shared memory: hidden + 32 floats.
__global__ void BiasResidualLayerNormKernel(__half* __restrict__ x, const __half* __restrict__ y,
                                            const float* __restrict__ bias,
                                            const float* __restrict__ gamma,
                                            const float* __restrict__ beta, float eps,
                                            int64_t hidden) {
  extern __shared__ float shared[];
  float* row = shared;
  float* red = shared + hidden;
  const int64_t r = blockIdx.x;
  __half* xr = x + r * hidden;
  const __half* yr = y + r * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    row[i] = __half2float(xr[i]) + __half2float(yr[i]) + bias[i];
  }
  NormalizeRow(row, hidden, gamma, beta, eps, red, xr);
}

__global__ void BiasGeluKernel(__half* __restrict__ y, const float* __restrict__ bias, int64_t n,
                               int64_t width) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float v = __half2float(y[i]) + bias[i % width];
    y[i] = __float2half(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
  }
}

// One block per packed sequence; threads stride over the hidden dimension.
__global__ void PackedPoolKernel(const __half* __restrict__ x, const int32_t* __restrict__ offsets,
                                 int64_t hidden, bool cls, bool normalize,
                                 float* __restrict__ out) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const int64_t begin = offsets[r], n = offsets[r + 1] - begin;
  const int64_t count = cls ? (n > 0 ? 1 : 0) : n;  // CLS: the first token alone
  const float inv_count = 1.0f / static_cast<float>(count > 0 ? count : 1);
  float sq = 0.0f;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t t = 0; t < count; ++t) acc += __half2float(x[(begin + t) * hidden + d]);
    acc *= inv_count;
    out[r * hidden + d] = acc;
    sq += acc * acc;
  }
  const float norm = BlockSum(sq, red);
  if (normalize && norm > 0.0f) {
    const float inv = rsqrtf(norm);
    for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) out[r * hidden + d] *= inv;
  }
}

size_t RowSharedBytes(int64_t hidden) { return (hidden + 32) * sizeof(float); }

}  // namespace

cudaError_t LaunchEmbedLayerNorm(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                                 const __half* word, const __half* position,
                                 const __half* token_type, const float* gamma, const float* beta,
                                 float eps, int64_t tokens, int64_t hidden, __half* x) {
  if (tokens == 0) return cudaSuccess;
  EmbedLayerNormKernel<<<static_cast<unsigned>(tokens), kRowThreads, RowSharedBytes(hidden),
                         stream>>>(ids, positions, word, position, token_type, gamma, beta, eps,
                                   hidden, x);
  return cudaGetLastError();
}

cudaError_t LaunchBiasResidualLayerNorm(cudaStream_t stream, __half* x, const __half* y,
                                        const float* bias, const float* gamma, const float* beta,
                                        float eps, int64_t tokens, int64_t hidden) {
  if (tokens == 0) return cudaSuccess;
  BiasResidualLayerNormKernel<<<static_cast<unsigned>(tokens), kRowThreads, RowSharedBytes(hidden),
                                stream>>>(x, y, bias, gamma, beta, eps, hidden);
  return cudaGetLastError();
}

cudaError_t LaunchBiasGelu(cudaStream_t stream, __half* y, const float* bias, int64_t tokens,
                           int64_t width) {
  const int64_t n = tokens * width;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = (n + 255) / 256;
  BiasGeluKernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, stream>>>(
      y, bias, n, width);
  return cudaGetLastError();
}

cudaError_t LaunchPackedPool(cudaStream_t stream, const __half* x, const int32_t* offsets,
                             int64_t rows, int64_t hidden, bool cls, bool normalize, float* out) {
  if (rows == 0) return cudaSuccess;
  if (rows > 2147483647) return cudaErrorInvalidValue;
  PackedPoolKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, offsets, hidden, cls,
                                                                            normalize, out);
  return cudaGetLastError();
}

}  // namespace infer::cuda
