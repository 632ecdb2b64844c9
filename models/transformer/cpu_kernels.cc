#include "models/transformer/cpu_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "models/simd_math.h"

namespace infer::cpu {
namespace {

// Vectors of W floats (models/simd_math.h): each instruction set gets its
// native width.
template <int W>
using Simd = simd::Lanes<W>;
using simd::ExpNonPositive;
using simd::Load;
using simd::Splat;
using simd::Store;

// Head sizes and sequence lengths are padded to multiples of 16 in scratch,
// whatever the vector width, so the scratch layout is one for every width.
constexpr int64_t kPad = 16;
// Queries whose scores are in scratch at once (a block). The score and
// weighted-sum passes cut a block into register tiles (Tiles below); 12 is
// a multiple of every tile's queries.
constexpr int kQueryBlock = 12;
// Work items are (sequence, head) pairs when they spread evenly over the
// threads (see Attention); otherwise (sequence, head, up to kQueryChunk
// queries), so that one long sequence still spreads over every thread.
constexpr int64_t kQueryChunk = 64;
// Whole-sequence items need at least this many (sequence, head) pairs per
// thread.
constexpr int64_t kItemsPerThread = 4;

#define INFER_INLINE inline __attribute__((always_inline))

INFER_INLINE int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

template <int W>
INFER_INLINE float HorizontalMax(typename Simd<W>::F v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = std::max(m, v[i]);
  return m;
}
template <int W>
INFER_INLINE float HorizontalSum(typename Simd<W>::F v) {
  float s = 0;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}

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

// One work item: queries [q_begin, q_end) of one head of one sequence.
struct Item {
  int64_t offset;  // the sequence's first token row
  int64_t length;  // its tokens
  int64_t head;
  int64_t q_begin, q_end;
};

// The keys query q of a sequence of `len` tokens may attend to: [lo, hi).
struct KeyRange {
  int64_t lo, hi;
};
INFER_INLINE KeyRange KeysOf(const AttentionArgs& a, int64_t q, int64_t len) {
  int64_t lo = 0, hi = len;
  if (a.window > 0) {
    lo = std::max<int64_t>(0, q - a.window);
    hi = std::min<int64_t>(len, q + a.window + 1);
  }
  if (a.causal) hi = std::min<int64_t>(hi, q + 1);
  return {lo, hi};
}

// Per-thread scratch for sequences of up to `lp` tokens (a multiple of 16):
//   kt [lp / 16][head_dim][16]  keys, transposed in blocks of 16 keys, so a
//                               score tile reads one contiguous run
//   v  [lp][head_dim rounded up to 16]
//   s  [kQueryBlock][lp] scores → weights    q [kQueryBlock][head_dim]
int64_t ScratchFloats(int64_t lp, int64_t head_dim) {
  return head_dim * lp + lp * RoundUp(head_dim, kPad) + kQueryBlock * lp + kQueryBlock * head_dim;
}

typedef float F8 __attribute__((vector_size(32)));

// 8 rows of 8 floats → 8 columns, in three rounds of shuffles (the usual
// unpack, shuffle, 128-bit permute of AVX; GCC lowers them for each target).
INFER_INLINE void Transpose8x8(F8 r[8]) {
  F8 t[8], u[8];
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

// Keys [0, kn) of rows `stride` floats apart from `key` into kt's blocks
// (see ScratchFloats), zeros up to kp, a multiple of 16: 8 × 8 tiles
// through registers, the ragged edges one float at a time.
INFER_INLINE void TransposeKeys(const float* key, int64_t stride, int64_t kn, int64_t kp,
                                int64_t dh, float* kt) {
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

// Scores of Q queries (rows of `dh` floats at q) against KV vectors of keys
// (at `keys` in a kt block, vector u at keys + u * W): s[qi][u * W + lane].
template <int W, int Q, int KV>
INFER_INLINE void ScoreTile(const float* q, int64_t dh, const float* keys, float* s, int64_t lp) {
  using F = typename Simd<W>::F;
  F acc[KV][Q] = {};
  for (int64_t d = 0; d < dh; ++d) {
    F k[KV];
#pragma GCC unroll 2
    for (int u = 0; u < KV; ++u) k[u] = Load<F>(keys + d * kPad + u * W);
#pragma GCC unroll 12
    for (int qi = 0; qi < Q; ++qi) {
      const float qd = q[qi * dh + d];
#pragma GCC unroll 2
      for (int u = 0; u < KV; ++u) acc[u][qi] += qd * k[u];
    }
  }
#pragma GCC unroll 2
  for (int u = 0; u < KV; ++u) {
#pragma GCC unroll 12
    for (int qi = 0; qi < Q; ++qi) Store(s + qi * lp + u * W, acc[u][qi]);
  }
}

// Weighted sums of value rows [jb, je) (V vectors from `v`, rows `row`
// floats apart) for Q queries (weights in rows of s, `lp` apart), into Q
// rows of `out`, `out_row` floats apart.
template <int W, int Q, int V>
INFER_INLINE void SumTile(const float* s, int64_t lp, const float* v, int64_t row, int64_t jb,
                          int64_t je, float* out, int64_t out_row) {
  using F = typename Simd<W>::F;
  F acc[Q][V] = {};
  for (int64_t j = jb; j < je; ++j) {
    F vv[V];
#pragma GCC unroll 4
    for (int c = 0; c < V; ++c) vv[c] = Load<F>(v + j * row + c * W);
#pragma GCC unroll 12
    for (int qi = 0; qi < Q; ++qi) {
      const float p = s[qi * lp + j];
#pragma GCC unroll 4
      for (int c = 0; c < V; ++c) acc[qi][c] += p * vv[c];
    }
  }
  for (int qi = 0; qi < Q; ++qi) {
    for (int c = 0; c < V; ++c) Store(out + qi * out_row + c * W, acc[qi][c]);
  }
}

// The weighted sums of every vector of a value row: kSumVectors at a time,
// then the rest.
template <int W, int kNv, int Done = 0>
INFER_INLINE void SumRow(const float* s, int64_t lp, const float* v, int64_t row, int64_t jb,
                         int64_t je, int nq, float* out, int64_t out_row) {
  if constexpr (Done < kNv) {
    constexpr int kV = std::min(Tiles<W>::kSumVectors, kNv - Done);
    constexpr int kQ = QueriesPerTile(Tiles<W>::kSumAccumulators / kV);
    constexpr int kTail = TailQueries(kQ);
    int qt = 0;
    for (; qt + kQ <= nq; qt += kQ) {
      SumTile<W, kQ, kV>(s + qt * lp, lp, v + Done * W, row, jb, je, out + qt * out_row + Done * W,
                         out_row);
    }
    for (; qt < nq; qt += kTail) {
      SumTile<W, kTail, kV>(s + qt * lp, lp, v + Done * W, row, jb, je,
                            out + qt * out_row + Done * W, out_row);
    }
    SumRow<W, kNv, Done + kV>(s, lp, v, row, jb, je, nq, out, out_row);
  }
}

// The attention of one work item, with vectors of W floats, for head sizes
// of up to N16 * 16. The item's keys are those any of its queries may
// attend to, [ks, ke) with ks a multiple of 16; scratch columns count from
// ks. Without masks or biases that is the whole sequence.
template <int W, int N16>
INFER_INLINE void AttendItem(const Item& it, const AttentionArgs& a, float* scratch) {
  using F = typename Simd<W>::F;
  constexpr int64_t kDhPadded = N16 * kPad;
  constexpr int kNv = static_cast<int>(kDhPadded / W);  // vectors per value row
  constexpr int kScoreQ = Tiles<W>::kScoreQueries, kScoreKv = Tiles<W>::kScoreVectors;
  const int64_t dh = a.head_dim;
  const int64_t len = it.length, lp = RoundUp(len, kPad);
  const int64_t q_width = a.heads * dh, kv_width = a.kv_heads * dh;
  const int64_t stride = q_width + 2 * kv_width;
  const int64_t kv_head = it.head / (a.heads / a.kv_heads);
  const bool masked = a.causal || a.window > 0;
  const bool adjust = masked || a.relative_bias != nullptr;
  const float* row0 = a.qkv + it.offset * stride;
  const float* qbase = row0 + it.head * dh;
  const float* kbase = row0 + q_width + kv_head * dh;
  const float* vbase = kbase + kv_width;
  const float* bias =
      a.relative_bias == nullptr
          ? nullptr
          : a.relative_bias + it.head * (2 * a.relative_span - 1) + (a.relative_span - 1);
  const int64_t ks = KeysOf(a, it.q_begin, len).lo / kPad * kPad;
  const int64_t ke = KeysOf(a, it.q_end - 1, len).hi;
  const int64_t kn = ke - ks, kp = RoundUp(kn, kPad);  // keys, padded
  float* kt = scratch;
  float* v = kt + dh * lp;
  float* s = v + lp * kDhPadded;
  float* q = s + kQueryBlock * lp;

  // The values are copied to contiguous scratch rows, zero-padded: read in
  // place, rows a multiple of 4 KiB apart would share a few cache sets.
  TransposeKeys(kbase + ks * stride, stride, kn, kp, dh, kt);
  for (int64_t j = 0; j < kn; ++j) {
    const float* vsrc = vbase + (ks + j) * stride;
    float* vrow = v + j * kDhPadded;
    if (dh == kDhPadded) {  // whole vectors: no call, no padding
#pragma GCC unroll 16
      for (int c = 0; c < kNv; ++c) Store(vrow + c * W, Load<F>(vsrc + c * W));
    } else {
      std::memcpy(vrow, vsrc, dh * sizeof(float));
      std::fill(vrow + dh, vrow + kDhPadded, 0.0f);
    }
  }

  for (int64_t i0 = it.q_begin; i0 < it.q_end; i0 += kQueryBlock) {
    const int nq = static_cast<int>(std::min<int64_t>(kQueryBlock, it.q_end - i0));
    for (int qi = 0; qi < kQueryBlock; ++qi) {
      float* dst = q + qi * dh;
      if (qi < nq) {
        const float* row = qbase + (i0 + qi) * stride;
        for (int64_t d = 0; d < dh; ++d) dst[d] = row[d] * a.scale;
      } else {
        std::fill(dst, dst + dh, 0.0f);
      }
      // The next block's queries are fetched while this block computes:
      // token rows lie `stride` floats apart, each a cache miss otherwise.
      if (i0 + kQueryBlock + qi < it.q_end) {
        const float* next = qbase + (i0 + kQueryBlock + qi) * stride;
        for (int64_t d = 0; d < dh; d += 16) __builtin_prefetch(next + d);
      }
    }
    // The block's keys: [jb, je) of the scratch columns, jb a multiple of 16.
    int64_t jb = 0, je = kn;
    if (masked) {
      jb = (KeysOf(a, i0, len).lo - ks) / kPad * kPad;
      je = KeysOf(a, i0 + nq - 1, len).hi - ks;
    }
    const int64_t jp = std::min(RoundUp(je, kPad), kp);
    // Scores: s[qi][j] = q_qi · k_j, in tiles of kScoreQ queries ×
    // kScoreKv * W keys (Tiles). [jb, jp) holds whole multiples of kPad,
    // hence of kScoreKv * W, which never straddle a block of kt.
    constexpr int kScoreTail = TailQueries(kScoreQ);
    int qt = 0;
    for (; qt + kScoreQ <= nq; qt += kScoreQ) {
      for (int64_t j0 = jb; j0 < jp; j0 += kScoreKv * W) {
        ScoreTile<W, kScoreQ, kScoreKv>(q + qt * dh, dh, kt + j0 / kPad * dh * kPad + j0 % kPad,
                                        s + qt * lp + j0, lp);
      }
    }
    for (; qt < nq; qt += kScoreTail) {
      for (int64_t j0 = jb; j0 < jp; j0 += kScoreKv * W) {
        ScoreTile<W, kScoreTail, kScoreKv>(q + qt * dh, dh, kt + j0 / kPad * dh * kPad + j0 % kPad,
                                           s + qt * lp + j0, lp);
      }
    }
    // Softmax over the block's keys. Keys past the sequence's end, or that
    // a mask drops, score -inf, whose weight (flushed to e^-87) is 1e-38 of
    // the row's sum at most, and the weighted sum below does not read those
    // past [jb, je).
    float inv_sum[kQueryBlock];
    for (int qi = 0; qi < nq; ++qi) {
      float* row = s + qi * lp;
      constexpr float kNegInf = -std::numeric_limits<float>::infinity();
      std::fill(row + std::min(kn, jp), row + jp, kNegInf);
      if (adjust) {
        const int64_t qpos = i0 + qi;
        const KeyRange keys = KeysOf(a, qpos, len);
        for (int64_t j = jb; j < std::min(kn, jp); ++j) {
          const int64_t k = ks + j;
          if (k < keys.lo || k >= keys.hi) {
            row[j] = kNegInf;
          } else if (bias != nullptr) {
            row[j] += bias[k - qpos];
          }
        }
      }
      F mx = Load<F>(row + jb);
      for (int64_t j0 = jb + W; j0 < jp; j0 += W) {
        const F x = Load<F>(row + j0);
        mx = x > mx ? x : mx;
      }
      const float m = HorizontalMax<W>(mx);
      F sum = {};
      for (int64_t j0 = jb; j0 < jp; j0 += W) {
        const F e = ExpNonPositive<W>(Load<F>(row + j0) - m);
        Store(row + j0, e);
        sum += e;
      }
      inv_sum[qi] = 1.0f / HorizontalSum<W>(sum);
    }
    // A last, partial block's other rows: zero weights, whose sums a tile
    // computes and drops.
    for (int qi = nq; qi < kQueryBlock; ++qi) std::fill(s + qi * lp + jb, s + qi * lp + jp, 0.0f);
    // Weighted sums of the values, in tiles (SumRow), then scaled by the
    // softmax's sums.
    float out[kQueryBlock][kDhPadded];
    SumRow<W, kNv>(s, lp, v, kDhPadded, jb, je, nq, &out[0][0], kDhPadded);
    for (int qi = 0; qi < nq; ++qi) {
      float result[kDhPadded];
      for (int c = 0; c < kNv; ++c) {
        Store(result + c * W, Load<F>(out[qi] + c * W) * inv_sum[qi]);
      }
      const int64_t t = it.offset + i0 + qi;
      if (a.context_bf16) {
        uint16_t* dst = static_cast<uint16_t*>(a.context) + t * q_width + it.head * dh;
        for (int64_t d = 0; d < dh; ++d) dst[d] = RoundToBf16(result[d]);
      } else {
        float* dst = static_cast<float*>(a.context) + t * q_width + it.head * dh;
        std::memcpy(dst, result, dh * sizeof(float));
      }
    }
  }
}

template <int W>
INFER_INLINE void AttendAnyWidth(const Item& it, const AttentionArgs& a, float* scratch) {
  switch ((a.head_dim + kPad - 1) / kPad) {
    case 1:
      return AttendItem<W, 1>(it, a, scratch);
    case 2:
      return AttendItem<W, 2>(it, a, scratch);
    case 3:
      return AttendItem<W, 3>(it, a, scratch);
    case 4:
      return AttendItem<W, 4>(it, a, scratch);
    case 5:
      return AttendItem<W, 5>(it, a, scratch);
    case 6:
      return AttendItem<W, 6>(it, a, scratch);
    case 7:
      return AttendItem<W, 7>(it, a, scratch);
    case 8:
      return AttendItem<W, 8>(it, a, scratch);
    default:
      return;  // refused at load (kMaxHeadDim)
  }
}

// The same code for three instruction sets. The parallel loop stays outside
// these: GCC outlines an OpenMP region before inlining, so a region inside a
// target-specific function would be compiled for the baseline.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi,bmi2"))) void AttendAvx512(
    const Item& it, const AttentionArgs& a, float* scratch) {
  AttendAnyWidth<16>(it, a, scratch);
}
__attribute__((target("avx2,fma,bmi,bmi2"))) void AttendAvx2(const Item& it, const AttentionArgs& a,
                                                             float* scratch) {
  AttendAnyWidth<8>(it, a, scratch);
}
void AttendBaseline(const Item& it, const AttentionArgs& a, float* scratch) {
  AttendAnyWidth<4>(it, a, scratch);
}

bool IsaIncludes(dnnl::cpu_isa isa, dnnl::cpu_isa part) {
  const auto i = static_cast<unsigned>(isa), p = static_cast<unsigned>(part);
  return (i & p) == p;
}

}  // namespace

SimdLevel DetectSimdLevel() {
  __builtin_cpu_init();
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (IsaIncludes(isa, dnnl::cpu_isa::avx512_core) && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma")) {
    return SimdLevel::kAvx512;
  }
  if (IsaIncludes(isa, dnnl::cpu_isa::avx2) && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma")) {
    return SimdLevel::kAvx2;
  }
  return SimdLevel::kBaseline;
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kBaseline:
      return "x86-64 baseline";
  }
  return "?";
}

int64_t AttentionScratchFloats(int64_t longest, int64_t head_dim) {
  return ScratchFloats(RoundUp(std::max<int64_t>(longest, 1), kPad), head_dim);
}

void Attention(SimdLevel level, const AttentionArgs& a, int threads) {
  // Whole sequences per item when (sequence, head) pairs give every thread
  // kItemsPerThread of them and the longest sequence's pair is no more than
  // a thread's share of the work (about len² each): each item gathers its
  // keys once, so cutting a sequence into query chunks repeats that gather
  // per chunk. The results are the same either way (each query's sums run
  // over the same keys in the same order).
  double work = 0;  // Σ len² over the sequences
  for (int64_t r = 0; r < a.rows; ++r) {
    const double len = a.offsets[r + 1] - a.offsets[r];
    work += len * len;
  }
  const double longest = static_cast<double>(a.longest);
  const bool whole =
      a.rows * a.heads >= kItemsPerThread * threads && longest * longest * threads <= work;
  const int64_t chunk = whole ? std::max<int64_t>(a.longest, 1) : kQueryChunk;
  std::vector<Item> items;
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t offset = a.offsets[r], length = a.offsets[r + 1] - offset;
    for (int64_t h = 0; h < a.heads; ++h) {
      for (int64_t q = 0; q < length; q += chunk) {
        items.push_back({offset, length, h, q, std::min(length, q + chunk)});
      }
    }
  }
  // Longest sequences first, so the dynamic schedule ends evenly.
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& x, const Item& y) { return x.length > y.length; });
  void (*attend)(const Item&, const AttentionArgs&, float*) =
      level == SimdLevel::kAvx512 ? AttendAvx512
      : level == SimdLevel::kAvx2 ? AttendAvx2
                                  : AttendBaseline;
  const int64_t per_thread = AttentionScratchFloats(a.longest, a.head_dim);
  const int64_t n = static_cast<int64_t>(items.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    attend(items[i], a, a.scratch + omp_get_thread_num() * per_thread);
  }
}

}  // namespace infer::cpu
