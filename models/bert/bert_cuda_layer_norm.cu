// Design of the BERT encoder's LayerNorm kernels (contract in
// bert_cuda_kernels.cuh; bias + GELU and pooling in bert_cuda_gelu_pool.cu).
// Memory-bound: FP16 in device memory, FP32 arithmetic, 16-byte accesses on
// the fast paths.
//
// LayerNorm (LaunchBiasResidualLayerNorm, LaunchEmbedLayerNorm). A row's
// inputs are summed in FP32 (x + y + bias, or word + position + token_type
// embedding rows), then out = (row - mean) * rsqrt(var + eps) * gamma + beta,
// rounded to FP16, with the exact two-pass statistics: mean = sum / hidden,
// then var = sum((row - mean)^2) / hidden over the row as it is held in
// registers. Paths, chosen on the host:
//  - register paths (hidden % 8 == 0, hidden <= kMaxLayerNormHidden, every
//    pointer 16-byte aligned). The row is split into 8-element chunks (one
//    16-byte FP16 load per input, two float4 loads of bias / gamma / beta);
//    with n threads on a row, thread t holds chunks t, t + n, ..,
//    t + n (kChunks - 1) as float[kChunks][8] in registers, kChunks a template
//    parameter, so every array index is a compile-time constant. Chunks past
//    the row's end are zero and skipped by the variance and the stores.
//    * warp per row (hidden <= 512: 384 for MiniLM): blocks of kWarpRows
//      warps, warp w of block b owns row kWarpRows * b + w, kChunks =
//      ceil(hidden / 256) in 1..2. The sums are warp butterflies
//      (__shfl_xor_sync: every lane gets the same bits). A warp whose row is
//      past the last token returns at once (warp-uniform; no block barrier).
//    * block per row (512 < hidden: 768, 1024, ..): kChunks = ceil(hidden /
//      2048) in 1..4 and the fewest whole warps that hold the row, at most
//      256 threads (768: 96 threads of one chunk each; 1024: 128). Each sum is
//      a warp butterfly, then the warp sums through shared memory (one barrier
//      per sum, a separate slot array per sum, so none is overwritten while
//      another warp reads it). Measured on an H100 at 16384 tokens (CUDA
//      events, buffers rotated past the L2), this beat a warp per row at
//      hidden 768 (29.3 vs 31.8 us) and 1024 (38.0 vs 41.7 us): with one
//      chunk per thread, fewer registers and more rows in flight. At hidden
//      384 a warp per row was faster with the row in L2 (11.4 vs 14.0 us) and
//      within 7% without (18.0 vs 16.9 us).
//  - otherwise (hidden not a multiple of 8, a misaligned pointer, or hidden
//    above kMaxLayerNormHidden up to kMaxScalarHidden): the scalar kernel, one
//    256-thread block per row, the FP32 row in shared memory, block-wide sums.
// The in-place output x is read with ordinary loads (this kernel writes it);
// every other input is read-only during the kernel and goes through __ldg. All
// loads of a row are issued before its first use, and all stores follow both
// sums.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "models/bert/bert_cuda_device.cuh"
#include "models/bert/bert_cuda_kernels.cuh"

