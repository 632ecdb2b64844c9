// sentence-transformers' modules after pooling (DenseHead): a served model
// with a Dense module against sentence-transformers' own encode() on the same
// folder (tests/fixtures/dense_head, made by
// models/tools/make_family_fixtures.py --dense-head on the BERT fixture), and
// the modules.json pipelines that are refused, each naming the problem.
#include "models/transformer/dense_head.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/bert/bert_model.h"
#include "models/checkpoint.h"
#include "runtime/device.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

// The BERT fixture's folder (or `base`) with the Dense fixture's
// modules.json and 2_Dense/ added, in a folder of this process's own.
class DenseFolder {
 public:
  explicit DenseFolder(const std::string& tag, const std::string& base = "families/bert")
      : dir_(fs::path(::testing::TempDir()) /
             absl::StrCat("dense_head_test_", tag, "_", getpid())) {
    fs::remove_all(dir_);
    fs::copy(::infer::testing::FixturePath(base), dir_, fs::copy_options::recursive);
    const std::string dense = ::infer::testing::FixturePath("dense_head");
    fs::copy(dense + "/modules.json", dir_ / "modules.json", fs::copy_options::overwrite_existing);
    fs::copy(dense + "/2_Dense", dir_ / "2_Dense", fs::copy_options::recursive);
  }
  ~DenseFolder() { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  void Write(const std::string& file, const std::string& text) const {
    std::ofstream(dir_ / file, std::ios::trunc) << text;
  }

 private:
  const fs::path dir_;
};

absl::StatusOr<std::unique_ptr<BertModel>> Load(testing::TestDevice& device, const std::string& dir,
                                                const std::string& dense_path = "") {
  BertModelOptions o;
  o.name = "dense";
  o.checkpoint_dir = dir;
  o.dense_path = dense_path;
  o.precision =
      device.device->info().kind == DeviceKind::kCpu ? Precision::kFp32 : Precision::kAuto;
  return BertModel::Create(o, device.context());
}

TEST(DenseHeadTest, ServedEmbeddingsMatchSentenceTransformers) {
  const DenseFolder folder("served");
  auto device = testing::TestDevice::Create("cpu");
  ASSERT_THAT(device, IsOk());
  auto model = Load(**device, folder.dir());
  ASSERT_THAT(model, IsOk());
  const ModelSpec& spec = (*model)->spec();
  ASSERT_GE(spec.outputs.size(), 1u);  // then the per-token outputs, on request
  EXPECT_EQ(spec.outputs[0].name, "embedding");
  EXPECT_EQ(spec.outputs[0].shape, (std::vector<int64_t>{-1, 32}));
  EXPECT_NE(spec.description.find("then 2_Dense (64 -> 32, tanh)"), std::string::npos)
      << spec.description;

  const std::string ref_dir = ::infer::testing::FixturePath("dense_head");
  auto text = ReadCheckpointFile(ref_dir + "/reference.json");
  ASSERT_THAT(text, IsOk());
  const auto texts = nlohmann::json::parse(*text)["texts"].get<std::vector<std::string>>();
  auto want = ReadSafetensors(ref_dir + "/reference.safetensors");
  ASSERT_THAT(want, IsOk());

  InferRequest r;
  r.inputs.push_back(testing::TextTensor(texts));
  ASSERT_THAT(ValidateRequestAgainstSpec(spec, r), IsOk());
  ASSERT_THAT((*model)->Preprocess(&r), IsOk());
  ASSERT_THAT((*model)->ValidateRequest(r), IsOk());
  InferResponse out;
  const InferRequest* in[] = {&r};
  InferResponse* res[] = {&out};
  ASSERT_THAT(RunBatch(**model, (*device)->device.get(), (*device)->stream.get(), in, res), IsOk());
  const Tensor& e = out.outputs.at(0);
  ASSERT_EQ(e.shape, (std::vector<int64_t>{static_cast<int64_t>(texts.size()), 32}));
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<float>& w = (*want)["embedding_" + std::to_string(i)].values;
    ASSERT_EQ(w.size(), 32u);
    double worst = 0;
    for (int k = 0; k < 32; ++k) {
      worst = std::max(worst, std::abs(double{e.as<float>()[i * 32 + k]} - w[k]));
    }
    EXPECT_LE(worst, 1e-4) << texts[i];
    EXPECT_GE(testing::Cosine(e.as<float>() + i * 32, w.data(), 32), 0.9999) << texts[i];
  }
}

