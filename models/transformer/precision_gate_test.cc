// The reduced-precision quality gate: its figures on made-up embeddings and
// scores, its sentences, and the gate itself on the real all-MiniLM-L6-v2
// in INT8 and BF16, and on the reranker fixture.
#include "models/transformer/precision_gate.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/precision.h"
#include "models/text/load_tokenizer.h"
#include "models/transformer/cpu_kernels.h"
#include "models/transformer/encode_on_device.h"
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

TEST(GateSentencesTest, AThousandSentencesInGroupsOfTenLanguages) {
  const std::vector<std::string>& s = GateSentences();
  ASSERT_EQ(s.size(), 1000u);
  for (const std::string& line : s) {
    EXPECT_FALSE(line.empty());
    EXPECT_EQ(line.find('\t'), std::string::npos) << line;
  }
  // Line 8 of each group is Russian (Cyrillic, two bytes a letter in
  // UTF-8), line 9 Chinese (three bytes a character).
  EXPECT_EQ(static_cast<unsigned char>(s[7][0]) & 0xE0, 0xC0) << s[7];
  EXPECT_EQ(static_cast<unsigned char>(s[8][0]) & 0xF0, 0xE0) << s[8];
}

// The passages: ten sentences of one language each, long enough for what
// only long sequences run (BF16 attention products) with a real tokenizer.
TEST(GateSentencesTest, FiftyPassagesOfOneLanguageEach) {
  const std::vector<std::string>& s = GateSentences();
  const std::vector<std::string>& p = GatePassages();
  ASSERT_EQ(p.size(), 50u);
  // Block 1, language 8 (Chinese): sentence groups 10 to 19.
  const std::string& chinese = p[1 * kGateLanguages + 8];
  EXPECT_EQ(chinese.find(s[10 * kGateLanguages + 8]), 0u) << chinese;
  EXPECT_NE(chinese.find(s[19 * kGateLanguages + 8]), std::string::npos) << chinese;
  EXPECT_EQ(chinese.find(s[10 * kGateLanguages + 7]), std::string::npos) << "Russian mixed in";
  if (testing::MiniLmDir().empty()) GTEST_SKIP() << testing::kNoMiniLm;
  auto tokenizer = text::LoadFolderTokenizer(testing::MiniLmDir());
  ASSERT_THAT(tokenizer, IsOk());
  int long_enough = 0;
  for (const std::string& passage : p) {
    auto ids = tokenizer->tokenizer->EncodeIds(passage, text::Truncation{256});
    ASSERT_THAT(ids, IsOk());
    long_enough += static_cast<int64_t>(ids->size()) >= cpu::kBf16ProductsMinTokens;
  }
  EXPECT_GE(long_enough, 45);
}

TEST(GateSentencesTest, TextsAreNamedByKindNumberAndLanguage) {
  EXPECT_EQ(GateTextName(0), "sentence 1, English");
  EXPECT_EQ(GateTextName(17), "sentence 18, Russian");
  EXPECT_EQ(GateTextName(999), "sentence 1000, Japanese");
  EXPECT_EQ(GateTextName(1000), "passage 1, English");
  EXPECT_EQ(GateTextName(1018), "passage 19, Chinese");
  EXPECT_EQ(GateTextName(1049), "passage 50, Japanese");
}

TEST(SpearmanTest, RanksNotValues) {
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {10, 20, 30, 1000}), 1.0);
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Ties take their average rank: ranks (1.5, 1.5, 3) against (1, 2, 3).
  EXPECT_NEAR(Spearman({5, 5, 7}, {1, 2, 3}), 0.8660254, 1e-6);
  EXPECT_DOUBLE_EQ(Spearman({1}, {2}), 1.0);
  // What cannot be ranked fails.
  EXPECT_DOUBLE_EQ(Spearman({1, 2}, {1, 2, 3}), 0.0);
  EXPECT_DOUBLE_EQ(Spearman({1, 2, 3}, {1, std::nanf(""), 3}), 0.0);
}

