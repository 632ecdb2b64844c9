// The served BERT model's inputs: segment ids, prompts, text and token ids,
// long text and input errors (bert_model_test.cc has the rest).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_model.h"
#include "models/bert/bert_model_test_util.h"
#include "models/checkpoint.h"
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
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;
using ::infer::testing::TextTensor;
using namespace ::infer::bert_model_testing;  // NOLINT: the tests' shared helpers

// Segment ids reach the encoder: the BERT fixture's (query, passage) pairs,
// sent as input_ids + token_type_ids in one padded request, give
// transformers' embeddings (tests/fixtures/families/bert, made with
// token_type_ids), on the CPU. The fixture's head size (16) is below what
// the CUDA attention kernel takes (32, 64, 128): the CUDA encoder refuses it
// at load, and GpuMatchesCpu checks segment ids on CUDA instead.
TEST(TokenTypeTest, PairsWithSegmentIdsMatchTransformers) {
  const std::string dir = ::infer::testing::FixturePath("families/bert");
  auto text = ReadCheckpointFile(dir + "/reference.json");
  ASSERT_THAT(text, IsOk());
  const nlohmann::json j = nlohmann::json::parse(*text);
  auto reference = ReadSafetensors(dir + "/reference.safetensors");
  ASSERT_THAT(reference, IsOk());
  std::vector<std::vector<int64_t>> ids, types, mask;
  std::vector<const std::vector<float>*> want;
  size_t seq = 0;
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    if (!j["inputs"][i].contains("types")) continue;
    ids.push_back(j["inputs"][i]["ids"].get<std::vector<int64_t>>());
    types.push_back(j["inputs"][i]["types"].get<std::vector<int64_t>>());
    want.push_back(&(*reference)["embedding_" + std::to_string(i)].values);
    seq = std::max(seq, ids.back().size());
  }
  ASSERT_GE(ids.size(), 3u);
  for (size_t r = 0; r < ids.size(); ++r) {
    mask.emplace_back(seq, 0);
    std::fill(mask[r].begin(), mask[r].begin() + ids[r].size(), 1);
    ids[r].resize(seq, 0);
    types[r].resize(seq, 0);
  }
  for (const std::string& device : Devices()) {
    SCOPED_TRACE(device);
    if (device != "cpu") continue;
    Served s(device, dir);
    ASSERT_TRUE(s.ok());
    const int64_t h = s.model().encoder().spec().hidden_size;
    InferRequest r;
    r.inputs = {Int64("input_ids", ids), Int64("attention_mask", mask),
                Int64("token_type_ids", types)};
    const std::vector<float> got = s.Run(r);
    ASSERT_EQ(got.size(), want.size() * h);
    for (size_t b = 0; b < want.size(); ++b) {
      EXPECT_GE(Cosine(got.data() + b * h, want[b]->data(), h), device == "cpu" ? 0.9999 : 0.999)
          << "pair " << b;
    }
    // Without the types the passages are read as segment 0: not the same.
    InferRequest untyped;
    untyped.inputs = {Int64("input_ids", ids), Int64("attention_mask", mask)};
    const std::vector<float> plain = s.Run(untyped);
    ASSERT_EQ(plain.size(), got.size());
    EXPECT_LT(Cosine(plain.data(), want[0]->data(), h), 0.999);

    InferRequest out_of_range;
    out_of_range.inputs = {Int64("input_ids", {{5, 6}}), Int64("token_type_ids", {{0, 2}})};
    EXPECT_THAT(s.Admit(&out_of_range),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "input 'token_type_ids' holds 2 at flat index 1; model 'minilm' accepts "
                         "types in [0, 2)"));
    InferRequest mismatched;
    mismatched.inputs = {Int64("input_ids", {{5, 6}}), Int64("token_type_ids", {{0}})};
    EXPECT_THAT(s.Admit(&mismatched),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "input 'token_type_ids' has shape [1,1]; it must match 'input_ids' "
                         "[1,2]"));
    InferRequest with_text;
    with_text.inputs = {TextTensor({"hi"}), Int64("token_type_ids", {{0}})};
    EXPECT_THAT(s.Admit(&with_text), StatusIs(absl::StatusCode::kInvalidArgument, "not both"));
  }
  // A family without a token-type table does not declare the input.
  Served mpnet("cpu", ::infer::testing::FixturePath("families/mpnet"));
  ASSERT_TRUE(mpnet.ok());
  InferRequest r;
  r.inputs = {Int64("input_ids", {{5, 6}}), Int64("token_type_ids", {{0, 0}})};
  EXPECT_THAT(mpnet.Admit(&r),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown input 'token_type_ids'"));
}