// On a GPU (the FP16 encoder, the Dense module on the host after the
// download), over a base whose heads the CUDA encoder takes
// (families-cuda/bert, 64 wide as the Dense module wants): each embedding
// within cosine 0.999 of the CPU's FP32 one, which the test above holds to
// sentence-transformers.
TEST(DenseHeadTest, ServedOnAGpuTheyMatchTheCpu) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  const DenseFolder folder("gpu", "families-cuda/bert");
  auto cpu = testing::TestDevice::Create("cpu");
  auto gpu = testing::TestDevice::Create("cuda:0");
  ASSERT_THAT(cpu, IsOk());
  ASSERT_THAT(gpu, IsOk());
  auto on_cpu = Load(**cpu, folder.dir());
  auto on_gpu = Load(**gpu, folder.dir());
  ASSERT_THAT(on_cpu, IsOk());
  ASSERT_THAT(on_gpu, IsOk());
  auto embed = [](BertModel& m, testing::TestDevice& d) {
    InferRequest r;
    r.inputs.push_back(testing::TextTensor({"a short one", "ein etwas längerer deutscher Satz", "x",
                                            "the fourth text of this request, in English"}));
    EXPECT_THAT(ValidateRequestAgainstSpec(m.spec(), r), IsOk());
    EXPECT_THAT(m.Preprocess(&r), IsOk());
    EXPECT_THAT(m.ValidateRequest(r), IsOk());
    InferResponse out;
    const InferRequest* in[] = {&r};
    InferResponse* res[] = {&out};
    EXPECT_THAT(RunBatch(m, d.device.get(), d.stream.get(), in, res), IsOk());
    return out.outputs.empty() ? Tensor() : out.outputs[0];
  };
  const Tensor a = embed(**on_cpu, **cpu), b = embed(**on_gpu, **gpu);
  ASSERT_EQ(a.shape, (std::vector<int64_t>{4, 32}));
  ASSERT_EQ(b.shape, a.shape);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_GE(testing::Cosine(a.as<float>() + i * 32, b.as<float>() + i * 32, 32), 0.999) << i;
  }
}

TEST(DenseHeadTest, PipelinesThatAreNotComputedAreRefusedNamingWhy) {
  const DenseFolder folder("refused");
  auto device = testing::TestDevice::Create("cpu");
  ASSERT_THAT(device, IsOk());
  const std::string head = R"([{"path": "", "type": "sentence_transformers.models.Transformer"},
      {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},)";
  folder.Write("modules.json", head + R"(
      {"path": "2_LSTM", "type": "sentence_transformers.models.LSTM"}])");
  EXPECT_THAT(Load(**device, folder.dir()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "lists the module sentence_transformers.models.LSTM (2_LSTM); only "
                       "Transformer, Pooling, Dense and Normalize are computed"));
  folder.Write("modules.json", R"([
      {"path": "", "type": "sentence_transformers.models.Transformer"},
      {"path": "2_Dense", "type": "sentence_transformers.models.Dense"},
      {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  EXPECT_THAT(Load(**device, folder.dir()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "out of the order Transformer, Pooling, Dense..., Normalize"));
  folder.Write("modules.json", head + R"(
      {"path": "../2_Dense", "type": "sentence_transformers.models.Dense"}])");
  EXPECT_THAT(Load(**device, folder.dir()),
              StatusIs(absl::StatusCode::kInvalidArgument, "must be a folder inside"));
  // A second Dense taking 64 after one giving 32.
  folder.Write("modules.json", head + R"(
      {"path": "2_Dense", "type": "sentence_transformers.models.Dense"},
      {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])");
  EXPECT_THAT(Load(**device, folder.dir()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "in_features 64 but the module before gives 32"));
  folder.Write("modules.json", head + R"(
      {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])");
  folder.Write("2_Dense/config.json",
               R"({"in_features": 64, "out_features": 32, "bias": true,
                   "activation_function": "torch.nn.modules.activation.SiLU"})");
  EXPECT_THAT(Load(**device, folder.dir()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "activation_function 'torch.nn.modules.activation.SiLU' is not computed"));
  folder.Write("2_Dense/config.json", R"({"in_features": 64, "out_features": 16})");
  EXPECT_THAT(Load(**device, folder.dir()),
              StatusIs(absl::StatusCode::kInvalidArgument, "'linear.weight' must be [16, 64]"));
  fs::remove(fs::path(folder.dir()) / "2_Dense/model.safetensors");
  folder.Write("2_Dense/pytorch_model.bin", "not read");
  EXPECT_THAT(Load(**device, folder.dir()),
              StatusIs(absl::StatusCode::kNotFound, "which is not read"));
}

