// The served model on sequence-classification checkpoints
// (tests/fixtures/classifiers, made by models/tools/make_family_fixtures.py
// --classifiers from transformers' *ForSequenceClassification): its scores
// for pairs sent as text and text_pair, or as one query with documents,
// against transformers' logits; truncation of pairs; and what it refuses.
#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_model.h"
#include "models/checkpoint.h"
#include "runtime/device.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;

Tensor Texts(const std::string& name, const std::vector<std::string>& texts) {
  Tensor t = ::infer::testing::TextTensor(texts);
  t.name = name;
  return t;
}

struct Reference {
  std::vector<std::string> labels;
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::vector<float>> logits;
};

Reference ReadReference(const std::string& dir) {
  Reference ref;
  auto text = ReadCheckpointFile(dir + "/reference.json");
  EXPECT_THAT(text, IsOk());
  auto tensors = ReadSafetensors(dir + "/reference.safetensors");
  EXPECT_THAT(tensors, IsOk());
  if (!text.ok() || !tensors.ok()) return ref;
  const nlohmann::json j = nlohmann::json::parse(*text);
  ref.labels = j["labels"].get<std::vector<std::string>>();
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    ref.pairs.emplace_back(j["inputs"][i]["pair"][0], j["inputs"][i]["pair"][1]);
    ref.logits.push_back((*tensors)["logits_" + std::to_string(i)].values);
  }
  return ref;
}

class ClassifierModelTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = ::infer::testing::FixturePath(std::string("classifiers/") + GetParam());
    auto d = TestDevice::Create("cpu");
    ASSERT_THAT(d, IsOk());
    device_ = *std::move(d);
    // As long as the position table allows: a reference pair of the BERT
    // fixture is over tokenizer_config.json's 64.
    model_ = Load(/*max_sequence_length=*/1 << 20);
    ASSERT_NE(model_, nullptr);
    ref_ = ReadReference(dir_);
  }

  std::unique_ptr<BertModel> Load(int64_t max_sequence_length = 0,
                                  const TestDevice* device = nullptr) {
    BertModelOptions o;
    o.checkpoint_dir = dir_;
    o.precision = device == nullptr ? Precision::kFp32 : Precision::kAuto;
    o.max_sequence_length = max_sequence_length;
    auto m = BertModel::Create(o, (device != nullptr ? device : device_.get())->context());
    EXPECT_THAT(m, IsOk());
    return m.ok() ? *std::move(m) : nullptr;
  }

  // Spec checks, Preprocess and ValidateRequest, as the engine runs them.
  absl::Status Admit(const BertModel& m, InferRequest* r) {
    absl::Status s = ValidateRequestAgainstSpec(m.spec(), *r);
    if (s.ok()) s = m.Preprocess(r);
    if (s.ok()) s = m.ValidateRequest(*r);
    return s;
  }

  // The scores of one request, [rows][labels].
  std::vector<std::vector<float>> Scores(BertModel& m, InferRequest r,
                                         const TestDevice* device = nullptr) {
    if (device == nullptr) device = device_.get();
    EXPECT_THAT(Admit(m, &r), IsOk());
    InferResponse out;
    const InferRequest* in[] = {&r};
    InferResponse* res[] = {&out};
    EXPECT_THAT(RunBatch(m, device->device.get(), device->stream.get(), in, res), IsOk());
    std::vector<std::vector<float>> rows;
    if (out.outputs.size() != 1) return rows;
    const Tensor& t = out.outputs[0];
    EXPECT_EQ(t.name, "scores");
    for (int64_t i = 0; i < t.shape[0]; ++i) {
      rows.emplace_back(t.as<float>() + i * t.shape[1], t.as<float>() + (i + 1) * t.shape[1]);
    }
    return rows;
  }

  std::string dir_;
  std::unique_ptr<TestDevice> device_;
  std::unique_ptr<BertModel> model_;
  Reference ref_;
};

// Within 1e-4 of transformers' FP32 logits: the CPU encoder's tolerance on
// the same fixtures (transformer_families_test.cc).
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4) << what << " [" << i << "]";
}

