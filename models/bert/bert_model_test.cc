// The served BERT model on every device this machine has: the memory model
// against the allocator's measured peak, precisions, pooling, the precision
// gate, and the CUDA encoder against the CPU one (inputs: text, segment ids,
// prompts and input errors, in bert_model_inputs_test.cc).
#include "models/bert/bert_model.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_gen.h"
#include "models/bert/bert_model_test_util.h"
#include "models/checkpoint.h"
#include "models/cpu_auto_precision.h"
#include "models/precision.h"
#include "models/transformer/encoder_cpu.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/served_bert.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::Cosine;
using ::infer::testing::EmbeddingFixture;
using ::infer::testing::IsOk;
using ::infer::testing::MiniLmDir;
using ::infer::testing::ReadEmbeddingFixture;
using ::infer::testing::ServedBert;
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;
using ::infer::testing::TextTensor;

using namespace ::infer::bert_model_testing;  // NOLINT: the tests' shared helpers

TEST(BertModelTest, IncompleteContextAndMissingCheckpointAreNamed) {
  auto d = TestDevice::Create("cpu");
  ASSERT_THAT(d, IsOk());
  BertModelOptions o;
  o.checkpoint_dir = "/nonexistent";
  EXPECT_THAT(BertModel::Create(o, DeviceContext{(*d)->device.get(), nullptr, nullptr}),
              StatusIs(absl::StatusCode::kInvalidArgument, "context is incomplete"));
  EXPECT_THAT(BertModel::Create(o, (*d)->context()),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/config.json"));
}

class BertModelOnDevice : public ::testing::TestWithParam<std::string> {};

// The precisions each device computes (the CPU: FP32, and BF16 where oneDNN
// has a BF16 matmul; a GPU: FP16).
std::vector<Precision> PrecisionsOn(const std::string& device) {
  if (device != "cpu") return {Precision::kFp16};
  std::vector<Precision> p = {Precision::kFp32};
  if (CpuHasNativeBf16()) p.push_back(Precision::kBf16);
  p.push_back(Precision::kInt8);
  return p;
}

// The memory model admission relies on, against the allocator's measured
// peak over a grid of shapes, packed: never below, at most 25% above. Rows
// have ragged real lengths (the model computes only those), the peak is
// estimated from the real tokens and the longest row. On a GPU, shapes of up
// to 2048 tokens replay a CUDA graph in resident buffers (the batch's own
// are its input and output) and the larger ones run kernel by kernel.
TEST_P(BertModelOnDevice, MemoryModelBoundsTheMeasuredPeak) {
  BertConfig c;
  const std::string dir = Generated("mid", &c);
  for (const Precision precision : PrecisionsOn(GetParam())) {
    Served s(GetParam(), dir, precision);
    ASSERT_TRUE(s.ok());
    CachingAllocator* alloc = s.device().allocator.get();
    std::mt19937 rng(7);
    for (int64_t rows : {1, 4, 16, 32}) {
      for (int64_t len : {1, 7, 64, 300, 512}) {
        alloc->EmptyCache();
        const int64_t weights = alloc->stats().allocated_bytes;
        alloc->ResetPeak();
        std::vector<std::vector<int64_t>> ids(rows, std::vector<int64_t>(len));
        std::vector<std::vector<int64_t>> mask(rows, std::vector<int64_t>(len, 0));
        int64_t real = 0;
        for (int64_t r = 0; r < rows; ++r) {
          // The first row is full (it sets the length); the others ragged.
          const int64_t n = r == 0 ? len : 1 + rng() % len;
          for (int64_t t = 0; t < len; ++t) {
            ids[r][t] = 5 + rng() % (c.vocab_size - 5);
            mask[r][t] = t < n ? 1 : 0;
          }
          real += n;
        }
        InferRequest r;
        r.inputs.push_back(Int64("input_ids", ids));
        r.inputs.push_back(Int64("attention_mask", mask));
        EXPECT_EQ(s.model().RealTokens(r), real);
        ASSERT_EQ(s.Run(r).size(), static_cast<size_t>(rows * c.hidden_size));
        const int64_t measured = alloc->stats().peak_allocated_bytes - weights;
        const int64_t predicted = s.model().PeakBytes({rows, real, len});
        const std::string shape =
            absl::StrCat(rows, "x", len, " (", real, " real tokens), ", PrecisionName(precision));
        EXPECT_GE(predicted, measured) << shape;
        EXPECT_LE(predicted, measured + measured / 4) << shape;
      }
    }
  }
}

// The precision is resolved for the device at load and shown in the spec;
// one the device's encoder cannot compute is refused naming it. (These tests
// use "mid", whose head size 32 the CUDA encoder computes; "tiny" has 8.)
TEST_P(BertModelOnDevice, PrecisionIsResolvedAtLoad) {
  const std::string dir = Generated("mid");
  auto d = TestDevice::Create(GetParam());
  ASSERT_THAT(d, IsOk());
  BertModelOptions o;
  o.checkpoint_dir = dir;
  auto automatic = BertModel::Create(o, (*d)->context());
  ASSERT_THAT(automatic, IsOk());
  const bool cpu = GetParam() == "cpu";
  // On the CPU, what the CPU table chooses (models/cpu_auto_precision.h).
  const CpuAutoChoice& choice = CpuAutoPrecision();
  const bool auto_bf16 = choice.precision == Precision::kBf16;
  EXPECT_EQ((*automatic)->spec().precision, !cpu ? "fp16" : auto_bf16 ? "bf16" : "fp32");
  EXPECT_FALSE((*automatic)->spec().implementation.empty());
  if (cpu && auto_bf16) {  // auto's BF16 passed the gate
    EXPECT_NE((*automatic)->spec().description.find("bf16 against fp32: 1050 texts"),
              std::string::npos)
        << (*automatic)->spec().description;
  }
  if (cpu) {  // and the description and the spec say why
    EXPECT_EQ((*automatic)->spec().precision_reason, "auto: " + choice.reason);
    EXPECT_NE((*automatic)->spec().description.find("; auto: " + choice.reason), std::string::npos)
        << (*automatic)->spec().description;
  }
  o.precision = cpu ? Precision::kFp16 : Precision::kFp32;
  EXPECT_THAT(BertModel::Create(o, (*d)->context()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       cpu ? "precision fp16: the CPU encoder computes fp32, bf16 or int8"
                           : "precision fp32: the CUDA encoder computes fp16"));
  // INT8 is the CPU's only, and only when asked for.
  o.precision = Precision::kInt8;
  if (cpu) {
    auto int8 = BertModel::Create(o, (*d)->context());
    ASSERT_THAT(int8, IsOk());
    EXPECT_EQ((*int8)->spec().precision, "int8");
    EXPECT_NE((*int8)->spec().implementation.find("int8 matmul"), std::string::npos);
    // It passed the gate against its FP32, and says so.
    EXPECT_NE((*int8)->spec().description.find("int8 against fp32: 1050 texts: cosine mean"),
              std::string::npos)
        << (*int8)->spec().description;
    // And to /info and the gauge.
    EXPECT_EQ((*int8)->spec().quality_check.rfind("int8 against fp32: 1050 texts", 0), 0u)
        << (*int8)->spec().quality_check;
    ASSERT_TRUE((*int8)->spec().check_min_cosine.has_value());
    EXPECT_GE(*(*int8)->spec().check_min_cosine, 0.97);
    EXPECT_GE((*int8)->spec().check_neighbour_overlap.value_or(0), 0.9);
  } else {
    EXPECT_THAT(BertModel::Create(o, (*d)->context()),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         "precision int8: the CUDA encoder computes fp16"));
  }
  if (!cpu) {
    o.checkpoint_dir = Generated("tiny");
    o.precision = Precision::kAuto;
    EXPECT_THAT(BertModel::Create(o, (*d)->context()),
                StatusIs(absl::StatusCode::kFailedPrecondition, "head size 8"));
  }
}