TEST(CompareEmbeddingsTest, IdenticalPassesAndNoiseOrShufflingFails) {
  const int64_t n = 200, width = 32;
  // Clusters of 10, as translations make: a centre per group plus a little.
  const std::vector<float> centres = NormalFloats(n / 10 * width, 1);
  std::vector<float> e = NormalFloats(n * width, 2, 0.3f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < width; ++d) e[i * width + d] += centres[(i / 10) * width + d];
  }
  const GateFigures same = CompareEmbeddings(e, e, n, width, 10);
  EXPECT_NEAR(*same.mean_cosine, 1.0, 1e-6);
  EXPECT_NEAR(*same.min_cosine, 1.0, 1e-6);
  EXPECT_DOUBLE_EQ(*same.neighbour_overlap, 1.0);
  EXPECT_EQ(GateFailure(same), "");

  // Small noise: the cosines stay high and the clusters keep their members.
  std::vector<float> near = e;
  const std::vector<float> noise = NormalFloats(n * width, 3, 0.01f);
  for (size_t i = 0; i < near.size(); ++i) near[i] += noise[i];
  const GateFigures small = CompareEmbeddings(e, near, n, width, 10);
  EXPECT_GT(*small.mean_cosine, 0.999);
  EXPECT_GT(*small.neighbour_overlap, 0.8);

  // One row far off: it is the lowest, and named.
  std::vector<float> one_off = near;
  for (int64_t d = 0; d < width; ++d) one_off[137 * width + d] += d % 2 == 0 ? 1.0f : -1.0f;
  const GateFigures off = CompareEmbeddings(e, one_off, n, width, 10);
  EXPECT_EQ(off.lowest_text, 137);
  EXPECT_LT(*off.min_cosine, *small.min_cosine);
  EXPECT_NE(DescribeGate(off).find(", min " + absl::StrFormat("%.4f", *off.min_cosine) +
                                   " (sentence 138, Russian);"),
            std::string::npos)
      << DescribeGate(off);

  // Each row swapped with another group's: the neighbours are others.
  std::vector<float> shuffled = e;
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(e.begin() + ((i + 10) % n) * width, width, shuffled.begin() + i * width);
  }
  const GateFigures bad = CompareEmbeddings(e, shuffled, n, width, 10);
  EXPECT_LT(*bad.mean_cosine, 0.9);
  const std::string failure = GateFailure(bad);
  EXPECT_NE(failure.find("mean cosine"), std::string::npos) << failure;
  EXPECT_NE(failure.find("min cosine"), std::string::npos) << failure;
}

TEST(GateFailureTest, NamesEachMissedLimit) {
  GateFigures f;
  f.texts = 1000;
  f.mean_cosine = 0.995;
  f.min_cosine = 0.96;
  f.neighbour_overlap = 0.85;
  EXPECT_EQ(GateFailure(f), "min cosine 0.9600 < 0.97, top-10 neighbour agreement 0.850 < 0.90");
  EXPECT_EQ(DescribeGate(f), "1000 texts: cosine mean 0.9950, min 0.9600; top-10 neighbours 0.850");
  GateFigures scores;
  scores.texts = 1000;
  scores.spearman = 0.98;
  EXPECT_EQ(GateFailure(scores), "score Spearman 0.9800 < 0.99");
  // A reduced precision that gives NaN fails every limit.
  std::vector<float> e(40, 0.5f), broken(40, 0.5f);
  broken[7] = std::nanf("");
  EXPECT_EQ(GateFailure(CompareEmbeddings(e, broken, 4, 10, 2)),
            "mean cosine 0.0000 < 0.99, min cosine 0.0000 < 0.97, top-10 neighbour agreement "
            "0.000 < 0.90");
  f.mean_cosine = std::nan("");
  EXPECT_NE(GateFailure(f).find("mean cosine nan"), std::string::npos) << GateFailure(f);
}

// all-MiniLM-L6-v2 in `precision` through the gate against its FP32, cut
// at 256 tokens, mean pooling.
absl::StatusOr<GateFigures> MiniLmGate(Precision precision) {
  auto fp32 = TransformerEncoderCpu::Load(testing::MiniLmDir());
  EncoderCpuOptions o;
  o.precision = precision;
  auto reduced = TransformerEncoderCpu::Load(testing::MiniLmDir(), o);
  auto tokenizer = text::LoadFolderTokenizer(testing::MiniLmDir());
  if (!fp32.ok()) return fp32.status();
  if (!reduced.ok()) return reduced.status();
  if (!tokenizer.ok()) return tokenizer.status();
  return MeasureGate(**fp32, **reduced, *tokenizer->tokenizer, 256, Pooling::kMean);
}

