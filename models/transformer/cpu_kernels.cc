#include "models/transformer/cpu_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <type_traits>
#include <vector>

#include "models/simd_math.h"
#include "models/transformer/attention_tiles.h"

namespace infer::cpu {
namespace {

// Vectors of W floats (models/simd_math.h): each instruction set gets its
// native width.
using attention::Bf16Math;
using attention::Fp32Math;
using attention::kPad;
using attention::kQueryBlock;
using attention::RoundUp;
using attention::Simd;
using simd::ExpNonPositive;
using simd::Load;
using simd::Store;

// Work items are (sequence, head) pairs when they spread evenly over the
// threads (see Attention); otherwise (sequence, head, up to kQueryChunk
// queries), so that one long sequence still spreads over every thread.
constexpr int64_t kQueryChunk = 64;
// Whole-sequence items need at least this many (sequence, head) pairs per
// thread.
constexpr int64_t kItemsPerThread = 4;
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

// Per-thread scratch for sequences of up to `lp` tokens (a multiple of 16),
// in 4-byte elements (FP32, or BF16 pairs in no more room; layouts in
// attention_tiles.h):
//   kt [lp / 16][head_dim][16]  keys, transposed in blocks of 16 keys
//   v  [lp][head_dim rounded up to 16]
//   s  [kQueryBlock][lp] scores → weights    q [kQueryBlock][head_dim]
int64_t ScratchFloats(int64_t lp, int64_t head_dim) {
  return head_dim * lp + lp * RoundUp(head_dim, kPad) + kQueryBlock * lp + kQueryBlock * head_dim;
}

// The attention of one work item, with vectors of W floats and the products
// of M (Fp32Math<W> or Bf16Math), for head sizes of up to N16 * 16. The
// item's keys are those any of its queries may attend to, [ks, ke) with ks a
// multiple of 16; scratch columns count from ks. Without masks or biases
// that is the whole sequence.
template <int W, int N16, class M = Fp32Math<W>>
INFER_INLINE void AttendItem(const Item& it, const AttentionArgs& a, float* scratch) {
  using F = typename Simd<W>::F;
  using E = typename M::Elem;
  constexpr bool kPairs = std::is_same_v<M, Bf16Math>;
  constexpr int64_t kDhPadded = N16 * kPad;
  constexpr int kNv = static_cast<int>(kDhPadded / W);  // vectors per value row
  const int64_t dh = a.head_dim, depth = kPairs ? (dh + 1) / 2 : dh;
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
  E* kt = reinterpret_cast<E*>(scratch);
  E* v = reinterpret_cast<E*>(scratch + dh * lp);
  float* s = scratch + dh * lp + lp * kDhPadded;
  E* q = reinterpret_cast<E*>(s + kQueryBlock * lp);

  attention::PackKeys(kbase + ks * stride, stride, kn, kp, dh, kt);
  attention::PackValues<W, kDhPadded>(vbase + ks * stride, stride, kn, dh, v);

  for (int64_t i0 = it.q_begin; i0 < it.q_end; i0 += kQueryBlock) {
    const int nq = static_cast<int>(std::min<int64_t>(kQueryBlock, it.q_end - i0));
    attention::PackQueries(qbase + i0 * stride, stride, nq, dh, a.scale, q);
    for (int qi = 0; qi < kQueryBlock; ++qi) {
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
    // Scores: s[qi][j] = q_qi · k_j, in register tiles.
    attention::Scores<M>(q, depth, kt, jb, jp, nq, s, lp);
    // Softmax over the block's keys. Keys past the sequence's end, or that
    // a mask drops, score -inf, whose weight is exactly 0 (ExpNonPositive),
    // and the weighted sum below does not read those past [jb, je).
    float inv_sum[kQueryBlock];
    for (int qi = 0; qi < nq; ++qi) {
      float* row = s + qi * lp;
      constexpr float kNegInf = -std::numeric_limits<float>::infinity();
      const int64_t end = std::min(kn, jp);
      std::fill(row + end, row + jp, kNegInf);
      if (adjust) {
        // The keys the mask drops, [jb, lo) and [hi, end), score -inf; those
        // it keeps get the relative bias, a contiguous run of it. (Vectors
        // by hand: a scalar loop here cost as much as the scores.)
        const int64_t qpos = i0 + qi;
        const KeyRange keys = KeysOf(a, qpos, len);
        const int64_t lo = std::clamp(keys.lo - ks, jb, end);
        const int64_t hi = std::clamp(keys.hi - ks, lo, end);
        std::fill(row + jb, row + lo, kNegInf);
        std::fill(row + hi, row + end, kNegInf);
        if (bias != nullptr) {
          const float* b = bias + (ks + lo - qpos);  // b[j - lo] = bias[key j - query]
          int64_t j = lo;
          for (; j + W <= hi; j += W) Store(row + j, Load<F>(row + j) + Load<F>(b + (j - lo)));
          for (; j < hi; ++j) row[j] += b[j - lo];
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
    // Weighted sums of the values, in register tiles, then scaled by the
    // softmax's sums.
    float out[kQueryBlock][kDhPadded];
    if constexpr (kPairs) {
      attention::WeightsToPairs(s, lp, jb, jp);
      attention::WeightedSums<M, kNv>(reinterpret_cast<const E*>(s), lp, v, kDhPadded, jb / 2,
                                      (je + 1) / 2, nq, &out[0][0], kDhPadded);
    } else {
      attention::WeightedSums<M, kNv>(s, lp, v, kDhPadded, jb, je, nq, &out[0][0], kDhPadded);
    }
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

template <int W, class M = Fp32Math<W>>
INFER_INLINE void AttendAnyWidth(const Item& it, const AttentionArgs& a, float* scratch) {
  switch ((a.head_dim + kPad - 1) / kPad) {
    case 1:
      return AttendItem<W, 1, M>(it, a, scratch);
    case 2:
      return AttendItem<W, 2, M>(it, a, scratch);
    case 3:
      return AttendItem<W, 3, M>(it, a, scratch);
    case 4:
      return AttendItem<W, 4, M>(it, a, scratch);
    case 5:
      return AttendItem<W, 5, M>(it, a, scratch);
    case 6:
      return AttendItem<W, 6, M>(it, a, scratch);
    case 7:
      return AttendItem<W, 7, M>(it, a, scratch);
    case 8:
      return AttendItem<W, 8, M>(it, a, scratch);
    default:
      return;  // refused at load (kMaxHeadDim)
  }
}

// The same code for three instruction sets, and AVX-512 with BF16
// products. The parallel loop stays outside these: GCC outlines an OpenMP
// region before inlining, so a region inside a target-specific function
// would be compiled for the baseline.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi,bmi2"))) void AttendAvx512(
    const Item& it, const AttentionArgs& a, float* scratch) {
  AttendAnyWidth<16>(it, a, scratch);
}
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi,bmi2"))) void
AttendAvx512Bf16(const Item& it, const AttentionArgs& a, float* scratch) {
  AttendAnyWidth<16, Bf16Math>(it, a, scratch);
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

bool HasBf16Products() {
  static const bool has = [] {
    __builtin_cpu_init();
    return DetectSimdLevel() == SimdLevel::kAvx512 && __builtin_cpu_supports("avx512bf16") &&
           IsaIncludes(dnnl::get_effective_cpu_isa(), dnnl::cpu_isa::avx512_core_bf16);
  }();
  return has;
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

namespace {

// The work items of every query: whole sequences, or chunks of queries.
void AllQueries(const AttentionArgs& a, int threads, std::vector<Item>* items) {
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
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t offset = a.offsets[r], length = a.offsets[r + 1] - offset;
    for (int64_t h = 0; h < a.heads; ++h) {
      for (int64_t q = 0; q < length; q += chunk) {
        items->push_back({offset, length, h, q, std::min(length, q + chunk)});
      }
    }
  }
}

}  // namespace

void Attention(SimdLevel level, const AttentionArgs& a, int threads) {
  std::vector<Item> items;
  if (a.queries != AttentionArgs::Queries::kAll) {
    // One query per (sequence, head): its keys are gathered once anyway.
    const bool first = a.queries == AttentionArgs::Queries::kFirst;
    for (int64_t r = 0; r < a.rows; ++r) {
      const int64_t offset = a.offsets[r], length = a.offsets[r + 1] - offset;
      if (length == 0) continue;
      const int64_t q = first ? 0 : length - 1;
      for (int64_t h = 0; h < a.heads; ++h) items.push_back({offset, length, h, q, q + 1});
    }
  } else {
    AllQueries(a, threads, &items);
  }
  // Longest sequences first, so the dynamic schedule ends evenly.
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& x, const Item& y) { return x.length > y.length; });
  void (*attend)(const Item&, const AttentionArgs&, float*) =
      level == SimdLevel::kAvx512 ? AttendAvx512
      : level == SimdLevel::kAvx2 ? AttendAvx2
                                  : AttendBaseline;
  const bool bf16 = a.bf16_products && level == SimdLevel::kAvx512 && HasBf16Products();
  const int64_t per_thread = AttentionScratchFloats(a.longest, a.head_dim);
  const int64_t n = static_cast<int64_t>(items.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    (bf16 && items[i].length >= kBf16ProductsMinTokens ? AttendAvx512Bf16 : attend)(
        items[i], a, a.scratch + omp_get_thread_num() * per_thread);
  }
}

}  // namespace infer::cpu
