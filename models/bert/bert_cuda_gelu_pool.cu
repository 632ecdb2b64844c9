// Design of the BERT encoder's bias + GELU and pooling kernels (contract in
// bert_cuda_kernels.cuh; LayerNorm in bert_cuda_layer_norm.cu).
//
// Bias + GELU (LaunchBiasGelu), exact erf form 0.5 v (1 + erf(v / sqrt 2)),
// v = y + bias in FP32. 2-D grid: x over the row's columns in accesses of kV
// elements (kV = 8: one 16-byte load/store, the bias as two float4, when
// width % 8 == 0 and y, bias are 16-byte aligned; else kV = 1), y over groups
// of kGeluRows consecutive token rows. A thread loads its column's bias once
// and applies it to kGeluRows rows, whose loads are all issued before the
// first store. Block (bx, by): bx a multiple of 32 of at most 256 chosen to
// split a row's accesses evenly, by = 256 / bx row groups. The column comes
// from the block and thread index (no division per element); gridDim.y is
// capped at 65535 and the row groups are walked with a grid stride, so any
// token count fits.
//
// Pooling (LaunchPackedPool): one 256-thread block per packed sequence,
// threads over the hidden columns, FP32 sums of the sequence's rows (or the
// first one), then the block-wide sum of squares for the L2 normalisation.
// It runs once per batch on [rows, hidden]; the kernel is left as it was.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "models/bert/bert_cuda_device.cuh"
#include "models/bert/bert_cuda_kernels.cuh"

namespace infer::cuda {
namespace {

using namespace device;  // NOLINT: the shared helpers (bert_cuda_device.cuh)

constexpr int kGeluRows = 4;       // token rows per GELU thread
constexpr int kGeluThreads = 256;  // threads per GELU block

// ---- Bias + GELU ------------------------------------------------------------

__device__ __forceinline__ float Gelu(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

__device__ __forceinline__ void LoadY(const __half* p, uint4& raw) {
  raw = *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ void LoadY(const __half* p, __half& raw) { raw = *p; }

// Block (bx, by): thread (tx, ty) of block (X, Y) owns the accesses
// c = X * bx + tx of every row in the row groups g = Y * by + ty,
// + gridDim.y * by, ..; a group is kGeluRows consecutive rows.
template <int kW>  // elements per access: kV (16 bytes) or 1
__global__ void __launch_bounds__(kGeluThreads)
    BiasGeluKernel(__half* __restrict__ y, const float* __restrict__ bias, int64_t tokens,
                   int64_t width) {
  using Raw = std::conditional_t<kW == kV, uint4, __half>;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= width / kW) return;  // no barriers below
  const int64_t col = c * kW;
  float b[kW];
  if constexpr (kW == kV) {
    LoadFloat8(bias + col, b);
  } else {
    b[0] = __ldg(bias + col);
  }
  const int64_t groups = (tokens + kGeluRows - 1) / kGeluRows;
  const int64_t group_stride = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t g = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; g < groups;
       g += group_stride) {
    const int64_t r0 = g * kGeluRows;
    __half* p = y + r0 * width + col;
    Raw raw[kGeluRows];
#pragma unroll
    for (int k = 0; k < kGeluRows; ++k) {
      if (r0 + k < tokens) LoadY(p + k * width, raw[k]);
    }
#pragma unroll
    for (int k = 0; k < kGeluRows; ++k) {
      if (r0 + k < tokens) {
        if constexpr (kW == kV) {
          float v[kV];
          ToFloat8(raw[k], v);
#pragma unroll
          for (int i = 0; i < kV; ++i) v[i] = Gelu(v[i] + b[i]);
          *reinterpret_cast<uint4*>(p + k * width) = ToHalf8(v);
        } else {
          p[k * width] = __float2half(Gelu(__half2float(raw[k]) + b[0]));
        }
      }
    }
  }
}

template <int kW>
cudaError_t LaunchGelu(cudaStream_t stream, __half* y, const float* bias, int64_t tokens,
                       int64_t width) {
  const int64_t accesses = width / kW;  // per row
  // bx: a multiple of 32, at most kGeluThreads, splitting a row's accesses
  // into blocks as evenly as possible.
  const int64_t per_row = (accesses + kGeluThreads - 1) / kGeluThreads;
  const int64_t bx = ((accesses + per_row - 1) / per_row + 31) / 32 * 32;
  const int64_t by = kGeluThreads / bx;
  const int64_t grid_x = (accesses + bx - 1) / bx;
  if (grid_x > kMaxGridX) return cudaErrorInvalidValue;
  const int64_t groups = (tokens + kGeluRows - 1) / kGeluRows;
  const int64_t grid_y = std::min((groups + by - 1) / by, kMaxGridY);
  BiasGeluKernel<kW><<<dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)),
                       dim3(static_cast<unsigned>(bx), static_cast<unsigned>(by)), 0, stream>>>(
      y, bias, tokens, width);
  return cudaGetLastError();
}

// ---- Pooling ------------------------------------------------------------------

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

}  // namespace

cudaError_t LaunchBiasGelu(cudaStream_t stream, __half* y, const float* bias, int64_t tokens,
                           int64_t width) {
  if (tokens < 0 || width < 0) return cudaErrorInvalidValue;
  if (tokens == 0 || width == 0) return cudaSuccess;
  if (width % kV == 0 && Aligned16(y) && Aligned16(bias)) {
    return LaunchGelu<kV>(stream, y, bias, tokens, width);
  }
  return LaunchGelu<1>(stream, y, bias, tokens, width);
}

cudaError_t LaunchPackedPool(cudaStream_t stream, const __half* x, const int32_t* offsets,
                             int64_t rows, int64_t hidden, bool cls, bool normalize, float* out) {
  if (rows < 0 || hidden < 0) return cudaErrorInvalidValue;
  if (rows == 0 || hidden == 0) return cudaSuccess;
  if (rows > kMaxGridX) return cudaErrorInvalidValue;
  PackedPoolKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, offsets, hidden, cls,
                                                                            normalize, out);
  return cudaGetLastError();
}

}  // namespace infer::cuda
