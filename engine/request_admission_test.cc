#include "engine/request_admission.h"

#include <atomic>

#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

// input_ids INT64 [-1, -1]; 1000 bytes of device memory per token; counts
// Preprocess calls.
class CountingModel final : public Model {
 public:
  CountingModel() {
    spec_.name = "m";
    spec_.inputs = {{"input_ids", DataType::kInt64, {-1, -1}}};
    spec_.outputs = {{"output_ids", DataType::kInt64, {-1, -1}}};
  }
  const ModelSpec& spec() const override { return spec_; }
  absl::Status Preprocess(InferRequest*) const override {
    ++preprocessed;
    return absl::OkStatus();
  }
  int64_t PeakBytes(const BatchShape& shape) const override { return shape.tokens * 1000; }
  absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const>) override {
    return absl::UnimplementedError("not run here");
  }
  mutable std::atomic<int> preprocessed{0};

 private:
  ModelSpec spec_;
};

InferRequest Ids(int64_t rows, int64_t length) { return testing::IdsRequest("m", rows, length); }

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionTest() : memory_(/*budget=*/1'000'000, /*headroom=*/0) {
    batching_.max_batch_size = 4;
    batching_.length_buckets = {16, 64};
    batching_.priority_levels = 3;
    batching_.default_timeout = absl::Seconds(5);
    limits_.max_tensor_elements = 512;
    limits_.max_input_length = 64;
  }
  AdmissionPolicy Policy() { return {&model_, &batching_, &limits_, &memory_}; }
  absl::Status Admit(InferRequest r, AdmittedRequest* out = nullptr) {
    AdmittedRequest ignored;
    InferRequestSource source(std::move(r));
    InferRequest decoded;
    return AdmitRequest(Policy(), arrival_, source, &decoded, out ? out : &ignored, &reason_);
  }

  CountingModel model_;
  QueueOptions batching_;
  RequestLimits limits_;
  MemoryAdmission memory_;
  const absl::Time arrival_ = absl::FromUnixSeconds(1000);
  RefusalReason reason_ = RefusalReason::kShutdown;
};

TEST_F(AdmissionTest, ClassifiesAnAdmittedRequest) {
  AdmittedRequest a;
  InferRequest r = Ids(6, 20);
  r.priority = 2;
  ASSERT_THAT(Admit(std::move(r), &a), IsOk());
  EXPECT_EQ(a.rows, 6);
  EXPECT_EQ(a.seq_length, 20);
  EXPECT_EQ(a.real_tokens, 120);
  EXPECT_EQ(a.bucket, 1) << "20 tokens: the 64-token class";
  EXPECT_EQ(a.level, 2);
  EXPECT_EQ(a.due, arrival_ + absl::Seconds(5)) << "the model's default timeout";
  ASSERT_THAT(Admit(Ids(1, 3), &a), IsOk());
  EXPECT_EQ(a.level, 3) << "no priority: the lowest level";
  EXPECT_EQ(a.bucket, 0);
}

TEST_F(AdmissionTest, EachRefusalHasItsStatusAndReason) {
  EXPECT_THAT(Admit(Ids(1, 600)),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_tensor_elements"));
  EXPECT_EQ(reason_, RefusalReason::kOverLimit);
  EXPECT_EQ(model_.preprocessed, 0) << "limits come before any work";

  InferRequest wrong_type = Ids(1, 4);
  wrong_type.inputs[0].dtype = DataType::kFp32;
  EXPECT_THAT(Admit(std::move(wrong_type)),
              StatusIs(absl::StatusCode::kInvalidArgument, "input_ids"));
  EXPECT_EQ(reason_, RefusalReason::kInvalid);

  EXPECT_THAT(Admit(Ids(2, 65)), StatusIs(absl::StatusCode::kInvalidArgument, "64"));
  EXPECT_EQ(reason_, RefusalReason::kOverLimit);

  InferRequest urgent = Ids(1, 4);
  urgent.priority = 4;
  EXPECT_THAT(Admit(std::move(urgent)),
              StatusIs(absl::StatusCode::kInvalidArgument, "priority 4 is outside [1, 3]"));
  EXPECT_EQ(reason_, RefusalReason::kInvalid);

  InferRequest late = Ids(1, 4);
  late.deadline = arrival_;
  EXPECT_THAT(Admit(std::move(late)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, "deadline passed"));
  EXPECT_EQ(reason_, RefusalReason::kDeadline);

  // A request over max_batch_size is split: its largest piece is 4 rows of
  // 64 tokens, 256,000 bytes, which must fit with nothing else in flight.
  EXPECT_THAT(Admit(Ids(8, 64)), IsOk());
  memory_.AddWeights(900'000);
  EXPECT_THAT(Admit(Ids(8, 64)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "request needs 256000 bytes of device memory (4 sequences of 64 tokens)"));
  EXPECT_EQ(reason_, RefusalReason::kMemory);
}

// A source that declares a shape and counts what the admission asks of it.
class DeclaringSource final : public RequestSource {
 public:
  DeclaringSource(std::vector<int64_t> shape, absl::Status declare = absl::OkStatus())
      : shape_(std::move(shape)), declare_(std::move(declare)) {}
  const std::string& model_name() const override { return name_; }
  absl::Status Declare(const ModelSpec&, DeclaredRequest* declared) override {
    ++declares;
    declared->inputs.push_back({"input_ids", shape_});
    return declare_;
  }
  absl::Status Decode(const ModelSpec& spec, InferRequest* request) override {
    ++decodes;
    *request = Ids(shape_[0], shape_[1]);
    request->model_name = "as decoded";  // the engine sets the model's
    return absl::OkStatus();
  }
  int declares = 0;
  int decodes = 0;

 private:
  const std::string name_ = "whatever";  // not looked at: the policy is the model's
  std::vector<int64_t> shape_;
  absl::Status declare_;
};

// The declared limits run once, on what the source declares, before it is
// decoded: a request over them is never decoded.
TEST_F(AdmissionTest, DeclaredLimitsAreCheckedOnceBeforeDecoding) {
  AdmittedRequest admitted;
  InferRequest decoded;
  DeclaringSource big({1, 600});
  EXPECT_THAT(AdmitRequest(Policy(), arrival_, big, &decoded, &admitted, &reason_),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_tensor_elements"));
  EXPECT_EQ(reason_, RefusalReason::kOverLimit);
  EXPECT_EQ(big.declares, 1);
  EXPECT_EQ(big.decodes, 0) << "refused before its contents were decoded";
  EXPECT_EQ(model_.preprocessed, 0);

  DeclaringSource fine({2, 8});
  EXPECT_THAT(AdmitRequest(Policy(), arrival_, fine, &decoded, &admitted, &reason_), IsOk());
  EXPECT_EQ(fine.declares, 1);
  EXPECT_EQ(fine.decodes, 1);
  EXPECT_EQ(decoded.model_name, model_.spec().name) << "the model's name, not the source's";
  EXPECT_EQ(admitted.rows, 2);

  DeclaringSource unreadable({2, 8}, absl::InvalidArgumentError("no such field"));
  EXPECT_THAT(AdmitRequest(Policy(), arrival_, unreadable, &decoded, &admitted, &reason_),
              StatusIs(absl::StatusCode::kInvalidArgument, "no such field"));
  EXPECT_EQ(reason_, RefusalReason::kInvalid);
  EXPECT_EQ(unreadable.decodes, 0);
}

}  // namespace
}  // namespace infer