// A sentence-transformers prompt (config_sentence_transformers.json) is
// prepended to every text: the prompted embedding of a text is the plain
// embedding of the prompt and the text together.
TEST(PromptTest, ThePromptIsPrependedToEveryText) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(::testing::TempDir()) / absl::StrCat("bert_model_test_prompt_", getpid());
  fs::remove_all(dir);
  fs::copy(::infer::testing::FixturePath("families/qwen3"), dir, fs::copy_options::recursive);
  std::ofstream(dir / "config_sentence_transformers.json")
      << R"({"prompts": {"query": "Instruct: find it\nQuery:", "document": ""},
             "default_prompt_name": null})";
  auto d = TestDevice::Create("cpu");
  ASSERT_THAT(d, IsOk());
  auto embed = [&](BertModel& m, const std::string& text) {
    InferRequest r;
    r.inputs.push_back(TextTensor({text}));
    EXPECT_THAT(ValidateRequestAgainstSpec(m.spec(), r), IsOk());
    EXPECT_THAT(m.Preprocess(&r), IsOk());
    EXPECT_THAT(m.ValidateRequest(r), IsOk());
    InferResponse out;
    const InferRequest* in[] = {&r};
    InferResponse* res[] = {&out};
    EXPECT_THAT(RunBatch(m, (*d)->device.get(), (*d)->stream.get(), in, res), IsOk());
    const Tensor& e = out.outputs.at(0);
    return std::vector<float>(e.as<float>(), e.as<float>() + e.shape[1]);
  };
  BertModelOptions o;
  o.checkpoint_dir = dir.string();
  o.precision = Precision::kFp32;
  auto plain = BertModel::Create(o, (*d)->context());
  ASSERT_THAT(plain, IsOk());
  o.prompt_name = "query";
  auto query = BertModel::Create(o, (*d)->context());
  ASSERT_THAT(query, IsOk());
  EXPECT_NE((*query)->spec().description.find("prompt 'query'"), std::string::npos);
  const std::vector<float> got = embed(**query, "A man is playing a guitar.");
  const std::vector<float> want =
      embed(**plain, "Instruct: find it\nQuery:A man is playing a guitar.");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  o.prompt_name = "passage";
  EXPECT_THAT(BertModel::Create(o, (*d)->context()),
              StatusIs(absl::StatusCode::kInvalidArgument, "prompt 'passage' is not in"));
  // default_prompt_name applies when no prompt_name is given.
  std::ofstream(dir / "config_sentence_transformers.json", std::ios::trunc)
      << R"({"prompts": {"query": "q: "}, "default_prompt_name": "query"})";
  o.prompt_name = "";
  auto by_default = BertModel::Create(o, (*d)->context());
  ASSERT_THAT(by_default, IsOk());
  EXPECT_EQ(embed(**by_default, "x"), embed(**plain, "q: x"));
  // A prompt given as text (TEI's --default-prompt) replaces the default.
  o.prompt = "passage: ";
  auto literal = BertModel::Create(o, (*d)->context());
  ASSERT_THAT(literal, IsOk());
  EXPECT_EQ(embed(**literal, "x"), embed(**plain, "passage: x"));
  EXPECT_NE((*literal)->spec().description.find("prompt 'passage: '"), std::string::npos);
  o.prompt_name = "query";
  EXPECT_THAT(BertModel::Create(o, (*d)->context()),
              StatusIs(absl::StatusCode::kInvalidArgument, "by its name or its text, not both"));
  fs::remove_all(dir);
}

class BertModelOnMiniLm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (MiniLmDir().empty()) GTEST_SKIP() << ::infer::testing::kNoMiniLm;
    served_ = std::make_unique<Served>("cpu", MiniLmDir());
    ASSERT_TRUE(served_->ok());
  }
  std::unique_ptr<Served> served_;
};