// The real gate: all-MiniLM-L6-v2 in INT8 against its FP32 passes.
TEST(MeasureGateTest, MiniLmInt8Passes) {
  if (testing::MiniLmDir().empty()) GTEST_SKIP() << testing::kNoMiniLm;
  auto figures = MiniLmGate(Precision::kInt8);
  ASSERT_THAT(figures, IsOk());
  EXPECT_EQ(figures->texts, 1050);
  EXPECT_EQ(GateFailure(*figures), "") << DescribeGate(*figures);
  EXPECT_LT(*figures->min_cosine, 0.99999) << "INT8 that is FP32 under another name";
  std::printf("all-MiniLM-L6-v2 int8 against fp32: %s\n", DescribeGate(*figures).c_str());
}

// BF16 where the CPU has it: the gate's passages run the BF16 attention
// products (from kBf16ProductsMinTokens tokens), and all-MiniLM-L6-v2 passes.
TEST(MeasureGateTest, MiniLmBf16PassesOnItsPassagesToo) {
  if (testing::MiniLmDir().empty()) GTEST_SKIP() << testing::kNoMiniLm;
  if (!CpuHasNativeBf16()) GTEST_SKIP() << "this CPU has no native BF16";
  auto figures = MiniLmGate(Precision::kBf16);
  ASSERT_THAT(figures, IsOk());
  EXPECT_EQ(figures->texts, 1050);
  EXPECT_EQ(GateFailure(*figures), "") << DescribeGate(*figures);
  EXPECT_LT(*figures->min_cosine, 1.0) << "BF16 that is FP32 under another name";
  std::printf("all-MiniLM-L6-v2 bf16 against fp32 (attention products in %s): %s\n",
              cpu::HasBf16Products() ? "BF16 from 128 tokens" : "FP32",
              DescribeGate(*figures).c_str());
}

// A reranker is judged by its scores over sentence pairs.
TEST(MeasureGateTest, RerankerInt8IsJudgedByItsScores) {
  const std::string dir = testing::FixturePath("classifiers/bert-reranker");
  auto fp32 = TransformerEncoderCpu::Load(dir);
  EncoderCpuOptions o;
  o.precision = Precision::kInt8;
  auto int8 = TransformerEncoderCpu::Load(dir, o);
  auto tokenizer = text::LoadFolderTokenizer(dir);
  ASSERT_THAT(fp32, IsOk());
  ASSERT_THAT(int8, IsOk());
  ASSERT_THAT(tokenizer, IsOk());
  const int64_t longest = (*fp32)->spec().MaxSequenceLength();
  auto figures = MeasureGate(**fp32, **int8, *tokenizer->tokenizer, longest, Pooling::kCls);
  ASSERT_THAT(figures, IsOk());
  ASSERT_TRUE(figures->spearman.has_value());
  EXPECT_FALSE(figures->mean_cosine.has_value());
  EXPECT_LT(*figures->spearman, 1.0);
  std::printf("bert-reranker fixture int8 against fp32: %s\n", DescribeGate(*figures).c_str());
  // The FP32 encoder against itself ranks every pair alike.
  auto self = MeasureGate(**fp32, **fp32, *tokenizer->tokenizer, longest, Pooling::kCls);
  ASSERT_THAT(self, IsOk());
  EXPECT_DOUBLE_EQ(*self->spearman, 1.0);
}

// A checkpoint's FP32 CPU encoder, its INT8 one drawing from a CPU device's
// allocator (as a served model's does), and its tokenizer: the two sides of
// the gate through the device interface.
struct OnACpuDevice {
  absl::StatusOr<std::unique_ptr<TestDevice>> device = absl::UnknownError("not loaded");
  absl::StatusOr<std::unique_ptr<TransformerEncoderCpu>> fp32 = absl::UnknownError("not loaded");
  absl::StatusOr<std::unique_ptr<TransformerEncoderCpu>> int8 = absl::UnknownError("not loaded");
  absl::StatusOr<text::FolderTokenizer> tokenizer = absl::UnknownError("not loaded");
  void Load(const std::string& dir) {
    device = TestDevice::Create("cpu");
    ASSERT_THAT(device, IsOk());
    fp32 = TransformerEncoderCpu::Load(dir);
    EncoderCpuOptions o;
    o.precision = Precision::kInt8;
    int8 = TransformerEncoderCpu::Load(dir, o, (*device)->allocator.get());
    tokenizer = text::LoadFolderTokenizer(dir);
    ASSERT_THAT(fp32, IsOk());
    ASSERT_THAT(int8, IsOk());
    ASSERT_THAT(tokenizer, IsOk());
  }
};

