// Design of the general transformer blocks' CUDA kernels (contracts in
// transformer_cuda_kernels.cuh). They serve the families the BERT kernels
// (models/bert/bert_cuda_layer_norm.cu) do not: pre-norm, RMSNorm, norms
// without β, gated FFNs, rotary positions. Simple and memory-bound by design:
// one block per row with the row in FP32 in shared memory (every input read
// once, every output written once, element accesses coalesced across the
// block), one warp per (token, head) for the q/k transform, a grid-stride
// loop for the activations. BERT-shaped models keep their tuned 16-byte
// register paths; these are the general case.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "models/bert/bert_cuda_device.cuh"
#include "models/transformer/transformer_cuda_kernels.cuh"

namespace infer::cuda {
namespace {

using namespace device;  // NOLINT: the shared helpers (bert_cuda_device.cuh)

__device__ __forceinline__ void Store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
__device__ __forceinline__ float Load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float Load(const float* p) { return *p; }

// Normalises the block's row `s` (FP32, shared memory) and writes it to `out`
// (FP16, or FP32). Every thread of the block calls it (it holds barriers).
template <typename Out>
__device__ void NormRow(float* s, int hidden, const RowNorm& n, float* red, Out* out) {
  if (n.gamma != nullptr) {
    float mean = 0.0f;
    if (!n.rms) {
      float sum = 0.0f;
      for (int j = threadIdx.x; j < hidden; j += blockDim.x) sum += s[j];
      mean = BlockSum(sum, red) / static_cast<float>(hidden);
    }
    float sq = 0.0f;
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
      const float d = s[j] - mean;
      sq += d * d;
    }
    const float inv = rsqrtf(BlockSum(sq, red) / static_cast<float>(hidden) + n.eps);
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
      float v = (s[j] - mean) * inv * __ldg(n.gamma + j);
      if (n.beta != nullptr) v += __ldg(n.beta + j);
      Store(out + j, v);
    }
  } else {
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) Store(out + j, s[j]);
  }
}

template <typename X>
__global__ void EmbedKernel(const int32_t* __restrict__ ids, const int32_t* __restrict__ positions,
                            const int32_t* __restrict__ types, const __half* __restrict__ word,
                            const __half* __restrict__ position,
                            const __half* __restrict__ token_type, RowNorm norm, int hidden,
                            X* __restrict__ x) {
  extern __shared__ float row[];
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const __half* w = word + static_cast<int64_t>(__ldg(ids + r)) * hidden;
  const __half* p = nullptr;
  if (position != nullptr) p = position + static_cast<int64_t>(__ldg(positions + r)) * hidden;
  const __half* tt =
      token_type != nullptr
          ? token_type + static_cast<int64_t>(types != nullptr ? __ldg(types + r) : 0) * hidden
          : nullptr;
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    float v = __half2float(w[j]);
    if (p != nullptr) v += __half2float(p[j]);
    if (tt != nullptr) v += __half2float(tt[j]);
    row[j] = v;
  }
  __syncthreads();
  NormRow(row, hidden, norm, red, x + r * hidden);
}

template <typename X>
__global__ void AddNormKernel(X* x, const __half* y, const float* __restrict__ bias, RowNorm norm,
                              int hidden, __half* out) {
  extern __shared__ float row[];
  __shared__ float red[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * hidden;
  const bool update = y != nullptr && static_cast<void*>(out) != static_cast<void*>(x);
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    float v = Load(x + base + j);
    if (y != nullptr) {
      v += __half2float(y[base + j]);
      if (bias != nullptr) v += __ldg(bias + j);
    }
    row[j] = v;
    if (update) Store(x + base + j, v);
  }
  // Every read of the row (x and y) happens before this barrier, every write
  // of `out` after it, so out may alias x or y.
  __syncthreads();
  NormRow(row, hidden, norm, red, out + base);
}

