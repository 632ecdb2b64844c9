// ValidateRequestAgainstSpec: every INVALID_ARGUMENT case, with the message
// naming what was wrong and what is allowed.
#include "models/model.h"

#include <cstdint>
#include <cstring>

#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

ModelSpec Spec() {
  ModelSpec s;
  s.name = "m";
  s.inputs = {{"ids", DataType::kInt64, {-1, -1}}, {"mask", DataType::kFp32, {-1, 4}}};
  s.outputs = {{"out", DataType::kFp32, {-1, 8}}, {"aux", DataType::kInt32, {-1}}};
  return s;
}

Tensor Make(const std::string& name, DataType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  t.data.assign(n * DataTypeSize(dtype), '\0');
  return t;
}

InferRequest Valid() {
  InferRequest r;
  r.model_name = "m";
  r.inputs.push_back(Make("ids", DataType::kInt64, {2, 5}));
  r.inputs.push_back(Make("mask", DataType::kFp32, {2, 4}));
  return r;
}

TEST(ValidateRequestTest, AcceptsAValidRequest) {
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), Valid()), IsOk());
  InferRequest r = Valid();
  r.requested_outputs = {"aux", "out"};
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r), IsOk());
  EXPECT_EQ(RequestBatchSize(r), 2);
}

TEST(ValidateRequestTest, UnknownInput) {
  InferRequest r = Valid();
  r.inputs.push_back(Make("extra", DataType::kFp32, {2}));
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid,
                       "unknown input 'extra' for model 'm'; expected inputs: "
                       "'ids', 'mask'"));
}

TEST(ValidateRequestTest, MissingInput) {
  InferRequest r = Valid();
  r.inputs.pop_back();
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r), StatusIs(kInvalid, "missing input 'mask'"));
}

TEST(ValidateRequestTest, DuplicateInput) {
  InferRequest r = Valid();
  r.inputs.push_back(r.inputs[0]);
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid, "input 'ids' is given more than once"));
}

TEST(ValidateRequestTest, WrongDatatype) {
  InferRequest r = Valid();
  r.inputs[0] = Make("ids", DataType::kInt32, {2, 5});
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid, "input 'ids' has datatype INT32; model 'm' expects INT64"));
}

TEST(WidenInt32InputsTest, AnInt32InputThatMayBeWidenedBecomesInt64WithEveryValue) {
  ModelSpec spec = Spec();
  spec.inputs[0].accepts_int32 = true;
  InferRequest r = Valid();
  r.inputs[0] = Make("ids", DataType::kInt32, {2, 3});
  const int32_t values[6] = {0, 1, -1, 101, INT32_MAX, INT32_MIN};
  std::memcpy(r.inputs[0].data.data(), values, sizeof(values));
  ASSERT_THAT(WidenInt32Inputs(spec, &r), IsOk());
  EXPECT_EQ(r.inputs[0].dtype, DataType::kInt64);
  ASSERT_EQ(r.inputs[0].data.size(), 6 * sizeof(int64_t));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.inputs[0].as<int64_t>()[i], values[i]) << i;
  EXPECT_THAT(ValidateRequestAgainstSpec(spec, r), IsOk());
  // INT64 is left as it is.
  InferRequest wide = Valid();
  const std::string before = wide.inputs[0].data;
  ASSERT_THAT(WidenInt32Inputs(spec, &wide), IsOk());
  EXPECT_EQ(wide.inputs[0].dtype, DataType::kInt64);
  EXPECT_EQ(wide.inputs[0].data, before);
}

TEST(WidenInt32InputsTest, OnlyInputsThatSayTheyAcceptInt32AreWidened) {
  ModelSpec spec = Spec();  // ids: INT64 without accepts_int32
  InferRequest r = Valid();
  r.inputs[0] = Make("ids", DataType::kInt32, {2, 5});
  r.inputs[1] = Make("mask", DataType::kInt32, {2, 4});  // FP32 input: never widened
  ASSERT_THAT(WidenInt32Inputs(spec, &r), IsOk());
  EXPECT_EQ(r.inputs[0].dtype, DataType::kInt32);
  EXPECT_EQ(r.inputs[1].dtype, DataType::kInt32);
  EXPECT_THAT(ValidateRequestAgainstSpec(spec, r),
              StatusIs(kInvalid, "input 'ids' has datatype INT32; model 'm' expects INT64"));
  spec.inputs[0].accepts_int32 = true;
  r.inputs[0] = Make("ids", DataType::kFp32, {2, 5});
  EXPECT_THAT(
      ValidateRequestAgainstSpec(spec, r),
      StatusIs(kInvalid, "input 'ids' has datatype FP32; model 'm' expects INT64 (or INT32)"));
}

