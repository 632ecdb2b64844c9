// Design of the packed attention kernel (contract in packed_attention_cuda.cuh):
// a FlashAttention-2-style forward pass over packed variable-length sequences
// on mma.sync tensor-core instructions (sm_80 and later; nothing sm_90a-only).
//
// Grid (ceil(max_len / kQueryTile), heads, rows); block 4 warps. A block owns
// kQueryTile query tokens of one sequence and head; warp w owns kMTiles
// consecutive 16-row m-tiles of them (rows 16 kMTiles w ..). kMTiles is 1
// (64-query blocks), except for head size 32 when max_len > 128: 2 (128
// queries; every K/V fragment then feeds two m-tiles). Keys go in tiles of 64.
//  1. cp.async (16-byte cp.async.cg) starts copying key tile 0's raw K and V
//     rows into stage 0 of a two-stage shared buffer. Meanwhile the block
//     stages Q plus its bias (FP32 add, one rounding to FP16; zero past the
//     sequence end) in shared memory; after the first barrier each warp loads
//     its rows once as mma A fragments (ldmatrix.x4), kept in registers.
//  2. Per key tile: wait for its copy, barrier, start copying the next tile
//     into the other stage (it lands while this tile is computed), then per
//     warp, all in registers: S = Q·K^T (FP32; K fragments by ldmatrix.x4);
//     in the sequence's last, partial tile keys past the end get -inf; the
//     online softmax (row max over the 4 lanes of a quad by __shfl_xor_sync 1
//     and 2, base-2 exponentials with |scale|·log2(e) folded in); P, the
//     exponentials rounded to FP16, packed straight into the A fragments of
//     P·V; O and the row sums l rescaled; O += P·V (V fragments by
//     ldmatrix.x4.trans) and l += P·1, an mma against a B of FP16 ones, so l
//     sums exactly the FP16 weights P·V uses, in FP32.
//  3. ctx = O / l + b_v, rounded to FP16, staged through the warp's own Q
//     rows in shared memory (read by no one any more) and written to global
//     memory as 16-byte row chunks.
// Biases: q·(k + b_k) = q·k + q·b_k, and q·b_k is the same for every key of a
// query row, so the softmax does not change: K is used without its bias. The
// weights sum to 1, so sum_j p_j (v_j + b_v) / sum_j p_j = sum_j p_j v_j /
// sum_j p_j + b_v: b_v is added in FP32 at the end. K and V are therefore
// copied raw. A negative scale is folded into Q (negating FP16 is exact), so
// the exponent scale is positive; 0 is raised to FLT_MIN (equal weights).
//
// The mma and ldmatrix fragment layouts this relies on are set out in
// packed_attention_ptx.cuh.
//
// Invariants: every __syncthreads is reached by every thread of the block: the
// early exit (q0 >= len) is block-uniform and precedes all barriers, the tile
// count is block-uniform, and a warp with no query row inside the sequence
// skips the math but not the copies or barriers (after the loop, which it
// leaves at once, nothing but __syncwarp follows). Each thread waits for its
// own cp.async groups before the barrier that publishes a tile, and that
// barrier, at the top of step i, also proves every warp finished step i - 1,
// whose stage the copy started next overwrites. Shared rows past the sequence
// end are zero (cp.async with source size 0 zero-fills), so S and P·V stay
// finite there, and keys past the end get probability exactly 0. The running
// max is finite from the first tile on (key 0 is inside the sequence), and
// l >= 1 at the end (the key holding the final max contributes exp2(0) = 1).
//
// Shared memory: Q tile kQueryTile x (D + 8) halves, K and V 2 stages x 64 x
// (D + 8) halves each: 64-query blocks 25600 (D = 32), 46080 (64), 87040
// (128) bytes; 128-query blocks (D = 32) 30720. Rows are padded by 16 bytes:
// the 8 row addresses of an ldmatrix phase then fall in 8 different 16-byte
// bank groups (the row stride in 16-byte units, D / 8 + 1, is odd), and so do
// the epilogue's 4-byte writes. Registers (ptxas -v, sm_80 / sm_90; no spills,
// no stack): bounded by __launch_bounds__ to keep 4 blocks per SM resident for
// D = 32 and 64 (128 registers), 3 for the 128-query blocks (168).
// Measured on an H100 (BERT-base, 32 x 512 tokens, 12 heads of 64): 114 us,
// 3.4x the wmma kernel this replaced; MiniLM (128 x 512, 12 heads of 32):
// 241-244 us, 3.0x; packed batches of 16-128 token sentences: 1.7x-2.6x.
//
// Included by packed_attention_cuda.cu alone (the launchers); the kernel and its
// tile configuration live here to keep each file to one concern.
#ifndef INFER_MODELS_PACKED_ATTENTION_KERNEL_CUH_
#define INFER_MODELS_PACKED_ATTENTION_KERNEL_CUH_

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "models/packed_attention_cuda.cuh"
#include "models/packed_attention_ptx.cuh"

