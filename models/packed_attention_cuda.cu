// Design of the packed attention kernel (contract in packed_attention_cuda.cuh).
//
// grid (ceil(max_len / 64), heads, rows); block 4 warps. A block owns 64 query
// tokens of one sequence and head; warp w owns query rows 16w .. 16w + 15.
//  1. The Q tile (bias added in FP32, rounded to FP16, zero past the sequence
//     end) is staged in the K buffer; each warp keeps its 16 x D slice in
//     registers as wmma matrix_a fragments for the whole kernel.
//  2. For each tile of 64 keys: K and V (bias added, zero past the end) into
//     shared memory; per warp S = Q·K^T (wmma m16n16k16, FP32) into the warp's
//     S stage; the online softmax, two lanes per query row (running max m and
//     sum l in registers, base-2 exponentials with scale·log2(e) folded in;
//     keys past the end get -inf, so probability 0); P as FP16 into the warp's
//     P stage; the warp's O rows (FP32, shared memory) scaled by
//     exp(m_old - m_new); then O += P·V with accumulator fragments loaded from
//     and stored back to O (mem_row_major).
//  3. ctx = O / l as FP16 for the rows inside the sequence.
// Invariants: every __syncthreads is reached by every thread of the block (the
// only early exit before the loop is block-uniform; warps with no query inside
// the sequence skip work but not barriers, and no barrier follows the loop). A
// warp's S, P and O stages are touched by that warp alone, ordered by
// __syncwarp. l >= 1 at the end: the row's largest score contributes exp(0).
// K/V zero past the end keep P·V finite (P is exactly 0 there).
//
// Shared memory, bytes: K and V tiles 2 * 64 * (D + 8) * 2, S 4 * 16 * 72 * 4,
// P 4 * 16 * 72 * 2, O 4 * 16 * (D + 8) * 4: D = 32: 48128, 64: 64512,
// 128: 97280. Rows are padded by 8 elements: wmma's leading dimensions stay
// multiples of 16 bytes, every fragment origin 256-bit aligned, and the
// softmax's float4 accesses (two lanes per row) hit distinct banks.
#include <mma.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstddef>

#include "models/packed_attention_cuda.cuh"

namespace infer::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kFrag = 16;                   // wmma tile: m = n = k = 16
constexpr int kQueryTile = kWarps * kFrag;  // query tokens per block
constexpr int kKeyTile = 64;                // key tokens per loop step
constexpr int kLdS = kKeyTile + 8;          // floats per row of a warp's S stage
constexpr int kLdP = kKeyTile + 8;          // halves per row of a warp's P stage
constexpr int kMaxDevices = 64;             // devices whose attribute flag is cached
constexpr float kLog2e = 1.4426950408889634f;

static_assert(kQueryTile <= kKeyTile, "the Q tile is staged in the K buffer");
static_assert(kKeyTile % kFrag == 0 && kKeyTile % 8 == 0, "key tile in whole fragments");
static_assert(kLdS % 4 == 0 && kLdP % 8 == 0, "wmma ld: 16-byte multiples");

// Byte offsets into the dynamic shared memory, per head size.
template <int kD>
struct Layout {
  static constexpr int kLdT = kD + 8;  // halves per row of the Q/K/V tiles
  static constexpr int kLdO = kD + 8;  // floats per row of a warp's O
  static constexpr size_t kTileBytes = size_t{kKeyTile} * kLdT * sizeof(__half);
  static constexpr size_t kSWarpBytes = size_t{kFrag} * kLdS * sizeof(float);
  static constexpr size_t kPWarpBytes = size_t{kFrag} * kLdP * sizeof(__half);
  static constexpr size_t kOWarpBytes = size_t{kFrag} * kLdO * sizeof(float);
  static constexpr size_t kK = 0;
  static constexpr size_t kV = kK + kTileBytes;
  static constexpr size_t kS = kV + kTileBytes;
  static constexpr size_t kP = kS + kWarps * kSWarpBytes;
  static constexpr size_t kO = kP + kWarps * kPWarpBytes;
  static constexpr size_t kBytes = kO + kWarps * kOWarpBytes;

