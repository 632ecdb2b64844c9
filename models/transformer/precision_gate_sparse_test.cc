// The precision gate of SPLADE models: CompareSparse's figures on made-up
// sparse vectors, and the gate on the SparseEncoder fixture in INT8.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/precision.h"
#include "models/text/load_tokenizer.h"
#include "models/transformer/precision_gate.h"
#include "tests/testing/random_data.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::NormalFloats;
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;

// Sparse rows of `n` texts over `vocab` terms, `terms` each (those of the
// largest of `vocab` normal draws, with positive values), seeded.
SparseRows RandomSparseRows(int64_t n, int64_t vocab, int terms, uint32_t seed) {
  const std::vector<float> u = NormalFloats(n * vocab, seed);
  std::vector<float> dense(u.size(), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    const float* row = u.data() + i * vocab;
    std::partial_sort(order.begin(), order.begin() + terms, order.end(),
                      [&](int64_t x, int64_t y) { return row[x] > row[y]; });
    for (int k = 0; k < terms; ++k) dense[i * vocab + order[k]] = std::fabs(row[order[k]]) + 0.1f;
  }
  SparseRows rows;
  rows.Append(dense.data(), n, vocab);
  return rows;
}

TEST(CompareSparseTest, IdenticalPassesAndChangedTermsOrNanFail) {
  constexpr int64_t kN = 60, kVocab = 700;
  const SparseRows a = RandomSparseRows(kN, kVocab, 40, 7);
  for (int64_t i = 0; i < kN; ++i) ASSERT_FALSE(a.terms[i].empty()) << "row " << i;
  const GateFigures same = CompareSparse(a, a, kVocab, 10);
  EXPECT_TRUE(same.sparse);
  EXPECT_EQ(same.texts, kN);
  EXPECT_NEAR(*same.mean_cosine, 1.0, 1e-12);
  EXPECT_NEAR(*same.min_cosine, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(*same.neighbour_overlap, 1.0);
  EXPECT_EQ(GateFailure(same), "");
  // Text 17's terms moved by one: no term in common, cosine 0, named.
  SparseRows b = a;
  for (int32_t& t : b.terms[17]) t = (t + 1) % kVocab;
  std::sort(b.terms[17].begin(), b.terms[17].end());
  const GateFigures moved = CompareSparse(a, b, kVocab, 10);
  EXPECT_EQ(moved.lowest_text, 17);
  EXPECT_LT(*moved.min_cosine, 0.2);
  EXPECT_NE(GateFailure(moved).find("min cosine"), std::string::npos);
  // Two empty vectors agree; an empty one beside a non-empty one does not.
  SparseRows empty = a, one_empty = a;
  empty.terms[3].clear();
  empty.values[3].clear();
  one_empty.terms[3].clear();
  one_empty.values[3].clear();
  EXPECT_NEAR(*CompareSparse(empty, empty, kVocab, 10).min_cosine, 1.0, 1e-12);
  EXPECT_EQ(*CompareSparse(a, one_empty, kVocab, 10).min_cosine, 0.0);
  // A NaN fails every limit.
  SparseRows nan = a;
  nan.values[5][0] = std::nanf("");
  const GateFigures bad = CompareSparse(a, nan, kVocab, 10);
  EXPECT_EQ(*bad.mean_cosine, 0.0);
  EXPECT_EQ(*bad.neighbour_overlap, 0.0);
}

// Neighbours are ranked by dot product, SPLADE's retrieval score: rows
// scaled by different factors keep every cosine at 1 and cosine neighbours
// alike, but not the ranking by dot product.
TEST(CompareSparseTest, NeighboursAreRankedByDotProduct) {
  constexpr int64_t kN = 80, kVocab = 300;
  const SparseRows a = RandomSparseRows(kN, kVocab, 60, 11);
  SparseRows scaled = a;
  for (int64_t i = 0; i < kN; ++i) {
    for (float& v : scaled.values[i]) v *= static_cast<float>(1 + (i * 7919) % 13);
  }
  const GateFigures f = CompareSparse(a, scaled, kVocab, 10);
  EXPECT_NEAR(*f.min_cosine, 1.0, 1e-6);
  EXPECT_LT(*f.neighbour_overlap, 0.9);
  EXPECT_NE(DescribeGate(f).find("by dot product"), std::string::npos) << DescribeGate(f);
}

// A SPLADE model is judged by its sparse vectors: INT8 against FP32 on the
// SparseEncoder fixture; the same figures through the device interface
// (SparseEmbedder, as a GPU's FP8 SPLADE model is judged); FP32 against
// itself agrees exactly; and the same FP32 encoder with another SPLADE
// pooling, whose hidden states (what a gate on pooled states would judge)
// are the same, does not.
TEST(MeasureGateTest, SpladeIsJudgedByItsSparseVectors) {
  const std::string dir = testing::FixturePath("sparse/bert-splade");
  auto device = TestDevice::Create("cpu");
  ASSERT_THAT(device, IsOk());
  EncoderCpuOptions o;
  o.masked_lm_head = true;
  auto fp32 = TransformerEncoderCpu::Load(dir, o);
  o.precision = Precision::kInt8;
  auto int8 = TransformerEncoderCpu::Load(dir, o, (*device)->allocator.get());
  auto tokenizer = text::LoadFolderTokenizer(dir);
  ASSERT_THAT(fp32, IsOk());
  ASSERT_THAT(int8, IsOk());
  ASSERT_THAT(tokenizer, IsOk());
  ASSERT_NE((*fp32)->splade(), nullptr);
  const Tokenizer& tok = *tokenizer->tokenizer;
  const int64_t longest = (*fp32)->spec().MaxSequenceLength();
  const SpladePooling max_relu;  // the fixture's 1_SpladePooling
  auto direct = MeasureSparseGate(**fp32, **int8, tok, longest, max_relu);
  auto via_device = MeasureSparseGate(
      **fp32, SparseEmbedder(**int8, (*device)->context(), max_relu), tok, longest, max_relu);
  ASSERT_THAT(direct, IsOk());
  ASSERT_THAT(via_device, IsOk());
  EXPECT_TRUE(direct->sparse);
  EXPECT_EQ(direct->texts, 1050);
  EXPECT_LT(*direct->min_cosine, 0.99999) << "INT8 that is FP32 under another name";
  EXPECT_GT(*direct->mean_cosine, 0.5);
  EXPECT_EQ(*via_device->mean_cosine, *direct->mean_cosine);
  EXPECT_EQ(*via_device->min_cosine, *direct->min_cosine);
  EXPECT_EQ(*via_device->neighbour_overlap, *direct->neighbour_overlap);
  std::printf("bert-splade fixture int8 against fp32: %s\n", DescribeGate(*direct).c_str());
  auto self = MeasureSparseGate(**fp32, **fp32, tok, longest, max_relu);
  ASSERT_THAT(self, IsOk());
  EXPECT_EQ(GateFailure(*self), "");
  EXPECT_NEAR(*self->min_cosine, 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(*self->neighbour_overlap, 1.0);
  SpladePooling sum_log1p_twice;
  sum_log1p_twice.sum = sum_log1p_twice.log1p_twice = true;
  auto other_pooling = MeasureSparseGate(
      **fp32,
      [&](const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
          const std::vector<int64_t>& types, int64_t batch,
          int64_t seq) { return (*fp32)->Sparse(ids, mask, batch, seq, sum_log1p_twice, types); },
      tok, longest, max_relu);
  ASSERT_THAT(other_pooling, IsOk());
  EXPECT_LT(*other_pooling->min_cosine, 0.99);
  // Without a masked-LM head there is nothing to judge; a candidate giving
  // the wrong number of values is an error, not a figure.
  auto plain = TransformerEncoderCpu::Load(dir);
  ASSERT_THAT(plain, IsOk());
  EXPECT_THAT(MeasureSparseGate(**plain, **int8, tok, longest, max_relu),
              StatusIs(absl::StatusCode::kFailedPrecondition, "masked-LM head"));
  const GateEmbedder short_rows = [](const std::vector<int64_t>&, const std::vector<int64_t>&,
                                     const std::vector<int64_t>&, int64_t batch,
                                     int64_t) -> absl::StatusOr<std::vector<float>> {
    return std::vector<float>(batch);
  };
  EXPECT_THAT(MeasureSparseGate(**fp32, short_rows, tok, longest, max_relu),
              StatusIs(absl::StatusCode::kInternal, "sparse vectors"));
}

}  // namespace
}  // namespace infer