TEST(WidenInt32InputsTest, BytesNotMatchingTheShapeAreRefusedBeforeWidening) {
  ModelSpec spec = Spec();
  spec.inputs[0].accepts_int32 = true;
  InferRequest r = Valid();
  r.inputs[0] = Make("ids", DataType::kInt32, {2, 5});
  r.inputs[0].shape = {2, 1000000000};  // declares 8 GB widened; 40 bytes came
  EXPECT_THAT(WidenInt32Inputs(spec, &r),
              StatusIs(kInvalid,
                       "input 'ids' has 40 bytes of data; its shape [2,1000000000] and datatype "
                       "INT32 need 8000000000"));
  r.inputs[0].shape = {INT64_MAX, 4};
  EXPECT_THAT(WidenInt32Inputs(spec, &r), StatusIs(kInvalid, "overflow"));
}

TEST(ValidateRequestTest, WrongRank) {
  InferRequest r = Valid();
  r.inputs[0] = Make("ids", DataType::kInt64, {10});
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid,
                       "input 'ids' has shape [10] (rank 1); model 'm' expects "
                       "rank 2 [-1,-1]"));
}

TEST(ValidateRequestTest, WrongFixedDimension) {
  InferRequest r = Valid();
  r.inputs[1] = Make("mask", DataType::kFp32, {2, 3});
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid, "input 'mask' has shape [2,3]; model 'm' expects [-1,4]"));
}

TEST(ValidateRequestTest, NegativeDimension) {
  InferRequest r = Valid();
  r.inputs[0].shape = {2, -5};
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid, "input 'ids' has negative dimension -5"));
}

TEST(ValidateRequestTest, OverflowingShape) {
  InferRequest r = Valid();
  r.inputs[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid, "overflows a 64-bit element count"));
  r.inputs[0].shape = {int64_t{1} << 31, int64_t{1} << 31};  // 2^62 elements, 2^65 bytes
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid, "overflows a 64-bit byte size"));
}

TEST(ValidateRequestTest, ByteSizeMismatch) {
  InferRequest r = Valid();
  r.inputs[0].data.resize(79);
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid,
                       "input 'ids' has 79 bytes of data; its shape [2,5] and "
                       "datatype INT64 need 80"));
}

TEST(ValidateRequestTest, InconsistentBatchDimension) {
  InferRequest r = Valid();
  r.inputs[1] = Make("mask", DataType::kFp32, {3, 4});
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid, "input 'mask' has batch dimension 3 but another input has 2"));
}

TEST(ValidateRequestTest, UnknownAndDuplicateOutputs) {
  InferRequest r = Valid();
  r.requested_outputs = {"nope"};
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid,
                       "unknown output 'nope' requested from model 'm'; "
                       "available outputs: 'out', 'aux'"));
  r.requested_outputs = {"out", "out"};
  EXPECT_THAT(ValidateRequestAgainstSpec(Spec(), r),
              StatusIs(kInvalid, "output 'out' is requested more than once"));
}

TEST(ValidateRequestTest, BytesLayoutIsChecked) {
  ModelSpec s;
  s.name = "t";
  s.inputs = {{"text", DataType::kBytes, {-1}}};
  InferRequest r;
  Tensor t;
  t.name = "text";
  t.dtype = DataType::kBytes;
  t.shape = {2};
  const char ok[] = {3, 0, 0, 0, 'a', 'b', 'c', 0, 0, 0, 0};
  t.data.assign(ok, sizeof(ok));
  r.inputs.push_back(t);
  EXPECT_THAT(ValidateRequestAgainstSpec(s, r), IsOk());
  r.inputs[0].data.assign(ok, 7);  // second element missing
  EXPECT_THAT(ValidateRequestAgainstSpec(s, r),
              StatusIs(kInvalid, "holds 1 BYTES elements; its shape [2] needs 2"));
  const char lying[] = {100, 0, 0, 0, 'a'};
  r.inputs[0].data.assign(lying, sizeof(lying));
  r.inputs[0].shape = {1};
  EXPECT_THAT(ValidateRequestAgainstSpec(s, r),
              StatusIs(kInvalid, "declares 100 bytes but only 1 remain"));
}

}  // namespace
}  // namespace infer