  static_assert(kD % kFrag == 0 && kD % 32 == 0, "head_dim in whole fragments and lane pairs");
  static_assert(kLdT % 8 == 0 && kLdO % 4 == 0, "wmma ld: 16-byte multiples");
  // 256-bit alignment of every fragment origin: region and per-warp bases,
  // and 16 rows of any stage (16 * ld * size is a multiple of 32 given the ld
  // rules above; columns step by 16 elements).
  static_assert(kTileBytes % 32 == 0 && kSWarpBytes % 32 == 0 && kPWarpBytes % 32 == 0 &&
                    kOWarpBytes % 32 == 0,
                "wmma pointers must be 256-bit aligned");
};

// Stages `count` (<= kKeyTile) rows of one head's kD columns of qkv, from
// token `first` and column `col` (part * hidden + head * kD), plus
// bias[col ..], as FP16 into tile [kKeyTile][kLdT]; rows from `count` on are
// zero. 16-byte loads (8 halves; col is a multiple of 8, qkv and bias 16-byte
// aligned), consecutive threads on consecutive chunks of a row.
template <int kD>
__device__ void LoadTile(const __half* __restrict__ qkv, const float* __restrict__ bias,
                         int64_t stride, int64_t first, int count, int64_t col,
                         __half* __restrict__ tile) {
  constexpr int kChunks = kD / 8;  // 16-byte chunks per row
  static_assert(kKeyTile * kChunks % kThreads == 0, "whole chunks per thread");
  const float* b = bias + col;
#pragma unroll
  for (int step = 0; step < kKeyTile * kChunks / kThreads; ++step) {
    const int i = step * kThreads + threadIdx.x;
    const int row = i / kChunks, c = (i % kChunks) * 8;
    uint4 packed = make_uint4(0u, 0u, 0u, 0u);
    if (row < count) {
      const uint4 raw =
          __ldg(reinterpret_cast<const uint4*>(qkv + (first + row) * stride + col + c));
      const float4 b0 = __ldg(reinterpret_cast<const float4*>(b + c));
      const float4 b1 = __ldg(reinterpret_cast<const float4*>(b + c + 4));
      const __half2* in = reinterpret_cast<const __half2*>(&raw);
      __half2* out = reinterpret_cast<__half2*>(&packed);
      float2 f = __half22float2(in[0]);
      out[0] = __floats2half2_rn(f.x + b0.x, f.y + b0.y);
      f = __half22float2(in[1]);
      out[1] = __floats2half2_rn(f.x + b0.z, f.y + b0.w);
      f = __half22float2(in[2]);
      out[2] = __floats2half2_rn(f.x + b1.x, f.y + b1.y);
      f = __half22float2(in[3]);
      out[3] = __floats2half2_rn(f.x + b1.z, f.y + b1.w);
    }
    *reinterpret_cast<uint4*>(tile + row * Layout<kD>::kLdT + c) = packed;
  }
}

