// The device check (models/bert/precision_check.h) without a GPU: a device
// encoder double runs the CPU encoder's FP32 but is not the CPU encoder, so
// the check takes the device path (DeviceEmbedder, SparseEmbedder: what the
// served model computes on a device) against the CPU reference. Faithful,
// it is served with its figures; with its outputs perturbed (the way a
// kernel bug would), it is refused naming the limit it misses, for pooled
// embeddings, a reranker's scores and SPLADE vectors; precision_gate false
// serves it unchecked and says so.
#include "models/bert/precision_check.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "models/bert/sentence_transformers_files.h"
#include "models/text/load_tokenizer.h"
#include "models/transformer/encoder_cpu.h"
#include "models/transformer/splade_head.h"
#include "runtime/status_macros.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;

// Adds noise of `scale` times each row's RMS to `rows` rows of `width`
// values (deterministic).
void Perturb(float* x, int64_t rows, int64_t width, double scale) {
  if (scale == 0 || x == nullptr) return;
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * width;
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += double{row[i]} * row[i];
    const float rms = static_cast<float>(std::sqrt(ss / static_cast<double>(width)));
    for (int64_t i = 0; i < width; ++i) row[i] += static_cast<float>(scale) * rms * noise(rng);
  }
}

// "The device": the CPU encoder's FP32 behind the TransformerEncoder
// interface alone, reporting FP16, its outputs perturbed by `scale`.
class DeviceDouble : public TransformerEncoder {
 public:
  DeviceDouble(std::unique_ptr<TransformerEncoderCpu> inner, double scale)
      : inner_(std::move(inner)), scale_(scale) {}
  const TransformerSpec& spec() const override {
    return spec_.has_value() ? *spec_ : inner_->spec();
  }
  // Reports `spec` instead of the inner encoder's.
  void Pretend(const TransformerSpec& spec) { spec_ = spec; }
  Precision precision() const override { return Precision::kFp16; }
  std::string Implementation() const override { return "a device double"; }
  int64_t WeightBytes() const override { return inner_->WeightBytes(); }
  int64_t PeakBytes(const BatchShape& shape) const override { return inner_->PeakBytes(shape); }
  const DenseHead* classifier() const override { return inner_->classifier(); }
  const SpladeHead* splade() const override { return inner_->splade(); }
  bool HasTokenStates() const override { return true; }
  absl::Status Encode(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                      bool normalize, float* out) const override {
    return EncodeWithStates(stream, batch, pooling, normalize, out, nullptr);
  }
  // The CPU encoder computes before it returns: its outputs can be
  // perturbed here.
  absl::Status EncodeWithStates(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                                bool normalize, float* out, float* states) const override {
    INFER_RETURN_IF_ERROR(inner_->EncodeWithStates(stream, batch, pooling, normalize, out, states));
    const int64_t h = spec().hidden_size;
    Perturb(out, batch.rows, h, scale_);
    Perturb(states, batch.tokens, h, scale_);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<TransformerEncoderCpu> inner_;
  double scale_;
  std::optional<TransformerSpec> spec_;
};

struct Case {
  const char* fixture;
  bool sparse;
};

class PrecisionCheckTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto d = TestDevice::Create("cpu");
    ASSERT_THAT(d, IsOk());
    device_ = *std::move(d);
    dir_ = ::infer::testing::FixturePath(GetParam().fixture);
    auto tokenizer = text::LoadFolderTokenizer(dir_);
    ASSERT_THAT(tokenizer, IsOk());
    tokenizer_ = std::move(tokenizer->tokenizer);
    if (GetParam().sparse) {
      auto s = SentenceTransformersSplade(dir_);
      ASSERT_THAT(s, IsOk());
      splade_ = s->value_or(SpladePooling());
    }
  }

  // The check of a double perturbed by `scale`, as BertModel runs it;
  // `layers`: the number of layers it claims (0: its own).
  absl::StatusOr<PrecisionCheck> Check(double scale, bool gate = true, int64_t layers = 0) {
    EncoderCpuOptions fp32;
    fp32.masked_lm_head = GetParam().sparse;
    auto inner = TransformerEncoderCpu::Load(dir_, fp32);
    if (!inner.ok()) return inner.status();
    DeviceDouble device(*std::move(inner), scale);
    if (layers > 0) {
      TransformerSpec big = device.spec();
      big.num_layers = layers;
      device.Pretend(big);
    }
    BertModelOptions o;
    o.checkpoint_dir = dir_;
    o.precision = Precision::kFp16;
    o.precision_gate = gate;
    const Pooling pooling =
        device.spec().labels.empty() ? Pooling::kMean : ClassifierPooling(device.spec());
    return CheckPrecision(o, device, device_->context(), *tokenizer_, 64, pooling,
                          GetParam().sparse ? &splade_ : nullptr);
  }

  std::unique_ptr<TestDevice> device_;
  std::string dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
  SpladePooling splade_;
};