namespace infer::cuda {
namespace {

using namespace device;  // NOLINT: the shared helpers (bert_cuda_device.cuh)

constexpr int kWarpRows = 4;       // warp-per-row LayerNorm: rows (warps) per block
constexpr int kMaxWarpChunks = 2;  // warp-per-row LayerNorm: 8-element chunks per lane
constexpr int kMaxWarpHidden = 32 * kV * kMaxWarpChunks;  // 512
constexpr int kMaxBlockChunks = 4;  // block-per-row LayerNorm: 8-element chunks per thread
// The scalar LayerNorm's row and 32 sums in the default 48 KiB of shared memory.
constexpr int kMaxScalarHidden = 48 * 1024 / 4 - 32;
static_assert(kRowThreads * kV * kMaxBlockChunks == kMaxLayerNormHidden,
              "the block path covers every multiple of 8 up to kMaxLayerNormHidden");
static_assert(kMaxLayerNormHidden <= kMaxScalarHidden, "the scalar path covers the rest");

// ---- LayerNorm row sources for the register paths --------------------------
// Source::Row(r, hidden) gives the row's view; View::Load(e, v) the FP32 row
// elements e .. e + 7 (e a multiple of 8); Source::Out(r, hidden) where the
// normalised row goes.

struct ResidualView {
  const __half* x;  // in place: ordinary loads
  const __half* y;
  const float* bias;
  __device__ __forceinline__ void Load(int e, float (&v)[kV]) const {
    float a[kV], b[kV], c[kV];
    ToFloat8(*reinterpret_cast<const uint4*>(x + e), a);
    ToFloat8(__ldg(reinterpret_cast<const uint4*>(y + e)), b);
    LoadFloat8(bias + e, c);
#pragma unroll
    for (int i = 0; i < kV; ++i) v[i] = a[i] + b[i] + c[i];
  }
};

struct ResidualSource {
  __half* x;
  const __half* y;
  const float* bias;
  __device__ __forceinline__ ResidualView Row(int64_t r, int64_t hidden) const {
    return {x + r * hidden, y + r * hidden, bias};
  }
  __device__ __forceinline__ __half* Out(int64_t r, int64_t hidden) const { return x + r * hidden; }
};

struct EmbedView {
  const __half* word;
  const __half* position;
  const __half* token_type;
  __device__ __forceinline__ void Load(int e, float (&v)[kV]) const {
    float a[kV], b[kV], c[kV];
    ToFloat8(__ldg(reinterpret_cast<const uint4*>(word + e)), a);
    ToFloat8(__ldg(reinterpret_cast<const uint4*>(position + e)), b);
    ToFloat8(__ldg(reinterpret_cast<const uint4*>(token_type + e)), c);
#pragma unroll
    for (int i = 0; i < kV; ++i) v[i] = a[i] + b[i] + c[i];
  }
};

struct EmbedSource {
  const int32_t* ids;
  const int32_t* positions;
  const int32_t* types;  // or null: type 0
  const __half* word;
  const __half* position;
  const __half* token_type;
  __half* x;
  __device__ __forceinline__ EmbedView Row(int64_t r, int64_t hidden) const {
    const int64_t type = types != nullptr ? static_cast<int64_t>(__ldg(types + r)) : 0;
    return {word + static_cast<int64_t>(__ldg(ids + r)) * hidden,
            position + static_cast<int64_t>(__ldg(positions + r)) * hidden,
            token_type + type * hidden};
  }
  __device__ __forceinline__ __half* Out(int64_t r, int64_t hidden) const { return x + r * hidden; }
};

// Sum over the threads of one row: the warp (kWarp) or the block, whose
// blockDim.x is a multiple of 32 of at most kRowThreads. `slots` holds
// kRowThreads / 32 floats, used by this call alone.
template <bool kWarp>
__device__ __forceinline__ float RowSum(float v, float* slots) {
  v = WarpSum(v);
  if constexpr (kWarp) {
    return v;
  } else {
    if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = v;
    __syncthreads();
    const int warps = blockDim.x >> 5;
    float s = 0.0f;
    for (int w = 0; w < warps; ++w) s += slots[w];
    return s;
  }
}

// Register-resident LayerNorm. kWarp: one warp per row, kWarpRows rows per
// block; else one block per row, blockDim.x threads (a multiple of 32, at
// most kRowThreads). Thread t of a row's n threads holds chunks t + n * j,
// j < kChunks, of 8 elements each.
template <bool kWarp, int kChunks, class Source>
__global__ void __launch_bounds__(kWarp ? 32 * kWarpRows : kRowThreads)
    LayerNormRegsKernel(Source src, const float* __restrict__ gamma, const float* __restrict__ beta,
                        float eps, int hidden, int64_t tokens) {
  __shared__ float slots[2][kRowThreads / 32];
  int t, n;
  int64_t r;
  if constexpr (kWarp) {
    t = threadIdx.x & 31;
    n = 32;
    r = static_cast<int64_t>(blockIdx.x) * kWarpRows + (threadIdx.x >> 5);
    if (r >= tokens) return;  // warp-uniform; no block barrier on this path
  } else {
    t = threadIdx.x;
    n = blockDim.x;
    r = blockIdx.x;
  }
  const int chunks = hidden / kV;  // in the row
  const auto view = src.Row(r, hidden);
  float v[kChunks][kV];
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = t + n * j;
    if (c < chunks) {
      view.Load(c * kV, v[j]);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) v[j][i] = 0.0f;
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
#pragma unroll
    for (int i = 0; i < kV; ++i) s += v[j][i];
  }
  const float mean = RowSum<kWarp>(s, slots[0]) / static_cast<float>(hidden);
  float q = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    if (t + n * j < chunks) {
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        const float d = v[j][i] - mean;
        q += d * d;
      }
    }
  }
  const float var = RowSum<kWarp>(q, slots[1]) / static_cast<float>(hidden);
  const float inv = rsqrtf(var + eps);
  __half* out = src.Out(r, hidden);
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int c = t + n * j;
    if (c < chunks) {
      float g[kV], b[kV];
      LoadFloat8(gamma + c * kV, g);
      LoadFloat8(beta + c * kV, b);
#pragma unroll
      for (int i = 0; i < kV; ++i) v[j][i] = (v[j][i] - mean) * inv * g[i] + b[i];
      *reinterpret_cast<uint4*>(out + c * kV) = ToHalf8(v[j]);
    }
  }
}

template <bool kWarp, int kChunks, class Source>
void LaunchRegs(cudaStream_t stream, const Source& src, const float* gamma, const float* beta,
                float eps, int hidden, int64_t tokens) {
  const int chunks = hidden / kV;
  // Block per row: the fewest whole warps that hold the row in kChunks
  // chunks per thread.
  const int64_t blocks = kWarp ? (tokens + kWarpRows - 1) / kWarpRows : tokens;
  const int threads = kWarp ? 32 * kWarpRows : ((chunks + kChunks - 1) / kChunks + 31) / 32 * 32;
  LayerNormRegsKernel<kWarp, kChunks, Source>
      <<<static_cast<unsigned>(blocks), threads, 0, stream>>>(src, gamma, beta, eps, hidden,
                                                              tokens);
}

