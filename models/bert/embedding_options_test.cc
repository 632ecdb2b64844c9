// A request's embedding options on the served transformer model (CPU, the
// tiny BERT fixture): dimensions (Matryoshka: cut, then normalised again),
// normalize (per request, also when batched with requests that want the
// model's default, which the folder's modules.json decides), prompt_name
// (any of the folder's prompts), and each refusal, named.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_model.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tensors.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;
using ::infer::testing::TextTensor;

// The bert fixture folder copied to one of this process's own, where a test
// may add files (CTest runs test cases in parallel processes).
fs::path CopyFixture(const std::string& tag) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / absl::StrCat("embedding_options_", getpid(), "_", tag);
  fs::remove_all(dir);
  fs::copy(::infer::testing::FixturePath("families/bert"), dir, fs::copy_options::recursive);
  ::infer::testing::RemoveAtExit(dir.string());
  return dir;
}

class EmbeddingOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = TestDevice::Create("cpu");
    ASSERT_THAT(d, IsOk());
    device_ = *std::move(d);
  }

  absl::StatusOr<std::unique_ptr<BertModel>> Load(const fs::path& dir,
                                                  std::optional<bool> matryoshka = std::nullopt) {
    BertModelOptions o;
    o.checkpoint_dir = dir.string();
    o.precision = Precision::kFp32;
    o.matryoshka = matryoshka;
    return BertModel::Create(o, device_->context());
  }

  // Spec checks + Preprocess + ValidateRequest, as the engine does them.
  static absl::Status Admit(const BertModel& m, InferRequest* r) {
    absl::Status s = ValidateRequestAgainstSpec(m.spec(), *r);
    if (s.ok()) s = m.Preprocess(r);
    if (s.ok()) s = m.ValidateRequest(*r);
    return s;
  }

  // Each request's embedding output, all run as one batch.
  std::vector<Tensor> Run(BertModel& m, std::vector<InferRequest> requests) {
    std::vector<const InferRequest*> in;
    std::vector<InferResponse> out(requests.size());
    std::vector<InferResponse*> res;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_THAT(Admit(m, &requests[i]), IsOk());
      in.push_back(&requests[i]);
      res.push_back(&out[i]);
    }
    EXPECT_THAT(RunBatch(m, device_->device.get(), device_->stream.get(), in, res), IsOk());
    std::vector<Tensor> embeddings;
    for (InferResponse& r : out) {
      embeddings.push_back(r.outputs.empty() ? Tensor{} : std::move(r.outputs[0]));
    }
    return embeddings;
  }

  static InferRequest Text(const std::vector<std::string>& texts) {
    InferRequest r;
    r.inputs.push_back(TextTensor(texts));
    return r;
  }

  std::unique_ptr<TestDevice> device_;
};

std::vector<float> Row(const Tensor& t, int64_t r) {
  return std::vector<float>(t.as<float>() + r * t.shape[1], t.as<float>() + (r + 1) * t.shape[1]);
}

// Rows computed in different batches, or at other rows of one, differ in
// their last bits (oneDNN blocks an FP32 matmul by the batch's shape):
// 1e-5 is about a hundred float epsilons at the values here (|x| < 2).
constexpr double kTol = 1e-5;

void ExpectNear(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape, want.shape);
  const int64_t n = got.shape[0] * got.shape[1];
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got.as<float>()[i], want.as<float>()[i], kTol) << i;
}

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// normalise(cut(v)) of a full embedding: what sentence-transformers'
// truncate_dim followed by Normalize gives.
std::vector<float> CutAndNormalise(std::vector<float> v, size_t d) {
  v.resize(d);
  const double n = Norm(v);
  for (float& x : v) x = static_cast<float>(x / n);
  return v;
}