// A sequence's embedding does not depend on its batch-mates or on padding.
TEST_P(BertModelOnDevice, PaddingAndBatchMatesDoNotChangeAnEmbedding) {
  BertConfig c;
  Served s(GetParam(), Generated("mid", &c));
  ASSERT_TRUE(s.ok());
  const std::vector<int64_t> seq = {2, 40, 41, 42, 43, 3};
  InferRequest alone;
  alone.inputs.push_back(Int64("input_ids", {seq}));
  const std::vector<float> a = s.Run(alone);
  std::vector<int64_t> padded = seq, mask(seq.size(), 1);
  padded.resize(20, 0);
  mask.resize(20, 0);
  InferRequest batch;
  batch.inputs.push_back(Int64("input_ids", {std::vector<int64_t>(20, 50), padded}));
  batch.inputs.push_back(Int64("attention_mask", {std::vector<int64_t>(20, 1), mask}));
  const std::vector<float> b = s.Run(batch);
  ASSERT_EQ(b.size(), 2u * c.hidden_size);
  for (int64_t d = 0; d < c.hidden_size; ++d) {
    EXPECT_NEAR(a[d], b[c.hidden_size + d], GetParam() == "cpu" ? 1e-5 : 2e-3) << d;
  }
}

// A sentence-transformers checkpoint that pools by [CLS] (1_Pooling/config.json,
// as bge models ship) is served with CLS pooling; a bad pooling file is named.
TEST_P(BertModelOnDevice, PoolingFollowsTheSentenceTransformersConfig) {
  const std::string dir = Generated("mid");
  std::filesystem::create_directories(dir + "/1_Pooling");
  const std::vector<int64_t> seq = {2, 40, 41, 42, 3};
  InferRequest r;
  r.inputs.push_back(Int64("input_ids", {seq}));
  auto encoder = TransformerEncoderCpu::Load(dir);
  ASSERT_THAT(encoder, IsOk());
  for (const bool cls : {true, false}) {
    std::ofstream(dir + "/1_Pooling/config.json")
        << "{\"pooling_mode_cls_token\": " << (cls ? "true" : "false")
        << ", \"pooling_mode_mean_tokens\": " << (cls ? "false" : "true") << "}";
    Served s(GetParam(), dir);
    ASSERT_TRUE(s.ok());
    const std::vector<float> got = s.Run(r);
    auto want = (*encoder)->Encode(seq, std::vector<int64_t>(seq.size(), 1), 1, 5, true,
                                   cls ? Pooling::kCls : Pooling::kMean);
    ASSERT_THAT(want, IsOk());
    ASSERT_EQ(got.size(), want->size());
    for (size_t d = 0; d < got.size(); ++d) {
      EXPECT_NEAR(got[d], (*want)[d], GetParam() == "cpu" ? 1e-6 : 2e-3) << d << " cls " << cls;
    }
  }
  std::ofstream(dir + "/1_Pooling/config.json") << "{\"pooling_mode_max_tokens\": true}";
  auto d = TestDevice::Create(GetParam());
  ASSERT_THAT(d, IsOk());
  BertModelOptions o;
  o.checkpoint_dir = dir;
  EXPECT_THAT(BertModel::Create(o, (*d)->context()),
              StatusIs(absl::StatusCode::kInvalidArgument, "1_Pooling/config.json: only"));
  std::filesystem::remove_all(dir + "/1_Pooling");
}