// Launches a register path for hidden % 8 == 0, 0 < hidden <= kMaxLayerNormHidden,
// 0 < tokens <= kMaxGridX: a warp per row up to hidden 512, else a block per
// row of at most kRowThreads threads with the fewest chunks per thread.
template <class Source>
void LaunchLayerNormRegs(cudaStream_t stream, const Source& src, const float* gamma,
                         const float* beta, float eps, int hidden, int64_t tokens) {
  const int chunks = hidden / kV;
  if (hidden <= kMaxWarpHidden) {
    if (chunks <= 32) return LaunchRegs<true, 1>(stream, src, gamma, beta, eps, hidden, tokens);
    return LaunchRegs<true, 2>(stream, src, gamma, beta, eps, hidden, tokens);
  }
  switch ((chunks + kRowThreads - 1) / kRowThreads) {
    case 1:
      return LaunchRegs<false, 1>(stream, src, gamma, beta, eps, hidden, tokens);
    case 2:
      return LaunchRegs<false, 2>(stream, src, gamma, beta, eps, hidden, tokens);
    case 3:
      return LaunchRegs<false, 3>(stream, src, gamma, beta, eps, hidden, tokens);
    default:
      return LaunchRegs<false, 4>(stream, src, gamma, beta, eps, hidden, tokens);
  }
}

// ---- Scalar LayerNorm fallback ------------------------------------------------

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
    const int32_t* __restrict__ types, const __half* __restrict__ word,
    const __half* __restrict__ position, const __half* __restrict__ token_type,
    const float* __restrict__ gamma, const float* __restrict__ beta, float eps, int64_t hidden,
    __half* __restrict__ x) {
  extern __shared__ float shared[];
  float* row = shared;
  float* red = shared + hidden;
  const int64_t r = blockIdx.x;
  const __half* w = word + static_cast<int64_t>(ids[r]) * hidden;
  const __half* p = position + static_cast<int64_t>(positions[r]) * hidden;
  const __half* t = token_type + (types != nullptr ? static_cast<int64_t>(types[r]) : 0) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    row[i] = __half2float(w[i]) + __half2float(p[i]) + __half2float(t[i]);
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

size_t RowSharedBytes(int64_t hidden) { return (hidden + 32) * sizeof(float); }

// Shapes no LayerNorm path takes, after the zero sizes.
bool BadLayerNormShape(int64_t tokens, int64_t hidden) {
  return hidden > kMaxScalarHidden || tokens > kMaxGridX;
}

}  // namespace

cudaError_t LaunchEmbedLayerNorm(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                                 const int32_t* types, const __half* word, const __half* position,
                                 const __half* token_type, const float* gamma, const float* beta,
                                 float eps, int64_t tokens, int64_t hidden, __half* x) {
  if (tokens < 0 || hidden < 0) return cudaErrorInvalidValue;
  if (tokens == 0 || hidden == 0) return cudaSuccess;
  if (BadLayerNormShape(tokens, hidden)) return cudaErrorInvalidValue;
  if (hidden % kV == 0 && hidden <= kMaxLayerNormHidden && Aligned16(word) && Aligned16(position) &&
      Aligned16(token_type) && Aligned16(gamma) && Aligned16(beta) && Aligned16(x)) {
    LaunchLayerNormRegs(stream, EmbedSource{ids, positions, types, word, position, token_type, x},
                        gamma, beta, eps, static_cast<int>(hidden), tokens);
  } else {
    EmbedLayerNormKernel<<<static_cast<unsigned>(tokens), kRowThreads, RowSharedBytes(hidden),
                           stream>>>(ids, positions, types, word, position, token_type, gamma, beta,
                                     eps, hidden, x);
  }
  return cudaGetLastError();
}

cudaError_t LaunchBiasResidualLayerNorm(cudaStream_t stream, __half* x, const __half* y,
                                        const float* bias, const float* gamma, const float* beta,
                                        float eps, int64_t tokens, int64_t hidden) {
  if (tokens < 0 || hidden < 0) return cudaErrorInvalidValue;
  if (tokens == 0 || hidden == 0) return cudaSuccess;
  if (BadLayerNormShape(tokens, hidden)) return cudaErrorInvalidValue;
  if (hidden % kV == 0 && hidden <= kMaxLayerNormHidden && Aligned16(x) && Aligned16(y) &&
      Aligned16(bias) && Aligned16(gamma) && Aligned16(beta)) {
    LaunchLayerNormRegs(stream, ResidualSource{x, y, bias}, gamma, beta, eps,
                        static_cast<int>(hidden), tokens);
  } else {
    BiasResidualLayerNormKernel<<<static_cast<unsigned>(tokens), kRowThreads,
                                  RowSharedBytes(hidden), stream>>>(x, y, bias, gamma, beta, eps,
                                                                    hidden);
  }
  return cudaGetLastError();
}

}  // namespace infer::cuda
