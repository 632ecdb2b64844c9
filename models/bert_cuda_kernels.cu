#include <cmath>

#include "models/bert_cuda_kernels.cuh"

namespace infer::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowThreads = 256;  // threads per row for the LayerNorm and pooling kernels
constexpr int kAttnWarps = 4;     // query positions per attention block (one per warp)
constexpr int kKeyTile = 32;      // keys per attention tile (one per lane)

__device__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
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
    const int64_t* __restrict__ ids, const int32_t* __restrict__ positions,
    const __half* __restrict__ word, const __half* __restrict__ position,
    const __half* __restrict__ token_type, const float* __restrict__ gamma,
    const float* __restrict__ beta, float eps, int64_t hidden, __half* __restrict__ x) {
  extern __shared__ float shared[];
  float* row = shared;
  float* red = shared + hidden;
  const int64_t r = blockIdx.x;
  const __half* w = word + ids[r] * hidden;
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

// grid (ceil(seq / kAttnWarps), heads, batch); block 32 * kAttnWarps. Each
// warp owns one query position; lane j scores key t0 + j of the current tile,
// and lane l accumulates output dimensions l, l + 32, ... Shared memory:
// K tile [kKeyTile][dh + 1] (padded: lanes read different rows), V tile
// [kKeyTile][dh], and each warp's scaled query [dh], all FP32.
__global__ void AttentionKernel(const __half* __restrict__ qkv, const float* __restrict__ bias,
                                const int64_t* __restrict__ mask, int seq, int heads, int dh,
                                float scale, __half* __restrict__ ctx) {
  extern __shared__ float shared[];
  constexpr int kPerLane = kMaxAttentionHeadDim / 32;
  const int hidden = heads * dh;
  const int64_t row_stride = 3 * static_cast<int64_t>(hidden);
  const int b = blockIdx.z, head = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int query = blockIdx.x * kAttnWarps + warp;
  float* ks = shared;
  float* vs = ks + kKeyTile * (dh + 1);
  float* qs = vs + kKeyTile * dh + warp * dh;
  const int64_t base = static_cast<int64_t>(b) * seq;  // token index of position 0
  const float* bq = bias + head * dh;
  const float* bk = bias + hidden + head * dh;
  const float* bv = bias + 2 * hidden + head * dh;
  if (query < seq) {
    const __half* q = qkv + (base + query) * row_stride + head * dh;
    for (int d = lane; d < dh; d += 32) qs[d] = (__half2float(q[d]) + bq[d]) * scale;
  }
  float acc[kPerLane];
  for (int i = 0; i < kPerLane; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < seq; t0 += kKeyTile) {
    __syncthreads();  // the previous tile is no longer read (and qs is visible)
    for (int i = threadIdx.x; i < kKeyTile * dh; i += blockDim.x) {
      const int j = i / dh, d = i % dh, t = t0 + j;
      float kv = 0.0f, vv = 0.0f;
      if (t < seq) {
        const __half* src = qkv + (base + t) * row_stride + head * dh + d;
        kv = __half2float(src[hidden]) + bk[d];
        vv = __half2float(src[2 * hidden]) + bv[d];
      }
      ks[j * (dh + 1) + d] = kv;
      vs[j * dh + d] = vv;
    }
    __syncthreads();
    if (query >= seq) continue;  // warp-uniform; the barriers above are still reached
    const int t = t0 + lane;
    float s = -INFINITY;
    if (t < seq && mask[base + t] != 0) {
      s = 0.0f;
      const float* kr = ks + lane * (dh + 1);
      for (int d = 0; d < dh; ++d) s += qs[d] * kr[d];
    }
    const float m_new = fmaxf(m, WarpMax(s));
    if (m_new == -INFINITY) continue;  // every key so far masked (warp-uniform)
    const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
    const float correction = m == -INFINITY ? 0.0f : expf(m - m_new);
    l = l * correction + WarpSum(p);
    for (int i = 0; i < kPerLane; ++i) acc[i] *= correction;
    for (int j = 0; j < kKeyTile; ++j) {
      const float pj = __shfl_sync(kFullMask, p, j);
      const float* vr = vs + j * dh;
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < dh) acc[i] += pj * vr[d];
      }
    }
    m = m_new;
  }
  if (query < seq) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    __half* out = ctx + (base + query) * hidden + head * dh;
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < dh) out[d] = __float2half(acc[i] * inv);
    }
  }
}

