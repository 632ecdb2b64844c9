// The packed attention kernel's launchers (contract in packed_attention_cuda.cuh;
// the kernel and its design in packed_attention_kernel.cuh).
#include <atomic>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>

#include "models/packed_attention_cuda.cuh"
#include "models/packed_attention_kernel.cuh"

namespace infer::cuda {
namespace {

using packed_attention::Config;
using packed_attention::kLog2e;
using packed_attention::PackedAttentionKernel;

constexpr int kMaxDevices = 64;  // devices whose attribute flag is cached

// Raises the kernel's dynamic shared memory limit past the default 48 KiB,
// once per device (the attribute belongs to the device's context). Not a
// stream operation: legal during graph capture too.
template <int kD, int kMTiles, bool kMasked>
cudaError_t AllowSharedMemory() {
  constexpr size_t kBytes = Config<kD, kMTiles>::kBytes;
  if (kBytes <= 48 * 1024) return cudaSuccess;
  static std::atomic<bool> done[kMaxDevices];  // zero-initialised: static storage
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  e = cudaFuncSetAttribute(PackedAttentionKernel<kD, kMTiles, kMasked>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes));
  if (e == cudaSuccess && cached) done[device].store(true, std::memory_order_release);
  return e;
}

// What every launch passes on, past the head size.
struct LaunchArgs {
  cudaStream_t stream;
  int64_t rows, max_len;
  int heads, kv_heads;
  const __half* qkv;
  const float* bias;
  const int32_t* offsets;
  float scale;
  AttentionMask mask;
  __half* ctx;
};

template <int kD, int kMTiles, bool kMasked>
cudaError_t Launch(const LaunchArgs& a) {
  using C = Config<kD, kMTiles>;
  const cudaError_t e = AllowSharedMemory<kD, kMTiles, kMasked>();
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((a.max_len + C::kQueryTile - 1) / C::kQueryTile),
                  static_cast<unsigned>(a.heads), static_cast<unsigned>(a.rows));
  // The exponent scale must be positive (see the design notes): the sign goes
  // into Q, and 0 becomes FLT_MIN.
  const float scale_log2 = std::fmax(std::fabs(a.scale) * kLog2e, FLT_MIN);
  const float q_sign = a.scale < 0.0f ? -1.0f : 1.0f;
  PackedAttentionKernel<kD, kMTiles, kMasked><<<grid, C::kThreads, C::kBytes, a.stream>>>(
      a.qkv, a.bias, a.offsets, a.heads, a.kv_heads * kD, a.heads / a.kv_heads, scale_log2, q_sign,
      a.mask, a.ctx);
  return cudaGetLastError();
}

// 64-query blocks (one m-tile per warp), except for head size 32 past 128
// tokens: 128-query blocks (two m-tiles per warp). Measured on an H100: for 32
// the second m-tile halves the K/V fragment loads per mma, which pays once
// sequences are long; for 64 and 128 it costs occupancy (registers) and wins
// nothing, and short sentences waste less work past their end in 64-query
// blocks. The masked variant always takes 64-query blocks (a causal or
// windowed block's key range grows with its query range).
template <int kD>
cudaError_t LaunchHeadDim(const LaunchArgs& a, bool masked) {
  if (masked) return Launch<kD, 1, true>(a);
  if constexpr (kD == 32) {
    if (a.max_len > 128) return Launch<kD, 2, false>(a);
  }
  return Launch<kD, 1, false>(a);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool PackedAttentionSupports(int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128;
}

cudaError_t LaunchPackedAttention(cudaStream_t stream, const __half* qkv, const float* bias,
                                  const int32_t* offsets, int64_t rows, int64_t max_len,
                                  int64_t heads, int64_t head_dim, float scale, __half* ctx) {
  return LaunchPackedAttentionMasked(stream, qkv, bias, offsets, rows, max_len, heads, heads,
                                     head_dim, scale, AttentionMask(), ctx);
}

cudaError_t LaunchPackedAttentionMasked(cudaStream_t stream, const __half* qkv, const float* bias,
                                        const int32_t* offsets, int64_t rows, int64_t max_len,
                                        int64_t heads, int64_t kv_heads, int64_t head_dim,
                                        float scale, const AttentionMask& mask, __half* ctx) {
  if (!PackedAttentionSupports(head_dim) || rows < 0 || max_len < 0 || heads < 1 || kv_heads < 1 ||
      heads % kv_heads != 0 || mask.window < 0 ||
      (mask.relative_bias != nullptr && (mask.relative_span < 1 || mask.relative_span < max_len))) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0 || max_len == 0) return cudaSuccess;
  // Token indices are int32 (offsets); grid y and z are at most 65535.
  if (max_len > INT_MAX || heads > 65535 || rows > 65535) return cudaErrorInvalidValue;
  if (!Aligned16(qkv) || !Aligned16(bias) || !Aligned16(ctx)) return cudaErrorInvalidValue;
  const bool masked =
      mask.causal || mask.window > 0 || mask.relative_bias != nullptr || kv_heads != heads;
  const LaunchArgs a{stream,
                     rows,
                     max_len,
                     static_cast<int>(heads),
                     static_cast<int>(kv_heads),
                     qkv,
                     bias,
                     offsets,
                     scale,
                     mask,
                     ctx};
  switch (head_dim) {
    case 32:
      return LaunchHeadDim<32>(a, masked);
    case 64:
      return LaunchHeadDim<64>(a, masked);
    default:
      return LaunchHeadDim<128>(a, masked);
  }
}

}  // namespace infer::cuda