// The gate through the device interface (the FP8 path's: any encoder, any
// device, via EncodeOnDevice), run here with the CPU encoder on a CPU
// device: the same figures as the CPU overload, bit for bit; and
// EncodeOnDevice equals the CPU encoder's host entry point.
TEST(MeasureGateTest, AnEncoderOnADeviceGivesTheCpuFigures) {
  OnACpuDevice m;
  ASSERT_NO_FATAL_FAILURE(m.Load(testing::FixturePath("families/xlm-roberta")));
  auto& [device, fp32, int8, tokenizer] = m;
  const int64_t longest = (*fp32)->spec().MaxSequenceLength();
  const TransformerEncoder& candidate = **int8;
  const DeviceContext context = (*device)->context();
  int64_t calls = 0;
  const GateEmbedder on_device = [&](const std::vector<int64_t>& ids,
                                     const std::vector<int64_t>& mask,
                                     const std::vector<int64_t>& types, int64_t batch,
                                     int64_t seq) -> absl::StatusOr<std::vector<float>> {
    ++calls;
    auto got = EncodeOnDevice(candidate, context, ids, mask, types, batch, seq, Pooling::kMean,
                              /*normalize=*/true);
    auto want = (*int8)->Encode(ids, mask, batch, seq, /*normalize=*/true, Pooling::kMean, types);
    EXPECT_THAT(got, IsOk());
    EXPECT_THAT(want, IsOk());
    if (got.ok() && want.ok()) EXPECT_EQ(*got, *want);
    return got;
  };
  auto via_device = MeasureGate(**fp32, on_device, *tokenizer->tokenizer, longest, Pooling::kMean);
  auto direct = MeasureGate(**fp32, **int8, *tokenizer->tokenizer, longest, Pooling::kMean);
  ASSERT_THAT(via_device, IsOk());
  ASSERT_THAT(direct, IsOk());
  EXPECT_GT(calls, 0);
  EXPECT_EQ(via_device->texts, 1050);
  EXPECT_EQ(*via_device->mean_cosine, *direct->mean_cosine);
  EXPECT_EQ(*via_device->min_cosine, *direct->min_cosine);
  EXPECT_EQ(*via_device->neighbour_overlap, *direct->neighbour_overlap);
}

// A reranker through the device interface (DeviceEmbedder: the first
// token's state from the device, the head on the host, as a GPU's FP8
// classifier is judged), with the CPU encoder on a CPU device: the same
// Spearman as the CPU overload.
TEST(MeasureGateTest, ARerankerOnADeviceGivesTheCpuFigures) {
  OnACpuDevice m;
  ASSERT_NO_FATAL_FAILURE(m.Load(testing::FixturePath("classifiers/bert-reranker")));
  auto& [device, fp32, int8, tokenizer] = m;
  const int64_t longest = (*fp32)->spec().MaxSequenceLength();
  auto via_device =
      MeasureGate(**fp32, DeviceEmbedder(**int8, (*device)->context(), Pooling::kMean),
                  *tokenizer->tokenizer, longest, Pooling::kMean);
  auto direct = MeasureGate(**fp32, **int8, *tokenizer->tokenizer, longest, Pooling::kMean);
  ASSERT_THAT(via_device, IsOk());
  ASSERT_THAT(direct, IsOk());
  ASSERT_TRUE(via_device->spearman.has_value());
  EXPECT_FALSE(via_device->mean_cosine.has_value());
  EXPECT_EQ(via_device->texts, 1050);
  EXPECT_EQ(*via_device->spearman, *direct->spearman);
  EXPECT_LT(*via_device->spearman, 1.0);
  // A candidate that gives the wrong number of scores is an error, not a
  // figure.
  const GateEmbedder short_scores = [](const std::vector<int64_t>&, const std::vector<int64_t>&,
                                       const std::vector<int64_t>&, int64_t batch,
                                       int64_t) -> absl::StatusOr<std::vector<float>> {
    return std::vector<float>(batch + 1);
  };
  EXPECT_THAT(MeasureGate(**fp32, short_scores, *tokenizer->tokenizer, longest, Pooling::kMean),
              StatusIs(absl::StatusCode::kInternal, "the gate's scores"));
}