namespace infer::cuda::packed_attention {

using namespace ptx;  // NOLINT: the PTX wrappers (packed_attention_ptx.cuh)

constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr uint32_t kHalf2Ones = 0x3C003C00u;  // two FP16 1.0

// Tile shape, register budget and byte offsets into the dynamic shared memory.
template <int kD, int kMTiles>
struct Config {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kKeyTile = 64;                    // keys per loop step
  static constexpr int kWarpRows = 16 * kMTiles;         // query rows per warp
  static constexpr int kQueryTile = kWarps * kWarpRows;  // query rows per block
  static constexpr int kLd = kD + 8;                     // halves per shared row
  static constexpr int kChunks = kD / 8;                 // 16-byte chunks per row
  static constexpr int kRowBytes = kLd * 2;
  static constexpr size_t kTileBytes = size_t{kKeyTile} * kRowBytes;
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + size_t{kQueryTile} * kRowBytes;  // 2 stages
  static constexpr size_t kV = kK + 2 * kTileBytes;                  // 2 stages
  static constexpr size_t kBytes = kV + 2 * kTileBytes;
  // Blocks per SM __launch_bounds__ must allow: caps the registers at
  // 65536 / (kThreads * kMinBlocks) (128, 168, 255), the most that measured
  // fastest without spills.
  static constexpr int kMinBlocks = kD == 128 ? 1 : kMTiles == 1 ? 4 : 3;

