// The CPU encoder's hand-written kernels against plain double-precision
// loops, on every instruction set this CPU runs (each build of the attention
// kernel is tested where the CPU can execute it).
#include "models/transformer/cpu_kernels.h"

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

// What the attention of a case computes: heads of head_dim, grouped KV
// heads, masks and relative biases (AttentionArgs).
struct Case {
  int64_t head_dim, heads, kv_heads;
  std::vector<int32_t> lengths;
  bool causal = false;
  int64_t window = 0;
  bool relative_bias = false;
};

// softmax(q k^T * scale + bias) v per sequence and head over the keys the
// masks keep, in double.
std::vector<double> NaiveAttention(const Case& c, const std::vector<float>& qkv,
                                   const std::vector<int32_t>& off, const std::vector<float>& bias,
                                   int64_t span) {
  const int64_t dh = c.head_dim, qw = c.heads * dh, stride = qw + 2 * c.kv_heads * dh;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  std::vector<double> out(off.back() * qw, 0.0);
  for (size_t r = 0; r + 1 < off.size(); ++r) {
    const int64_t o = off[r], len = off[r + 1] - o;
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kv = h / (c.heads / c.kv_heads);
      const int64_t k_col = qw + kv * dh, v_col = qw + (c.kv_heads + kv) * dh;
      for (int64_t i = 0; i < len; ++i) {
        std::vector<double> p(len, 0.0);
        std::vector<bool> keep(len);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          keep[j] = (!c.causal || j <= i) && (c.window == 0 || std::abs(j - i) <= c.window);
          if (!keep[j]) continue;
          double s = 0;
          for (int64_t d = 0; d < dh; ++d) {
            s += double{qkv[(o + i) * stride + h * dh + d]} * qkv[(o + j) * stride + k_col + d];
          }
          p[j] = s * scale;
          if (c.relative_bias) p[j] += bias[h * (2 * span - 1) + (j - i) + span - 1];
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j < len; ++j) sum += (p[j] = keep[j] ? std::exp(p[j] - mx) : 0.0);
        for (int64_t d = 0; d < dh; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < len; ++j) acc += p[j] * qkv[(o + j) * stride + v_col + d];
          out[(o + i) * qw + h * dh + d] = acc / sum;
        }
      }
    }
  }
  return out;
}