TEST_P(PrecisionCheckTest, AFaithfulDeviceIsServedWithItsFigures) {
  absl::StatusOr<PrecisionCheck> check = Check(0);
  ASSERT_THAT(check, IsOk());
  EXPECT_TRUE(check->checked);
  EXPECT_FALSE(check->use_fp32);
  EXPECT_EQ(check->figures.texts, 1050);
  if (check->figures.spearman.has_value()) {
    EXPECT_GE(*check->figures.spearman, 0.9999);
  } else {
    EXPECT_GE(*check->figures.min_cosine, 0.9999);
    EXPECT_GE(*check->figures.neighbour_overlap, 0.999);
  }
  EXPECT_NE(check->description.find("; fp16 on the device against the CPU's fp32: 1050 texts"),
            std::string::npos)
      << check->description;
}

TEST_P(PrecisionCheckTest, APerturbedDeviceIsRefusedNamingTheLimit) {
  const absl::StatusOr<PrecisionCheck> check = Check(1.0);
  EXPECT_THAT(check, StatusIs(absl::StatusCode::kFailedPrecondition,
                              "precision fp16 on the device fails the quality gate against "
                              "the CPU's fp32"));
  std::printf("%s, outputs perturbed: %s\n", GetParam().fixture,
              std::string(check.status().message()).c_str());
}

TEST_P(PrecisionCheckTest, PrecisionGateFalseServesItUncheckedAndSaysSo) {
  absl::StatusOr<PrecisionCheck> check = Check(1.0, /*gate=*/false);
  ASSERT_THAT(check, IsOk());
  EXPECT_TRUE(check->skipped);
  EXPECT_FALSE(check->checked);
  EXPECT_EQ(check->summary,
            "fp16 on the device not checked against the CPU's fp32 "
            "(precision_gate false)");
}

// Past kMaxCheckedParameters the CPU reference would take minutes: not
// checked, and said so (a perturbed double is then served, as the
// description warns).
TEST_P(PrecisionCheckTest, AModelTooLargeToCheckAtLoadIsServedUncheckedAndSaysSo) {
  absl::StatusOr<PrecisionCheck> check = Check(1.0, /*gate=*/true, /*layers=*/1000000);
  ASSERT_THAT(check, IsOk());
  EXPECT_TRUE(check->skipped);
  EXPECT_NE(check->summary.find("fp16 on the device not checked against the CPU's fp32: "),
            std::string::npos);
  EXPECT_NE(check->summary.find("over the 1.0 B a check at load computes"), std::string::npos)
      << check->summary;
}

INSTANTIATE_TEST_SUITE_P(Heads, PrecisionCheckTest,
                         ::testing::Values(Case{"families/bert", false},
                                           Case{"classifiers/bert-reranker", false},
                                           Case{"sparse/bert-splade", true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const std::string f = info.param.fixture;
                           return f == "families/bert"               ? std::string("Embeddings")
                                  : f == "classifiers/bert-reranker" ? std::string("Scores")
                                                                     : std::string("Splade");
                         });

}  // namespace
}  // namespace infer
