#include "models/quantize.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>

#include "models/simd_math.h"
#include "models/transformer/cpu_kernels.h"

namespace infer::cpu {
namespace {

template <int W>
using Lanes = simd::Lanes<W>;
using simd::Load;

// One row's scale, zero point and codes.
template <int W>
__attribute__((always_inline)) inline void QuantizeRow(const float* __restrict x, int64_t width,
                                                       int levels, uint8_t* __restrict q,
                                                       float* scale, int32_t* zero) {
  using F = typename Lanes<W>::F;
  F vlo = {}, vhi = {};
  int64_t k = 0;
  for (; k + W <= width; k += W) {
    const F v = Load<F>(x + k);
    vlo = v < vlo ? v : vlo;
    vhi = v > vhi ? v : vhi;
  }
  float lo = 0.0f, hi = 0.0f;
  for (int i = 0; i < W; ++i) {
    lo = std::min(lo, vlo[i]);
    hi = std::max(hi, vhi[i]);
  }
  for (; k < width; ++k) {
    lo = std::min(lo, x[k]);
    hi = std::max(hi, x[k]);
  }
  float s = (hi - lo) / static_cast<float>(levels);
  // A row of zeros (hi == lo == 0), or a range so small (subnormal) that
  // 1 / s would not be finite: codes of zero, the row's values being below
  // any step that matters.
  if (!(s >= std::numeric_limits<float>::min())) s = 1.0f;
  const float inv = 1.0f / s;
  // Codes are round(x / s) + z, clamped to [0, levels]; z is an integer, so
  // adding z + 0.5 and truncating a value clamped at 0 rounds half up.
  const auto z = static_cast<int32_t>(std::lround(-lo * inv));
  const float offset = static_cast<float>(z) + 0.5f, top = static_cast<float>(levels);
  // A plain loop: GCC vectorises it with the packing instructions of the
  // target, where a vector conversion to bytes goes lane by lane.
#pragma omp simd
  for (k = 0; k < width; ++k) {
    const float v = std::min(std::max(x[k] * inv + offset, 0.0f), top);
    q[k] = static_cast<uint8_t>(static_cast<int32_t>(v));
  }
  *scale = s;
  *zero = z;
}

// One row of DequantizeRows with the activation Act (a constant, so the
// loop has no branch on it).
template <int W, LinearActivation Act>
__attribute__((always_inline)) inline void DequantizeRowWith(const DequantizeArgs& a, int64_t r) {
  using F = typename Lanes<W>::F;
  using I = typename Lanes<W>::I;
  const int32_t* acc = a.acc + r * a.width;
  float* y = a.y + r * a.width;
  const float s = a.row_scale[r];
  const int32_t z = a.row_zero[r];
  const F vs = F{} + s;
  const I vz = I{} + z;
  int64_t n = 0;
  for (; n + W <= a.width; n += W) {
    const I centred = Load<I>(acc + n) - vz * Load<I>(a.col_sum + n);
    F v = vs * Load<F>(a.col_scale + n) * __builtin_convertvector(centred, F);
    if (a.bias != nullptr) v += Load<F>(a.bias + n);
    v = simd::Activate<W, Act>(v);
    if (a.accumulate) v += Load<F>(y + n);
    simd::Store(y + n, v);
  }
  // The last width % W values: through a zero-padded vector, so that they
  // get the same activation code as the rest.
  if (n < a.width) {
    const int64_t left = a.width - n;
    float tail[W] = {};
    for (int64_t i = 0; i < left; ++i) {
      tail[i] = s * a.col_scale[n + i] * static_cast<float>(acc[n + i] - z * a.col_sum[n + i]);
      if (a.bias != nullptr) tail[i] += a.bias[n + i];
    }
    const F v = simd::Activate<W, Act>(Load<F>(tail));
    simd::Store(tail, v);
    for (int64_t i = 0; i < left; ++i) y[n + i] = a.accumulate ? y[n + i] + tail[i] : tail[i];
  }
}

template <int W>
__attribute__((always_inline)) inline void DequantizeRow(const DequantizeArgs& a, int64_t r) {
  switch (a.activation) {
    case LinearActivation::kNone:
      return DequantizeRowWith<W, LinearActivation::kNone>(a, r);
    case LinearActivation::kGelu:
      return DequantizeRowWith<W, LinearActivation::kGelu>(a, r);
    case LinearActivation::kGeluTanh:
      return DequantizeRowWith<W, LinearActivation::kGeluTanh>(a, r);
    case LinearActivation::kSilu:
      return DequantizeRowWith<W, LinearActivation::kSilu>(a, r);
  }
}

// The same row code for three instruction sets. The parallel loops stay
// outside these (GCC outlines an OpenMP region before inlining, so a region
// inside a target-specific function would be compiled for the baseline).
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void QuantizeRowAvx512(
    const float* x, int64_t width, int levels, uint8_t* q, float* scale, int32_t* zero) {
  QuantizeRow<16>(x, width, levels, q, scale, zero);
}
__attribute__((target("avx2,fma"))) void QuantizeRowAvx2(const float* x, int64_t width, int levels,
                                                         uint8_t* q, float* scale, int32_t* zero) {
  QuantizeRow<8>(x, width, levels, q, scale, zero);
}
void QuantizeRowBaseline(const float* x, int64_t width, int levels, uint8_t* q, float* scale,
                         int32_t* zero) {
  QuantizeRow<4>(x, width, levels, q, scale, zero);
}

__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void DequantizeRowAvx512(
    const DequantizeArgs& a, int64_t r) {
  DequantizeRow<16>(a, r);
}
__attribute__((target("avx2,fma"))) void DequantizeRowAvx2(const DequantizeArgs& a, int64_t r) {
  DequantizeRow<8>(a, r);
}
void DequantizeRowBaseline(const DequantizeArgs& a, int64_t r) { DequantizeRow<4>(a, r); }

bool IsaIncludes(dnnl::cpu_isa isa, dnnl::cpu_isa part) {
  const auto i = static_cast<unsigned>(isa), p = static_cast<unsigned>(part);
  return (i & p) == p;
}

// Threads for `rows` rows of `width` values: about `per_thread` values
// each at least (16k for the plain passes; an activation costs about four
// times as much per value), so a small piece is not spread over a team for
// nothing.
int TeamFor(int64_t rows, int64_t width, int threads, int64_t per_thread = 16384) {
  const int64_t by_size = std::max<int64_t>(1, rows * width / per_thread);
  return static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(by_size, rows), 1, threads));
}

}  // namespace