INSTANTIATE_TEST_SUITE_P(Devices, BertModelOnDevice, ::testing::ValuesIn(Devices()));

// The precision gate at load (models/transformer/precision_gate.h): an INT8
// that loses what the FP32 model computes is refused with the figures,
// unless the config asks for it unchecked. The checkpoint is "mid" with one
// hidden dimension made an outlier (its embedding LayerNorm gain 1000): the
// first layer's per-token 7- or 8-bit codes cannot carry the other
// dimensions beside it; FP32 can.
TEST(BertModelGateTest, AnInt8ThatLosesTheModelIsRefusedUnlessForced) {
  const std::string dir = Generated("mid") + "_outlier";
  std::filesystem::remove_all(dir);
  std::filesystem::copy(Generated("mid"), dir, std::filesystem::copy_options::recursive);
  auto tensors = ReadSafetensors(dir + "/model.safetensors");
  ASSERT_THAT(tensors, IsOk());
  ASSERT_EQ(tensors->count("embeddings.LayerNorm.weight"), 1u);
  (*tensors)["embeddings.LayerNorm.weight"].values[3] = 1000.0f;
  ASSERT_THAT(WriteSafetensors(dir + "/model.safetensors", *tensors, "F32"), IsOk());
  auto d = TestDevice::Create("cpu");
  ASSERT_THAT(d, IsOk());
  BertModelOptions o;
  o.checkpoint_dir = dir;
  o.precision = Precision::kInt8;
  // (The outlier dominates every embedding, so the cosines stay near 1;
  // which texts are near which is what the codes lose.)
  EXPECT_THAT(BertModel::Create(o, (*d)->context()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "precision int8 fails the quality gate against fp32: top-10 neighbour "
                       "agreement"));
  o.precision_gate = false;
  auto unchecked = BertModel::Create(o, (*d)->context());
  ASSERT_THAT(unchecked, IsOk());
  EXPECT_NE((*unchecked)->spec().description.find("int8 not checked against fp32"),
            std::string::npos);
  EXPECT_EQ((*unchecked)->spec().quality_check,
            "int8 not checked against fp32 (precision_gate false)");
  EXPECT_FALSE((*unchecked)->spec().check_min_cosine.has_value());
  // FP32 is what the gate compares with: never gated.
  o.precision = Precision::kFp32;
  o.precision_gate = true;
  EXPECT_THAT(BertModel::Create(o, (*d)->context()), IsOk());
  std::filesystem::remove_all(dir);
}