TEST(AttentionTest, MatchesPlainLoopsOnEveryInstructionSet) {
  const std::vector<Case> cases = {
      {32, 12, 12, {1, 7, 16, 17, 64, 130}},      // MiniLM's head size 32; keys past 16 and 64
      {64, 12, 12, {3, 77, 129}},                 // BERT-base's 64
      {128, 2, 2, {5, 33}},                       // 128, the largest
      {40, 2, 2, {2, 19, 40}},                    // 40: not a multiple of the vector width
      {20, 3, 3, {1, 13, 45}},                    // 20: keys transposed partly one by one
      {16, 4, 1, {1, 9, 70}, /*causal=*/true},    // Qwen3-like: 1 KV head, causal
      {64, 8, 2, {2, 65, 150}, /*causal=*/true},  // 4 query heads per KV head
      {32, 4, 4, {1, 8, 40, 140}, false, /*window=*/8},           // ModernBERT's sliding window
      {16, 2, 2, {3, 17, 100}, false, /*window=*/1},              // the narrowest window
      {48, 3, 3, {1, 10, 66}, true, /*window=*/5},                // causal and windowed (Mistral)
      {32, 4, 4, {1, 12, 64}, false, 0, /*relative_bias=*/true},  // MPNet
      // A mask and a relative bias together, over sequences split into
      // query chunks (2 heads: too few items for whole sequences), so a
      // chunk's keys start past 0 and a block's kept keys past its first.
      {32, 2, 2, {1, 150}, false, /*window=*/8, /*relative_bias=*/true},
      {32, 2, 2, {1, 12, 150}, true, /*window=*/5, /*relative_bias=*/true},
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
    const int64_t tokens = off.back(), dh = c.head_dim, qw = c.heads * dh;
    std::vector<float> qkv(tokens * (qw + 2 * c.kv_heads * dh));
    for (float& x : qkv) x = normal(rng);
    const int64_t span = longest + 3;
    std::vector<float> bias(c.heads * (2 * span - 1));
    for (float& x : bias) x = normal(rng);
    const std::vector<double> want = NaiveAttention(c, qkv, off, bias, span);
    for (const SimdLevel level : LevelsThisCpuRuns()) {
      // FP32 output, BF16 output, and FP32 output from BF16 products.
      for (const int variant : {0, 1, 2}) {
        const bool bf16 = variant == 1, products = variant == 2;
        const int threads = 3;
        std::vector<float> scratch(threads * AttentionScratchFloats(longest, dh));
        std::vector<float> ctx32(tokens * qw, -1.0f);
        std::vector<uint16_t> ctx16(tokens * qw, 0);
        AttentionArgs a;
        a.qkv = qkv.data();
        a.offsets = off.data();
        a.rows = static_cast<int64_t>(c.lengths.size());
        a.heads = c.heads;
        a.kv_heads = c.kv_heads;
        a.head_dim = dh;
        a.longest = longest;
        a.scale = 1.0f / std::sqrt(static_cast<float>(dh));
        a.causal = c.causal;
        a.window = c.window;
        if (c.relative_bias) {
          a.relative_bias = bias.data();
          a.relative_span = span;
        }
        a.context = bf16 ? static_cast<void*>(ctx16.data()) : ctx32.data();
        a.context_bf16 = bf16;
        a.bf16_products = products;
        a.scratch = scratch.data();
        Attention(level, a, threads);
        double worst = 0;
        for (int64_t i = 0; i < tokens * qw; ++i) {
          const double got = bf16 ? FromBf16(ctx16[i]) : ctx32[i];
          const int64_t t = i / qw;
          const int64_t r = std::upper_bound(off.begin(), off.end(), t) - off.begin() - 1;
          const bool bf16_products = products && level == SimdLevel::kAvx512 && HasBf16Products() &&
                                     off[r + 1] - off[r] >= 128;
          // BF16 keeps 8 bits of mantissa: 2^-8 relative, plus rounding. BF16
          // products round q and k (scores up to about 10 here move by a few
          // hundredths, the weights by a few percent) and p and v: measured
          // under 0.05 at outputs of magnitude up to 6; a wrong index or
          // layout is off by about 1.
          const double tolerance = bf16            ? 4e-3 * std::max(1.0, std::abs(want[i]))
                                   : bf16_products ? 0.1
                                                   : 2e-5;
          worst = std::max(worst, std::abs(got - want[i]) / tolerance);
        }
        EXPECT_LE(worst, 1.0) << "head size " << dh << ", heads " << c.heads << "/" << c.kv_heads
                              << (c.causal ? ", causal" : "") << ", window " << c.window
                              << (c.relative_bias ? ", relative bias, " : ", ")
                              << SimdLevelName(level)
                              << (bf16       ? ", bf16 output"
                                  : products ? ", bf16 products"
                                             : ", fp32 output");
      }
    }
  }
}

// Unmasked attention over packed sequences with as many KV heads as query
// heads; the caller adds masks and biases.
AttentionArgs PlainArgs(const std::vector<float>& qkv, const std::vector<int32_t>& off,
                        int64_t heads, int64_t head_dim, int64_t longest, float scale,
                        float* context, std::vector<float>& scratch) {
  AttentionArgs a;
  a.qkv = qkv.data();
  a.offsets = off.data();
  a.rows = static_cast<int64_t>(off.size()) - 1;
  a.heads = heads;
  a.kv_heads = heads;
  a.head_dim = head_dim;
  a.longest = longest;
  a.scale = scale;
  a.context = context;
  a.scratch = scratch.data();
  return a;
}

