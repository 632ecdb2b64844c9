// The inner loops of the CPU attention kernel (cpu_kernels.cc), internal to
// it: the scratch layouts of keys, values and queries, and the register
// tiles that compute scores (q · k) and weighted sums (p · v) from them, in
// two arithmetics:
//   Fp32Math<W>  FP32 products with FMAs on vectors of W floats;
//   Bf16Math     BF16 products summed in FP32 (vdpbf16ps, AVX512_BF16): two
//                products per lane and instruction, so twice the FP32 rate.
//                Inputs are rounded to nearest-even BF16 (NaNs not kept).
// Everything here is always inlined into one function per instruction set
// (cpu_kernels.cc's Attend*), which carries the target attribute; vdpbf16ps
// is written as inline assembly because GCC only declares its builtin where
// the target already allows it, and these templates are defined outside any
// such function.
//
// Layouts (per item, 16-key blocks; `depth` is head_dim for FP32 and the
// number of BF16 pairs, ceil(head_dim / 2), for BF16):
//   keys     [blocks of 16][depth][16]: a score tile reads one contiguous run;
//   values   FP32: [key][head_dim rounded up to 16];
//            BF16: [key pair][head_dim rounded up to 16] of (v[2j], v[2j+1]);
//   queries  [kQueryBlock][depth], already scaled;
//   weights  FP32 rows of s; BF16 pairs written over the start of the same
//            row (pair j at 32-bit index j of the row).
// Thread-safety: pure functions of their arguments.
#ifndef INFER_MODELS_TRANSFORMER_ATTENTION_TILES_H_
#define INFER_MODELS_TRANSFORMER_ATTENTION_TILES_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "models/simd_math.h"
#include "models/transformer/cpu_kernels.h"