// What a decoder's classifier reads: the tokens after each row's last
// non-pad one are cleared; a row of pad tokens alone keeps its first real
// one; left padding and rows without pad tokens stay; other specs are left
// alone.
TEST(MaskTrailingPadTokensTest, ClearsWhatFollowsTheLastTokenThatIsNotPadding) {
  TransformerSpec spec;
  spec.labels = {"LABEL_0"};
  spec.classifier_skips_pad = true;
  spec.pad_token_id = 0;
  const std::vector<int64_t> ids = {5, 6, 0, 0,   // ends with two pad-id tokens
                                    0, 0, 7, 0,   // left padded, then one
                                    0, 0, 0, 0,   // pad ids alone
                                    8, 9, 9, 9};  // none
  std::vector<int64_t> mask = {1, 1, 1, 1,        //
                               0, 0, 1, 1,        //
                               0, 1, 1, 1,        //
                               1, 1, 1, 1};
  EXPECT_TRUE(MaskTrailingPadTokens(spec, ids.data(), 4, 4, &mask));
  EXPECT_EQ(mask, (std::vector<int64_t>{1, 1, 0, 0,  //
                                        0, 0, 1, 0,  //
                                        0, 1, 0, 0,  //
                                        1, 1, 1, 1}));
  std::vector<int64_t> all;  // no mask: every token real
  EXPECT_TRUE(MaskTrailingPadTokens(spec, ids.data(), 1, 4, &all));
  EXPECT_EQ(all, (std::vector<int64_t>{1, 1, 0, 0}));
  std::vector<int64_t> untouched;
  EXPECT_FALSE(MaskTrailingPadTokens(spec, ids.data() + 12, 1, 4, &untouched));
  spec.classifier_skips_pad = false;
  std::vector<int64_t> other;
  EXPECT_FALSE(MaskTrailingPadTokens(spec, ids.data(), 4, 4, &other));
  EXPECT_TRUE(other.empty());
}

TEST(EncodeOnDeviceTest, RefusesBadInputsNamingThem) {
  const std::string dir = testing::FixturePath("families/bert");
  auto device = TestDevice::Create("cpu");
  ASSERT_THAT(device, IsOk());
  auto encoder = TransformerEncoderCpu::Load(dir);
  ASSERT_THAT(encoder, IsOk());
  const TransformerEncoder& e = **encoder;
  const DeviceContext c = (*device)->context();
  const int64_t vocab = e.spec().vocab_size;
  auto run = [&](std::vector<int64_t> ids, std::vector<int64_t> mask, std::vector<int64_t> types,
                 int64_t batch, int64_t seq) {
    return EncodeOnDevice(e, c, ids, mask, types, batch, seq, Pooling::kMean, true).status();
  };
  EXPECT_THAT(run({1, 2}, {1, 1}, {}, 1, 2), IsOk());
  EXPECT_EQ(run({1, 2}, {1}, {}, 1, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run({1, vocab}, {1, 1}, {}, 1, 2).message(),
              ::testing::HasSubstr(absl::StrCat("token id ", vocab, " is outside [0, ", vocab)));
  EXPECT_THAT(run({1, -1}, {1, 1}, {}, 1, 2).message(), ::testing::HasSubstr("token id -1"));
  EXPECT_THAT(run({1, 2}, {1, 2}, {}, 1, 2).message(), ::testing::HasSubstr("mask"));
  EXPECT_THAT(run({1, 2}, {1, 1}, {0, 2}, 1, 2).message(), ::testing::HasSubstr("token type"));
  const int64_t too_long = e.spec().MaxSequenceLength() + 1;
  EXPECT_THAT(
      run(std::vector<int64_t>(too_long, 1), std::vector<int64_t>(too_long, 1), {}, 1, too_long)
          .message(),
      ::testing::HasSubstr(absl::StrCat("the model allows ", too_long - 1)));
}

}  // namespace
}  // namespace infer