TEST_F(EmbeddingOptionsTest, DimensionsCutThenNormaliseAgain) {
  auto m = Load(CopyFixture("dims"), /*matryoshka=*/true);
  ASSERT_THAT(m, IsOk());
  const TensorSpec& out = (*m)->spec().outputs[0];
  EXPECT_TRUE(out.matryoshka);
  EXPECT_TRUE(out.normalizable);
  const int64_t width = out.shape[1];
  ASSERT_GT(width, 8);
  const std::vector<std::string> texts = {"A man is playing a guitar.", "hello"};
  InferRequest cut = Text(texts);
  cut.dimensions = 8;
  InferRequest whole = Text(texts);
  whole.dimensions = width;  // the width itself is no cut
  // One batch: the full request and the cut one side by side.
  std::vector<Tensor> got = Run(**m, {Text(texts), std::move(cut), std::move(whole)});
  ASSERT_EQ(got[1].shape, (std::vector<int64_t>{2, 8}));
  ASSERT_EQ(got[1].data.size(), 2 * 8 * sizeof(float));
  ExpectNear(got[2], got[0]);
  for (int64_t r = 0; r < 2; ++r) {
    const std::vector<float> want = CutAndNormalise(Row(got[0], r), 8);
    const std::vector<float> have = Row(got[1], r);
    // One division by the norm apart (float against double): 1e-6.
    for (size_t c = 0; c < 8; ++c) EXPECT_NEAR(have[c], want[c], 1e-6) << r << "," << c;
    EXPECT_NEAR(Norm(have), 1.0, 1e-6);
  }
}

TEST_F(EmbeddingOptionsTest, NormalizeFalseGivesThePooledVectorInAnyBatch) {
  auto m = Load(CopyFixture("normalize"));
  ASSERT_THAT(m, IsOk());
  const std::vector<std::string> texts = {"A man is playing a guitar.", "hello"};
  const std::vector<Tensor> alone = Run(**m, {Text(texts)});
  InferRequest raw = Text(texts);
  raw.normalize = false;
  InferRequest raw_cut = Text(texts);
  raw_cut.normalize = false;
  raw_cut.dimensions = (*m)->spec().outputs[0].shape[1];
  // The default request shares a batch with a raw one: the device then
  // computes raw embeddings and normalises the default's on the host.
  std::vector<Tensor> got = Run(**m, {Text(texts), std::move(raw), std::move(raw_cut)});
  ExpectNear(got[2], got[1]);
  for (int64_t r = 0; r < 2; ++r) {
    const std::vector<float> a = Row(alone[0], r), n = Row(got[0], r), raw_row = Row(got[1], r);
    EXPECT_NEAR(Norm(n), 1.0, 1e-6);
    for (size_t c = 0; c < a.size(); ++c) EXPECT_NEAR(n[c], a[c], kTol) << r << "," << c;
    // Pooled, not normalised: its norm is the fixture's, far from 1; its
    // direction the normalised one's.
    EXPECT_GT(std::abs(Norm(raw_row) - 1.0), 1e-3);
    const std::vector<float> back = CutAndNormalise(raw_row, raw_row.size());
    for (size_t c = 0; c < a.size(); ++c) EXPECT_NEAR(back[c], a[c], kTol) << r << "," << c;
  }
}

