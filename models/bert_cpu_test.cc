// The CPU encoder on the real all-MiniLM-L6-v2 checkpoint, against
// sentence-transformers' own embeddings of the same sentences (fixture made
// by tests/fixtures/README.md's command).
#include "models/bert_cpu.h"

#include <cmath>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "models/wordpiece.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

#ifdef INFER_MINILM_DIR
struct Fixture {
  std::vector<std::string> sentences;
  std::vector<std::vector<float>> embeddings;
};

Fixture ReadFixture() {
  Fixture f;
  std::ifstream in(std::string(INFER_SOURCE_DIR) + "/tests/fixtures/minilm_embeddings.tsv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    f.sentences.push_back(line.substr(0, tab));
    std::vector<float> e;
    for (absl::string_view v : absl::StrSplit(line.substr(tab + 1), ' ')) {
      float x = 0;
      EXPECT_TRUE(absl::SimpleAtof(v, &x));
      e.push_back(x);
    }
    f.embeddings.push_back(std::move(e));
  }
  return f;
}

double Cosine(const float* a, const float* b, int64_t n) {
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < n; ++i) {
    dot += double{a[i]} * b[i];
    na += double{a[i]} * a[i];
    nb += double{b[i]} * b[i];
  }
  return dot / std::sqrt(na * nb);
}

class BertCpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = BertEncoderCpu::Load(INFER_MINILM_DIR);
    ASSERT_THAT(m, IsOk());
    model_ = m->release();
    auto t = WordPieceTokenizer::FromVocabFile(std::string(INFER_MINILM_DIR) + "/vocab.txt", {});
    ASSERT_THAT(t, IsOk());
    tokenizer_ = t->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tokenizer_;
  }
  // Encodes `sentences` as one padded batch.
  std::vector<float> EncodeBatch(const std::vector<std::string>& sentences) {
    std::vector<std::vector<int64_t>> ids;
    int64_t seq = 0;
    for (const std::string& s : sentences) {
      ids.push_back(*tokenizer_->Encode(s));
      seq = std::max<int64_t>(seq, ids.back().size());
    }
    std::vector<int64_t> flat, mask;
    for (auto& row : ids) {
      const size_t n = row.size();
      row.resize(seq, tokenizer_->pad_id());
      flat.insert(flat.end(), row.begin(), row.end());
      for (int64_t s = 0; s < seq; ++s) mask.push_back(s < static_cast<int64_t>(n) ? 1 : 0);
    }
    auto out = model_->Encode(flat, mask, static_cast<int64_t>(sentences.size()), seq, true);
    EXPECT_THAT(out, IsOk());
    return out.ok() ? *out : std::vector<float>{};
  }
  static BertEncoderCpu* model_;
  static WordPieceTokenizer* tokenizer_;
};
BertEncoderCpu* BertCpuTest::model_ = nullptr;
WordPieceTokenizer* BertCpuTest::tokenizer_ = nullptr;

TEST_F(BertCpuTest, MatchesSentenceTransformers) {
  const Fixture f = ReadFixture();
  ASSERT_EQ(f.sentences.size(), 5u);
  const std::vector<float> got = EncodeBatch(f.sentences);
  ASSERT_EQ(got.size(), 5u * 384);
  for (size_t i = 0; i < f.sentences.size(); ++i) {
    const float* g = got.data() + i * 384;
    std::vector<float> want = f.embeddings[i];
    double norm = 0;
    for (float x : want) norm += double{x} * x;
    for (float& x : want) x /= static_cast<float>(std::sqrt(norm));
    EXPECT_GE(Cosine(g, want.data(), 384), 0.9999) << f.sentences[i];
    double max_diff = 0;
    for (int d = 0; d < 384; ++d) max_diff = std::max(max_diff, std::abs(double{g[d]} - want[d]));
    EXPECT_LT(max_diff, 1e-4) << f.sentences[i];
  }
}

TEST_F(BertCpuTest, ParaphrasesAreCloserThanUnrelatedSentences) {
  const std::vector<float> e =
      EncodeBatch({"A man is playing a guitar.", "Someone is strumming a six-string instrument.",
                   "The stock market fell sharply on Tuesday."});
  const double paraphrase = Cosine(e.data(), e.data() + 384, 384);
  const double unrelated = Cosine(e.data(), e.data() + 768, 384);
  EXPECT_GT(paraphrase, unrelated + 0.3) << paraphrase << " vs " << unrelated;
}

TEST_F(BertCpuTest, PaddingAndBatchMatesDoNotChangeAnEmbedding) {
  const std::vector<float> alone = EncodeBatch({"Hello, world!"});
  const std::vector<float> batched = EncodeBatch(
      {"The stock market fell sharply on Tuesday after a long rally.", "Hello, world!"});
  for (int d = 0; d < 384; ++d) EXPECT_NEAR(batched[384 + d], alone[d], 1e-5);
}

TEST_F(BertCpuTest, RejectsBadInput) {
  EXPECT_THAT(model_->Encode({101, 40000}, {1, 1}, 1, 2, true),
              StatusIs(absl::StatusCode::kInvalidArgument, "token id 40000 is outside [0, 30522)"));
  EXPECT_THAT(
      model_->Encode(std::vector<int64_t>(513, 1), std::vector<int64_t>(513, 1), 1, 513, true),
      StatusIs(absl::StatusCode::kInvalidArgument, "513 tokens; the model allows 512"));
}
#endif

TEST(BertCpuLoadTest, MissingCheckpointIsNamed) {
  EXPECT_THAT(BertEncoderCpu::Load("/nonexistent"),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/config.json"));
}

}  // namespace
}  // namespace infer