// One block per sequence; threads stride over the hidden dimension.
__global__ void PoolKernel(const __half* __restrict__ x, const int64_t* __restrict__ mask,
                           int64_t seq, int64_t hidden, bool cls, bool normalize,
                           float* __restrict__ out) {
  __shared__ float red[32];
  const int64_t b = blockIdx.x;
  const int64_t positions = cls ? 1 : seq;  // CLS: the first (real) column alone
  int64_t count = 0;
  for (int64_t s = 0; s < positions; ++s) count += mask[b * seq + s] != 0;
  const float inv_count = 1.0f / static_cast<float>(count > 0 ? count : 1);
  float sq = 0.0f;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t s = 0; s < positions; ++s) {
      if (mask[b * seq + s] != 0) acc += __half2float(x[(b * seq + s) * hidden + d]);
    }
    acc *= inv_count;
    out[b * hidden + d] = acc;
    sq += acc * acc;
  }
  const float norm = BlockSum(sq, red);
  if (normalize && norm > 0.0f) {
    const float inv = rsqrtf(norm);
    for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) out[b * hidden + d] *= inv;
  }
}

size_t RowSharedBytes(int64_t hidden) { return (hidden + 32) * sizeof(float); }

// One block per sequence; threads stride over its padded row.
__global__ void UnpackKernel(const int32_t* __restrict__ ids, const int32_t* __restrict__ positions,
                             const int32_t* __restrict__ offsets, int64_t seq,
                             int64_t* __restrict__ padded_ids,
                             int32_t* __restrict__ padded_positions, int64_t* __restrict__ mask) {
  const int64_t b = blockIdx.x;
  const int64_t begin = offsets[b], n = offsets[b + 1] - begin;
  for (int64_t c = threadIdx.x; c < seq; c += blockDim.x) {
    const bool real = c < n;
    padded_ids[b * seq + c] = real ? ids[begin + c] : 0;
    padded_positions[b * seq + c] = real ? positions[begin + c] : 0;
    mask[b * seq + c] = real ? 1 : 0;
  }
}

}  // namespace

cudaError_t LaunchUnpack(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                         const int32_t* offsets, int64_t rows, int64_t seq, int64_t* padded_ids,
                         int32_t* padded_positions, int64_t* mask) {
  if (rows == 0 || seq == 0) return cudaSuccess;
  UnpackKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      ids, positions, offsets, seq, padded_ids, padded_positions, mask);
  return cudaGetLastError();
}

cudaError_t LaunchEmbedLayerNorm(cudaStream_t stream, const int64_t* ids, const int32_t* positions,
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

cudaError_t LaunchAttention(cudaStream_t stream, const __half* qkv, const float* bias,
                            const int64_t* mask, int64_t batch, int64_t seq, int64_t heads,
                            int64_t head_dim, float scale, __half* ctx) {
  if (batch == 0 || seq == 0) return cudaSuccess;
  if (head_dim > kMaxAttentionHeadDim || heads > 65535 || batch > 65535) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>((seq + kAttnWarps - 1) / kAttnWarps),
                  static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  const size_t shared =
      (kKeyTile * (head_dim + 1) + kKeyTile * head_dim + kAttnWarps * head_dim) * sizeof(float);
  AttentionKernel<<<grid, 32 * kAttnWarps, shared, stream>>>(
      qkv, bias, mask, static_cast<int>(seq), static_cast<int>(heads), static_cast<int>(head_dim),
      scale, ctx);
  return cudaGetLastError();
}

cudaError_t LaunchPool(cudaStream_t stream, const __half* x, const int64_t* mask, int64_t batch,
                       int64_t seq, int64_t hidden, bool cls, bool normalize, float* out) {
  if (batch == 0) return cudaSuccess;
  PoolKernel<<<static_cast<unsigned>(batch), kRowThreads, 0, stream>>>(x, mask, seq, hidden, cls,
                                                                       normalize, out);
  return cudaGetLastError();
}

}  // namespace infer::cuda
