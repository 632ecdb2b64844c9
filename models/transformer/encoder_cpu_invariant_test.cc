// Batch-invariant mode of the CPU encoder (EncoderCpuOptions::batch_invariant)
// on the real all-MiniLM-L6-v2: a sentence's embedding is the same to the
// bit alone, with batch-mates before and after it, at offsets that straddle
// the fixed pieces, and in batches of over a thousand tokens; in FP32 and,
// where the CPU has it, BF16. CTest runs it under every instruction set
// oneDNN offers here (ONEDNN_MAX_CPU_ISA), since which kernels oneDNN picks
// is what decides invariance.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "models/precision.h"
#include "models/text/load_tokenizer.h"
#include "models/transformer/encoder_cpu.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::kNoMiniLm;
using ::infer::testing::MiniLmDir;

class BertCpuInvariantTest : public ::testing::TestWithParam<Precision> {
 protected:
  void SetUp() override {
    if (MiniLmDir().empty()) GTEST_SKIP() << kNoMiniLm;
    EncoderCpuOptions o;
    o.precision = GetParam();
    o.batch_invariant = true;
    auto m = TransformerEncoderCpu::Load(MiniLmDir(), o);
    if (!m.ok() && m.status().code() == absl::StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << m.status();
    }
    ASSERT_THAT(m, IsOk());
    invariant_ = *std::move(m);
    o.batch_invariant = false;
    auto d = TransformerEncoderCpu::Load(MiniLmDir(), o);
    ASSERT_THAT(d, IsOk());
    default_ = *std::move(d);
    auto t = text::LoadFolderTokenizer(MiniLmDir());
    ASSERT_THAT(t, IsOk());
    tokenizer_ = std::move(t->tokenizer);
  }

  // The embeddings of `sentences` encoded as one batch.
  std::vector<std::vector<float>> Encode(const TransformerEncoderCpu& model,
                                         const std::vector<std::string>& sentences) {
    std::vector<std::vector<int64_t>> ids;
    int64_t seq = 0;
    for (const std::string& s : sentences) {
      const std::vector<int32_t> row = *tokenizer_->EncodeIds(s, std::nullopt);
      ids.emplace_back(row.begin(), row.end());
      seq = std::max<int64_t>(seq, static_cast<int64_t>(ids.back().size()));
    }
    std::vector<int64_t> flat, mask;
    for (auto& row : ids) {
      const int64_t n = static_cast<int64_t>(row.size());
      row.resize(seq, tokenizer_->pad_id());
      flat.insert(flat.end(), row.begin(), row.end());
      for (int64_t s = 0; s < seq; ++s) mask.push_back(s < n ? 1 : 0);
    }
    auto out = model.Encode(flat, mask, static_cast<int64_t>(sentences.size()), seq, true);
    EXPECT_THAT(out, IsOk());
    std::vector<std::vector<float>> rows;
    for (size_t i = 0; out.ok() && i < sentences.size(); ++i) {
      rows.emplace_back(out->begin() + i * 384, out->begin() + (i + 1) * 384);
    }
    return rows;
  }

  std::unique_ptr<TransformerEncoderCpu> invariant_, default_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

// Sentences of 3 to 60 words, from a fixed seed.
std::vector<std::string> Mates(int n, uint32_t seed) {
  static const char* const kWords[] = {"the", "market", "fell",  "sharply", "on",      "tuesday",
                                       "a",   "man",    "plays", "guitar",  "quietly", "while",
                                       "it",  "rains",  "over",  "paris",   "again",   "today"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string s;
    for (int w = 3 + static_cast<int>(rng() % 58); w > 0; --w) {
      s += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
      s += w > 1 ? " " : ".";
    }
    out.push_back(s);
  }
  return out;
}

TEST_P(BertCpuInvariantTest, ASentenceHasTheSameBitsInEveryBatch) {
  const std::string target = "A man is playing a guitar on a quiet street in Paris.";
  const std::vector<float> alone = Encode(*invariant_, {target})[0];
  ASSERT_EQ(alone.size(), 384u);
  int batches = 0;
  for (int mates : {1, 2, 3, 7, 30, 80}) {  // 80 mates: over 1024 tokens
    const std::vector<std::string> others = Mates(mates, 17 + mates);
    for (int at : {0, mates / 2, mates}) {  // first, in the middle, last
      std::vector<std::string> batch = others;
      batch.insert(batch.begin() + at, target);
      const std::vector<std::vector<float>> got = Encode(*invariant_, batch);
      ASSERT_EQ(got.size(), batch.size());
      EXPECT_EQ(std::memcmp(got[at].data(), alone.data(), 384 * sizeof(float)), 0)
          << mates << " batch-mates, at position " << at;
      ++batches;
    }
  }
  EXPECT_EQ(batches, 18);
}

// The mode changes which kernels run, not what is computed: its embeddings
// agree with the default mode's to within the precision's rounding.
TEST_P(BertCpuInvariantTest, AgreesWithTheDefaultMode) {
  const std::vector<std::string> batch = Mates(12, 5);
  const auto a = Encode(*invariant_, batch);
  const auto b = Encode(*default_, batch);
  ASSERT_EQ(a.size(), b.size());
  // FP32: different summation orders of the same FP32 sums (6 layers of
  // dot products of up to 1536 terms) move a unit vector's components by
  // ~1e-6; BF16: each matmul input is rounded to 8 bits of mantissa either
  // way, but the rounding of the FP32 activations before it differs.
  const double tol = GetParam() == Precision::kFp32 ? 1e-5 : 2e-2;
  for (size_t i = 0; i < a.size(); ++i) {
    for (int d = 0; d < 384; ++d) EXPECT_NEAR(a[i][d], b[i][d], tol) << i << "," << d;
  }
  EXPECT_NE(invariant_->Implementation().find("batch-invariant"), std::string::npos);
}

TEST_P(BertCpuInvariantTest, PaddingRowsAreBudgetedByPeakBytes) {
  // The padded rows are computed, so they are counted: a batch of one token
  // costs what a batch of one whole piece costs, and one token more than a
  // piece costs a second piece.
  const int64_t piece = TransformerEncoderCpu::kInvariantRows;
  EXPECT_EQ(invariant_->PeakBytes({1, 1, 1}), invariant_->PeakBytes({1, piece, 1}));
  EXPECT_LT(invariant_->PeakBytes({1, piece, 1}), invariant_->PeakBytes({1, piece + 1, 1}));
}

INSTANTIATE_TEST_SUITE_P(Precisions, BertCpuInvariantTest,
                         ::testing::Values(Precision::kFp32, Precision::kBf16),
                         [](const ::testing::TestParamInfo<Precision>& p) {
                           return std::string(PrecisionName(p.param));
                         });

}  // namespace
}  // namespace infer