template <int kD>
__global__ void __launch_bounds__(kThreads)
    PackedAttentionKernel(const __half* __restrict__ qkv, const float* __restrict__ bias,
                          const int32_t* __restrict__ offsets, int heads, float scale_log2,
                          __half* __restrict__ ctx) {
  using L = Layout<kD>;
  using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __half, wmma::row_major>;
  using FragKt = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __half, wmma::col_major>;
  using FragV = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __half, wmma::row_major>;
  using FragC = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;
  constexpr int kDFrags = kD / kFrag;
  constexpr int kKeyFrags = kKeyTile / kFrag;
  extern __shared__ __align__(128) unsigned char smem[];

  const int seq = blockIdx.z, head = blockIdx.y;
  const int q0 = blockIdx.x * kQueryTile;
  const int begin = offsets[seq];
  const int len = offsets[seq + 1] - begin;
  if (q0 >= len) return;  // block-uniform, before any barrier

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r = lane >> 1, h = lane & 1;  // this lane's row of the warp's 16, and its column half
  const int64_t hidden = static_cast<int64_t>(heads) * kD;
  const int64_t stride = 3 * hidden;
  const int64_t col = static_cast<int64_t>(head) * kD;  // this head's query columns
  __half* ks = reinterpret_cast<__half*>(smem + L::kK);
  __half* vs = reinterpret_cast<__half*>(smem + L::kV);
  float* sw = reinterpret_cast<float*>(smem + L::kS + warp * L::kSWarpBytes);
  __half* pw = reinterpret_cast<__half*>(smem + L::kP + warp * L::kPWarpBytes);
  float* ow = reinterpret_cast<float*>(smem + L::kO + warp * L::kOWarpBytes);
  const bool active = q0 + warp * kFrag < len;  // warp-uniform: some query row inside

  // Q (staged in the K buffer) into fragments; O to zero.
  LoadTile<kD>(qkv, bias, stride, begin + q0, min(len - q0, kQueryTile), col, ks);
  for (int i = lane; i < kFrag * L::kLdO; i += 32) ow[i] = 0.0f;
  __syncthreads();
  FragA qa[kDFrags];
  if (active) {
#pragma unroll
    for (int k = 0; k < kDFrags; ++k) {
      wmma::load_matrix_sync(qa[k], ks + warp * kFrag * L::kLdT + k * kFrag, L::kLdT);
    }
  }

  float m = -INFINITY, l = 0.0f;  // this lane's row: running max (log2 units) and sum
  for (int t0 = 0; t0 < len; t0 += kKeyTile) {
    __syncthreads();  // the previous K/V tiles (or the staged Q) are no longer read
    const int count = min(len - t0, kKeyTile);
    LoadTile<kD>(qkv, bias, stride, begin + t0, count, hidden + col, ks);
    LoadTile<kD>(qkv, bias, stride, begin + t0, count, 2 * hidden + col, vs);
    __syncthreads();
    if (!active) continue;

      // S = Q·K^T: K [key][d] row-major is K^T column-major.
#pragma unroll
    for (int j = 0; j < kKeyFrags; ++j) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int k = 0; k < kDFrags; ++k) {
        FragKt kt;
        wmma::load_matrix_sync(kt, ks + j * kFrag * L::kLdT + k * kFrag, L::kLdT);
        wmma::mma_sync(acc, qa[k], kt, acc);
      }
      wmma::store_matrix_sync(sw + j * kFrag, acc, kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: lane (r, h) holds columns 8i + 4h .. 8i + 4h + 3.
    const float* srow = sw + r * kLdS;
    float s[kKeyTile / 2];
    float tile_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kKeyTile / 8; ++i) {
      const int c = 8 * i + 4 * h;
      const float4 v = *reinterpret_cast<const float4*>(srow + c);
      s[4 * i + 0] = c + 0 < count ? v.x * scale_log2 : -INFINITY;
      s[4 * i + 1] = c + 1 < count ? v.y * scale_log2 : -INFINITY;
      s[4 * i + 2] = c + 2 < count ? v.z * scale_log2 : -INFINITY;
      s[4 * i + 3] = c + 3 < count ? v.w * scale_log2 : -INFINITY;
      tile_max =
          fmaxf(tile_max, fmaxf(fmaxf(s[4 * i], s[4 * i + 1]), fmaxf(s[4 * i + 2], s[4 * i + 3])));
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);  // finite: key t0 is inside the sequence
    const float alpha = exp2f(m - m_new);    // 0 on the first tile (m = -inf)
    __half* prow = pw + r * kLdP;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kKeyTile / 8; ++i) {
      const int c = 8 * i + 4 * h;
      const __half2 p01 =
          __floats2half2_rn(exp2f(s[4 * i + 0] - m_new), exp2f(s[4 * i + 1] - m_new));
      const __half2 p23 =
          __floats2half2_rn(exp2f(s[4 * i + 2] - m_new), exp2f(s[4 * i + 3] - m_new));
      __half2* dst = reinterpret_cast<__half2*>(prow + c);
      dst[0] = p01;
      dst[1] = p23;
      // Sum the FP16 weights P·V will use, so O / l normalises exactly them.
      const float2 f01 = __half22float2(p01), f23 = __half22float2(p23);
      sum += (f01.x + f01.y) + (f23.x + f23.y);
    }
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    if (alpha != 1.0f) {  // rescale this lane's half of its O row
      float* orow = ow + r * L::kLdO;
#pragma unroll
      for (int i = 0; i < kD / 8; ++i) {
        float4* o = reinterpret_cast<float4*>(orow + 8 * i + 4 * h);
        float4 v = *o;
        v.x *= alpha;
        v.y *= alpha;
        v.z *= alpha;
        v.w *= alpha;
        *o = v;
      }
    }
    __syncwarp();

    // O += P·V: V [key][d] row-major.
    FragA pa[kKeyFrags];