namespace infer::cpu::attention {

#define INFER_INLINE inline __attribute__((always_inline))

template <int W>
using Simd = simd::Lanes<W>;
using simd::Load;
using simd::Store;

// Head sizes and sequence lengths are padded to multiples of 16 in scratch,
// whatever the vector width, so the scratch layout is one for every width.
constexpr int64_t kPad = 16;
// Queries whose scores are in scratch at once (a block). The score and
// weighted-sum passes cut a block into register tiles (Tiles below); 12 is
// a multiple of every tile's queries.
constexpr int kQueryBlock = 12;

INFER_INLINE int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Register tiles of W-float vectors. An FMA takes 4 cycles on two pipes on
// the CPUs this runs on, so a loop wants 8 or more independent sums in
// flight; the tiles keep 12 (24 with AVX-512's 32 registers) while leaving
// registers for the operands, with fewer loads per FMA than a square tile:
//   scores: kScoreQueries queries × kScoreVectors vectors of keys, per head
//           dimension 1 load per key vector and 1 broadcast per query;
//   weighted sum: up to kSumAccumulators sums, queries × vectors of a value
//           row, the queries a divisor of kQueryBlock.
template <int W>
struct Tiles {
  static constexpr int kScoreQueries = W == 16 ? 12 : 6;
  static constexpr int kScoreVectors = W == 16 ? 1 : 2;  // × W keys ≤ kPad
  static constexpr int kSumAccumulators = W == 16 ? 24 : 12;
  static constexpr int kSumVectors = 4;
};
static_assert(kQueryBlock % Tiles<4>::kScoreQueries == 0 &&
              kQueryBlock % Tiles<16>::kScoreQueries == 0);

// A block's last queries, fewer than a tile's, run in tiles of a third of
// its queries (12 → 4, 6 → 2), so a short sequence or a block's tail does
// not compute up to 11 queries it drops; tiles of 4 or fewer run whole.
constexpr int TailQueries(int tile) { return tile >= 6 ? tile / 3 : tile; }

// The largest divisor of kQueryBlock (12) that is at most n.
constexpr int QueriesPerTile(int n) {
  return n >= 12 ? 12 : n >= 6 ? 6 : n >= 4 ? 4 : n >= 3 ? 3 : n >= 2 ? 2 : 1;
}

// 8 rows of 8 four-byte elements → 8 columns, in three rounds of shuffles
// (the usual unpack, shuffle, 128-bit permute of AVX; GCC lowers them for
// each target).
template <typename T>
INFER_INLINE void Transpose8x8(T r[8]) {
  T t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] =
          __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[c + 4] = __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// The one register tile of scores and weighted sums alike: for Q rows of
// scalars a (row qi at a + qi * a_row) and N vectors of W lanes per step
// (vector c of step t at b + t * b_step + c * W),
//   out[qi][c * W + lane] = Σ_{t in [begin, end)} a[qi][t] · b[t][c][lane],
// summed in step order, stored at out + qi * out_row + c * W.
//   scores:        a = queries (steps: head dimensions), b = a key block;
//   weighted sums: a = weights (steps: keys), b = value rows.
template <class M, int Q, int N>
INFER_INLINE void Tile(const typename M::Elem* a, int64_t a_row, const typename M::Elem* b,
                       int64_t b_step, int64_t begin, int64_t end, float* out, int64_t out_row) {
  constexpr int W = M::kWidth;
  typename M::F acc[Q][N] = {};
  for (int64_t t = begin; t < end; ++t) {
    typename M::V bv[N];
#pragma GCC unroll 4
    for (int c = 0; c < N; ++c) bv[c] = Load<typename M::V>(b + t * b_step + c * W);
#pragma GCC unroll 12
    for (int qi = 0; qi < Q; ++qi) {
      const typename M::Elem x = a[qi * a_row + t];
#pragma GCC unroll 4
      for (int c = 0; c < N; ++c) acc[qi][c] = M::Fma(acc[qi][c], bv[c], x);
    }
  }
  for (int qi = 0; qi < Q; ++qi) {
    for (int c = 0; c < N; ++c) Store(out + qi * out_row + c * W, acc[qi][c]);
  }
}

// The scores of queries [qt, qt + Q) against keys [jb, jp) of the item
// (multiples of kPad), one tile per kScoreVectors vectors of keys.
template <class M, int Q>
INFER_INLINE void ScoreRow(const typename M::Elem* q, int64_t depth, const typename M::Elem* kt,
                           int64_t jb, int64_t jp, int qt, float* s, int64_t lp) {
  constexpr int W = M::kWidth, kKv = Tiles<W>::kScoreVectors;
  for (int64_t j0 = jb; j0 < jp; j0 += kKv * W) {
    Tile<M, Q, kKv>(q + qt * depth, depth, kt + j0 / kPad * depth * kPad + j0 % kPad, kPad, 0,
                    depth, s + qt * lp + j0, lp);
  }
}

// The scores of nq queries against keys [jb, jp): tiles of kScoreQueries,
// then tail tiles. (No lambda here: a lambda is not always inlined, and an
// outlined one would be compiled for the baseline, not its caller's target.)
template <class M>
INFER_INLINE void Scores(const typename M::Elem* q, int64_t depth, const typename M::Elem* kt,
                         int64_t jb, int64_t jp, int nq, float* s, int64_t lp) {
  constexpr int kQ = Tiles<M::kWidth>::kScoreQueries, kTail = TailQueries(kQ);
  int qt = 0;
  for (; qt + kQ <= nq; qt += kQ) ScoreRow<M, kQ>(q, depth, kt, jb, jp, qt, s, lp);
  for (; qt < nq; qt += kTail) ScoreRow<M, kTail>(q, depth, kt, jb, jp, qt, s, lp);
}

// The weighted sums of every vector of a value row (kNv of them) for nq
// queries over value rows [jb, je): kSumVectors vectors at a time, then
// the rest.
template <class M, int kNv, int Done = 0>
INFER_INLINE void WeightedSums(const typename M::Elem* p, int64_t lp, const typename M::Elem* v,
                               int64_t row, int64_t jb, int64_t je, int nq, float* out,
                               int64_t out_row) {
  if constexpr (Done < kNv) {
    constexpr int W = M::kWidth;
    constexpr int kV = std::min(Tiles<W>::kSumVectors, kNv - Done);
    constexpr int kQ = QueriesPerTile(Tiles<W>::kSumAccumulators / kV);
    constexpr int kTail = TailQueries(kQ);
    int qt = 0;
    for (; qt + kQ <= nq; qt += kQ) {
      Tile<M, kQ, kV>(p + qt * lp, lp, v + Done * W, row, jb, je, out + qt * out_row + Done * W,
                      out_row);
    }
    for (; qt < nq; qt += kTail) {
      Tile<M, kTail, kV>(p + qt * lp, lp, v + Done * W, row, jb, je, out + qt * out_row + Done * W,
                         out_row);
    }
    WeightedSums<M, kNv, Done + kV>(p, lp, v, row, jb, je, nq, out, out_row);
  }
}

// FP32 products.
template <int W>
struct Fp32Math {
  static constexpr int kWidth = W;
  using Elem = float;
  using F = typename Simd<W>::F;
  using V = F;
  static INFER_INLINE F Fma(F acc, F x, float y) { return acc + y * x; }
};

// BF16 products, two per lane, summed into FP32 lanes.
struct Bf16Math {
  static constexpr int kWidth = 16;
  using Elem = uint32_t;  // a pair of BF16 values, the first in the low half
  using F = Simd<16>::F;
  using V = uint32_t __attribute__((vector_size(64)));
  static INFER_INLINE F Fma(F acc, V x, uint32_t y) {
    const V pair = V{} + y;
    asm("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(x), "v"(pair));
    return acc;
  }
};

// BF16 bits (round to nearest even) of each lane, in the low half.
template <typename U, typename F>
INFER_INLINE U Bf16Bits(F x) {
  U b;
  std::memcpy(&b, &x, sizeof b);
  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}
INFER_INLINE uint32_t Bf16Pair(float lo, float hi) {
  return static_cast<uint32_t>(RoundToBf16(lo)) | static_cast<uint32_t>(RoundToBf16(hi)) << 16;
}

typedef float F8 __attribute__((vector_size(32)));
typedef uint32_t U8 __attribute__((vector_size(32)));
typedef float F16 __attribute__((vector_size(64)));
typedef uint32_t U16 __attribute__((vector_size(64)));

// 16 floats as 8 BF16 pairs: (x[2i], x[2i + 1]) in lane i.
INFER_INLINE U8 PairsOf(F16 x) {
  const U16 bits = Bf16Bits<U16>(x);
  const U8 lo = __builtin_shufflevector(bits, bits, 0, 2, 4, 6, 8, 10, 12, 14);
  const U8 hi = __builtin_shufflevector(bits, bits, 1, 3, 5, 7, 9, 11, 13, 15);
  return lo | hi << 16;
}

// Keys [0, kn) of rows `stride` floats apart from `key` into kt's blocks
// (depth = dh), zeros up to kp, a multiple of 16: 8 × 8 tiles through
// registers, the ragged edges one float at a time.
INFER_INLINE void PackKeys(const float* key, int64_t stride, int64_t kn, int64_t kp, int64_t dh,
                           float* kt) {
  for (int64_t j0 = 0; j0 < kp; j0 += 8) {
    float* block = kt + j0 / kPad * dh * kPad + j0 % kPad;
    const int64_t keys = std::clamp<int64_t>(kn - j0, 0, 8);
    int64_t d0 = 0;
    if (keys == 8) {
      for (; d0 + 8 <= dh; d0 += 8) {
        F8 r[8];
        for (int i = 0; i < 8; ++i) r[i] = Load<F8>(key + (j0 + i) * stride + d0);
        Transpose8x8(r);
        for (int c = 0; c < 8; ++c) Store(block + (d0 + c) * kPad, r[c]);
      }
    }
    for (; d0 < dh; ++d0) {
      for (int64_t i = 0; i < 8; ++i) {
        block[d0 * kPad + i] = i < keys ? key[(j0 + i) * stride + d0] : 0.0f;
      }
    }
  }
}

// The same in BF16 pairs (depth = ceil(dh / 2)): pair i of key j is
// (k[2i], k[2i + 1]).
INFER_INLINE void PackKeys(const float* key, int64_t stride, int64_t kn, int64_t kp, int64_t dh,
                           uint32_t* kt) {
  const int64_t depth = (dh + 1) / 2;
  for (int64_t j0 = 0; j0 < kp; j0 += 8) {
    uint32_t* block = kt + j0 / kPad * depth * kPad + j0 % kPad;
    const int64_t keys = std::clamp<int64_t>(kn - j0, 0, 8);
    int64_t i0 = 0;
    if (keys == 8) {
      for (; 2 * (i0 + 8) <= dh; i0 += 8) {
        U8 r[8];
        for (int i = 0; i < 8; ++i) r[i] = PairsOf(Load<F16>(key + (j0 + i) * stride + 2 * i0));
        Transpose8x8(r);
        for (int c = 0; c < 8; ++c) Store(block + (i0 + c) * kPad, r[c]);
      }
    }
    for (; i0 < depth; ++i0) {
      for (int64_t i = 0; i < 8; ++i) {
        const float* k = key + (j0 + i) * stride;
        block[i0 * kPad + i] =
            i < keys ? Bf16Pair(k[2 * i0], 2 * i0 + 1 < dh ? k[2 * i0 + 1] : 0.0f) : 0u;
      }
    }
  }
}

// Values [0, kn) into rows of kDhPadded floats, zero-padded: read in
// place, rows a multiple of 4 KiB apart would share a few cache sets.
template <int W, int64_t kDhPadded>
INFER_INLINE void PackValues(const float* val, int64_t stride, int64_t kn, int64_t dh, float* v) {
  using F = typename Simd<W>::F;
  for (int64_t j = 0; j < kn; ++j) {
    const float* src = val + j * stride;
    float* dst = v + j * kDhPadded;
    if (dh == kDhPadded) {  // whole vectors: no call, no padding
#pragma GCC unroll 16
      for (int c = 0; c < kDhPadded / W; ++c) Store(dst + c * W, Load<F>(src + c * W));
    } else {
      std::memcpy(dst, src, dh * sizeof(float));
      std::fill(dst + dh, dst + kDhPadded, 0.0f);
    }
  }
}

// The same in BF16 pairs of consecutive keys, (v[2j][d], v[2j + 1][d]),
// for pairs [0, ceil(kn / 2)); a missing key is zeros.
template <int W, int64_t kDhPadded>
INFER_INLINE void PackValues(const float* val, int64_t stride, int64_t kn, int64_t dh,
                             uint32_t* v) {
  for (int64_t j2 = 0; 2 * j2 < kn; ++j2) {
    const float* a = val + 2 * j2 * stride;
    const float* b = 2 * j2 + 1 < kn ? a + stride : nullptr;
    uint32_t* dst = v + j2 * kDhPadded;
    if (dh == kDhPadded) {
      for (int c = 0; c < kDhPadded / 16; ++c) {
        const U16 lo = Bf16Bits<U16>(Load<F16>(a + c * 16));
        const U16 hi = b == nullptr ? U16{} : Bf16Bits<U16>(Load<F16>(b + c * 16));
        Store(dst + c * 16, lo | hi << 16);
      }
    } else {
      for (int64_t d = 0; d < kDhPadded; ++d) {
        dst[d] = d < dh ? Bf16Pair(a[d], b == nullptr ? 0.0f : b[d]) : 0u;
      }
    }
  }
}

// Query rows [0, nq) (`stride` floats apart) times `scale` into
// kQueryBlock rows of depth elements; rows from nq on are zeros.
INFER_INLINE void PackQueries(const float* rows, int64_t stride, int nq, int64_t dh, float scale,
                              float* q) {
  for (int qi = 0; qi < kQueryBlock; ++qi) {
    float* dst = q + qi * dh;
    if (qi < nq) {
      const float* row = rows + qi * stride;
      for (int64_t d = 0; d < dh; ++d) dst[d] = row[d] * scale;
    } else {
      std::fill(dst, dst + dh, 0.0f);
    }
  }
}
INFER_INLINE void PackQueries(const float* rows, int64_t stride, int nq, int64_t dh, float scale,
                              uint32_t* q) {
  const int64_t depth = (dh + 1) / 2;
  for (int qi = 0; qi < kQueryBlock; ++qi) {
    uint32_t* dst = q + qi * depth;
    if (qi < nq) {
      const float* row = rows + qi * stride;
      for (int64_t i = 0; i < depth; ++i) {
        dst[i] = Bf16Pair(row[2 * i] * scale, 2 * i + 1 < dh ? row[2 * i + 1] * scale : 0.0f);
      }
    } else {
      std::fill(dst, dst + depth, 0u);
    }
  }
}

// The weights of the block's kQueryBlock rows of s over [jb, jp)
// (multiples of 16) as BF16 pairs, written over the start of each row:
// pair j / 2 at 32-bit index j / 2. Each step reads 16 floats before it
// writes 8 pairs, at or before them.
INFER_INLINE void WeightsToPairs(float* s, int64_t lp, int64_t jb, int64_t jp) {
  for (int qi = 0; qi < kQueryBlock; ++qi) {
    float* row = s + qi * lp;
    for (int64_t j = jb; j < jp; j += 16) Store(row + j / 2, PairsOf(Load<F16>(row + j)));
  }
}

}  // namespace infer::cpu::attention

#endif  // INFER_MODELS_TRANSFORMER_ATTENTION_TILES_H_