TEST_F(BertModelOnMiniLm, TextAndTokenIdsGiveTheSameNormalisedEmbedding) {
  InferRequest text;
  text.inputs.push_back(TextTensor({"A man is playing a guitar.", "Hello, world!"}));
  const std::vector<float> a = served_->Run(text);
  ASSERT_EQ(a.size(), 2u * 384);
  double norm = 0;
  for (int d = 0; d < 384; ++d) norm += double{a[d]} * a[d];
  EXPECT_NEAR(norm, 1.0, 1e-5);
  // "Hello, world!" as ids (from the reference tokenizer), no mask.
  InferRequest ids;
  ids.inputs.push_back(Int64("input_ids", {{101, 7592, 1010, 2088, 999, 102}}));
  const std::vector<float> b = served_->Run(ids);
  for (int d = 0; d < 384; ++d) EXPECT_NEAR(b[d], a[384 + d], 1e-5);
}

// The fixture's last text has 286 tokens; sentence-transformers reads the
// first 256 (sentence_bert_config.json's max_seq_length, [CLS] and [SEP]
// included). Refused by default, naming both lengths; with auto_truncate,
// cut as sentence-transformers cuts it, to the same embedding.
TEST_F(BertModelOnMiniLm, LongTextIsRefusedOrCutAsSentenceTransformersCutsIt) {
  const EmbeddingFixture fixture = ReadEmbeddingFixture();
  ASSERT_FALSE(fixture.sentences.empty());
  const std::string& long_text = fixture.sentences.back();
  InferRequest refused;
  refused.inputs.push_back(TextTensor({"short", long_text}));
  EXPECT_THAT(served_->Admit(&refused),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "element 1 has 286 tokens; model 'minilm' allows 256"));
  Served cut("cpu", MiniLmDir(), Precision::kFp32, /*auto_truncate=*/true);
  ASSERT_TRUE(cut.ok());
  InferRequest r;
  r.inputs.push_back(TextTensor({long_text, fixture.sentences.front()}));
  const std::vector<float> got = cut.Run(r);
  ASSERT_EQ(got.size(), 2u * 384);
  EXPECT_GE(Cosine(got.data(), fixture.embeddings.back().data(), 384), 0.9999);
  EXPECT_GE(Cosine(got.data() + 384, fixture.embeddings.front().data(), 384), 0.9999);
  double max_diff = 0;
  for (int d = 0; d < 384; ++d) {
    max_diff = std::max(max_diff, std::abs(double{got[d]} - fixture.embeddings.back()[d]));
  }
  EXPECT_LT(max_diff, 1e-4);
}

TEST_F(BertModelOnMiniLm, InputErrorsAreNamed) {
  InferRequest none;
  EXPECT_THAT(served_->Admit(&none), StatusIs(absl::StatusCode::kInvalidArgument,
                                              "needs input 'text' (BYTES) or 'input_ids' (INT64)"));
  InferRequest both;
  both.inputs.push_back(TextTensor({"hi"}));
  both.inputs.push_back(Int64("input_ids", {{0}}));
  EXPECT_THAT(served_->Admit(&both), StatusIs(absl::StatusCode::kInvalidArgument, "not both"));
  InferRequest mask_only;
  mask_only.inputs.push_back(Int64("attention_mask", {{0}}));
  EXPECT_THAT(served_->Admit(&mask_only),
              StatusIs(absl::StatusCode::kInvalidArgument, "needs input 'text'"));
  InferRequest too_long;
  std::string words;
  for (int i = 0; i < 600; ++i) words += "word ";
  too_long.inputs.push_back(TextTensor({words}));
  EXPECT_THAT(served_->Admit(&too_long),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input 'text' element 0 has 602 tokens; model 'minilm' allows 256"));
  InferRequest bad_utf8;
  bad_utf8.inputs.push_back(TextTensor({"ok", "\xff"}));
  EXPECT_THAT(served_->Admit(&bad_utf8),
              StatusIs(absl::StatusCode::kInvalidArgument, "element 1: text is not valid UTF-8"));
}

}  // namespace
}  // namespace infer