// One warp per (token, head) of the query and key heads.
__global__ void QkTransformKernel(__half* qkv, const float* __restrict__ bias,
                                  const float* __restrict__ q_gamma,
                                  const float* __restrict__ k_gamma, float eps,
                                  const int32_t* __restrict__ positions,
                                  const float* __restrict__ inv_freq, int64_t tokens, int heads,
                                  int kv_heads, int head_dim) {
  constexpr int kMaxPerLane = 4;  // head_dim <= 256: pairs (i, i + d/2) per lane <= 4
  const int lane = threadIdx.x & 31;
  const int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int qk_heads = heads + kv_heads;
  if (item >= tokens * qk_heads) return;  // warp-uniform
  const int64_t t = item / qk_heads;
  const int h = static_cast<int>(item % qk_heads);
  const int stride = (heads + 2 * kv_heads) * head_dim, half = head_dim / 2;
  __half* v = qkv + t * stride + static_cast<int64_t>(h) * head_dim;
  const float* b = bias != nullptr ? bias + static_cast<int64_t>(h) * head_dim : nullptr;
  const float* gamma = h < heads ? q_gamma : k_gamma;
  float lo[kMaxPerLane], hi[kMaxPerLane];
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int i = lane + 32 * k;
    lo[k] = hi[k] = 0.0f;
    if (i < half) {
      lo[k] = __half2float(v[i]) + (b != nullptr ? __ldg(b + i) : 0.0f);
      hi[k] = __half2float(v[i + half]) + (b != nullptr ? __ldg(b + i + half) : 0.0f);
      sq += lo[k] * lo[k] + hi[k] * hi[k];
    }
  }
  if (gamma != nullptr) {
    const float inv = rsqrtf(WarpSum(sq) / static_cast<float>(head_dim) + eps);
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int i = lane + 32 * k;
      if (i < half) {
        lo[k] = lo[k] * inv * __ldg(gamma + i);
        hi[k] = hi[k] * inv * __ldg(gamma + i + half);
      }
    }
  }
  const float p = inv_freq != nullptr ? static_cast<float>(__ldg(positions + t)) : 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int i = lane + 32 * k;
    if (i >= half) continue;
    float a = lo[k], c = hi[k];
    if (inv_freq != nullptr) {
      float sn, cs;
      sincosf(p * __ldg(inv_freq + i), &sn, &cs);
      a = lo[k] * cs - hi[k] * sn;
      c = hi[k] * cs + lo[k] * sn;
    }
    v[i] = __float2half_rn(a);
    v[i + half] = __float2half_rn(c);
  }
}

__device__ __forceinline__ float Activate(float x, Activation act) {
  switch (act) {
    case Activation::kGelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Activation::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Activation::kSilu:
    default:
      return x / (1.0f + expf(-x));
  }
}

__global__ void ActivationKernel(__half* y, const float* __restrict__ bias, int64_t tokens,
                                 int64_t width, Activation act, bool gated) {
  const int64_t n = tokens * width, row_stride = gated ? 2 * width : width;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / width, j = e % width;
    __half* row = y + r * row_stride;
    float v = __half2float(row[j]) + (bias != nullptr ? __ldg(bias + j) : 0.0f);
    v = Activate(v, act);
    if (gated) {
      v *= __half2float(row[width + j]) + (bias != nullptr ? __ldg(bias + width + j) : 0.0f);
    }
    row[j] = __float2half_rn(v);
  }
}

__global__ void LastTokenPoolKernel(const __half* __restrict__ x,
                                    const int32_t* __restrict__ offsets, int hidden, bool normalize,
                                    float* __restrict__ out) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const int begin = __ldg(offsets + r), end = __ldg(offsets + r + 1);
  float* o = out + r * hidden;
  if (end <= begin) {  // block-uniform
    for (int j = threadIdx.x; j < hidden; j += blockDim.x) o[j] = 0.0f;
    return;
  }
  const __half* src = x + static_cast<int64_t>(end - 1) * hidden;
  float sq = 0.0f;
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    const float v = __half2float(src[j]);
    sq += v * v;
  }
  float scale = 1.0f;
  if (normalize) {
    const float norm = sqrtf(BlockSum(sq, red));
    scale = norm > 0.0f ? 1.0f / norm : 0.0f;
  }
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) o[j] = __half2float(src[j]) * scale;
}

bool RowSizesOk(int64_t rows, int64_t hidden) {
  return rows >= 0 && hidden >= 0 && hidden <= kMaxRowHidden && rows <= kMaxGridX;
}