// The memory model of every family (tests/fixtures/families: grouped KV
// heads, gated FFNs, sliding windows, relative biases) against the measured
// peak on the CPU, as for BERT above: never below, at most 25% above, over
// batches of up to 32 rows of up to the family's longest sequence.
class FamilyMemoryTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FamilyMemoryTest, MemoryModelBoundsTheMeasuredPeak) {
  const std::string dir = ::infer::testing::FixturePath(std::string("families/") + GetParam());
  for (const Precision precision : PrecisionsOn("cpu")) {
    Served s("cpu", dir, precision);
    ASSERT_TRUE(s.ok());
    const TransformerSpec& c = s.model().encoder().spec();
    CachingAllocator* alloc = s.device().allocator.get();
    std::mt19937 rng(11);
    for (int64_t rows : {1, 4, 32}) {
      for (int64_t len : {int64_t{1}, int64_t{9}, c.MaxSequenceLength()}) {
        alloc->EmptyCache();
        const int64_t weights = alloc->stats().allocated_bytes;
        alloc->ResetPeak();
        std::vector<std::vector<int64_t>> ids(rows, std::vector<int64_t>(len));
        std::vector<std::vector<int64_t>> mask(rows, std::vector<int64_t>(len, 0));
        int64_t real = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t n = r == 0 ? len : 1 + rng() % len;
          for (int64_t t = 0; t < len; ++t) {
            ids[r][t] = 5 + rng() % (c.vocab_size - 5);
            mask[r][t] = t < n ? 1 : 0;
          }
          real += n;
        }
        InferRequest r;
        r.inputs.push_back(Int64("input_ids", ids));
        r.inputs.push_back(Int64("attention_mask", mask));
        ASSERT_EQ(s.Run(r).size(), static_cast<size_t>(rows * c.hidden_size));
        const int64_t measured = alloc->stats().peak_allocated_bytes - weights;
        const int64_t predicted = s.model().PeakBytes({rows, real, len});
        const std::string shape = absl::StrCat(GetParam(), " ", rows, "x", len, " (", real,
                                               " real tokens), ", PrecisionName(precision));
        EXPECT_GE(predicted, measured) << shape;
        EXPECT_LE(predicted, measured + measured / 4) << shape;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyMemoryTest,
                         ::testing::Values("xlm-roberta", "mpnet", "modernbert", "qwen3", "bert",
                                           "qwen2", "llama", "mistral", "distilbert", "nomic_bert",
                                           "new", "nomic_bert-native", "gte", "roberta",
                                           "camembert", "qwen2-scaled"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
                           return name;
                         });

// The CUDA encoder (FP16) against the CPU one (FP32) on the same weights:
// cosine >= 0.999 for every sequence, on a synthetic BERT-base-shaped model
// cut to 4 layers and on the real MiniLM, with ragged padding, and with
// segment ids (the second half of each sequence in segment 1, as a
// (query, passage) pair is sent).
TEST(BertModelGpuTest, GpuMatchesCpu) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  std::vector<std::string> dirs;
  {
    const std::string dir = ::infer::testing::RemoveAtExit(
        absl::StrCat(::testing::TempDir(), "/bert_model_test_", getpid(), "_base4"));
    BertGenOptions o;
    o.config = *BertPreset("bert-base");
    o.config.num_hidden_layers = 4;
    ASSERT_THAT(GenerateBertCheckpoint(dir, o), IsOk());
    dirs.push_back(dir);
  }
  if (!MiniLmDir().empty()) dirs.push_back(MiniLmDir());
  for (const std::string& dir : dirs) {
    Served cpu("cpu", dir), gpu("cuda:0", dir);
    ASSERT_TRUE(cpu.ok() && gpu.ok()) << dir;
    const int64_t hidden = cpu.model().spec().outputs[0].shape[1];
    std::mt19937 rng(11);
    for (int64_t len : {5, 77, 256}) {
      std::vector<std::vector<int64_t>> ids(8, std::vector<int64_t>(len)), mask = ids, types = ids;
      for (size_t r = 0; r < ids.size(); ++r) {
        const int64_t real = 1 + rng() % len;
        for (int64_t t = 0; t < len; ++t) {
          ids[r][t] = t < real ? 1000 + rng() % 20000 : 0;
          mask[r][t] = t < real ? 1 : 0;
          types[r][t] = t < real && t >= real / 2 ? 1 : 0;
        }
      }
      for (bool typed : {false, true}) {
        InferRequest req;
        req.inputs.push_back(Int64("input_ids", ids));
        req.inputs.push_back(Int64("attention_mask", mask));
        if (typed) req.inputs.push_back(Int64("token_type_ids", types));
        const std::vector<float> a = cpu.Run(req), b = gpu.Run(req);
        ASSERT_EQ(a.size(), b.size());
        for (size_t r = 0; r < ids.size(); ++r) {
          EXPECT_GE(Cosine(a.data() + r * hidden, b.data() + r * hidden, hidden), 0.999)
              << dir << " len " << len << " row " << r << (typed ? " with segment ids" : "");
        }
      }
    }
  }
}

TEST(BertModelGpuTest, MiniLmTextMatchesSentenceTransformers) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  if (MiniLmDir().empty()) GTEST_SKIP() << ::infer::testing::kNoMiniLm;
  const EmbeddingFixture fixture = ReadEmbeddingFixture();
  ASSERT_FALSE(fixture.sentences.empty());
  Served gpu("cuda:0", MiniLmDir(), Precision::kAuto, /*auto_truncate=*/true);
  ASSERT_TRUE(gpu.ok());
  InferRequest r;
  r.inputs.push_back(TextTensor(fixture.sentences));
  const std::vector<float> got = gpu.Run(r);
  ASSERT_EQ(got.size(), fixture.sentences.size() * 384);
  for (size_t i = 0; i < fixture.sentences.size(); ++i) {
    EXPECT_GE(Cosine(got.data() + i * 384, fixture.embeddings[i].data(), 384), 0.999)
        << fixture.sentences[i];
  }
}

}  // namespace
}  // namespace infer