  static_assert(kD % 32 == 0, "head_dim in whole pairs of 16-wide k-steps");
  static_assert(kKeyTile * kChunks % kThreads == 0, "whole K/V chunks per thread");
  static_assert(kQueryTile * kChunks % kThreads == 0, "whole Q chunks per thread");
  static_assert(kRowBytes % 16 == 0 && (kRowBytes / 16) % 2 == 1,
                "16-byte aligned rows, odd stride in 16-byte units");
  static_assert(kK % 128 == 0 && kTileBytes % 128 == 0, "aligned regions");
};

// kMasked: the general variant (causal and window masks, a relative position
// bias; AttentionMask). Scores are then mapped to the log2 domain as they
// are computed (s · scale · log2 e + bias · log2 e, or -inf when masked), a
// row may see tiles with no key it may attend to (its running max is then
// -inf, and 0 stands in for it in the exponents), and the key tiles run
// only over the range the masks leave the block. kMasked == false is the
// plain kernel, unchanged.
// The general variant at head size 64 keeps 3 blocks per SM resident, not 4:
// its per-score masks spill at 128 registers (ptxas -v), not at 168.
template <int kD, int kMTiles, bool kMasked>
__global__ void __launch_bounds__(Config<kD, kMTiles>::kThreads,
                                  kMasked&& kD == 64 ? 3 : Config<kD, kMTiles>::kMinBlocks)
    PackedAttentionKernel(const __half* __restrict__ qkv, const float* __restrict__ bias,
                          const int32_t* __restrict__ offsets, int heads, int kv_width_arg,
                          int group, float scale_log2, float q_sign, AttentionMask mask,
                          __half* __restrict__ ctx) {
  using C = Config<kD, kMTiles>;
  constexpr int kKeyTile = C::kKeyTile;
  constexpr int kKSteps = kD / 16;          // k-steps of Q·K^T
  constexpr int kDTiles = kD / 8;           // n-tiles of O
  constexpr int kKeyTiles = kKeyTile / 8;   // n-tiles of S
  constexpr int kKeySteps = kKeyTile / 16;  // k-steps of P·V
  extern __shared__ __align__(128) unsigned char smem[];

  const int seq = blockIdx.z, head = blockIdx.y;
  const int q0 = blockIdx.x * C::kQueryTile;
  const int begin = __ldg(offsets + seq);
  const int len = __ldg(offsets + seq + 1) - begin;
  if (q0 >= len) return;  // block-uniform, before any barrier

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int hidden = heads * kD;  // query width, < 2^23: heads <= 65535
  // The key (and value) width: kv_width_arg in the general variant, which
  // alone takes grouped KV heads (`group` query heads per key head).
  const int kv_width = kMasked ? kv_width_arg : hidden;
  const int stride = hidden + 2 * kv_width;
  const int col = head * kD;  // this head's query columns
  // Its key and value columns, relative to the row's key part.
  const int kv_col = kMasked ? (head / group) * kD : col;
  const __half* tokens = qkv + static_cast<int64_t>(begin) * stride;
  const uint32_t smem_base = SharedAddress(smem);
  // Key tiles [first_tile, end_tile): all of them, or the range the masks
  // leave the block's queries q0 .. q_last.
  int first_tile = 0, end_tile = (len + kKeyTile - 1) / kKeyTile;
  if constexpr (kMasked) {
    const int q_last = min(len, q0 + C::kQueryTile) - 1;
    int lo = 0, hi = len;  // keys [lo, hi)
    if (mask.window > 0) {
      lo = max(0, q0 - mask.window);
      hi = min(hi, q_last + mask.window + 1);
    }
    if (mask.causal) hi = min(hi, q_last + 1);
    first_tile = lo / kKeyTile;
    end_tile = (hi + kKeyTile - 1) / kKeyTile;
  }
  // The masked variant's scores are in the log2 domain already.
  const float sl = kMasked ? 1.0f : scale_log2;

  // The first key tile into stage 0, in flight while Q is staged.
  {
    const int t0 = first_tile * kKeyTile;
    CopyKeyTile<C>(tokens + static_cast<int64_t>(t0) * stride + hidden + kv_col, stride, kv_width,
                   min(len - t0, kKeyTile), smem_base + C::kK, smem_base + C::kV);
  }
  CommitCopies();

  // Q + bias (FP32), times q_sign, rounded once to FP16; zero past the end.
  {
    __half* qs = reinterpret_cast<__half*>(smem + C::kQ);
    const float* bq = bias + col;
#pragma unroll
    for (int step = 0; step < C::kQueryTile * C::kChunks / C::kThreads; ++step) {
      const int i = step * C::kThreads + tid;
      const int row = i / C::kChunks, c = (i % C::kChunks) * 8;
      uint4 packed = make_uint4(0u, 0u, 0u, 0u);
      if (q0 + row < len) {
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(
            tokens + static_cast<int64_t>(q0 + row) * stride + col + c));
        const float4 b0 = __ldg(reinterpret_cast<const float4*>(bq + c));
        const float4 b1 = __ldg(reinterpret_cast<const float4*>(bq + c + 4));
        const __half2* in = reinterpret_cast<const __half2*>(&raw);
        const float bb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
        uint32_t out[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 f = __half22float2(in[j]);
          out[j] = PackHalf2((f.x + bb[2 * j]) * q_sign, (f.y + bb[2 * j + 1]) * q_sign);
        }
        packed = make_uint4(out[0], out[1], out[2], out[3]);
      }
      *reinterpret_cast<uint4*>(qs + row * C::kLd + c) = packed;
    }
  }