QuantizedWeights QuantizeWeights(const float* w, int64_t out, int64_t in, int levels) {
  QuantizedWeights q;
  q.q.resize(static_cast<size_t>(out * in));
  q.scale.resize(static_cast<size_t>(out));
  q.sum.resize(static_cast<size_t>(out));
  for (int64_t n = 0; n < out; ++n) {
    const float* row = w + n * in;
    float top = 0.0f;
    for (int64_t k = 0; k < in; ++k) top = std::max(top, std::fabs(row[k]));
    const float s = top > 0.0f ? top / static_cast<float>(levels) : 1.0f;
    int32_t sum = 0;
    for (int64_t k = 0; k < in; ++k) {
      const auto v = static_cast<int32_t>(std::clamp(
          std::lround(row[k] / s), -static_cast<long>(levels), static_cast<long>(levels)));
      q.q[n * in + k] = static_cast<int8_t>(v);
      sum += v;
    }
    q.scale[n] = s;
    q.sum[n] = sum;
  }
  return q;
}

int WeightLevels() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return IsaIncludes(isa, dnnl::cpu_isa::avx512_core_vnni) ? 127 : 63;
}

void QuantizeRows(const float* x, int64_t rows, int64_t width, int levels, uint8_t* q,
                  float* row_scale, int32_t* row_zero, int threads) {
  static const SimdLevel level = DetectSimdLevel();
  auto* row_fn = level == SimdLevel::kAvx512 ? QuantizeRowAvx512
                 : level == SimdLevel::kAvx2 ? QuantizeRowAvx2
                                             : QuantizeRowBaseline;
#pragma omp parallel for num_threads(TeamFor(rows, width, threads)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    row_fn(x + r * width, width, levels, q + r * width, row_scale + r, row_zero + r);
  }
}

void DequantizeRows(const DequantizeArgs& a, int threads) {
  static const SimdLevel level = DetectSimdLevel();
  auto* row_fn = level == SimdLevel::kAvx512 ? DequantizeRowAvx512
                 : level == SimdLevel::kAvx2 ? DequantizeRowAvx2
                                             : DequantizeRowBaseline;
  const int64_t per_thread = a.activation == LinearActivation::kNone ? 16384 : 4096;
#pragma omp parallel for num_threads(TeamFor(a.rows, a.width, threads, per_thread)) schedule(static)
  for (int64_t r = 0; r < a.rows; ++r) row_fn(a, r);
}

}  // namespace infer::cpu