// Whether embeddings are normalised by default follows the folder, as
// sentence-transformers does: modules.json's Normalize module; a folder
// without modules.json is normalised (TEI's default). The Pooling module is
// read from the folder modules.json names for it.
TEST_F(EmbeddingOptionsTest, TheFolderSaysWhetherToNormaliseAndWhereItsPoolingIs) {
  const std::vector<std::string> texts = {"A man is playing a guitar.", "hello"};
  auto normalised = Load(CopyFixture("listed"));
  ASSERT_THAT(normalised, IsOk());
  EXPECT_THAT((*normalised)->spec().description,
              ::testing::HasSubstr("L2-normalised (modules.json lists Normalize)"));
  InferRequest raw_request = Text(texts);
  raw_request.normalize = false;
  const Tensor raw = Run(**normalised, {std::move(raw_request)})[0];

  // modules.json without Normalize, its Pooling module in another folder.
  const fs::path dir = CopyFixture("unlisted");
  fs::rename(dir / "1_Pooling", dir / "pool");
  std::ofstream(dir / "modules.json") << R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "pool", "type": "sentence_transformers.models.Pooling"}])";
  auto plain = Load(dir);
  ASSERT_THAT(plain, IsOk());
  EXPECT_THAT(
      (*plain)->spec().description,
      ::testing::HasSubstr("mean pooling, not normalised (modules.json lists no Normalize)"));
  InferRequest asked = Text(texts);
  asked.normalize = true;
  const std::vector<Tensor> got = Run(**plain, {Text(texts), std::move(asked)});
  ExpectNear(got[0], raw);
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_GT(std::abs(Norm(Row(got[0], r)) - 1.0), 1e-3);
    EXPECT_NEAR(Norm(Row(got[1], r)), 1.0, 1e-6);
  }
  // The configuration overrides the folder.
  BertModelOptions o;
  o.checkpoint_dir = dir.string();
  o.precision = Precision::kFp32;
  o.normalize = true;
  auto configured = BertModel::Create(o, device_->context());
  ASSERT_THAT(configured, IsOk());
  EXPECT_THAT((*configured)->spec().description,
              ::testing::HasSubstr("L2-normalised (as configured)"));
  const Tensor unit = Run(**configured, {Text(texts)})[0];
  for (int64_t r = 0; r < 2; ++r) EXPECT_NEAR(Norm(Row(unit, r)), 1.0, 1e-6);

  // The pooling is read where modules.json says: [CLS] there.
  std::ofstream(dir / "pool" / "config.json")
      << R"({"word_embedding_dimension": 64, "pooling_mode_cls_token": true})";
  auto cls = Load(dir);
  ASSERT_THAT(cls, IsOk());
  EXPECT_THAT((*cls)->spec().description, ::testing::HasSubstr("cls pooling"));
  const std::vector<Tensor> cls_rows = Run(**cls, {Text(texts)});
  EXPECT_GT(std::abs(Row(cls_rows[0], 0)[0] - Row(raw, 0)[0]), 1e-4);

  // A Pooling path outside the folder, or the folder itself, is refused.
  for (const char* path : {"../pool", "pool/../..", ".", "./", "/tmp"}) {
    std::ofstream(dir / "modules.json") << absl::StrCat(
        R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": ")",
        path, R"(", "type": "sentence_transformers.models.Pooling"}])");
    EXPECT_THAT(Load(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                    "must be a folder inside the model folder"))
        << path;
  }
  std::ofstream(dir / "modules.json") << R"({"not": "a list"})";
  EXPECT_THAT(Load(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, "modules.json is not a list"));

  // No modules.json: normalised.
  fs::remove(dir / "modules.json");
  auto bare = Load(dir);
  ASSERT_THAT(bare, IsOk());
  EXPECT_THAT((*bare)->spec().description,
              ::testing::HasSubstr("L2-normalised (no modules.json: TEI's default)"));
  const Tensor bare_rows = Run(**bare, {Text(texts)})[0];
  for (int64_t r = 0; r < 2; ++r) EXPECT_NEAR(Norm(Row(bare_rows, r)), 1.0, 1e-6);
}

TEST_F(EmbeddingOptionsTest, RefusalsNameTheOptionAndTheLimit) {
  auto m = Load(CopyFixture("refusals"));
  ASSERT_THAT(m, IsOk());
  const int64_t width = (*m)->spec().outputs[0].shape[1];
  EXPECT_FALSE((*m)->spec().outputs[0].matryoshka);
  auto admit = [&](InferRequest r) { return Admit(**m, &r); };
  InferRequest r = Text({"x"});
  r.dimensions = width - 1;
  EXPECT_THAT(admit(r),
              StatusIs(absl::StatusCode::kInvalidArgument, "does not declare Matryoshka training"));
  r.dimensions = width;
  EXPECT_THAT(admit(r), IsOk());
  for (int64_t bad : {int64_t{-1}, width + 1}) {
    r.dimensions = bad;
    EXPECT_THAT(admit(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                   absl::StrCat("gives embeddings of 1 to ", width)));
  }
  r.dimensions = 0;
  r.prompt_name = "query";
  EXPECT_THAT(admit(r),
              StatusIs(absl::StatusCode::kInvalidArgument, "has no prompt 'query' (it has none)"));

  // A classifier's scores are no embedding: normalize and dimensions are
  // refused.
  auto classifier = Load(::infer::testing::FixturePath("classifiers/bert-reranker"));
  ASSERT_THAT(classifier, IsOk());
  InferRequest c = Text({"x"});
  c.normalize = true;
  EXPECT_THAT(Admit(**classifier, &c), StatusIs(absl::StatusCode::kInvalidArgument,
                                                "offers no 'normalize' or 'dimensions'"));
}

