// End-to-end tests of infer-server over loopback gRPC: the real binary is
// started on a free port with a model repository written by the test, and
// driven through the generated KServe v2 client stub.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "models/embed_pool/embed_pool.h"
#include "tests/testing/float_tolerance.h"
#include "tests/testing/kserve.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using ::infer::testing::Concurrent;
using ::infer::testing::IdsRequest;
using ::infer::testing::ServerBinary;
using ::infer::testing::ServerProcess;
using ::infer::testing::Stats;
using inference::GRPCInferenceService;

constexpr char kSmallConfig[] = R"(
  backend: "embed_pool"
  max_batch_size: 16
  dynamic_batching { max_queue_delay_microseconds: 5000 }
  parameters { key: "vocab_size" value { string_value: "1000" } }
  parameters { key: "hidden_size" value { string_value: "16" } }
  parameters { key: "embedding_size" value { string_value: "32" } }
  parameters { key: "max_sequence_length" value { string_value: "64" } }
  parameters { key: "seed" value { string_value: "5" } }
)";

// Batches wait up to 2 s for mates, and only 4 requests may wait: the 5th
// concurrent request is refused at once.
constexpr char kTinyQueueConfig[] = R"(
  backend: "embed_pool"
  max_batch_size: 64
  dynamic_batching { max_queue_delay_microseconds: 2000000
                     default_queue_policy { max_queue_size: 4 } }
  parameters { key: "vocab_size" value { string_value: "100" } }
  parameters { key: "embedding_size" value { string_value: "8" } }
)";

EmbedPoolOptions SmallOptions() {
  EmbedPoolOptions o;
  o.name = "small";
  o.vocab_size = 1000;
  o.hidden_size = 16;
  o.embedding_size = 32;
  o.max_sequence_length = 64;
  o.seed = 5;
  return o;
}

fs::path WriteRepository() {
  const fs::path dir = fs::temp_directory_path() / ("infer_it_repo_" + std::to_string(getpid()));
  fs::remove_all(dir);
  for (const auto& [name, text] :
       {std::pair{"small", kSmallConfig}, std::pair{"tiny_queue", kTinyQueueConfig}}) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "config.pbtxt") << text;
  }
  return dir;
}

class GrpcServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new fs::path(WriteRepository());
    server_ = testing::StartSharedServer(
        {"--model-repository", repo_->string(), "--max-receive-message-bytes", "1048576"});
  }
  static void TearDownTestSuite() {
    testing::StopSharedServer(&server_);
    fs::remove_all(*repo_);
    delete repo_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = GRPCInferenceService::NewStub(channel_);
  }

  grpc::Status Infer(const inference::ModelInferRequest& req, inference::ModelInferResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->ModelInfer(&ctx, req, resp);
  }

  void ExpectError(const inference::ModelInferRequest& req, grpc::StatusCode code,
                   const std::string& substr) {
    inference::ModelInferResponse resp;
    const grpc::Status s = Infer(req, &resp);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(substr), std::string::npos) << s.error_message();
  }

  static fs::path* repo_;
  static ServerProcess* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

fs::path* GrpcServerTest::repo_ = nullptr;
ServerProcess* GrpcServerTest::server_ = nullptr;

