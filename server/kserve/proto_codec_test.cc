// RequestFromProto: every INVALID_ARGUMENT case of the wire format.
#include "server/kserve/proto_codec.h"

#include <cstring>

#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

using Input = inference::ModelInferRequest::InferInputTensor;

inference::ModelInferRequest RawRequest(const std::vector<int64_t>& ids,
                                        std::vector<int64_t> shape) {
  inference::ModelInferRequest p;
  p.set_model_name("m");
  p.set_id("x1");
  Input* in = p.add_inputs();
  in->set_name("input_ids");
  in->set_datatype("INT64");
  for (int64_t d : shape) in->add_shape(d);
  p.add_raw_input_contents()->assign(reinterpret_cast<const char*>(ids.data()),
                                     ids.size() * sizeof(int64_t));
  return p;
}

TEST(ProtoCodecTest, RawInputIsMovedIn) {
  inference::ModelInferRequest p = RawRequest({1, 2, 3, 4}, {2, 2});
  p.add_outputs()->set_name("embedding");
  auto r = RequestFromProto(&p);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->model_name, "m");
  EXPECT_EQ(r->id, "x1");
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].dtype, DataType::kInt64);
  EXPECT_EQ(r->inputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r->inputs[0].as<int64_t>()[3], 4);
  EXPECT_EQ(r->requested_outputs, std::vector<std::string>{"embedding"});
}

TEST(ProtoCodecTest, TypedContentsAreConverted) {
  inference::ModelInferRequest p;
  Input* in = p.add_inputs();
  in->set_name("a");
  in->set_datatype("INT64");
  in->add_shape(3);
  for (int64_t v : {7, 8, 9}) in->mutable_contents()->add_int64_contents(v);
  Input* f = p.add_inputs();
  f->set_name("b");
  f->set_datatype("FP32");
  f->add_shape(1);
  f->mutable_contents()->add_fp32_contents(2.5f);
  Input* s = p.add_inputs();
  s->set_name("c");
  s->set_datatype("BYTES");
  s->add_shape(1);
  s->mutable_contents()->add_bytes_contents("hi");
  auto r = RequestFromProto(&p);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->inputs[0].as<int64_t>()[2], 9);
  EXPECT_EQ(r->inputs[1].as<float>()[0], 2.5f);
  EXPECT_EQ(r->inputs[2].data, std::string("\x02\x00\x00\x00hi", 6));
}

TEST(ProtoCodecTest, RawCountMismatch) {
  inference::ModelInferRequest p = RawRequest({1}, {1, 1});
  p.add_raw_input_contents("extra");
  EXPECT_THAT(RequestFromProto(&p),
              StatusIs(kInvalid, "request has 2 raw_input_contents entries for 1 inputs"));
}

TEST(ProtoCodecTest, RawSizeMismatch) {
  inference::ModelInferRequest p = RawRequest({1, 2, 3}, {1, 4});
  EXPECT_THAT(RequestFromProto(&p),
              StatusIs(kInvalid,
                       "input 'input_ids' has 24 bytes in raw_input_contents; its "
                       "shape [1,4] and datatype INT64 need 32"));
}

TEST(ProtoCodecTest, ContentsMixedWithRaw) {
  inference::ModelInferRequest p = RawRequest({1}, {1, 1});
  p.mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
  EXPECT_THAT(RequestFromProto(&p),
              StatusIs(kInvalid, "sets 'contents' but the request uses raw_input_contents"));
}

TEST(ProtoCodecTest, UnknownDatatype) {
  inference::ModelInferRequest p = RawRequest({1}, {1, 1});
  p.mutable_inputs(0)->set_datatype("FLOAT64");
  EXPECT_THAT(RequestFromProto(&p),
              StatusIs(kInvalid, "input 'input_ids' has unknown datatype 'FLOAT64'"));
}

TEST(ProtoCodecTest, NegativeAndOverflowingDims) {
  inference::ModelInferRequest p = RawRequest({1}, {1, -1});
  EXPECT_THAT(RequestFromProto(&p), StatusIs(kInvalid, "has negative dimension -1"));
  // Overflow is detected from the shape alone: nothing is allocated for it.
  p = RawRequest({1}, {int64_t{1} << 62, 4});
  EXPECT_THAT(RequestFromProto(&p), StatusIs(kInvalid, "overflows a 64-bit element count"));
  p = RawRequest({1}, {int64_t{1} << 61, 1});
  EXPECT_THAT(RequestFromProto(&p), StatusIs(kInvalid, "overflows a 64-bit byte size"));
}

TEST(ProtoCodecTest, TypedContentsOfWrongLengthOrKind) {
  inference::ModelInferRequest p;
  Input* in = p.add_inputs();
  in->set_name("a");
  in->set_datatype("INT64");
  in->add_shape(1000000000);  // huge declared shape, 2 values sent: no big allocation
  in->mutable_contents()->add_int64_contents(1);
  in->mutable_contents()->add_int64_contents(2);
  EXPECT_THAT(RequestFromProto(&p),
              StatusIs(kInvalid,
                       "input 'a' has 2 values in contents.int64_contents; its "
                       "shape [1000000000] and datatype INT64 need 1000000000"));
  in->clear_shape();
  in->add_shape(2);
  in->clear_contents();
  in->mutable_contents()->add_fp32_contents(1.0f);  // wrong field for INT64
  in->mutable_contents()->add_fp32_contents(2.0f);
  EXPECT_THAT(RequestFromProto(&p), StatusIs(kInvalid, "has 0 values in contents.int64_contents"));
}