TEST(AttentionTest, WholeSequenceItemsAndQueryChunksAgreeBitForBit) {
  // Few (sequence, head) pairs per thread cut sequences into query chunks;
  // many make one item per pair. Each query's sums are the same either way.
  const int64_t dh = 32, heads = 2;
  const std::vector<int32_t> off = {0, 150, 151, 300};  // past one chunk of 64, and 1 token
  const int64_t tokens = off.back(), qw = heads * dh;
  std::vector<float> qkv(tokens * 3 * qw);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (float& x : qkv) x = normal(rng);
  const int64_t span = 151;
  std::vector<float> bias(heads * (2 * span - 1));
  for (float& x : bias) x = normal(rng);
  struct Mask {
    int64_t window;
    bool causal, relative_bias;
  };
  for (const SimdLevel level : LevelsThisCpuRuns()) {
    for (const Mask m : {Mask{0, false, false}, Mask{20, false, false}, Mask{0, true, false},
                         Mask{0, false, true}, Mask{20, true, true}}) {
      std::vector<float> results[2];
      const int threads_of[2] = {1, 16};  // 6 pairs: whole sequences for 1 thread, chunks for 16
      for (int run = 0; run < 2; ++run) {
        const int threads = threads_of[run];
        std::vector<float> scratch(threads * AttentionScratchFloats(150, dh));
        results[run].assign(tokens * qw, -1.0f);
        AttentionArgs a = PlainArgs(qkv, off, heads, dh, 150, 0.17f, results[run].data(), scratch);
        a.window = m.window;
        a.causal = m.causal;
        if (m.relative_bias) {
          a.relative_bias = bias.data();
          a.relative_span = span;
        }
        Attention(level, a, threads);
      }
      EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4), 0)
          << SimdLevelName(level) << ", window " << m.window << (m.causal ? ", causal" : "")
          << (m.relative_bias ? ", relative bias" : "");
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
    Attention(level, PlainArgs(qkv, off, heads, hidden, 3, 1.0f, ctx.data(), scratch), 1);
    for (float x : ctx) EXPECT_NEAR(x, 0.5f, 1e-6) << SimdLevelName(level);  // mean of v0, v1
  }
}

