// The CPU encoder on the real all-MiniLM-L6-v2 checkpoint, in FP32 and BF16,
// against sentence-transformers' own embeddings of the same sentences
// (fixture made by tests/fixtures/README.md's command), and against a plain
// double-precision forward pass on a tiny checkpoint, with masks that leave
// holes and left padding (what packing must get right).
#include "models/transformer/encoder_cpu.h"

#include <cmath>
#include <cstdlib>

#include "models/bert/bert_gen.h"
#include "models/precision.h"
#include "models/text/load_tokenizer.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace infer {
namespace {

using ::infer::testing::Cosine;
using ::infer::testing::EmbeddingFixture;
using ::infer::testing::IsOk;
using ::infer::testing::kNoMiniLm;
using ::infer::testing::MiniLmDir;
using ::infer::testing::ReadEmbeddingFixture;
using ::infer::testing::StatusIs;

class BertCpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (MiniLmDir().empty()) return;
    auto m = TransformerEncoderCpu::Load(MiniLmDir());
    ASSERT_THAT(m, IsOk());
    model_ = m->release();
    auto t = text::LoadFolderTokenizer(MiniLmDir());
    ASSERT_THAT(t, IsOk());
    tokenizer_ = t->tokenizer.release();
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << kNoMiniLm;
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tokenizer_;
  }
  // Encodes `sentences` as one padded batch.
  std::vector<float> EncodeBatch(const std::vector<std::string>& sentences,
                                 const TransformerEncoderCpu* model = model_) {
    std::vector<std::vector<int64_t>> ids;
    int64_t seq = 0;
    for (const std::string& s : sentences) {
      // Cut at 256 tokens, as sentence-transformers (the fixture) does.
      const std::vector<int32_t> row = *tokenizer_->EncodeIds(s, text::Truncation{256});
      ids.emplace_back(row.begin(), row.end());
      seq = std::max<int64_t>(seq, ids.back().size());
    }
    std::vector<int64_t> flat, mask;
    for (auto& row : ids) {
      const size_t n = row.size();
      row.resize(seq, tokenizer_->pad_id());
      flat.insert(flat.end(), row.begin(), row.end());
      for (int64_t s = 0; s < seq; ++s) mask.push_back(s < static_cast<int64_t>(n) ? 1 : 0);
    }
    auto out = model->Encode(flat, mask, static_cast<int64_t>(sentences.size()), seq, true);
    EXPECT_THAT(out, IsOk());
    return out.ok() ? *out : std::vector<float>{};
  }
  static TransformerEncoderCpu* model_;
  static Tokenizer* tokenizer_;
};
TransformerEncoderCpu* BertCpuTest::model_ = nullptr;
Tokenizer* BertCpuTest::tokenizer_ = nullptr;

TEST_F(BertCpuTest, MatchesSentenceTransformers) {
  const EmbeddingFixture f = ReadEmbeddingFixture();
  ASSERT_EQ(f.sentences.size(), 6u);
  const std::vector<float> got = EncodeBatch(f.sentences);
  ASSERT_EQ(got.size(), 6u * 384);
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

// BF16 (BF16 GEMM inputs and weights, FP32 accumulation and residual
// stream): cosine >= 0.999 against sentence-transformers' FP32 vectors, with
// paraphrases still far closer than unrelated sentences.
TEST_F(BertCpuTest, Bf16MatchesSentenceTransformers) {
  EncoderCpuOptions o;
  o.precision = Precision::kBf16;
  auto bf16 = TransformerEncoderCpu::Load(MiniLmDir(), o);
  if (!bf16.ok() && bf16.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "this CPU has no BF16 matmul: " << bf16.status();
  }
  ASSERT_THAT(bf16, IsOk());
  EXPECT_EQ((*bf16)->precision(), Precision::kBf16);
  const EmbeddingFixture f = ReadEmbeddingFixture();
  const std::vector<float> got = EncodeBatch(f.sentences, bf16->get());
  ASSERT_EQ(got.size(), f.sentences.size() * 384);
  // It is not FP32 under another name: BF16 rounding shows.
  const std::vector<float> fp32 = EncodeBatch(f.sentences);
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double{got[i]} - fp32[i]));
  }
  EXPECT_GT(max_diff, 1e-4);
  for (size_t i = 0; i < f.sentences.size(); ++i) {
    EXPECT_GE(Cosine(got.data() + i * 384, f.embeddings[i].data(), 384), 0.999) << f.sentences[i];
  }
  const std::vector<float> e =
      EncodeBatch({"A man is playing a guitar.", "Someone is strumming a six-string instrument.",
                   "The stock market fell sharply on Tuesday."},
                  bf16->get());
  EXPECT_GT(Cosine(e.data(), e.data() + 384, 384), Cosine(e.data(), e.data() + 768, 384) + 0.3);
}

