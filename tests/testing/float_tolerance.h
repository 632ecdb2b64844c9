// Tolerances for comparing FP32 results that differ only in the order of
// their sums, derived from the precision rather than picked.
//
// oneDNN picks its GEMM kernel by the instruction set, the row count and
// the thread count, and kernels add a dot product's terms in different
// orders. So a row computed in a batch of 4 and the same row computed
// alone may differ in their last bits (seen on AVX2: 0.030443206 against
// 0.030443197), while both are correct FP32 results. The classic bound on
// a dot product summed in any order (Higham, "Accuracy and Stability of
// Numerical Algorithms", §3.1): |fl(Σ a_k b_k) − Σ a_k b_k| ≤ γ_K Σ|a_k b_k|,
// γ_K = K·u / (1 − K·u), u = 2^-24. Two such results are within twice that.
//
// Header-only; test code.
#ifndef INFER_TESTS_TESTING_FLOAT_TOLERANCE_H_
#define INFER_TESTS_TESTING_FLOAT_TOLERANCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "models/embed_pool/embed_pool.h"

namespace infer::testing {

// The unit roundoff of FP32.
inline double Fp32Roundoff() { return std::ldexp(1.0, -24); }

// γ_n of the bound above.
inline double Gamma(int64_t n) {
  const double nu = static_cast<double>(n) * Fp32Roundoff();
  return nu / (1.0 - nu);
}

// How far apart two embed_pool embeddings of the sequence `ids` (no
// padding ids) may be when the GEMM added its terms in different orders:
// the dense layer's dot products of K = hidden_size terms (2·γ_K·S, S the
// largest Σ|x_k·W_kd| over the sequence's tokens and the outputs), the bias
// add (one rounding of up to S + max|b| each side), tanh (1-Lipschitz,
// within an ulp or two each side) and the mean over n tokens in the same
// order (at most the largest difference of its terms, plus its own
// roundings, 2·γ_n since |tanh| ≤ 1).
inline double EmbedPoolReorderTolerance(const EmbedPoolOptions& o,
                                        const std::vector<int64_t>& ids) {
  const EmbedPoolModel::HostWeights w = EmbedPoolModel::GenerateWeights(o);
  double s = 0, b = 0;
  for (int64_t d = 0; d < o.embedding_size; ++d) b = std::max<double>(b, std::abs(w.bias[d]));
  for (int64_t id : ids) {
    for (int64_t d = 0; d < o.embedding_size; ++d) {
      double sum = 0;
      for (int64_t k = 0; k < o.hidden_size; ++k) {
        sum += std::abs(double{w.table[id * o.hidden_size + k]} *
                        double{w.dense[k * o.embedding_size + d]});
      }
      s = std::max(s, sum);
    }
  }
  const double u = Fp32Roundoff();
  const auto n = static_cast<int64_t>(ids.size());
  return 2 * Gamma(o.hidden_size) * s + 2 * u * (s + b) + 4 * u + 2 * Gamma(n) + 2 * u;
}

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_FLOAT_TOLERANCE_H_
