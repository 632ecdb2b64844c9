// The row-wise CPU kernels of models/transformer/cpu_kernels.h: each row
// (token) or sequence is computed on its own, spread over the calling
// thread's OpenMP team, and left to the compiler to vectorise, except the
// gated activations, whose erf/tanh/exp are vectorised by hand
// (models/simd_math.h) for AVX-512, AVX2 and the baseline.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/simd_math.h"
#include "models/transformer/cpu_kernels.h"

namespace infer::cpu {

void EmbeddingSum(const EmbeddingArgs& a, float* x, int threads) {
  const int64_t hidden = a.hidden;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t t = 0; t < a.tokens; ++t) {
    const float* w = a.word + static_cast<int64_t>(a.ids[t]) * hidden;
    float* out = x + t * hidden;
    std::memcpy(out, w, hidden * sizeof(float));
    if (a.position != nullptr) {
      const float* pos = a.position + (a.position_offset + a.positions[t]) * hidden;
      for (int64_t i = 0; i < hidden; ++i) out[i] += pos[i];
    }
    if (a.token_type != nullptr) {
      const float* type = a.token_type + (a.types != nullptr ? a.types[t] : 0) * hidden;
      for (int64_t i = 0; i < hidden; ++i) out[i] += type[i];
    }
  }
}

void Norm(const float* x, int64_t rows, int64_t hidden, const float* gamma, const float* beta,
          float eps, bool rms, void* out, bool out_bf16, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * hidden;
    float mean = 0;
    if (!rms) {
      double sum = 0;
      for (int64_t i = 0; i < hidden; ++i) sum += in[i];
      mean = static_cast<float>(sum / hidden);
    }
    double sq = 0;
    for (int64_t i = 0; i < hidden; ++i) {
      const float d = in[i] - mean;
      sq += double{d} * d;
    }
    const auto inv = static_cast<float>(1.0 / std::sqrt(sq / hidden + eps));
    if (out_bf16) {
      uint16_t* o = static_cast<uint16_t*>(out) + r * hidden;
      for (int64_t i = 0; i < hidden; ++i) {
        o[i] = RoundToBf16((in[i] - mean) * inv * gamma[i] + (beta != nullptr ? beta[i] : 0.0f));
      }
    } else {
      float* o = static_cast<float*>(out) + r * hidden;
      for (int64_t i = 0; i < hidden; ++i) {
        o[i] = (in[i] - mean) * inv * gamma[i] + (beta != nullptr ? beta[i] : 0.0f);
      }
    }
  }
}

void QkTransform(const QkTransformArgs& a, int threads) {
  const int64_t dh = a.head_dim, half = dh / 2;
  const int64_t stride = (a.heads + 2 * a.kv_heads) * dh;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t t = 0; t < a.tokens; ++t) {
    float* row = a.qkv + t * stride;
    const float* cos =
        a.cos != nullptr ? a.cos + static_cast<int64_t>(a.positions[t]) * half : nullptr;
    const float* sin =
        a.sin != nullptr ? a.sin + static_cast<int64_t>(a.positions[t]) * half : nullptr;
    for (int64_t h = 0; h < a.heads + a.kv_heads; ++h) {
      float* v = row + h * dh;
      const float* gamma = h < a.heads ? a.q_gamma : a.k_gamma;
      if (gamma != nullptr) {
        double sq = 0;
        for (int64_t i = 0; i < dh; ++i) sq += double{v[i]} * v[i];
        const auto inv = static_cast<float>(1.0 / std::sqrt(sq / dh + a.eps));
        for (int64_t i = 0; i < dh; ++i) v[i] = v[i] * inv * gamma[i];
      }
      if (cos != nullptr) {
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * cos[i] - x2 * sin[i];
          v[i + half] = x2 * cos[i] + x1 * sin[i];
        }
      }
    }
  }
}