  const int warp_q0 = q0 + warp * C::kWarpRows;  // this warp's first query (sequence index)
  const bool active = warp_q0 < len;             // warp-uniform: some query row inside

  // Per-lane ldmatrix offsets (bytes). Q and V: lanes 8i + r address row
  // 8 (i & 1) + r, column 8 (i >> 1) of the 16 x 16 block. K: lanes 8i + r
  // address row r, column 8i of the 8 x 32 block.
  const uint32_t qv_lane =
      static_cast<uint32_t>(((lane & 7) + 8 * ((lane >> 3) & 1)) * C::kRowBytes + 16 * (lane >> 4));
  const uint32_t k_lane = static_cast<uint32_t>((lane & 7) * C::kRowBytes + 16 * (lane >> 3));

  WaitCopies();
  __syncthreads();  // Q staged and key tile 0 landed, for every thread

  uint32_t qf[kMTiles][kKSteps][4];
  if (active) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int k = 0; k < kKSteps; ++k) {
        LoadMatrixX4(
            smem_base + C::kQ + qv_lane + ((warp * C::kWarpRows + 16 * mt) * C::kRowBytes + 32 * k),
            qf[mt][k]);
      }
    }
  }

  float o[kMTiles][kDTiles][4];
  float l[kMTiles][4];  // row sums, C fragment: [0], [1] row g; [2], [3] row g + 8
  float m[kMTiles][2];  // running max (log2 units) of rows g and g + 8
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    l[mt][0] = l[mt][1] = l[mt][2] = l[mt][3] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
  }

  // One key tile: S = Q·K^T, online softmax, O += P·V, l += P·1. Instantiated
  // twice: for whole tiles (`partial` is std::false_type) and for the last,
  // partial one (std::true_type), which masks keys from `count` on with -inf
  // and skips the 32-key halves with no key inside. Whole tiles have no
  // branches inside, so the independent mma chains interleave (per-step
  // guards there cut them into serial chains of dependent mma, measured 25%
  // slower).
  auto TileStep = [&](auto partial, uint32_t ks, uint32_t vs, int count, int t0) {
    constexpr bool kPartial = decltype(partial)::value && !kMasked;
    constexpr int kHalfTiles = kKeyTiles / 2;             // S n-tiles per 32-key half
    const int halves = kPartial ? (count + 31) >> 5 : 2;  // halves holding a key inside

    // S = Q·K^T (a skipped half keeps S = 0, masked below).
    float s[kMTiles][kKeyTiles][4];
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
        s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!kPartial || h < halves) {
#pragma unroll
        for (int n = h * kHalfTiles; n < (h + 1) * kHalfTiles; ++n) {
#pragma unroll
          for (int p = 0; p < kKSteps / 2; ++p) {
            uint32_t b[4];
            LoadMatrixX4(ks + k_lane + (8 * n * C::kRowBytes + 64 * p), b);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
              Mma(s[mt][n], qf[mt][2 * p], b[0], b[1]);
              Mma(s[mt][n], qf[mt][2 * p + 1], b[2], b[3]);
            }
          }
        }
      }
    }
    if constexpr (kPartial) {
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) {
        const int key = 8 * n + 2 * t;
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          if (key >= count) s[mt][n][0] = s[mt][n][2] = -INFINITY;
          if (key + 1 >= count) s[mt][n][1] = s[mt][n][3] = -INFINITY;
        }
      }
    }
    if constexpr (kMasked) {
      // Element e of s[mt][n]: query warp_q0 + 16 mt + g + 8 (e >> 1), key
      // t0 + 8 n + 2 t + (e & 1), both indices within the sequence.
      const float* rel = mask.relative_bias == nullptr
                             ? nullptr
                             : mask.relative_bias +
                                   static_cast<int64_t>(head) * (2 * mask.relative_span - 1) +
                                   (mask.relative_span - 1);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int query = warp_q0 + 16 * mt + g + 8 * (e >> 1);
            const int key = t0 + 8 * n + 2 * t + (e & 1);
            const int d = key - query;
            bool keep = key < len && query < len;
            if (mask.causal) keep = keep && d <= 0;
            if (mask.window > 0) keep = keep && d <= mask.window && -d <= mask.window;
            float v = s[mt][n][e] * scale_log2;
            if (rel != nullptr && keep) v = fmaf(__ldg(rel + d), kLog2e, v);
            s[mt][n][e] = keep ? v : -INFINITY;
          }
        }
      }
    }

    // Online softmax; P as A fragments of P·V.
    uint32_t pf[kMTiles][kKeySteps][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      // Row maxima of this lane's columns, as trees (short dependency chains).
      float r0[kKeyTiles], r1[kKeyTiles];
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) {
        r0[n] = fmaxf(s[mt][n][0], s[mt][n][1]);
        r1[n] = fmaxf(s[mt][n][2], s[mt][n][3]);
      }