// INT8 (s8 weights per channel, u8 activations per token): within the
// reduced-precision gate's floor (cosine >= 0.97 to FP32, 0.99 on average)
// against sentence-transformers' FP32 vectors, paraphrases still far closer
// than unrelated sentences, and the linear layers' weights a quarter of
// their FP32 bytes.
TEST_F(BertCpuTest, Int8StaysCloseToSentenceTransformers) {
  EncoderCpuOptions o;
  o.precision = Precision::kInt8;
  auto int8 = TransformerEncoderCpu::Load(MiniLmDir(), o);
  ASSERT_THAT(int8, IsOk());
  EXPECT_EQ((*int8)->precision(), Precision::kInt8);
  EXPECT_NE((*int8)->Implementation().find("int8"), std::string::npos);
  const EmbeddingFixture f = ReadEmbeddingFixture();
  const std::vector<float> got = EncodeBatch(f.sentences, int8->get());
  ASSERT_EQ(got.size(), f.sentences.size() * 384);
  const std::vector<float> fp32 = EncodeBatch(f.sentences);
  double max_diff = 0, mean = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double{got[i]} - fp32[i]));
  }
  EXPECT_GT(max_diff, 1e-3);  // not FP32 under another name
  for (size_t i = 0; i < f.sentences.size(); ++i) {
    const double c = Cosine(got.data() + i * 384, f.embeddings[i].data(), 384);
    EXPECT_GE(c, 0.97) << f.sentences[i];
    mean += c / static_cast<double>(f.sentences.size());
  }
  EXPECT_GE(mean, 0.99);
  const std::vector<float> e =
      EncodeBatch({"A man is playing a guitar.", "Someone is strumming a six-string instrument.",
                   "The stock market fell sharply on Tuesday."},
                  int8->get());
  EXPECT_GT(Cosine(e.data(), e.data() + 384, 384), Cosine(e.data(), e.data() + 768, 384) + 0.3);
  // MiniLM-L6: 6 layers of 4 × 384² + 2 × 384 × 1536 weights; the
  // embedding tables (about 12 MB) stay FP32.
  const int64_t linear = 6 * (4 * 384 * 384 + 2 * 384 * 1536);
  EXPECT_LE((*int8)->WeightBytes(), model_->WeightBytes() - linear * 3 + linear / 10);
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

