// INT8: the quantizers' codes, and the INT8 linear op against the exact
// integer arithmetic it stands for (no saturation, the zero points
// compensated, every piece size) and against the FP32 op within the bound
// the quantization steps allow.
#include "models/quantize.h"

#include <cmath>

#include "models/onednn_ops.h"
#include "tests/testing/random_data.h"
#include "tests/testing/status_matchers.h"

namespace infer::cpu {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::NormalFloats;

TEST(QuantizeWeightsTest, CodesSpanEachChannelWithinHalfAStep) {
  const int64_t out = 5, in = 33;
  std::vector<float> w = NormalFloats(out * in, 1, 0.3f);
  for (int64_t k = 0; k < in; ++k) w[2 * in + k] = 0.0f;  // a channel of zeros
  w[3 * in + 7] = 40.0f;                                  // an outlier owns its channel
  // 127: with VNNI; 63: without.
  for (const int levels : {127, 63}) {
    const QuantizedWeights q = QuantizeWeights(w.data(), out, in, levels);
    for (int64_t n = 0; n < out; ++n) {
      int top = 0, sum = 0;
      for (int64_t k = 0; k < in; ++k) {
        const int c = q.q[n * in + k];
        top = std::max(top, std::abs(c));
        sum += c;
        EXPECT_LE(std::fabs(c * q.scale[n] - w[n * in + k]), q.scale[n] * 0.5f + 1e-6f);
      }
      EXPECT_EQ(sum, q.sum[n]);
      EXPECT_EQ(top, n == 2 ? 0 : levels) << n;
    }
    EXPECT_EQ(q.scale[2], 1.0f);
    EXPECT_FLOAT_EQ(q.scale[3], 40.0f / static_cast<float>(levels));
  }
}

// The largest codes everywhere: every pair of products vpmaddubsw adds
// into int16 (CPUs without VNNI) at its most. With 8-bit weights there, the
// sums would saturate at 32767 per pair and come out about half.
TEST(Int8LinearTest, TheLargestCodesDoNotSaturate) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const int64_t in = 256, out = 2, rows = 3;
  std::vector<float> w(out * in, 1.0f);
  for (int64_t k = 0; k < in; k += 2) w[in + k] = -1.0f;  // channel 1: +1, -1, ...
  // Inputs of ones: codes 255, zero point 0.
  const std::vector<float> b(out, 0.0f), x(rows * in, 1.0f);
  LinearOptions o{.in = in, .out = out};
  o.int8 = true;
  auto op = OnednnLinear::Create(engine, o, w.data(), b.data());
  ASSERT_THAT(op, IsOk());
  std::vector<uint8_t> scratch((*op)->ScratchpadBytesFor(rows));
  std::vector<float> y(rows * out);
  ASSERT_THAT((*op)->Run(stream, x.data(), rows, y.data(), scratch.data()), IsOk());
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_NEAR(y[r * out], static_cast<float>(in), 1e-3) << "weight levels " << WeightLevels();
    EXPECT_NEAR(y[r * out + 1], 0.0f, 1e-3);
  }
}

TEST(QuantizeRowsTest, EachRowItsOwnRangeWithZeroExact) {
  const int64_t rows = 5, width = 70;
  std::vector<float> x = NormalFloats(rows * width, 2, 1.0f);
  for (int64_t k = 0; k < width; ++k) {
    x[1 * width + k] = 0.0f;                         // zeros
    x[2 * width + k] = std::fabs(x[2 * width + k]);  // all positive: zero point 0
    // Subnormal values: a range whose step would have no finite inverse is
    // quantized as a row of zeros.
    x[4 * width + k] *= 1e-40f;
  }
  x[3 * width] = 1000.0f;  // an outlier coarsens its own row only
  for (const int levels : {127, 255}) {
    std::vector<uint8_t> q(rows * width);
    std::vector<float> scale(rows);
    std::vector<int32_t> zero(rows);
    QuantizeRows(x.data(), rows, width, levels, q.data(), scale.data(), zero.data(), 2);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < width; ++k) {
        ASSERT_LE(q[r * width + k], levels);
        EXPECT_LE(std::fabs(scale[r] * (q[r * width + k] - zero[r]) - x[r * width + k]),
                  scale[r] * 0.5f * 1.0001f)
            << r << " " << k;
      }
    }
    EXPECT_EQ(scale[1], 1.0f);
    EXPECT_EQ(zero[1], 0);
    EXPECT_EQ(zero[2], 0);
    EXPECT_GT(scale[3], 1000.0f / levels);
    EXPECT_LT(scale[0], 10.0f / levels);
    EXPECT_EQ(scale[4], 1.0f);
    EXPECT_EQ(zero[4], 0);
    for (int64_t k = 0; k < width; ++k) EXPECT_EQ(q[4 * width + k], 0) << k;
  }
}

