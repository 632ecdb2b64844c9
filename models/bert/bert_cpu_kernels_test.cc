// The CPU encoder's hand-written kernels against plain double-precision
// loops, on every instruction set this CPU runs (each build of the attention
// kernel is tested where the CPU can execute it).
#include "models/bert/bert_cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace infer::cpu {
namespace {

std::vector<SimdLevel> LevelsThisCpuRuns() {
  std::vector<SimdLevel> levels = {SimdLevel::kBaseline};
  const SimdLevel best = DetectSimdLevel();
  if (best == SimdLevel::kAvx2 || best == SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx2);
  if (best == SimdLevel::kAvx512) levels.push_back(SimdLevel::kAvx512);
  return levels;
}

float FromBf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// softmax(q k^T * scale) v per sequence and head, in double.
std::vector<double> NaiveAttention(const std::vector<float>& qkv, const std::vector<int32_t>& off,
                                   int64_t hidden, int64_t heads) {
  const int64_t dh = hidden / heads, stride = 3 * hidden;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  std::vector<double> out(off.back() * hidden, 0.0);
  for (size_t r = 0; r + 1 < off.size(); ++r) {
    const int64_t o = off[r], len = off[r + 1] - o;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < len; ++i) {
        std::vector<double> p(len);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          double s = 0;
          for (int64_t d = 0; d < dh; ++d) {
            s += double{qkv[(o + i) * stride + h * dh + d]} *
                 qkv[(o + j) * stride + hidden + h * dh + d];
          }
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (int64_t d = 0; d < dh; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < len; ++j)
            acc += p[j] * qkv[(o + j) * stride + 2 * hidden + h * dh + d];
          out[(o + i) * hidden + h * dh + d] = acc / sum;
        }
      }
    }
  }
  return out;
}

struct Case {
  int64_t hidden, heads;
  std::vector<int32_t> lengths;
};

TEST(AttentionTest, MatchesPlainLoopsOnEveryInstructionSet) {
  const std::vector<Case> cases = {
      {384, 12, {1, 7, 16, 17, 64, 130}},  // MiniLM's head size 32; keys past 16 and 64
      {768, 12, {3, 77, 129}},             // BERT-base's 64
      {256, 2, {5, 33}},                   // 128, the largest
      {80, 2, {2, 19, 40}},                // 40: not a multiple of the vector width
  };
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (const Case& c : cases) {
    std::vector<int32_t> off = {0};
    int64_t longest = 0;
    for (int32_t len : c.lengths) {
      off.push_back(off.back() + len);
      longest = std::max<int64_t>(longest, len);
    }
    const int64_t tokens = off.back(), dh = c.hidden / c.heads;
    std::vector<float> qkv(tokens * 3 * c.hidden);
    for (float& x : qkv) x = normal(rng);
    const std::vector<double> want = NaiveAttention(qkv, off, c.hidden, c.heads);
    for (const SimdLevel level : LevelsThisCpuRuns()) {
      for (const bool bf16 : {false, true}) {
        const int threads = 3;
        std::vector<float> scratch(threads * AttentionScratchFloats(longest, dh));
        std::vector<float> ctx32(tokens * c.hidden, -1.0f);
        std::vector<uint16_t> ctx16(tokens * c.hidden, 0);
        AttentionArgs a;
        a.qkv = qkv.data();
        a.offsets = off.data();
        a.rows = static_cast<int64_t>(c.lengths.size());
        a.hidden = c.hidden;
        a.heads = c.heads;
        a.longest = longest;
        a.scale = 1.0f / std::sqrt(static_cast<float>(dh));
        a.context = bf16 ? static_cast<void*>(ctx16.data()) : ctx32.data();
        a.context_bf16 = bf16;
        a.scratch = scratch.data();
        Attention(level, a, threads);
        double worst = 0;
        for (int64_t i = 0; i < tokens * c.hidden; ++i) {
          const double got = bf16 ? FromBf16(ctx16[i]) : ctx32[i];
          // BF16 keeps 8 bits of mantissa: 2^-8 relative, plus rounding.
          const double tolerance = bf16 ? 4e-3 * std::max(1.0, std::abs(want[i])) : 2e-5;
          worst = std::max(worst, std::abs(got - want[i]) / tolerance);
        }
        EXPECT_LE(worst, 1.0) << "head size " << dh << ", " << SimdLevelName(level)
                              << (bf16 ? ", bf16 output" : ", fp32 output");
      }
    }
  }
}