TEST_P(ClassifierModelTest, DeclaresScoresWithTheLabels) {
  const ModelSpec& spec = model_->spec();
  ASSERT_EQ(spec.outputs.size(), 1u);
  EXPECT_EQ(spec.outputs[0].name, "scores");
  EXPECT_EQ(spec.outputs[0].labels, ref_.labels);
  EXPECT_EQ(spec.outputs[0].shape,
            (std::vector<int64_t>{-1, static_cast<int64_t>(ref_.labels.size())}));
  std::vector<std::string> inputs;
  for (const TensorSpec& t : spec.inputs) inputs.push_back(t.name);
  EXPECT_THAT(inputs, ::testing::IsSupersetOf({"text", "text_pair", "query", "documents",
                                               "input_ids", "attention_mask"}));
  EXPECT_NE(spec.description.find("sequence classification"), std::string::npos);
}

TEST_P(ClassifierModelTest, PairsMatchTransformers) {
  InferRequest r;
  std::vector<std::string> firsts, seconds;
  for (const auto& [a, b] : ref_.pairs) {
    firsts.push_back(a);
    seconds.push_back(b);
  }
  r.inputs = {Texts("text", firsts), Texts("text_pair", seconds)};
  const auto scores = Scores(*model_, r);
  ASSERT_EQ(scores.size(), ref_.pairs.size());
  for (size_t i = 0; i < scores.size(); ++i)
    ExpectNear(scores[i], ref_.logits[i], "pair " + std::to_string(i));
}

TEST_P(ClassifierModelTest, QueryWithDocumentsIsEachPair) {
  // Every reference pair's passage against the first pair's query, as one
  // rerank request, equals each (query, passage) sent as a text pair.
  const std::string query = ref_.pairs[0].first;
  std::vector<std::string> docs;
  for (const auto& p : ref_.pairs) docs.push_back(p.second);
  // Cut where a combination is over the length, alike in both forms.
  InferRequest rerank;
  rerank.inputs = {Texts("query", {query}), Texts("documents", docs)};
  rerank.truncate = true;
  const auto got = Scores(*model_, rerank);
  ASSERT_EQ(got.size(), docs.size());
  ExpectNear(got[0], ref_.logits[0], "document 0");
  for (size_t i = 0; i < docs.size(); ++i) {
    InferRequest pair;
    pair.inputs = {Texts("text", {query}), Texts("text_pair", {docs[i]})};
    pair.truncate = true;
    const auto want = Scores(*model_, pair);
    ASSERT_EQ(want.size(), 1u);
    ExpectNear(got[i], want[0], "document " + std::to_string(i));
  }
}