TEST_F(GrpcServerTest, LivenessReadinessAndHealth) {
  grpc::ClientContext c1, c2, c3, c4, c5;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(&c2, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ModelReadyRequest mr;
  mr.set_name("small");
  inference::ModelReadyResponse mready;
  ASSERT_TRUE(stub_->ModelReady(&c3, mr, &mready).ok());
  EXPECT_TRUE(mready.ready());
  mr.set_name("absent");
  ASSERT_TRUE(stub_->ModelReady(&c4, mr, &mready).ok());
  EXPECT_FALSE(mready.ready());

  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest hreq;
  grpc::health::v1::HealthCheckResponse hresp;
  ASSERT_TRUE(health->Check(&c5, hreq, &hresp).ok());
  EXPECT_EQ(hresp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  grpc::ClientContext c6;
  hreq.set_service("other.Service");
  EXPECT_EQ(health->Check(&c6, hreq, &hresp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcServerTest, ServerAndModelMetadata) {
  grpc::ClientContext c1, c2, c3;
  inference::ServerMetadataResponse sm;
  ASSERT_TRUE(stub_->ServerMetadata(&c1, {}, &sm).ok());
  EXPECT_EQ(sm.name(), "infer");
  EXPECT_FALSE(sm.version().empty());
  inference::ModelMetadataRequest req;
  req.set_name("small");
  inference::ModelMetadataResponse mm;
  ASSERT_TRUE(stub_->ModelMetadata(&c2, req, &mm).ok());
  EXPECT_EQ(mm.name(), "small");
  EXPECT_EQ(mm.platform(), "infer_embed_pool");
  ASSERT_EQ(mm.inputs_size(), 1);
  EXPECT_EQ(mm.inputs(0).name(), "input_ids");
  EXPECT_EQ(mm.inputs(0).datatype(), "INT64");
  EXPECT_EQ(mm.inputs(0).shape_size(), 2);
  EXPECT_EQ(mm.inputs(0).shape(0), -1);
  ASSERT_EQ(mm.outputs_size(), 1);
  EXPECT_EQ(mm.outputs(0).datatype(), "FP32");
  EXPECT_EQ(mm.outputs(0).shape(1), 32);
  req.set_name("absent");
  const grpc::Status s = stub_->ModelMetadata(&c3, req, &mm);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcServerTest, ModelConfigInTritonsForm) {
  grpc::ClientContext c1, c2, c3;
  inference::ModelConfigRequest req;
  req.set_name("tiny_queue");
  inference::ModelConfigResponse resp;
  ASSERT_TRUE(stub_->ModelConfig(&c1, req, &resp).ok());
  const inference::ModelConfig& config = resp.config();
  EXPECT_EQ(config.name(), "tiny_queue");
  EXPECT_EQ(config.backend(), "embed_pool");
  EXPECT_EQ(config.platform(), "infer_embed_pool");
  EXPECT_EQ(config.max_batch_size(), 64);
  ASSERT_EQ(config.input_size(), 1);
  EXPECT_EQ(config.input(0).name(), "input_ids");
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_INT64);
  ASSERT_EQ(config.input(0).dims_size(), 1);  // the batch dimension left out
  EXPECT_EQ(config.input(0).dims(0), -1);
  ASSERT_EQ(config.output_size(), 1);
  EXPECT_EQ(config.output(0).data_type(), inference::TYPE_FP32);
  ASSERT_EQ(config.output(0).dims_size(), 1);
  EXPECT_EQ(config.output(0).dims(0), 8);
  EXPECT_EQ(config.dynamic_batching().max_queue_delay_microseconds(), 2000000u);
  EXPECT_EQ(config.dynamic_batching().default_queue_policy().max_queue_size(), 4u);
  ASSERT_EQ(config.instance_group_size(), 1);
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  req.set_version("2");
  EXPECT_EQ(stub_->ModelConfig(&c2, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  req.set_name("absent");
  req.clear_version();
  EXPECT_EQ(stub_->ModelConfig(&c3, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcServerTest, InferenceMatchesTheInProcessModel) {
  const std::vector<std::vector<int64_t>> rows = {{101, 7, 42, 999, 102}, {101, 5, 102, 0, 0}};
  inference::ModelInferRequest req = IdsRequest("small", rows);
  req.set_id("abc");
  inference::ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model_name(), "small");
  EXPECT_EQ(resp.id(), "abc");
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).name(), "embedding");
  EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  ASSERT_EQ(resp.raw_output_contents(0).size(), 2 * 32 * sizeof(float));

  auto device = ::infer::testing::TestDevice::Create("cpu");
  ASSERT_TRUE(device.ok());
  auto model = EmbedPoolModel::Create(SmallOptions(), (*device)->context());
  ASSERT_TRUE(model.ok());
  InferRequest local;
  Tensor t;
  t.name = "input_ids";
  t.dtype = DataType::kInt64;
  t.shape = {2, 5};
  t.data = req.raw_input_contents(0);
  local.inputs.push_back(t);
  InferResponse expected;
  const InferRequest* in[] = {&local};
  InferResponse* out[] = {&expected};
  ASSERT_TRUE(RunBatch(**model, (*device)->device.get(), (*device)->stream.get(), in, out).ok());
  const float* got = reinterpret_cast<const float*>(resp.raw_output_contents(0).data());
  const float* want = expected.outputs[0].as<float>();
  // The same batch, but maybe not the same GEMM kernel: the server computes
  // on its own thread count. Equal but for the order of the sums
  // (tests/testing/float_tolerance.h).
  const double tol[] = {
      ::infer::testing::EmbedPoolReorderTolerance(SmallOptions(), {101, 7, 42, 999, 102}),
      ::infer::testing::EmbedPoolReorderTolerance(SmallOptions(), {101, 5, 102})};
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(got[i], want[i], tol[i / 32]) << i;
}

TEST_F(GrpcServerTest, TypedContentsWorkLikeRaw) {
  inference::ModelInferRequest raw = IdsRequest("small", {{3, 4, 5}});
  inference::ModelInferRequest typed = raw;
  typed.clear_raw_input_contents();
  for (int64_t v : {3, 4, 5}) typed.mutable_inputs(0)->mutable_contents()->add_int64_contents(v);
  inference::ModelInferResponse a, b;
  ASSERT_TRUE(Infer(raw, &a).ok());
  ASSERT_TRUE(Infer(typed, &b).ok());
  EXPECT_EQ(a.raw_output_contents(0), b.raw_output_contents(0));
}

TEST_F(GrpcServerTest, EachErrorHasItsExactCode) {
  using grpc::StatusCode;
  ExpectError(IdsRequest("nope", {{1}}), StatusCode::NOT_FOUND, "unknown model 'nope'");
  inference::ModelInferRequest r = IdsRequest("small", {{1}});
  r.set_model_version("3");
  ExpectError(r, StatusCode::NOT_FOUND, "has no version '3'");

  r = IdsRequest("small", {{1, 2}});
  r.mutable_inputs(0)->set_datatype("INT32");
  ExpectError(r, StatusCode::INVALID_ARGUMENT, "has 16 bytes in raw_input_contents");
  r.mutable_inputs(0)->set_datatype("UINT32");
  r.mutable_raw_input_contents(0)->resize(8);
  ExpectError(r, StatusCode::INVALID_ARGUMENT,
              "has datatype UINT32; model 'small' expects INT64 (or INT32)");

  r = IdsRequest("small", {{1, 2}});
  r.mutable_inputs(0)->set_shape(1, 3);
  ExpectError(r, StatusCode::INVALID_ARGUMENT, "need 24");
  r.mutable_inputs(0)->set_shape(1, -2);
  ExpectError(r, StatusCode::INVALID_ARGUMENT, "negative dimension -2");
  r.mutable_inputs(0)->set_shape(0, int64_t{1} << 40);
  r.mutable_inputs(0)->set_shape(1, int64_t{1} << 40);
  // Refused on the declared shape before decoding (the decoder's own
  // overflow check is in proto_codec_test).
  ExpectError(r, StatusCode::INVALID_ARGUMENT, "(request_limits.max_tensor_elements)");

  r = IdsRequest("small", {{1, 2}});
  r.add_raw_input_contents("x");
  ExpectError(r, StatusCode::INVALID_ARGUMENT, "2 raw_input_contents entries for 1 inputs");

  r = IdsRequest("small", {{1, 2}});
  r.mutable_inputs(0)->set_name("tokens");
  ExpectError(r, StatusCode::INVALID_ARGUMENT, "unknown input 'tokens'");
  r = IdsRequest("small", {{1, 2}});
  r.clear_inputs();
  r.clear_raw_input_contents();
  ExpectError(r, StatusCode::INVALID_ARGUMENT, "missing input 'input_ids'");
  r = IdsRequest("small", {{1, 2}});
  r.add_outputs()->set_name("logits");
  ExpectError(r, StatusCode::INVALID_ARGUMENT, "unknown output 'logits'");

  ExpectError(IdsRequest("small", {std::vector<int64_t>(65, 1)}), StatusCode::INVALID_ARGUMENT,
              "input 'input_ids' has 65 tokens; model 'small' allows 64");
  ExpectError(IdsRequest("small", {{1, 1000}}), StatusCode::INVALID_ARGUMENT,
              "accepts ids in [0, 1000)");

  // Over the server's 1 MiB receive limit: gRPC itself refuses it.
  r = IdsRequest("small", {std::vector<int64_t>(64, 1)});
  r.mutable_raw_input_contents(0)->resize(2 << 20);
  inference::ModelInferResponse resp;
  EXPECT_EQ(Infer(r, &resp).error_code(), StatusCode::RESOURCE_EXHAUSTED);

  // After all of that the server still serves.
  EXPECT_TRUE(Infer(IdsRequest("small", {{1, 2}}), &resp).ok());
}

// Issues `n` ModelInfer calls at once; returns their status codes.
TEST_F(GrpcServerTest, ManyConcurrentRequestsAreAllAnsweredInBatches) {
  const inference::ModelStatistics before = Stats(stub_.get(), "small");
  constexpr int kRequests = 200;
  std::atomic<int> bad{0};
  const std::vector<grpc::StatusCode> codes =
      Concurrent(stub_.get(), IdsRequest("small", {{101, 2, 3, 4, 102}}), kRequests, &bad);
  for (int i = 0; i < kRequests; ++i) EXPECT_EQ(codes[i], grpc::StatusCode::OK) << i;
  EXPECT_EQ(bad.load(), 0) << "every response carries its own request's id";
  const inference::ModelStatistics after = Stats(stub_.get(), "small");
  const uint64_t inferences = after.inference_count() - before.inference_count();
  const uint64_t executions = after.execution_count() - before.execution_count();
  EXPECT_EQ(inferences, static_cast<uint64_t>(kRequests));
  // Evidence of batching: far fewer executions than requests.
  EXPECT_LT(executions, static_cast<uint64_t>(kRequests / 2))
      << "executions " << executions << " for " << kRequests << " requests";
  bool saw_batch_over_one = false;
  for (const auto& b : after.batch_stats()) {
    EXPECT_LE(b.batch_size(), 16u);
    saw_batch_over_one |= b.batch_size() > 1;
  }
  EXPECT_TRUE(saw_batch_over_one);
}

TEST_F(GrpcServerTest, FullQueueRefusesWithUnavailable) {
  std::atomic<int> bad{0};
  const std::vector<grpc::StatusCode> codes =
      Concurrent(stub_.get(), IdsRequest("tiny_queue", {{1, 2}}), 12, &bad);
  int ok = 0, unavailable = 0;
  for (grpc::StatusCode c : codes) {
    ok += c == grpc::StatusCode::OK;
    unavailable += c == grpc::StatusCode::UNAVAILABLE;
  }
  EXPECT_EQ(ok, 4) << "max_queue_size 4: four wait for the 2 s batch window";
  EXPECT_EQ(unavailable, 8);
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(GrpcServerTest, ARequestPastItsTimeoutIsDroppedBeforeCompute) {
  // tiny_queue holds a lone request for up to 2 s waiting for batch-mates;
  // a 100 ms "timeout" parameter (microseconds, as in Triton) expires first.
  inference::ModelInferRequest req = IdsRequest("tiny_queue", {{1, 2}});
  (*req.mutable_parameters())["timeout"].set_int64_param(100000);
  const inference::ModelStatistics before = Stats(stub_.get(), "tiny_queue");
  inference::ModelInferResponse resp;
  const grpc::Status s = Infer(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_NE(s.error_message().find("passed its deadline; it was not run"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(Stats(stub_.get(), "tiny_queue").execution_count(), before.execution_count());
  // A bad parameter is refused outright.
  (*req.mutable_parameters())["timeout"].set_string_param("soon");
  ExpectError(req, grpc::StatusCode::INVALID_ARGUMENT, "parameter 'timeout' must be an int64");
}

TEST(GrpcServerLifecycleTest, SigtermDrainsAndExitsZero) {
  auto server =
      ServerProcess::Start(ServerBinary(), {"--device", "cpu", "--drain-timeout-s", "10"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  inference::ModelInferResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->ModelInfer(&ctx, IdsRequest("embed_pool", {{101, 2000, 102}}), &resp).ok());
  EXPECT_EQ(resp.outputs(0).shape(1), 384);
  absl::StatusOr<int> code = server->Stop(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << server->log();
}

TEST(GrpcServerLifecycleTest, MemoryBudgetBoundsWeightsAndBatches) {
  // Weights that do not fit the budget: the server refuses to start.
  auto refused =
      ServerProcess::Start(ServerBinary(), {"--device", "cpu", "--memory-budget-bytes", "1000000"});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("RESOURCE_EXHAUSTED: out of memory on cpu"),
            std::string::npos)
      << refused.status();

  // A wide model under a 4 MiB budget: a long batch cannot fit and is refused
  // with RESOURCE_EXHAUSTED; the server keeps serving what fits.
  const fs::path dir =
      fs::temp_directory_path() / ("infer_budget_repo_" + std::to_string(getpid()));
  fs::create_directories(dir / "wide");
  std::ofstream(dir / "wide" / "config.pbtxt") << R"(
    backend: "embed_pool"
    max_batch_size: 8
    parameters { key: "vocab_size" value { string_value: "1000" } }
    parameters { key: "hidden_size" value { string_value: "16" } }
    parameters { key: "embedding_size" value { string_value: "4096" } }
  )";
  auto server = ServerProcess::Start(
      ServerBinary(), {"--device", "cpu", "--model-repository", dir.string(),
                       "--memory-budget-bytes", "4194304", "--drain-timeout-s", "10"});
  fs::remove_all(dir);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  inference::ModelInferResponse resp;
  {
    grpc::ClientContext ctx;
    const grpc::Status s = stub->ModelInfer(
        &ctx,
        IdsRequest("wide", std::vector<std::vector<int64_t>>(8, std::vector<int64_t>(512, 3))),
        &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("bytes of device memory (8 sequences of 512 tokens); model "
                                     "'wide' may use budget 4194304"),
              std::string::npos)
        << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    const grpc::Status s = stub->ModelInfer(&ctx, IdsRequest("wide", {{1, 2, 3}}), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  absl::StatusOr<int> code = server->Stop(SIGTERM);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
}

TEST(GrpcServerLifecycleTest, BadRepositoryFailsAtStartWithTheReason) {
  const fs::path dir = fs::temp_directory_path() / ("infer_bad_repo_" + std::to_string(getpid()));
  fs::create_directories(dir / "m");
  std::ofstream(dir / "m" / "config.pbtxt") << "backend: \"embed_pool\"\nmax_batch_size: -3\n";
  auto server =
      ServerProcess::Start(ServerBinary(), {"--device", "cpu", "--model-repository", dir.string()});
  fs::remove_all(dir);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("field 'max_batch_size' = -3"), std::string::npos)
      << server.status();
}

TEST(GrpcServerLifecycleTest, UnavailableGpuFailsAtStartWithTheReason) {
  if (ProbeCuda().device_count > 0) GTEST_SKIP() << "a GPU is present";
  auto server = ServerProcess::Start(ServerBinary(), {"--device", "cuda:0"});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("device 'cuda:0' requested but"), std::string::npos)
      << server.status();
}

}  // namespace
}  // namespace infer