namespace {

// One row of GatedActivation with vectors of W floats (models/simd_math.h),
// the activation a constant so the loop has no branch on it. The last
// inter % W values go through a zero-padded vector, so every value gets the
// same code.
template <int W, LinearActivation Act>
inline __attribute__((always_inline)) void GatedRowWith(const float* a, const float* g,
                                                        int64_t inter, float* out32,
                                                        uint16_t* out16) {
  using F = typename simd::Lanes<W>::F;
  float tail_a[W], tail_g[W], y[W];
  for (int64_t i = 0; i < inter; i += W) {
    const int64_t n = std::min<int64_t>(W, inter - i);
    F v;
    if (n == W) {
      v = simd::Activate<W, Act>(simd::Load<F>(a + i)) * simd::Load<F>(g + i);
    } else {
      std::fill(tail_a, tail_a + W, 0.0f);
      std::fill(tail_g, tail_g + W, 0.0f);
      std::copy(a + i, a + i + n, tail_a);
      std::copy(g + i, g + i + n, tail_g);
      v = simd::Activate<W, Act>(simd::Load<F>(tail_a)) * simd::Load<F>(tail_g);
    }
    if (out16 == nullptr && n == W) {
      simd::Store(out32 + i, v);
      continue;
    }
    simd::Store(y, v);
    for (int64_t k = 0; k < n; ++k) {
      if (out16 != nullptr) {
        out16[i + k] = RoundToBf16(y[k]);
      } else {
        out32[i + k] = y[k];
      }
    }
  }
}

template <int W>
inline __attribute__((always_inline)) void GatedRow(LinearActivation act, const float* a,
                                                    const float* g, int64_t inter, float* out32,
                                                    uint16_t* out16) {
  switch (act) {
    case LinearActivation::kNone:
      return GatedRowWith<W, LinearActivation::kNone>(a, g, inter, out32, out16);
    case LinearActivation::kGelu:
      return GatedRowWith<W, LinearActivation::kGelu>(a, g, inter, out32, out16);
    case LinearActivation::kGeluTanh:
      return GatedRowWith<W, LinearActivation::kGeluTanh>(a, g, inter, out32, out16);
    case LinearActivation::kSilu:
      return GatedRowWith<W, LinearActivation::kSilu>(a, g, inter, out32, out16);
  }
}

// The same row code for three instruction sets (the parallel loop stays
// outside: GCC outlines an OpenMP region before inlining).
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void GatedRowAvx512(
    LinearActivation act, const float* a, const float* g, int64_t inter, float* out32,
    uint16_t* out16) {
  GatedRow<16>(act, a, g, inter, out32, out16);
}
__attribute__((target("avx2,fma"))) void GatedRowAvx2(LinearActivation act, const float* a,
                                                      const float* g, int64_t inter, float* out32,
                                                      uint16_t* out16) {
  GatedRow<8>(act, a, g, inter, out32, out16);
}
void GatedRowBaseline(LinearActivation act, const float* a, const float* g, int64_t inter,
                      float* out32, uint16_t* out16) {
  GatedRow<4>(act, a, g, inter, out32, out16);
}

}  // namespace

void GatedActivation(const float* in, int64_t rows, int64_t inter, LinearActivation act, void* out,
                     bool out_bf16, int threads) {
  static const SimdLevel level = DetectSimdLevel();
  auto* row_fn = level == SimdLevel::kAvx512 ? GatedRowAvx512
                 : level == SimdLevel::kAvx2 ? GatedRowAvx2
                                             : GatedRowBaseline;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = in + r * 2 * inter;
    float* out32 = out_bf16 ? nullptr : static_cast<float*>(out) + r * inter;
    uint16_t* out16 = out_bf16 ? static_cast<uint16_t*>(out) + r * inter : nullptr;
    row_fn(act, a, a + inter, inter, out32, out16);
  }
}

void Pool(const float* x, const int32_t* offsets, int64_t rows, int64_t hidden, PoolMode mode,
          bool normalize, float* out, int threads) {
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * hidden;
    std::fill(o, o + hidden, 0.0f);
    int64_t begin = offsets[r], end = offsets[r + 1];
    if (end > begin && mode == PoolMode::kFirst) end = begin + 1;
    if (end > begin && mode == PoolMode::kLast) begin = end - 1;
    for (int64_t t = begin; t < end; ++t) {
      const float* row = x + t * hidden;
      for (int64_t i = 0; i < hidden; ++i) o[i] += row[i];
    }
    const float inv_count = end > begin ? 1.0f / static_cast<float>(end - begin) : 0.0f;
    for (int64_t i = 0; i < hidden; ++i) o[i] *= inv_count;
    if (normalize) L2NormalizeRows(o, 1, hidden);
  }
}

void L2NormalizeRows(float* x, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    float* o = x + r * width;
    double norm = 0;
    for (int64_t i = 0; i < width; ++i) norm += double{o[i]} * o[i];
    if (norm > 0) {
      const float inv = static_cast<float>(1.0 / std::sqrt(norm));
      for (int64_t i = 0; i < width; ++i) o[i] *= inv;
    }
  }
}

void ToBf16(const float* in, int64_t n, uint16_t* out, int threads) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) out[i] = RoundToBf16(in[i]);
  }
}

}  // namespace infer::cpu