size_t RowBytes(int64_t hidden) { return static_cast<size_t>(hidden) * sizeof(float); }

}  // namespace

namespace {

template <typename X>
cudaError_t Embed(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                  const int32_t* types, const __half* word, const __half* position,
                  const __half* token_type, const RowNorm& norm, int64_t tokens, int64_t hidden,
                  X* x) {
  if (!RowSizesOk(tokens, hidden) || tokens > 2147483647) return cudaErrorInvalidValue;
  if (tokens == 0 || hidden == 0) return cudaSuccess;
  EmbedKernel<X><<<static_cast<unsigned>(tokens), kRowThreads, RowBytes(hidden), stream>>>(
      ids, positions, types, word, position, token_type, norm, static_cast<int>(hidden), x);
  return cudaGetLastError();
}

template <typename X>
cudaError_t AddNorm(cudaStream_t stream, X* x, const __half* y, const float* bias,
                    const RowNorm& norm, int64_t tokens, int64_t hidden, __half* out) {
  if (!RowSizesOk(tokens, hidden)) return cudaErrorInvalidValue;
  if (tokens == 0 || hidden == 0) return cudaSuccess;
  AddNormKernel<X><<<static_cast<unsigned>(tokens), kRowThreads, RowBytes(hidden), stream>>>(
      x, y, bias, norm, static_cast<int>(hidden), out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchEmbed(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                        const int32_t* types, const __half* word, const __half* position,
                        const __half* token_type, const RowNorm& norm, int64_t tokens,
                        int64_t hidden, __half* x) {
  return Embed(stream, ids, positions, types, word, position, token_type, norm, tokens, hidden, x);
}

cudaError_t LaunchEmbed(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                        const int32_t* types, const __half* word, const __half* position,
                        const __half* token_type, const RowNorm& norm, int64_t tokens,
                        int64_t hidden, float* x) {
  return Embed(stream, ids, positions, types, word, position, token_type, norm, tokens, hidden, x);
}

cudaError_t LaunchAddNorm(cudaStream_t stream, __half* x, const __half* y, const float* bias,
                          const RowNorm& norm, int64_t tokens, int64_t hidden, __half* out) {
  return AddNorm(stream, x, y, bias, norm, tokens, hidden, out);
}

cudaError_t LaunchAddNorm(cudaStream_t stream, float* x, const __half* y, const float* bias,
                          const RowNorm& norm, int64_t tokens, int64_t hidden, __half* out) {
  return AddNorm(stream, x, y, bias, norm, tokens, hidden, out);
}

cudaError_t LaunchQkTransform(cudaStream_t stream, __half* qkv, const float* bias,
                              const float* q_gamma, const float* k_gamma, float eps,
                              const int32_t* positions, const float* inv_freq, int64_t tokens,
                              int64_t heads, int64_t kv_heads, int64_t head_dim) {
  if (tokens < 0 || heads < 1 || kv_heads < 1 || head_dim < 2 || head_dim % 2 != 0 ||
      head_dim > 256 || heads > 65535 || kv_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  if (tokens == 0) return cudaSuccess;
  constexpr int kThreads = 256, kWarps = kThreads / 32;
  const int64_t items = tokens * (heads + kv_heads);
  const int64_t blocks = (items + kWarps - 1) / kWarps;
  if (blocks > kMaxGridX) return cudaErrorInvalidValue;
  QkTransformKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      qkv, bias, q_gamma, k_gamma, eps, positions, inv_freq, tokens, static_cast<int>(heads),
      static_cast<int>(kv_heads), static_cast<int>(head_dim));
  return cudaGetLastError();
}

cudaError_t LaunchActivation(cudaStream_t stream, __half* y, const float* bias, int64_t tokens,
                             int64_t width, Activation act, bool gated) {
  if (tokens < 0 || width < 0) return cudaErrorInvalidValue;
  if (tokens == 0 || width == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t n = tokens * width;
  // A grid-stride loop: enough blocks to fill any GPU, never past the limit.
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{1} << 20);
  ActivationKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(y, bias, tokens, width,
                                                                           act, gated);
  return cudaGetLastError();
}

cudaError_t LaunchLastTokenPool(cudaStream_t stream, const __half* x, const int32_t* offsets,
                                int64_t rows, int64_t hidden, bool normalize, float* out) {
  if (!RowSizesOk(rows, hidden)) return cudaErrorInvalidValue;
  if (rows == 0 || hidden == 0) return cudaSuccess;
  LastTokenPoolKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      x, offsets, static_cast<int>(hidden), normalize, out);
  return cudaGetLastError();
}

namespace {

__device__ float ConvertValue(__half x, float*) { return __half2float(x); }
__device__ __half ConvertValue(float x, __half*) { return __float2half_rn(x); }

// y[i] = x[i] in To's type: one value per thread per step of a grid-stride
// loop, so any n is covered by at most kMaxConvertBlocks blocks.
constexpr int kConvertThreads = 256;
constexpr int64_t kMaxConvertBlocks = int64_t{1} << 20;
template <typename From, typename To>
__global__ void ConvertKernel(const From* __restrict__ x, int64_t n, To* __restrict__ y) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] = ConvertValue(x[i], static_cast<To*>(nullptr));
  }
}