// The encoder against a naive forward pass (plain loops, double
// accumulation, written from the formulas in models/transformer/encoder.h) on a tiny
// synthetic checkpoint, with ragged padding and without normalisation.
std::vector<double> NaiveForward(const TransformerWeights& w, const std::vector<int64_t>& ids,
                                 const std::vector<int64_t>& mask, int64_t batch, int64_t seq,
                                 bool cls) {
  const TransformerSpec& c = w.spec;
  const int64_t h = c.hidden_size, heads = c.num_heads, dh = h / heads;
  using Rows = std::vector<std::vector<double>>;
  auto layer_norm = [&](std::vector<double>& v, const TransformerWeights::Norm& n) {
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= h;
    for (double x : v) var += (x - mean) * (x - mean);
    var /= h;
    for (int64_t i = 0; i < h; ++i) {
      v[i] = (v[i] - mean) / std::sqrt(var + c.norm_eps) * n.gamma[i] + n.beta[i];
    }
  };
  auto linear = [](const std::vector<double>& x, const TransformerWeights::Linear& l) {
    std::vector<double> y(l.out);
    for (int64_t o = 0; o < l.out; ++o) {
      y[o] = l.b[o];
      for (int64_t i = 0; i < l.in; ++i) y[o] += double{l.w[o * l.in + i]} * x[i];
    }
    return y;
  };
  std::vector<double> out(batch * h, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    Rows x(seq, std::vector<double>(h));
    for (int64_t s = 0; s < seq; ++s) {
      for (int64_t i = 0; i < h; ++i) {
        x[s][i] =
            double{w.word[ids[b * seq + s] * h + i]} + w.position[s * h + i] + w.token_type[i];
      }
      layer_norm(x[s], w.embed_norm);
    }
    for (const TransformerWeights::Layer& l : w.layers) {
      Rows q(seq), k(seq), v(seq), ctx(seq, std::vector<double>(h, 0.0));
      for (int64_t s = 0; s < seq; ++s) {
        const std::vector<double> qkv = linear(x[s], l.qkv);
        q[s].assign(qkv.begin(), qkv.begin() + h);
        k[s].assign(qkv.begin() + h, qkv.begin() + 2 * h);
        v[s].assign(qkv.begin() + 2 * h, qkv.end());
      }
      for (int64_t hd = 0; hd < heads; ++hd) {
        for (int64_t s = 0; s < seq; ++s) {
          std::vector<double> p(seq, 0.0);
          double mx = -1e300, sum = 0;
          for (int64_t t = 0; t < seq; ++t) {
            if (mask[b * seq + t] == 0) continue;
            for (int64_t d = 0; d < dh; ++d) p[t] += q[s][hd * dh + d] * k[t][hd * dh + d];
            p[t] /= std::sqrt(double(dh));
            mx = std::max(mx, p[t]);
          }
          for (int64_t t = 0; t < seq; ++t) {
            p[t] = mask[b * seq + t] == 0 ? 0.0 : std::exp(p[t] - mx);
            sum += p[t];
          }
          for (int64_t t = 0; t < seq; ++t) {
            for (int64_t d = 0; d < dh; ++d) ctx[s][hd * dh + d] += p[t] / sum * v[t][hd * dh + d];
          }
        }
      }
      for (int64_t s = 0; s < seq; ++s) {
        std::vector<double> a = linear(ctx[s], l.attn_out);
        for (int64_t i = 0; i < h; ++i) x[s][i] += a[i];
        layer_norm(x[s], l.attn_norm);
        std::vector<double> f = linear(x[s], l.ffn_in);
        for (double& e : f) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
        std::vector<double> y = linear(f, l.ffn_out);
        for (int64_t i = 0; i < h; ++i) x[s][i] += y[i];
        layer_norm(x[s], l.ffn_norm);
      }
    }
    if (cls) {
      for (int64_t i = 0; i < h; ++i) out[b * h + i] = x[0][i];
      continue;
    }
    int64_t count = 0;
    for (int64_t s = 0; s < seq; ++s) {
      if (mask[b * seq + s] == 0) continue;
      ++count;
      for (int64_t i = 0; i < h; ++i) out[b * h + i] += x[s][i];
    }
    for (int64_t i = 0; i < h; ++i) out[b * h + i] /= std::max<int64_t>(count, 1);
  }
  return out;
}

