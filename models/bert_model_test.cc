#include "models/bert_model.h"

#include <cmath>
#include <cstring>

#include "tests/testing/fake_device.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;

Tensor Text(const std::vector<std::string>& sentences) {
  Tensor t;
  t.name = "text";
  t.dtype = DataType::kBytes;
  t.shape = {static_cast<int64_t>(sentences.size())};
  for (const std::string& s : sentences) AppendBytesElement(s, &t.data);
  return t;
}

TEST(BertModelTest, RefusesDevicesWithoutAnImplementation) {
  testing::FakeDevice gpu(1 << 30);  // reports itself as CUDA
  BertModelOptions o;
  o.checkpoint_dir = "/nonexistent";
  EXPECT_THAT(BertModel::Create(o, DeviceContext{&gpu, nullptr, nullptr}),
              StatusIs(absl::StatusCode::kFailedPrecondition, "serve it with --device cpu"));
}

#ifdef INFER_MINILM_DIR
class BertModelOnMiniLm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = TestDevice::Create("cpu");
    ASSERT_THAT(d, IsOk());
    device_ = *std::move(d);
    BertModelOptions o;
    o.checkpoint_dir = INFER_MINILM_DIR;
    auto m = BertModel::Create(o, device_->context());
    ASSERT_THAT(m, IsOk());
    model_ = *std::move(m);
  }
  // Spec checks + Preprocess + ValidateRequest, as the engine does them.
  absl::Status Admit(InferRequest* r) {
    absl::Status s = ValidateRequestAgainstSpec(model_->spec(), *r);
    if (s.ok()) s = model_->Preprocess(r);
    if (s.ok()) s = model_->ValidateRequest(*r);
    return s;
  }
  std::vector<float> Run(InferRequest r) {
    EXPECT_THAT(Admit(&r), IsOk());
    InferResponse out;
    const InferRequest* in[] = {&r};
    InferResponse* res[] = {&out};
    EXPECT_THAT(RunBatch(*model_, device_->device.get(), device_->stream.get(), in, res), IsOk());
    const Tensor& e = out.outputs.at(0);
    return std::vector<float>(e.as<float>(), e.as<float>() + e.shape[0] * e.shape[1]);
  }
  std::unique_ptr<TestDevice> device_;
  std::unique_ptr<BertModel> model_;
};

TEST_F(BertModelOnMiniLm, TextAndTokenIdsGiveTheSameNormalisedEmbedding) {
  InferRequest text;
  text.inputs.push_back(Text({"A man is playing a guitar.", "Hello, world!"}));
  const std::vector<float> a = Run(text);
  ASSERT_EQ(a.size(), 2u * 384);
  double norm = 0;
  for (int d = 0; d < 384; ++d) norm += double{a[d]} * a[d];
  EXPECT_NEAR(norm, 1.0, 1e-5);
  // "Hello, world!" as ids (from the reference tokenizer), no mask.
  InferRequest ids;
  Tensor t;
  t.name = "input_ids";
  t.dtype = DataType::kInt64;
  t.shape = {1, 6};
  const int64_t v[] = {101, 7592, 1010, 2088, 999, 102};
  t.data.assign(reinterpret_cast<const char*>(v), sizeof(v));
  ids.inputs.push_back(t);
  const std::vector<float> b = Run(ids);
  for (int d = 0; d < 384; ++d) EXPECT_NEAR(b[d], a[384 + d], 1e-5);
}

TEST_F(BertModelOnMiniLm, InputErrorsAreNamed) {
  InferRequest none;
  EXPECT_THAT(Admit(&none), StatusIs(absl::StatusCode::kInvalidArgument,
                                     "needs input 'text' (BYTES) or 'input_ids' (INT64)"));
  InferRequest both;
  both.inputs.push_back(Text({"hi"}));
  Tensor ids;
  ids.name = "input_ids";
  ids.dtype = DataType::kInt64;
  ids.shape = {1, 1};
  ids.data.assign(8, '\0');
  both.inputs.push_back(ids);
  EXPECT_THAT(Admit(&both), StatusIs(absl::StatusCode::kInvalidArgument, "not both"));
  InferRequest mask_only;
  ids.name = "attention_mask";
  mask_only.inputs.push_back(ids);
  EXPECT_THAT(Admit(&mask_only),
              StatusIs(absl::StatusCode::kInvalidArgument, "needs input 'text'"));
  InferRequest too_long;
  std::string words;
  for (int i = 0; i < 600; ++i) words += "word ";
  too_long.inputs.push_back(Text({words}));
  EXPECT_THAT(Admit(&too_long),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input 'text' element 0 has 602 tokens; model 'minilm' allows 512"));
  InferRequest bad_utf8;
  bad_utf8.inputs.push_back(Text({"ok", "\xff"}));
  EXPECT_THAT(Admit(&bad_utf8),
              StatusIs(absl::StatusCode::kInvalidArgument, "element 1: text is not valid UTF-8"));
}
#endif

}  // namespace
}  // namespace infer