TEST(AttentionTest, ScoresFarApartStayFinite) {
  // Large logits: the softmax subtracts the maximum, so nothing overflows,
  // and a key far below the others weighs nothing.
  const int64_t hidden = 32, heads = 1;
  const std::vector<int32_t> off = {0, 3};
  std::vector<float> qkv(3 * 3 * hidden, 0.0f);
  for (int t = 0; t < 3; ++t) {
    for (int d = 0; d < hidden; ++d) {
      qkv[t * 3 * hidden + d] = 10.0f;                               // q
      qkv[t * 3 * hidden + hidden + d] = t == 2 ? -10.0f : 10.0f;    // k
      qkv[t * 3 * hidden + 2 * hidden + d] = static_cast<float>(t);  // v
    }
  }
  for (const SimdLevel level : LevelsThisCpuRuns()) {
    std::vector<float> scratch(AttentionScratchFloats(3, hidden)), ctx(3 * hidden);
    AttentionArgs a;
    a.qkv = qkv.data();
    a.offsets = off.data();
    a.rows = 1;
    a.hidden = hidden;
    a.heads = heads;
    a.longest = 3;
    a.scale = 1.0f;
    a.context = ctx.data();
    a.scratch = scratch.data();
    Attention(level, a, 1);
    for (float x : ctx) EXPECT_NEAR(x, 0.5f, 1e-6) << SimdLevelName(level);  // mean of v0, v1
  }
}

TEST(KernelsTest, EmbeddingSumPoolAndBf16) {
  const int64_t hidden = 5;
  const std::vector<float> word = {1, 2, 3, 4, 5, 10, 20, 30, 40, 50};
  const std::vector<float> position = {0.5, 0.5, 0.5, 0.5, 0.5, 1, 1, 1, 1, 1};
  const std::vector<float> type = {0, 0, 0, 0, 100};
  const int32_t ids[] = {1, 0, 1}, positions[] = {0, 1, 0};
  std::vector<float> x(3 * hidden);
  EmbeddingSum(ids, positions, 3, hidden, word.data(), position.data(), type.data(), x.data(), 2);
  EXPECT_EQ(x, (std::vector<float>{10.5, 20.5, 30.5, 40.5, 150.5, 2, 3, 4, 5, 106, 10.5, 20.5, 30.5,
                                   40.5, 150.5}));
  // Sequences {0, 1}, {} and {2}.
  const int32_t offsets[] = {0, 2, 2, 3};
  std::vector<float> out(3 * hidden, -1.0f);
  Pool(x.data(), offsets, 3, hidden, /*first=*/false, /*normalize=*/false, out.data(), 2);
  EXPECT_EQ(out, (std::vector<float>{6.25, 11.75, 17.25, 22.75, 128.25, 0, 0, 0, 0, 0, 10.5, 20.5,
                                     30.5, 40.5, 150.5}));
  Pool(x.data(), offsets, 3, hidden, /*first=*/true, /*normalize=*/true, out.data(), 2);
  double norm = 0;
  for (int d = 0; d < hidden; ++d) norm += double{out[d]} * out[d];
  EXPECT_NEAR(norm, 1.0, 1e-6);
  EXPECT_NEAR(out[0] / out[4], 10.5 / 150.5, 1e-6);  // the first token alone
  for (int d = 0; d < hidden; ++d) EXPECT_EQ(out[hidden + d], 0.0f) << "empty sequence";

  const float in[] = {1.0f, 1.00390625f, 1.01171875f, -2.5f, 3.4028235e38f, NAN};
  uint16_t got[6];
  ToBf16(in, 6, got, 2);
  EXPECT_EQ(got[0], 0x3f80);
  EXPECT_EQ(got[1], 0x3f80);  // a tie rounds to even: down
  EXPECT_EQ(got[2], 0x3f82);  // and here up
  EXPECT_EQ(got[3], 0xc020);
  EXPECT_EQ(got[4], 0x7f80);  // FLT_MAX rounds past BF16's largest: infinity
  EXPECT_TRUE(std::isnan(FromBf16(got[5])));
}

}  // namespace
}  // namespace infer::cpu