// TEI's --dense-path: the Dense module from another folder than the one
// modules.json lists (models that ship 2_Dense_256, 2_Dense_1024, ...), or
// the only one when it lists none.
TEST(DenseHeadTest, DensePathChoosesTheModulesFolder) {
  const DenseFolder folder("dense_path");
  auto device = testing::TestDevice::Create("cpu");
  ASSERT_THAT(device, IsOk());
  fs::copy(fs::path(folder.dir()) / "2_Dense", fs::path(folder.dir()) / "2_Dense_32",
           fs::copy_options::recursive);
  // The listed folder is not read: break it.
  folder.Write("2_Dense/config.json", R"({"in_features": 7, "out_features": 3})");
  auto model = Load(**device, folder.dir(), "2_Dense_32");
  ASSERT_THAT(model, IsOk());
  EXPECT_NE((*model)->spec().description.find("then 2_Dense_32 (64 -> 32, tanh)"),
            std::string::npos)
      << (*model)->spec().description;
  EXPECT_EQ((*model)->spec().outputs[0].shape, (std::vector<int64_t>{-1, 32}));
  // modules.json without a Dense module: the one --dense-path names.
  folder.Write("modules.json", R"([{"path": "", "type": "sentence_transformers.models.Transformer"},
      {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  EXPECT_THAT(Load(**device, folder.dir(), "2_Dense_32"), IsOk());
  EXPECT_THAT(Load(**device, folder.dir(), "../2_Dense_32"),
              StatusIs(absl::StatusCode::kInvalidArgument, "must be a folder inside"));
  folder.Write("modules.json", R"([{"path": "", "type": "sentence_transformers.models.Transformer"},
      {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
      {"path": "2_Dense", "type": "sentence_transformers.models.Dense"},
      {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])");
  EXPECT_THAT(Load(**device, folder.dir(), "2_Dense_32"),
              StatusIs(absl::StatusCode::kInvalidArgument, "lists 2 Dense modules"));
}

// Every product is summed in the documented order (16 running sums over
// k mod 16, the remainder into lanes 0, 1, ..., the lanes added pairwise),
// bit for bit, on whichever instruction set runs it (ctest runs this under
// the AVX2 and SSE4.1 caps too): odd widths, so the remainders count, then
// tanh and the bias, then ReLU and none.
TEST(DenseHeadTest, TheSumsAreInOneFixedOrderOnEveryCpu) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  };
  const int64_t rows = 3, in = 53, mid = 37, out = 5;
  std::vector<DenseHead::Layer> layers(2);
  layers[0] = {in, mid, random(mid * in), random(mid), DenseHead::Activation::kTanh, "a"};
  layers[1] = {mid, out, random(out * mid), {}, DenseHead::Activation::kRelu, "b"};
  const DenseHead head = DenseHead::FromLayers(in, layers);
  const std::vector<float> x = random(rows * in);
  auto dot = [](const float* w, const float* v, int64_t n) {
    float lanes[16] = {};
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
      for (int j = 0; j < 16; ++j) lanes[j] += w[k + j] * v[k + j];
    }
    for (int j = 0; k < n; ++k, ++j) lanes[j] += w[k] * v[k];
    for (int width = 8; width >= 1; width /= 2) {
      for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
    }
    return lanes[0];
  };
  std::vector<float> hidden(rows * mid), want(rows * out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < mid; ++o) {
      hidden[r * mid + o] =
          std::tanh(dot(&layers[0].weight[o * in], &x[r * in], in) + layers[0].bias[o]);
    }
    for (int64_t o = 0; o < out; ++o) {
      want[r * out + o] = std::max(dot(&layers[1].weight[o * mid], &hidden[r * mid], mid), 0.0f);
    }
  }
  const std::vector<float> got = head.Apply(x.data(), rows);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
}

}  // namespace
}  // namespace infer