TEST(KernelsTest, EmbeddingSumPoolAndBf16) {
  const int64_t hidden = 5;
  const std::vector<float> word = {1, 2, 3, 4, 5, 10, 20, 30, 40, 50};
  const std::vector<float> position = {0.5, 0.5, 0.5, 0.5, 0.5, 1, 1, 1, 1, 1};
  const std::vector<float> type = {0, 0, 0, 0, 100};
  // Sequences {0, 1}, {} and {2}.
  const int32_t ids[] = {1, 0, 1}, positions[] = {0, 1, 0}, offsets[] = {0, 2, 2, 3};
  EmbeddingArgs e;
  e.ids = ids;
  e.positions = positions;
  e.tokens = 3;
  e.hidden = hidden;
  e.word = word.data();
  e.position = position.data();
  e.token_type = type.data();
  std::vector<float> x(3 * hidden);
  EmbeddingSum(e, x.data(), 2);
  EXPECT_EQ(x, (std::vector<float>{10.5, 20.5, 30.5, 40.5, 150.5, 2, 3, 4, 5, 106, 10.5, 20.5, 30.5,
                                   40.5, 150.5}));
  // RoBERTa's positions, past an offset (here 1: position 0 is the second
  // row, and -1, a padding token's, the first); no token types.
  std::vector<float> roberta(3 * hidden);
  const std::vector<float> positions3 = {9, 9, 9, 9, 9, 0.5, 0.5, 0.5, 0.5, 0.5, 1, 1, 1, 1, 1};
  const int32_t roberta_positions[] = {0, -1, 1};
  e.positions = roberta_positions;
  e.position = positions3.data();
  e.position_offset = 1;
  e.token_type = nullptr;
  EmbeddingSum(e, roberta.data(), 2);
  EXPECT_EQ(roberta, (std::vector<float>{10.5, 20.5, 30.5, 40.5, 50.5, 10, 11, 12, 13, 14, 11, 21,
                                         31, 41, 51}));
  std::vector<float> out(3 * hidden, -1.0f);
  Pool(x.data(), offsets, 3, hidden, PoolMode::kMean, /*normalize=*/false, out.data(), 2);
  EXPECT_EQ(out, (std::vector<float>{6.25, 11.75, 17.25, 22.75, 128.25, 0, 0, 0, 0, 0, 10.5, 20.5,
                                     30.5, 40.5, 150.5}));
  Pool(x.data(), offsets, 3, hidden, PoolMode::kLast, /*normalize=*/false, out.data(), 2);
  EXPECT_EQ(out,
            (std::vector<float>{2, 3, 4, 5, 106, 0, 0, 0, 0, 0, 10.5, 20.5, 30.5, 40.5, 150.5}));
  Pool(x.data(), offsets, 3, hidden, PoolMode::kFirst, /*normalize=*/true, out.data(), 2);
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

TEST(KernelsTest, NormsMatchTheirFormulas) {
  const int64_t hidden = 4;
  const std::vector<float> x = {1, 2, 3, 6, -1, 0, 0, 1};
  const std::vector<float> gamma = {1, 2, 0.5, 1}, beta = {0, 1, 0, -1};
  std::vector<float> out(8);
  Norm(x.data(), 2, hidden, gamma.data(), beta.data(), 0.0f, /*rms=*/false, out.data(), false, 2);
  // Row 0: mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5.
  const double sd = std::sqrt(3.5);
  EXPECT_NEAR(out[0], -2 / sd, 1e-6);
  EXPECT_NEAR(out[1], 2 * (-1 / sd) + 1, 1e-6);
  EXPECT_NEAR(out[3], 3 / sd - 1, 1e-6);
  Norm(x.data(), 2, hidden, gamma.data(), nullptr, 0.0f, /*rms=*/true, out.data(), false, 2);
  // Row 1: mean square (1 + 0 + 0 + 1) / 4 = 0.5.
  EXPECT_NEAR(out[4], -1 / std::sqrt(0.5), 1e-6);
  EXPECT_NEAR(out[7], 1 / std::sqrt(0.5), 1e-6);
  std::vector<uint16_t> half(8);
  Norm(x.data(), 2, hidden, gamma.data(), nullptr, 0.0f, /*rms=*/true, half.data(), true, 2);
  EXPECT_NEAR(FromBf16(half[4]), out[4], 1e-2);
}

TEST(KernelsTest, QkNormAndRotaryPositions) {
  // One query head and one KV head of size 4, at positions 0 and 1.
  const int64_t dh = 4, stride = 3 * dh;
  std::vector<float> qkv = {1, 2, 3, 4, 0, 0, 0, 2, 9, 9, 9, 9, 1, 0, 0, 0, 1, 0, 0, 0, 9, 9, 9, 9};
  const int32_t positions[] = {0, 1};
  const std::vector<float> cos = {1, 1, 0.5f, 0.25f}, sin = {0, 0, 0.75f, 0.125f};
  QkTransformArgs a;
  a.qkv = qkv.data();
  a.positions = positions;
  a.tokens = 2;
  a.heads = 1;
  a.kv_heads = 1;
  a.head_dim = dh;
  a.cos = cos.data();
  a.sin = sin.data();
  QkTransform(a, 2);
  // Position 0 rotates by nothing; position 1 pairs (x_i, x_{i+2}).
  EXPECT_EQ(std::vector<float>(qkv.begin(), qkv.begin() + stride),
            (std::vector<float>{1, 2, 3, 4, 0, 0, 0, 2, 9, 9, 9, 9}));
  EXPECT_FLOAT_EQ(qkv[stride + 0], 1 * 0.5f);   // x0 cos - x2 sin
  EXPECT_FLOAT_EQ(qkv[stride + 2], 1 * 0.75f);  // x2 cos + x0 sin
  EXPECT_FLOAT_EQ(qkv[stride + 4], 0.5f);       // the key too
  EXPECT_FLOAT_EQ(qkv[stride + 8], 9.0f);       // values untouched
  // RMSNorm over each head first: the key [0, 0, 0, 2] has mean square 1.
  const std::vector<float> gamma = {1, 1, 1, 3};
  std::vector<float> one = {1, 2, 3, 4, 0, 0, 0, 2, 9, 9, 9, 9};
  a.qkv = one.data();
  a.tokens = 1;
  a.q_gamma = gamma.data();
  a.k_gamma = gamma.data();
  a.eps = 0.0f;
  a.cos = nullptr;
  a.sin = nullptr;
  QkTransform(a, 1);
  EXPECT_FLOAT_EQ(one[7], 2.0f * 3.0f);
  EXPECT_NEAR(one[3], 4.0 / std::sqrt(7.5) * 3.0, 1e-5);
}

TEST(KernelsTest, GatedActivationsMatchTheirFormulas) {
  const std::vector<float> in = {-1.5f, 0.5f, 2.0f, 3.0f};  // one row: a = {-1.5, 0.5}, b = {2, 3}
  std::vector<float> out(2);
  GatedActivation(in.data(), 1, 2, LinearActivation::kSilu, out.data(), false, 1);
  EXPECT_NEAR(out[0], -1.5 / (1 + std::exp(1.5)) * 2, 1e-6);
  EXPECT_NEAR(out[1], 0.5 / (1 + std::exp(-0.5)) * 3, 1e-6);
  GatedActivation(in.data(), 1, 2, LinearActivation::kGelu, out.data(), false, 1);
  EXPECT_NEAR(out[0], 0.5 * -1.5 * (1 + std::erf(-1.5 / std::sqrt(2.0))) * 2, 1e-6);
  GatedActivation(in.data(), 1, 2, LinearActivation::kGeluTanh, out.data(), false, 1);
  const double t = std::tanh(std::sqrt(2 / M_PI) * (0.5 + 0.044715 * 0.125));
  EXPECT_NEAR(out[1], 0.5 * 0.5 * (1 + t) * 3, 1e-6);
}

TEST(KernelsTest, GatedActivationsOnWholeRowsFp32AndBf16) {
  // 3 rows of 37: whole vectors and a tail at every width; values across
  // the activations' range, gates of either sign.
  const int64_t rows = 3, inter = 37;
  std::vector<float> in(rows * 2 * inter);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (float& x : in) x = normal(rng);
  in[5] = -40.0f;  // far in the tails
  in[6] = 40.0f;
  for (const LinearActivation act :
       {LinearActivation::kGelu, LinearActivation::kGeluTanh, LinearActivation::kSilu}) {
    std::vector<float> out32(rows * inter, std::nanf(""));
    std::vector<uint16_t> out16(rows * inter, 0);
    GatedActivation(in.data(), rows, inter, act, out32.data(), false, 2);
    GatedActivation(in.data(), rows, inter, act, out16.data(), true, 2);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < inter; ++i) {
        const double x = in[r * 2 * inter + i], g = in[r * 2 * inter + inter + i];
        double y =
            act == LinearActivation::kSilu ? x / (1 + std::exp(-x))
            : act == LinearActivation::kGelu
                ? 0.5 * x * std::erfc(-x / std::sqrt(2.0))
                : 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        y *= g;
        const int64_t k = r * inter + i;
        EXPECT_NEAR(out32[k], y, 1e-6 * std::max(1.0, std::fabs(x * g)))
            << static_cast<int>(act) << " at " << k;
        EXPECT_NEAR(FromBf16(out16[k]), y, 4e-3 * std::max(1.0, std::fabs(y)))
            << static_cast<int>(act) << " bf16 at " << k;
      }
    }
  }
}

}  // namespace
}  // namespace infer::cpu