TEST(ProtoCodecTest, NarrowTypesAreRangeChecked) {
  inference::ModelInferRequest p;
  Input* in = p.add_inputs();
  in->set_name("a");
  in->set_datatype("INT8");
  in->add_shape(2);
  in->mutable_contents()->add_int_contents(5);
  in->mutable_contents()->add_int_contents(300);
  EXPECT_THAT(RequestFromProto(&p),
              StatusIs(kInvalid, "input 'a' value 300 at index 1 does not fit INT8"));
}

TEST(ProtoCodecTest, Fp16NeedsRawContents) {
  inference::ModelInferRequest p;
  Input* in = p.add_inputs();
  in->set_name("h");
  in->set_datatype("FP16");
  in->add_shape(1);
  EXPECT_THAT(RequestFromProto(&p),
              StatusIs(kInvalid, "has no typed contents field; send it in raw_input_contents"));
}

TEST(ProtoCodecTest, ResponseUsesRawOutputs) {
  InferResponse r;
  r.model_name = "m";
  r.id = "7";
  Tensor t;
  t.name = "embedding";
  t.dtype = DataType::kFp32;
  t.shape = {1, 2};
  t.data.assign(8, 'x');
  r.outputs.push_back(t);
  inference::ModelInferResponse p;
  ResponseToProto(std::move(r), &p);
  EXPECT_EQ(p.model_name(), "m");
  EXPECT_EQ(p.model_version(), "1");
  EXPECT_EQ(p.id(), "7");
  ASSERT_EQ(p.outputs_size(), 1);
  EXPECT_EQ(p.outputs(0).datatype(), "FP32");
  EXPECT_EQ(p.outputs(0).shape_size(), 2);
  ASSERT_EQ(p.raw_output_contents_size(), 1);
  EXPECT_EQ(p.raw_output_contents(0).size(), 8u);
}

TEST(ProtoCodecTest, ModelConfigInTritonsForm) {
  ModelSpec spec{.name = "m",
                 .platform = "infer_bert",
                 .backend = "bert",
                 .precision = "fp16",
                 .inputs = {{"text", DataType::kBytes, {-1}, /*optional=*/true},
                            {"input_ids", DataType::kInt64, {-1, -1}}},
                 .outputs = {{"embedding", DataType::kFp16, {-1, 384}}}};
  QueueOptions queue;
  queue.max_batch_size = 16;
  queue.max_queue_delay = absl::Microseconds(1500);
  queue.priority_levels = 3;
  queue.max_queue_size = 77;
  queue.default_timeout = absl::Milliseconds(250);
  DeviceInfo gpu{.kind = DeviceKind::kCuda, .ordinal = 2};
  inference::ModelConfig c;
  ModelConfigToProto(spec, queue, gpu, &c);
  EXPECT_EQ(c.name(), "m");
  EXPECT_EQ(c.backend(), "bert");
  EXPECT_EQ(c.platform(), "infer_bert");
  EXPECT_EQ(c.max_batch_size(), 16);
  ASSERT_EQ(c.input_size(), 2);
  EXPECT_EQ(c.input(0).data_type(), inference::TYPE_STRING);
  EXPECT_EQ(c.input(0).dims_size(), 0);
  EXPECT_TRUE(c.input(0).optional());
  EXPECT_FALSE(c.input(1).optional());
  EXPECT_EQ(c.input(1).data_type(), inference::TYPE_INT64);
  ASSERT_EQ(c.input(1).dims_size(), 1);
  EXPECT_EQ(c.input(1).dims(0), -1);
  ASSERT_EQ(c.output_size(), 1);
  EXPECT_EQ(c.output(0).data_type(), inference::TYPE_FP16);
  ASSERT_EQ(c.output(0).dims_size(), 1);
  EXPECT_EQ(c.output(0).dims(0), 384);
  ASSERT_EQ(c.instance_group_size(), 1);
  EXPECT_EQ(c.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_GPU);
  ASSERT_EQ(c.instance_group(0).gpus_size(), 1);
  EXPECT_EQ(c.instance_group(0).gpus(0), 2);
  EXPECT_EQ(c.dynamic_batching().max_queue_delay_microseconds(), 1500u);
  EXPECT_EQ(c.dynamic_batching().priority_levels(), 3u);
  EXPECT_EQ(c.dynamic_batching().default_priority_level(), 3u);  // 0 means the lowest
  EXPECT_EQ(c.dynamic_batching().default_queue_policy().max_queue_size(), 77u);
  EXPECT_EQ(c.dynamic_batching().default_queue_policy().default_timeout_microseconds(), 250000u);
  ASSERT_EQ(c.parameters().count("precision"), 1u);
  EXPECT_EQ(c.parameters().at("precision").string_value(), "fp16");
  EXPECT_EQ(c.parameters().count("batch_invariant"), 0u);
  ModelSpec invariant = spec;
  invariant.batch_invariant = true;
  inference::ModelConfig ci;
  ModelConfigToProto(invariant, queue, DeviceInfo{}, &ci);
  EXPECT_EQ(ci.parameters().at("batch_invariant").string_value(), "true");

  // Every KServe datatype has its Triton enum value.
  for (DataType t :
       {DataType::kBool, DataType::kUint8, DataType::kUint16, DataType::kUint32, DataType::kUint64,
        DataType::kInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64, DataType::kFp16,
        DataType::kBf16, DataType::kFp32, DataType::kFp64, DataType::kBytes}) {
    ModelSpec one{.name = "t", .outputs = {{"o", t, {-1}}}};
    inference::ModelConfig out;
    ModelConfigToProto(one, queue, DeviceInfo{}, &out);
    EXPECT_NE(out.output(0).data_type(), inference::TYPE_INVALID) << DataTypeName(t);
  }
}

}  // namespace
}  // namespace infer