TEST_P(ClassifierModelTest, LongPairsAreRefusedOrCutLongestFirst) {
  // A model limited to 12 tokens: the reference pairs are longer.
  std::unique_ptr<BertModel> short_model = Load(12);
  ASSERT_NE(short_model, nullptr);
  const auto& [query, doc] = ref_.pairs[0];
  InferRequest refused;
  refused.inputs = {Texts("query", {"x"}), Texts("documents", {"y", doc})};
  EXPECT_THAT(Admit(*short_model, &refused),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input 'documents' element 1 with the query has"));
  InferRequest long_query;
  long_query.inputs = {Texts("query", {query + " " + query}), Texts("documents", {"y"})};
  EXPECT_THAT(Admit(*short_model, &long_query),
              StatusIs(absl::StatusCode::kInvalidArgument, "input 'query' has"));
  // Asked per request, the pair is cut to 12 tokens, longest first, as
  // Hugging Face's tokenizer cuts it: the same scores as the ids the
  // tokenizer gives for that truncation.
  InferRequest cut;
  cut.inputs = {Texts("query", {query}), Texts("documents", {doc})};
  cut.truncate = true;
  ASSERT_THAT(Admit(*short_model, &cut), IsOk());
  ASSERT_EQ(cut.inputs[0].name, "input_ids");
  EXPECT_EQ(cut.inputs[0].shape, (std::vector<int64_t>{1, 12}));
  // Truncation asked against: refused again.
  InferRequest not_cut;
  not_cut.inputs = {Texts("text", {query}), Texts("text_pair", {doc})};
  not_cut.truncate = false;
  EXPECT_THAT(
      Admit(*short_model, &not_cut),
      StatusIs(absl::StatusCode::kInvalidArgument, "inputs 'text' and 'text_pair' element 0 has"));
}

TEST_P(ClassifierModelTest, IncompleteOrMixedInputsAreNamed) {
  auto admit = [&](std::vector<Tensor> inputs) {
    InferRequest r;
    r.inputs = std::move(inputs);
    return Admit(*model_, &r);
  };
  EXPECT_THAT(admit({Texts("text_pair", {"b"})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "'text_pair' needs 'text'"));
  EXPECT_THAT(admit({Texts("query", {"q"})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "'query' and 'documents' go together"));
  EXPECT_THAT(admit({Texts("text", {"a"}), Texts("query", {"q"}), Texts("documents", {"d"})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "not both"));
  // One query for the whole request.
  EXPECT_THAT(admit({Texts("query", {"q", "r"}), Texts("documents", {"d", "e"})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "input 'query' has shape [2]"));
  EXPECT_THAT(admit({Texts("text", {"a", "b"}), Texts("text_pair", {"c"})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "batch dimension"));
  EXPECT_THAT(admit({Texts("query", {"q"}), Texts("documents", {"ok", "\xff"})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "input 'documents' element 1"));
  // Nothing to score is refused, not answered with no rows.
  EXPECT_THAT(admit({Texts("query", {"q"}), Texts("documents", {})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "input 'documents' is empty"));
  EXPECT_THAT(admit({Texts("text", {}), Texts("text_pair", {})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "input 'text' is empty"));
}

// On a GPU, in FP16: the encoder on the device, the head on the host after
// the download. Each logit within 2e-2 · max(1, |logit|) of transformers'
// FP32 (FP16 keeps about 3 decimal digits through the layers; these
// random-weight heads give logits of order 0.1 to 1), and a rerank request
// scores as the pairs do.
TEST_P(ClassifierModelTest, ScoresOnAGpuMatchTransformersInFp16) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  auto gpu = TestDevice::Create("cuda:0");
  ASSERT_THAT(gpu, IsOk());
  std::unique_ptr<BertModel> m = Load(1 << 20, gpu->get());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->encoder().precision(), Precision::kFp16);
  std::vector<std::string> firsts, seconds;
  for (const auto& [a, b] : ref_.pairs) {
    firsts.push_back(a);
    seconds.push_back(b);
  }
  InferRequest r;
  r.inputs = {Texts("text", firsts), Texts("text_pair", seconds)};
  const auto scores = Scores(*m, r, gpu->get());
  ASSERT_EQ(scores.size(), ref_.pairs.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    ASSERT_EQ(scores[i].size(), ref_.logits[i].size());
    for (size_t l = 0; l < scores[i].size(); ++l) {
      EXPECT_NEAR(scores[i][l], ref_.logits[i][l],
                  2e-2 * std::max(1.0f, std::abs(ref_.logits[i][l])))
          << "pair " << i << " label " << l;
    }
  }
  InferRequest rerank;
  rerank.inputs = {Texts("query", {firsts[0]}), Texts("documents", {seconds[0], seconds[0]})};
  const auto twice = Scores(*m, rerank, gpu->get());
  ASSERT_EQ(twice.size(), 2u);
  EXPECT_EQ(twice[0], twice[1]);
  ASSERT_EQ(twice[0].size(), scores[0].size());
  for (size_t l = 0; l < scores[0].size(); ++l) {
    EXPECT_NEAR(twice[0][l], scores[0][l], 1e-2 * std::max(1.0f, std::abs(scores[0][l])));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ClassifierModelTest,
                         ::testing::Values("bert-reranker", "xlm-roberta-classifier",
                                           "distilbert-classifier", "gte-reranker",
                                           "mpnet-reranker", "modernbert-classifier",
                                           "gte-native-reranker", "qwen3-reranker"));

}  // namespace
}  // namespace infer
