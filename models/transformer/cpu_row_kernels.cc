// The row-wise CPU kernels of models/transformer/cpu_kernels.h: each row
// (token) or sequence is computed on its own, spread over the calling
// thread's OpenMP team, and left to the compiler to vectorise.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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
      int64_t p = a.positions[t];
      if (a.by_order) {  // the index within its sequence: t less the sequence's first row
        p = t - *(std::upper_bound(a.offsets, a.offsets + a.rows + 1, static_cast<int32_t>(t)) - 1);
      }
      const float* pos = a.position + (a.position_offset + p) * hidden;
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

void GatedActivation(const float* in, int64_t rows, int64_t inter, GateActivation act, void* out,
                     bool out_bf16, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = in + r * 2 * inter;
    const float* g = a + inter;
    for (int64_t i = 0; i < inter; ++i) {
      const float x = a[i];
      float y;
      switch (act) {
        case GateActivation::kGelu:
          y = 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
          break;
        case GateActivation::kGeluTanh:
          y = 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
          break;
        case GateActivation::kSilu:
        default:
          y = x / (1.0f + std::exp(-x));
          break;
      }
      y *= g[i];
      if (out_bf16) {
        static_cast<uint16_t*>(out)[r * inter + i] = RoundToBf16(y);
      } else {
        static_cast<float*>(out)[r * inter + i] = y;
      }
    }
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
