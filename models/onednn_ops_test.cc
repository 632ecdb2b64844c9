// The oneDNN ops: row counts cut into pieces, and every piece size computing
// what plain loops compute (bias, GELU, the residual add, LayerNorm), in
// FP32 and BF16.
#include "models/onednn_ops.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "models/precision.h"
#include "tests/testing/status_matchers.h"

namespace infer::cpu {
namespace {

using ::infer::testing::IsOk;

TEST(RowPiecesTest, EveryRowCountIsCutIntoKnownPieces) {
  const std::vector<int64_t>& sizes = PieceSizes();
  for (int64_t rows = 1; rows <= 5000; ++rows) {
    int64_t left = rows, pieces = 0;
    while (left > 0) {
      const int64_t n = NextPiece(left);
      ASSERT_NE(std::find(sizes.begin(), sizes.end(), n), sizes.end()) << rows;
      ASSERT_LE(n, left);
      left -= n;
      ++pieces;
    }
    // Whole 1024s, at most 6 power-of-two pieces (512..16) and one tail.
    EXPECT_LE(pieces, rows / 1024 + 7) << rows;
  }
}

uint16_t ToBf16Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

class OnednnLinearTest : public ::testing::TestWithParam<bool> {};  // BF16?

TEST_P(OnednnLinearTest, MatchesPlainLoopsForRowCountsAcrossPieces) {
  const bool bf16 = GetParam();
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const int64_t in = 48, out = 40;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> w(out * in), b(out);
  for (float& x : w) x = normal(rng);
  for (float& x : b) x = normal(rng);
  const ElementType type = bf16 ? ElementType::kBf16 : ElementType::kF32;
  auto plain = OnednnLinear::Create(
      engine, {in, out, type, ElementType::kF32, LinearActivation::kNone, false}, w.data(),
      b.data());
  auto gelu_acc = OnednnLinear::Create(
      engine, {in, out, type, ElementType::kF32, LinearActivation::kGelu, true}, w.data(),
      b.data());
  if (bf16 && !plain.ok() && plain.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "no BF16 matmul on this CPU: " << plain.status();
  }
  ASSERT_THAT(plain, IsOk());
  ASSERT_THAT(gelu_acc, IsOk());
  std::vector<char> scratchpad(
      std::max((*plain)->ScratchpadBytes(), (*gelu_acc)->ScratchpadBytes()) + 1);
  dnnl::stream stream(engine);
  for (const int64_t rows : {1, 15, 16, 17, 100, 1024, 1500, 2071}) {
    std::vector<float> x(rows * in);
    for (float& v : x) v = normal(rng);
    std::vector<uint16_t> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i) xb[i] = ToBf16Bits(x[i]);
    const void* src = bf16 ? static_cast<const void*>(xb.data()) : x.data();
    std::vector<float> y(rows * out, 0.0f), acc(rows * out, 1.0f);
    ASSERT_THAT((*plain)->Run(stream, src, rows, y.data(), scratchpad.data()), IsOk());
    ASSERT_THAT((*gelu_acc)->Run(stream, src, rows, acc.data(), scratchpad.data()), IsOk());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double s = b[o];
        for (int64_t i = 0; i < in; ++i) {
          const double xi = bf16 ? Bf16ToFloat(xb[r * in + i]) : x[r * in + i];
          const double wi = bf16 ? Bf16ToFloat(ToBf16Bits(w[o * in + i])) : w[o * in + i];
          s += xi * wi;
        }
        const double gelu = 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
        ASSERT_NEAR(y[r * out + o], s, 1e-4) << rows << " rows, [" << r << ", " << o << "]";
        ASSERT_NEAR(acc[r * out + o], 1.0 + gelu, 1e-4) << rows << " rows, GELU + residual";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, OnednnLinearTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Bf16" : "Fp32"; });

TEST(OnednnLayerNormTest, NormalisesEveryRowInPlace) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const int64_t hidden = 24;
  std::vector<float> gamma(hidden), beta(hidden);
  for (int64_t i = 0; i < hidden; ++i) {
    gamma[i] = 1.0f + 0.1f * static_cast<float>(i);
    beta[i] = -0.05f * static_cast<float>(i);
  }
  auto norm = OnednnLayerNorm::Create(engine, hidden, 1e-12f, gamma.data(), beta.data());
  ASSERT_THAT(norm, IsOk());
  std::vector<char> scratchpad((*norm)->ScratchpadBytes() + 1);
  dnnl::stream stream(engine);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(3.0f, 2.0f);
  for (const int64_t rows : {1, 9, 1040}) {
    std::vector<float> x(rows * hidden);
    for (float& v : x) v = normal(rng);
    const std::vector<float> before = x;
    ASSERT_THAT((*norm)->Run(stream, x.data(), rows, scratchpad.data()), IsOk());
    for (int64_t r = 0; r < rows; ++r) {
      const float* v = before.data() + r * hidden;
      const double mean = std::accumulate(v, v + hidden, 0.0) / hidden;
      double var = 0;
      for (int64_t i = 0; i < hidden; ++i) var += (v[i] - mean) * (v[i] - mean);
      var /= hidden;
      for (int64_t i = 0; i < hidden; ++i) {
        const double want = (v[i] - mean) / std::sqrt(var + 1e-12) * gamma[i] + beta[i];
        ASSERT_NEAR(x[r * hidden + i], want, 1e-5) << rows << " rows, [" << r << ", " << i << "]";
      }
    }
  }
}

}  // namespace
}  // namespace infer::cpu