TEST_F(EmbeddingOptionsTest, APromptIsChosenPerRequest) {
  const fs::path dir = CopyFixture("prompts");
  std::ofstream(dir / "config_sentence_transformers.json")
      << R"({"prompts": {"query": "query: ", "passage": "passage: "},
             "default_prompt_name": "passage"})";
  auto m = Load(dir);
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ((*m)->spec().prompts, (std::vector<std::string>{"passage", "query"}));
  InferRequest query = Text({"how much protein"});
  query.prompt_name = "query";
  InferRequest by_default = Text({"how much protein"});
  std::vector<Tensor> got = Run(**m, {std::move(query), std::move(by_default)});
  // The request's prompt replaces the default's: each equals the text
  // written out with its prompt, through the same folder without prompts.
  EXPECT_GT(std::abs(got[0].as<float>()[0] - got[1].as<float>()[0]), 1e-3);
  std::ofstream(dir / "config_sentence_transformers.json", std::ios::trunc) << R"({})";
  auto unprompted = Load(dir);
  ASSERT_THAT(unprompted, IsOk());
  std::vector<Tensor> want =
      Run(**unprompted, {Text({"query: how much protein"}), Text({"passage: how much protein"})});
  ExpectNear(got[0], want[0]);
  ExpectNear(got[1], want[1]);

  InferRequest unknown = Text({"x"});
  unknown.prompt_name = "document";
  EXPECT_THAT(Admit(**m, &unknown), StatusIs(absl::StatusCode::kInvalidArgument,
                                             "has no prompt 'document'; its prompts: passage, "
                                             "query"));
  // Token ids have no text to put a prompt before.
  InferRequest ids;
  ids.inputs.push_back(::infer::testing::Int64Matrix("input_ids", {101, 102}, 1));
  ids.prompt_name = "query";
  EXPECT_THAT(Admit(**m, &ids), StatusIs(absl::StatusCode::kInvalidArgument, "cannot have one"));
  fs::remove_all(dir);
}

TEST_F(EmbeddingOptionsTest, TheModelCardDeclaresMatryoshka) {
  const fs::path dir = CopyFixture("card");
  std::ofstream(dir / "README.md") << "---\nlanguage: en\ntags:\n- sentence-transformers\n"
                                      "- loss:MatryoshkaLoss\n---\n# A model\n";
  auto tagged = Load(dir);
  ASSERT_THAT(tagged, IsOk());
  EXPECT_TRUE((*tagged)->spec().outputs[0].matryoshka);
  EXPECT_NE((*tagged)->spec().description.find("Matryoshka"), std::string::npos);
  // The parameter overrides the card.
  auto off = Load(dir, /*matryoshka=*/false);
  ASSERT_THAT(off, IsOk());
  EXPECT_FALSE((*off)->spec().outputs[0].matryoshka);
  // A tag outside the front matter is prose, not metadata.
  std::ofstream(dir / "README.md", std::ios::trunc)
      << "---\ntags:\n- sentence-transformers\n---\n- loss:MatryoshkaLoss\n";
  auto prose = Load(dir);
  ASSERT_THAT(prose, IsOk());
  EXPECT_FALSE((*prose)->spec().outputs[0].matryoshka);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace infer