// y = act(x · Wᵀ + b) (+ y) as the INT8 op defines it, in exact integers and
// double: the codes from the quantizers, the int32 sums as int64.
std::vector<double> Reference(const std::vector<float>& x, int64_t rows, int64_t in,
                              const QuantizedWeights& w, const std::vector<float>& b, int64_t out,
                              LinearActivation act, const std::vector<float>& y0) {
  const int levels = kActivationLevels;
  std::vector<uint8_t> q(rows * in);
  std::vector<float> scale(rows);
  std::vector<int32_t> zero(rows);
  QuantizeRows(x.data(), rows, in, levels, q.data(), scale.data(), zero.data(), 1);
  std::vector<double> y(rows * out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t n = 0; n < out; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < in; ++k) {
        acc += (int64_t{q[r * in + k]} - zero[r]) * w.q[n * in + k];
      }
      double v = double{scale[r]} * w.scale[n] * static_cast<double>(acc) + b[n];
      switch (act) {
        case LinearActivation::kNone:
          break;
        case LinearActivation::kGelu:
          v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
          break;
        case LinearActivation::kGeluTanh:
          v = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
          break;
        case LinearActivation::kSilu:
          v = v / (1.0 + std::exp(-v));
          break;
      }
      y[r * out + n] = v + (y0.empty() ? 0.0 : y0[r * out + n]);
    }
  }
  return y;
}

TEST(Int8LinearTest, IsTheExactIntegerProductAcrossPieces) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  // in = 768: long enough that int16 pair sums would saturate if the
  // weights used 8 bits where the CPU multiplies with vpmaddubsw.
  const int64_t in = 768, out = 43;  // 43: a tail past whole vectors of 4, 8 and 16
  const std::vector<float> w = NormalFloats(out * in, 3, 0.05f), b = NormalFloats(out, 4, 0.5f);
  const QuantizedWeights qw = QuantizeWeights(w.data(), out, in, WeightLevels());
  // The activation runs in the dequantization pass, on whole vectors and on
  // the last out % 16 channels alike.
  for (const LinearActivation act : {LinearActivation::kNone, LinearActivation::kGelu,
                                     LinearActivation::kGeluTanh, LinearActivation::kSilu}) {
    for (const bool accumulate : {false, true}) {
      LinearOptions o{.in = in, .out = out};
      o.activation = act;
      o.accumulate = accumulate;
      o.int8 = true;
      auto op = OnednnLinear::Create(engine, o, w.data(), b.data());
      ASSERT_THAT(op, IsOk());
      for (const int64_t rows : {1, 15, 16, 17, 100, 1100}) {
        // Activations as a post-GELU layer sees them: mostly positive, a
        // long positive tail.
        std::vector<float> x = NormalFloats(rows * in, static_cast<uint32_t>(rows), 1.0f);
        for (float& v : x) v = v > 0 ? v * 3.0f : v * 0.1f;
        const std::vector<float> y0 =
            accumulate ? NormalFloats(rows * out, 9, 1.0f) : std::vector<float>{};
        std::vector<float> y = accumulate ? y0 : std::vector<float>(rows * out, 7.0f);
        // Exactly the bytes the op asks for, then a guard.
        const size_t need = (*op)->ScratchpadBytesFor(rows);
        std::vector<uint8_t> scratch(need + 64, 0xAB);
        ASSERT_THAT((*op)->Run(stream, x.data(), rows, y.data(), scratch.data()), IsOk());
        for (size_t i = need; i < scratch.size(); ++i) ASSERT_EQ(scratch[i], 0xAB) << rows;
        const std::vector<double> ref = Reference(x, rows, in, qw, b, out, act, y0);
        for (size_t i = 0; i < ref.size(); ++i) {
          // FP32 rounding of the scale products and of the sum's conversion.
          ASSERT_NEAR(y[i], ref[i], 2e-5 * (1.0 + std::fabs(ref[i])))
              << "rows " << rows << " activation " << static_cast<int>(act) << " accumulate "
              << accumulate << " at " << i;
        }
      }
    }
  }
}