#pragma unroll
    for (int k = 0; k < kKeyFrags; ++k) wmma::load_matrix_sync(pa[k], pw + k * kFrag, kLdP);
#pragma unroll
    for (int n = 0; n < kDFrags; ++n) {
      FragC acc;
      wmma::load_matrix_sync(acc, ow + n * kFrag, L::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int k = 0; k < kKeyFrags; ++k) {
        FragV vf;
        wmma::load_matrix_sync(vf, vs + k * kFrag * L::kLdT + n * kFrag, L::kLdT);
        wmma::mma_sync(acc, pa[k], vf, acc);
      }
      wmma::store_matrix_sync(ow + n * kFrag, acc, L::kLdO, wmma::mem_row_major);
    }
    // The next step's writes to S, P and O follow its __syncthreads.
  }
  if (!active) return;
  __syncwarp();  // O stored by the fragments is visible to every lane

  const int query = q0 + warp * kFrag + r;
  if (query >= len) return;
  const float inv = 1.0f / l;
  const float* orow = ow + r * L::kLdO;
  __half* out = ctx + static_cast<int64_t>(begin + query) * hidden + col;
#pragma unroll
  for (int i = 0; i < kD / 16; ++i) {
    const int c = 16 * i + 8 * h;
    const float4 a = *reinterpret_cast<const float4*>(orow + c);
    const float4 b = *reinterpret_cast<const float4*>(orow + c + 4);
    uint4 packed;
    __half2* p = reinterpret_cast<__half2*>(&packed);
    p[0] = __floats2half2_rn(a.x * inv, a.y * inv);
    p[1] = __floats2half2_rn(a.z * inv, a.w * inv);
    p[2] = __floats2half2_rn(b.x * inv, b.y * inv);
    p[3] = __floats2half2_rn(b.z * inv, b.w * inv);
    *reinterpret_cast<uint4*>(out + c) = packed;
  }
}

// Raises the kernel's dynamic shared memory limit past the default 48 KiB,
// once per device (the attribute belongs to the device's context). Not a
// stream operation: legal during graph capture too.
template <int kD>
cudaError_t AllowSharedMemory() {
  constexpr size_t kBytes = Layout<kD>::kBytes;
  if (kBytes <= 48 * 1024) return cudaSuccess;
  static std::atomic<bool> done[kMaxDevices];  // zero-initialised: static storage
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  e = cudaFuncSetAttribute(PackedAttentionKernel<kD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kBytes));
  if (e == cudaSuccess && cached) done[device].store(true, std::memory_order_release);
  return e;
}

template <int kD>
cudaError_t Launch(cudaStream_t stream, dim3 grid, const __half* qkv, const float* bias,
                   const int32_t* offsets, int heads, float scale, __half* ctx) {
  const cudaError_t e = AllowSharedMemory<kD>();
  if (e != cudaSuccess) return e;
  PackedAttentionKernel<kD><<<grid, kThreads, Layout<kD>::kBytes, stream>>>(
      qkv, bias, offsets, heads, scale * kLog2e, ctx);
  return cudaGetLastError();
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool PackedAttentionSupports(int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128;
}

cudaError_t LaunchPackedAttention(cudaStream_t stream, const __half* qkv, const float* bias,
                                  const int32_t* offsets, int64_t rows, int64_t max_len,
                                  int64_t heads, int64_t head_dim, float scale, __half* ctx) {
  if (!PackedAttentionSupports(head_dim) || rows < 0 || max_len < 0 || heads < 1) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0 || max_len == 0) return cudaSuccess;
  // Token indices are int32 (offsets); grid y and z are at most 65535.
  if (max_len > INT_MAX || heads > 65535 || rows > 65535) return cudaErrorInvalidValue;
  if (!Aligned16(qkv) || !Aligned16(bias) || !Aligned16(ctx)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((max_len + kQueryTile - 1) / kQueryTile),
                  static_cast<unsigned>(heads), static_cast<unsigned>(rows));
  const int h = static_cast<int>(heads);
  switch (head_dim) {
    case 32:
      return Launch<32>(stream, grid, qkv, bias, offsets, h, scale, ctx);
    case 64:
      return Launch<64>(stream, grid, qkv, bias, offsets, h, scale, ctx);
    default:
      return Launch<128>(stream, grid, qkv, bias, offsets, h, scale, ctx);
  }
}

}  // namespace infer::cuda