// Packing keeps each token's position: a mask with holes or left padding
// computes what the padded forward pass computes for the real tokens.
TEST(BertCpuNaiveTest, MasksWithHolesAndLeftPaddingMatchThePaddedForwardPass) {
  const ::infer::testing::TempDir tmp("bert_cpu_holes");
  const std::string dir = tmp.path().string();
  BertGenOptions o;
  o.config = *BertPreset("tiny");
  o.seed = 43;
  ASSERT_THAT(GenerateBertCheckpoint(dir, o), IsOk());
  auto weights = LoadTransformerWeights(dir);
  ASSERT_THAT(weights, IsOk());
  auto model = TransformerEncoderCpu::Load(dir);
  ASSERT_THAT(model, IsOk());
  const int64_t batch = 4, seq = 8, h = o.config.hidden_size;
  const std::vector<int64_t> mask = {
      1, 1, 0, 1, 0, 1, 1, 0,  // holes
      0, 0, 0, 1, 1, 1, 1, 1,  // left padding
      1, 0, 0, 0, 0, 0, 0, 1,  // first and last
      1, 1, 1, 1, 1, 1, 1, 1,  // full
  };
  std::vector<int64_t> ids(batch * seq);
  for (int64_t i = 0; i < batch * seq; ++i) ids[i] = (11 + 17 * i) % o.config.vocab_size;
  auto got = (*model)->Encode(ids, mask, batch, seq, /*normalize=*/false);
  ASSERT_THAT(got, IsOk());
  const std::vector<double> want = NaiveForward(*weights, ids, mask, batch, seq, /*cls=*/false);
  double scale = 0;
  for (double x : want) scale = std::max(scale, std::abs(x));
  for (int64_t i = 0; i < batch * h; ++i) EXPECT_NEAR((*got)[i], want[i], 1e-4 * scale) << i;
  // A row with no real token gets a zero vector.
  auto empty = (*model)->Encode(std::vector<int64_t>(seq, 5), std::vector<int64_t>(seq, 0), 1, seq,
                                /*normalize=*/true);
  ASSERT_THAT(empty, IsOk());
  for (float x : *empty) EXPECT_EQ(x, 0.0f);
}

TEST(BertCpuNaiveTest, MatchesPlainLoopsOnATinyModel) {
  const ::infer::testing::TempDir tmp("bert_cpu_tiny");
  const std::string dir = tmp.path().string();
  BertGenOptions o;
  o.config = *BertPreset("tiny");
  o.seed = 42;
  ASSERT_THAT(GenerateBertCheckpoint(dir, o), IsOk());
  auto weights = LoadTransformerWeights(dir);
  ASSERT_THAT(weights, IsOk());
  auto model = TransformerEncoderCpu::Load(dir);
  ASSERT_THAT(model, IsOk());
  const int64_t batch = 3, seq = 9, h = o.config.hidden_size;
  std::vector<int64_t> ids(batch * seq), mask(batch * seq);
  const int64_t lengths[] = {9, 4, 1};
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      ids[b * seq + s] = s < lengths[b] ? (7 + 31 * b + 13 * s) % o.config.vocab_size : 0;
      mask[b * seq + s] = s < lengths[b] ? 1 : 0;
    }
  }
  for (const bool cls : {false, true}) {
    auto got = (*model)->Encode(ids, mask, batch, seq, /*normalize=*/false,
                                cls ? Pooling::kCls : Pooling::kMean);
    ASSERT_THAT(got, IsOk());
    const std::vector<double> want = NaiveForward(*weights, ids, mask, batch, seq, cls);
    ASSERT_EQ(got->size(), want.size());
    double scale = 0;
    for (double x : want) scale = std::max(scale, std::abs(x));
    ASSERT_GT(scale, 0.01);  // a live signal, not zeros
    for (int64_t i = 0; i < batch * h; ++i) {
      EXPECT_NEAR((*got)[i], want[i], 1e-4 * scale) << i << (cls ? " CLS" : " mean");
    }
  }
}

// Under ONEDNN_MAX_CPU_ISA (as ctest runs this binary for AVX2 and SSE4.1)
// the attention kernel is held to the same instruction set as oneDNN, so the
// runs above checked the code a CPU without AVX-512 (or AVX2) executes.
TEST(BertCpuLoadTest, TheInstructionSetCapReachesTheAttentionKernel) {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const cpu::SimdLevel level = cpu::DetectSimdLevel();
  if (cap != nullptr && std::string(cap) == "AVX2") EXPECT_NE(level, cpu::SimdLevel::kAvx512);
  if (cap != nullptr && std::string(cap) == "SSE41") EXPECT_EQ(level, cpu::SimdLevel::kBaseline);
  if (cap == nullptr) {
    __builtin_cpu_init();
    EXPECT_EQ(level == cpu::SimdLevel::kAvx512, __builtin_cpu_supports("avx512bw") != 0);
  }
  if (CpuHasNativeBf16()) EXPECT_EQ(level, cpu::SimdLevel::kAvx512);
}

TEST(BertCpuLoadTest, MissingCheckpointIsNamed) {
  EXPECT_THAT(TransformerEncoderCpu::Load("/nonexistent"),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/config.json"));
}

}  // namespace
}  // namespace infer