TEST(Int8LinearTest, StaysWithinTheQuantizationBoundOfFp32) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const int64_t in = 384, out = 64, rows = 50;
  const std::vector<float> w = NormalFloats(out * in, 5, 0.05f), b = NormalFloats(out, 6, 0.5f);
  const std::vector<float> x = NormalFloats(rows * in, 7, 1.0f);
  LinearOptions o{.in = in, .out = out};
  auto fp32 = OnednnLinear::Create(engine, o, w.data(), b.data());
  o.int8 = true;
  auto int8 = OnednnLinear::Create(engine, o, w.data(), b.data());
  ASSERT_THAT(fp32, IsOk());
  ASSERT_THAT(int8, IsOk());
  std::vector<uint8_t> scratch(
      std::max((*fp32)->ScratchpadBytesFor(rows), (*int8)->ScratchpadBytesFor(rows)));
  std::vector<float> y32(rows * out), y8(rows * out);
  ASSERT_THAT((*fp32)->Run(stream, x.data(), rows, y32.data(), scratch.data()), IsOk());
  ASSERT_THAT((*int8)->Run(stream, x.data(), rows, y8.data(), scratch.data()), IsOk());
  const QuantizedWeights qw = QuantizeWeights(w.data(), out, in, WeightLevels());
  const int levels = kActivationLevels;
  double dot = 0, n32 = 0, n8 = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float lo = 0, hi = 0;
    for (int64_t k = 0; k < in; ++k) {
      lo = std::min(lo, x[r * in + k]);
      hi = std::max(hi, x[r * in + k]);
    }
    const double sx = (hi - lo) / levels;
    for (int64_t n = 0; n < out; ++n) {
      // |x·w − x̂·ŵ| ≤ Σ |w| sx/2 + |x| sw/2 + sx sw/4 for steps sx, sw.
      double bound = 0;
      for (int64_t k = 0; k < in; ++k) {
        bound += std::fabs(w[n * in + k]) * sx / 2 + std::fabs(x[r * in + k]) * qw.scale[n] / 2 +
                 sx * qw.scale[n] / 4;
      }
      const size_t i = r * out + n;
      EXPECT_LE(std::fabs(y8[i] - y32[i]), bound + 1e-4) << r << " " << n;
      dot += double{y8[i]} * y32[i];
      n32 += double{y32[i]} * y32[i];
      n8 += double{y8[i]} * y8[i];
    }
  }
  // Random errors, not the worst case: the results point the same way.
  EXPECT_GT(dot / std::sqrt(n32 * n8), 0.999);
}

TEST(Int8LinearTest, BatchInvariantPiecesDoNotDependOnTheirBatch) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const int64_t in = 64, out = 48, fixed = 16;
  const std::vector<float> w = NormalFloats(out * in, 8, 0.1f), b = NormalFloats(out, 9, 0.5f);
  LinearOptions o{.in = in, .out = out};
  o.int8 = true;
  o.fixed_rows = fixed;
  o.activation = LinearActivation::kGelu;
  auto op = OnednnLinear::Create(engine, o, w.data(), b.data());
  ASSERT_THAT(op, IsOk());
  EXPECT_EQ((*op)->ScratchpadBytesPerRow(), 0u);
  const int64_t rows = 4 * fixed;
  const std::vector<float> x = NormalFloats(rows * in, 10, 1.0f);
  std::vector<uint8_t> scratch((*op)->ScratchpadBytesFor(rows, 4));
  std::vector<float> all(rows * out);
  ASSERT_THAT((*op)->Run(stream, x.data(), rows, all.data(), scratch.data()), IsOk());
  for (int64_t piece = 0; piece < 4; ++piece) {
    std::vector<float> alone(fixed * out);
    ASSERT_THAT(
        (*op)->Run(stream, x.data() + piece * fixed * in, fixed, alone.data(), scratch.data()),
        IsOk());
    for (int64_t i = 0; i < fixed * out; ++i) {
      ASSERT_EQ(alone[i], all[piece * fixed * out + i]) << piece << " " << i;
    }
  }
}

TEST(Int8LinearTest, RefusesAnythingButFp32InAndOut) {
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const std::vector<float> w(16, 0.5f);
  LinearOptions o{.in = 4, .out = 4};
  o.int8 = true;
  o.input = ElementType::kBf16;
  EXPECT_EQ(OnednnLinear::Create(engine, o, w.data(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace infer::cpu
