// The CPU's SPLADE head in the encoder's reduced precisions: the decoder
// (hidden × vocab, most of the head's work) in BF16 or INT8 takes less than
// FP32's weight bytes, and the sparse vectors stay close to FP32's, over
// texts longer than one of the head's chunks; where the CPU's int8 kernels
// keep 7 bits of the weights, an INT8 encoder's decoder stays FP32. (The
// fixtures' hidden size is 32, which oneDNN's blocked VNNI layout for INT8
// pads to 64: their INT8 decoder takes 0.6 of FP32's bytes; a real head's
// takes a quarter plus its scales.)
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "models/precision.h"
#include "models/quantize.h"
#include "models/transformer/encoder_cpu.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;

double Cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  return aa == 0 && bb == 0 ? 1.0 : ab / std::sqrt(aa * bb);
}

void ExpectCloseToFp32(const std::string& fixture, Precision precision, double weight_share,
                       double min_cosine) {
  const std::string dir = testing::FixturePath(fixture);
  EncoderCpuOptions o;
  o.masked_lm_head = true;
  auto fp32 = TransformerEncoderCpu::Load(dir, o);
  o.precision = precision;
  auto reduced = TransformerEncoderCpu::Load(dir, o);
  ASSERT_THAT(fp32, IsOk());
  ASSERT_THAT(reduced, IsOk());
  const SpladeHeadCpu* a = dynamic_cast<const SpladeHeadCpu*>((*fp32)->splade());
  const SpladeHeadCpu* b = dynamic_cast<const SpladeHeadCpu*>((*reduced)->splade());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  if (precision == Precision::kInt8 && cpu::WeightLevels() < 127) {
    // 7-bit int8 weights here: the decoder stays FP32.
    EXPECT_EQ(b->decoder_precision(), Precision::kFp32);
    EXPECT_EQ(b->WeightBytes(), a->WeightBytes());
  } else {
    EXPECT_EQ(b->decoder_precision(), precision);
    EXPECT_LE(b->WeightBytes(), a->WeightBytes() * weight_share)
        << fixture << " " << PrecisionName(precision);
  }
  const TransformerSpec& c = (*fp32)->spec();
  // Four texts: a short one, two in between, one as long as the model
  // takes (past the head's 256-token chunk), random ids past the specials.
  const int64_t seq = std::min<int64_t>(c.MaxSequenceLength(), 300), batch = 4;
  std::mt19937 rng(5);
  std::vector<int64_t> ids(batch * seq), mask(batch * seq, 0);
  const int64_t lengths[batch] = {3, 40, 150, seq};
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t t = 0; t < seq; ++t) {
      ids[r * seq + t] = 5 + rng() % (c.vocab_size - 5);
      mask[r * seq + t] = t < lengths[r];
    }
  }
  for (bool sum : {false, true}) {
    SpladePooling pooling;
    pooling.sum = sum;
    auto want = (*fp32)->Sparse(ids, mask, batch, seq, pooling);
    auto got = (*reduced)->Sparse(ids, mask, batch, seq, pooling);
    ASSERT_THAT(want, IsOk());
    ASSERT_THAT(got, IsOk());
    const int64_t v = a->vocab();
    for (int64_t r = 0; r < batch; ++r) {
      EXPECT_GE(Cosine(want->data() + r * v, got->data() + r * v, v), min_cosine)
          << fixture << " " << PrecisionName(precision) << " text " << r << (sum ? " sum" : " max");
    }
  }
}

TEST(SpladeHeadTest, Int8ShrinksTheDecoderAndKeepsTheVectors) {
  ExpectCloseToFp32("sparse/bert-splade", Precision::kInt8, 0.7, 0.99);
  ExpectCloseToFp32("sparse/xlm-roberta-splade", Precision::kInt8, 0.7, 0.99);
}

TEST(SpladeHeadTest, Bf16HalvesTheDecoderAndKeepsTheVectors) {
  if (!CpuHasNativeBf16()) GTEST_SKIP() << "this CPU has no native BF16";
  ExpectCloseToFp32("sparse/bert-splade", Precision::kBf16, 0.6, 0.999);
  ExpectCloseToFp32("sparse/xlm-roberta-splade", Precision::kBf16, 0.6, 0.999);
}

}  // namespace
}  // namespace infer