template <typename From, typename To>
cudaError_t LaunchConvert(cudaStream_t stream, const From* x, int64_t n, To* y) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t blocks = std::min((n + kConvertThreads - 1) / kConvertThreads, kMaxConvertBlocks);
  ConvertKernel<<<static_cast<unsigned>(blocks), kConvertThreads, 0, stream>>>(x, n, y);
  return cudaGetLastError();
}

// One thread per (sequence, column): the sequence's tokens in the chunk are
// read down the column, consecutive threads reading consecutive columns.
__global__ void SpladeFoldKernel(const float* __restrict__ logits, const float* __restrict__ bias,
                                 const int32_t* __restrict__ offsets, int64_t first, int64_t c0,
                                 int64_t c1, int64_t vocab, bool sum, bool twice,
                                 float* __restrict__ out) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vocab) return;
  const int64_t s = first + blockIdx.y;
  const int64_t t0 = max(static_cast<int64_t>(offsets[s]), c0);
  const int64_t t1 = min(static_cast<int64_t>(offsets[s + 1]), c1);
  if (t0 >= t1) return;
  const float b = bias != nullptr ? bias[v] : 0.0f;
  auto f = [twice](float l) {
    const float y = log1pf(l);
    return twice ? log1pf(y) : y;
  };
  float* o = out + s * vocab + v;
  if (sum) {
    float acc = 0.0f;
    for (int64_t t = t0; t < t1; ++t) {
      const float l = logits[(t - c0) * vocab + v] + b;
      if (l > 0.0f) acc += f(l);
    }
    *o += acc;
  } else {
    float top = -INFINITY;
    for (int64_t t = t0; t < t1; ++t) top = fmaxf(top, logits[(t - c0) * vocab + v] + b);
    if (top > 0.0f) *o = fmaxf(*o, f(top));
  }
}

}  // namespace

cudaError_t LaunchFloatToHalf(cudaStream_t stream, const float* x, int64_t n, __half* y) {
  return LaunchConvert(stream, x, n, y);
}

cudaError_t LaunchSpladeFold(cudaStream_t stream, const float* logits, const float* bias,
                             const int32_t* offsets, int64_t first, int64_t last, int64_t c0,
                             int64_t c1, int64_t vocab, bool sum, bool twice, float* out) {
  if (first < 0 || last < first || c0 < 0 || c1 < c0 || vocab < 0 || last - first > 65535) {
    return cudaErrorInvalidValue;
  }
  if (last == first || c1 == c0 || vocab == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((vocab + kThreads - 1) / kThreads),
                  static_cast<unsigned>(last - first));
  SpladeFoldKernel<<<grid, kThreads, 0, stream>>>(logits, bias, offsets, first, c0, c1, vocab, sum,
                                                  twice, out);
  return cudaGetLastError();
}

cudaError_t LaunchHalfToFloat(cudaStream_t stream, const __half* x, int64_t n, float* y) {
  return LaunchConvert(stream, x, n, y);
}

}  // namespace infer::cuda