#pragma unroll
      for (int width = kKeyTiles / 2; width > 0; width /= 2) {
#pragma unroll
        for (int n = 0; n < width; ++n) {
          r0[n] = fmaxf(r0[n], r0[n + width]);
          r1[n] = fmaxf(r1[n], r1[n + width]);
        }
      }
      float mx0 = r0[0], mx1 = r1[0];
      mx0 = fmaxf(mx0, __shfl_xor_sync(kFullMask, mx0, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(kFullMask, mx1, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(kFullMask, mx0, 2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(kFullMask, mx1, 2));
      // Unmasked: finite, since key t0 is inside the sequence; alpha is 0 on
      // the first tile. Masked: -inf while a row has met no key it may
      // attend to; 0 stands in for it, so alpha and P are 0, not NaN.
      float m0 = fmaxf(m[mt][0], mx0 * sl);
      float m1 = fmaxf(m[mt][1], mx1 * sl);
      const float old0 = m[mt][0], old1 = m[mt][1];
      m[mt][0] = m0;
      m[mt][1] = m1;
      if constexpr (kMasked) {
        if (m0 == -INFINITY) m0 = 0.0f;
        if (m1 == -INFINITY) m1 = 0.0f;
      }
      const float alpha0 = Exp2(old0 - m0), alpha1 = Exp2(old1 - m1);
#pragma unroll
      for (int j = 0; j < kKeySteps; ++j) {
        const float* lo = s[mt][2 * j];
        const float* hi = s[mt][2 * j + 1];
        pf[mt][j][0] = PackHalf2(Exp2(fmaf(lo[0], sl, -m0)), Exp2(fmaf(lo[1], sl, -m0)));
        pf[mt][j][1] = PackHalf2(Exp2(fmaf(lo[2], sl, -m1)), Exp2(fmaf(lo[3], sl, -m1)));
        pf[mt][j][2] = PackHalf2(Exp2(fmaf(hi[0], sl, -m0)), Exp2(fmaf(hi[1], sl, -m0)));
        pf[mt][j][3] = PackHalf2(Exp2(fmaf(hi[2], sl, -m1)), Exp2(fmaf(hi[3], sl, -m1)));
      }
#pragma unroll
      for (int n = 0; n < kDTiles; ++n) {
        o[mt][n][0] *= alpha0;
        o[mt][n][1] *= alpha0;
        o[mt][n][2] *= alpha1;
        o[mt][n][3] *= alpha1;
      }
      l[mt][0] *= alpha0;
      l[mt][1] *= alpha0;
      l[mt][2] *= alpha1;
      l[mt][3] *= alpha1;
    }

    // O += P·V and l += P·1 (P is 0 in a skipped half).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!kPartial || h < halves) {
#pragma unroll
        for (int j = h * kKeySteps / 2; j < (h + 1) * kKeySteps / 2; ++j) {
#pragma unroll
          for (int n = 0; n < kDTiles; n += 2) {
            uint32_t b[4];
            LoadMatrixX4Trans(vs + qv_lane + (16 * j * C::kRowBytes + 16 * n), b);
#pragma unroll
            for (int mt = 0; mt < kMTiles; ++mt) {
              Mma(o[mt][n], pf[mt][j], b[0], b[1]);
              Mma(o[mt][n + 1], pf[mt][j], b[2], b[3]);
            }
          }
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) Mma(l[mt], pf[mt][j], kHalf2Ones, kHalf2Ones);
        }
      }
    }
  };

  for (int it = first_tile; it < end_tile; ++it) {
    const int step = it - first_tile;  // its stage is step & 1
    const int t0 = it * kKeyTile;
    if (step > 0) {
      WaitCopies();
      __syncthreads();  // tile it landed; every warp is done with tile it - 1
    }
    const int t1 = t0 + kKeyTile;
    if (it + 1 < end_tile) {  // the next tile, into the stage tile it - 1 used
      const uint32_t stage = static_cast<uint32_t>(((step + 1) & 1) * C::kTileBytes);
      CopyKeyTile<C>(tokens + static_cast<int64_t>(t1) * stride + hidden + kv_col, stride, kv_width,
                     min(len - t1, kKeyTile), smem_base + C::kK + stage, smem_base + C::kV + stage);
      CommitCopies();
    }
    if (!active) continue;

    const uint32_t stage = static_cast<uint32_t>((step & 1) * C::kTileBytes);
    const uint32_t ks = smem_base + C::kK + stage, vs = smem_base + C::kV + stage;
    const int count = min(len - t0, kKeyTile);  // keys of this tile inside the sequence
    if (count == kKeyTile) {
      TileStep(std::false_type{}, ks, vs, count, t0);
    } else {  // block-uniform: the sequence's last, partial tile
      TileStep(std::true_type{}, ks, vs, count, t0);
    }
  }
  if (!active) return;

  // ctx = O / l + b_v as FP16: into the warp's own Q rows (read only by this
  // warp, into registers, before the loop), then 16-byte rows to global.
  // offsets[seq] is read again (volatile: not kept live through the loop,
  // which made ptxas spill it).
  __half* out = ctx + (static_cast<int64_t>(LoadVolatile(offsets + seq)) + warp_q0) * hidden + col;
  __half* staged = reinterpret_cast<__half*>(smem + C::kQ) + warp * C::kWarpRows * C::kLd;
  const float* bv = bias + hidden + kv_width + kv_col;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    const float inv0 = 1.0f / l[mt][0], inv1 = 1.0f / l[mt][2];
    __half* row0 = staged + (16 * mt + g) * C::kLd + 2 * t;
    __half* row1 = row0 + 8 * C::kLd;
#pragma unroll
    for (int n = 0; n < kDTiles; ++n) {
      const float2 b = __ldg(reinterpret_cast<const float2*>(bv + 8 * n + 2 * t));
      *reinterpret_cast<uint32_t*>(row0 + 8 * n) =
          PackHalf2(fmaf(o[mt][n][0], inv0, b.x), fmaf(o[mt][n][1], inv0, b.y));
      *reinterpret_cast<uint32_t*>(row1 + 8 * n) =
          PackHalf2(fmaf(o[mt][n][2], inv1, b.x), fmaf(o[mt][n][3], inv1, b.y));
    }
  }
  __syncwarp();
#pragma unroll
  for (int step = 0; step < C::kWarpRows * C::kChunks / 32; ++step) {
    const int i = step * 32 + lane;
    const int row = i / C::kChunks, c = (i % C::kChunks) * 8;
    const int query = warp_q0 + row;
    if (query < len) {
      *reinterpret_cast<uint4*>(out + static_cast<int64_t>(row) * hidden + c) =
          *reinterpret_cast<const uint4*>(staged + row * C::kLd + c);
    }
  }
}

}  // namespace infer::cuda::packed_attention

#endif  // INFER_MODELS_PACKED_ATTENTION_KERNEL_CUH_
