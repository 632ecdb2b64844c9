// Client strings of 1 MiB (model names, versions, input and output names,
// datatypes, ids, parameter keys and values, health service names) and a
// shape of 100,000 dimensions, sent to every RPC that takes them, over
// loopback gRPC to the real server. Each gets its proper status code and a
// message under 1 KiB: an error quoting the whole string would exceed the
// client's 16 KiB metadata limit and reach it as RESOURCE_EXHAUSTED "Stream
// removed" instead. The server serves normally afterwards.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "health.grpc.pb.h"
#include "tests/testing/kserve.h"
#include "tests/testing/server_process.h"

namespace infer {
namespace {

using ::infer::testing::IdsRequest;
using ::infer::testing::ServerProcess;
using ::infer::testing::TempDir;
using inference::GRPCInferenceService;
using ::testing::HasSubstr;
using StatusCode = grpc::StatusCode;

constexpr char kModelConfig[] = R"(
  backend: "embed_pool"
  max_batch_size: 8
  dynamic_batching { max_queue_delay_microseconds: 0 }
  parameters { key: "vocab_size" value { string_value: "100" } }
  parameters { key: "embedding_size" value { string_value: "8" } }
)";

constexpr size_t kHuge = size_t{1} << 20;
constexpr size_t kMaxMessage = 1024;

const std::string& Huge() {
  static const std::string* s = new std::string(kHuge, 'a');
  return *s;
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(30);
}

// The code, a bounded message, and (when `quoted`) the quoted string cut
// with its length stated.
void ExpectBounded(const grpc::Status& s, StatusCode code, bool quoted = true) {
  EXPECT_EQ(s.error_code(), code) << s.error_message().substr(0, 200);
  EXPECT_LT(s.error_message().size(), kMaxMessage);
  if (quoted) EXPECT_THAT(s.error_message(), HasSubstr("…' (1048576 bytes)"));
}

class HostileStringsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("hostile_strings");
    dir_->AddModel("m", kModelConfig);
    server_ = testing::StartSharedServer({"--model-repository", dir_->path().string()});
  }
  static void TearDownTestSuite() {
    testing::StopSharedServer(&server_);
    delete dir_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = GRPCInferenceService::NewStub(channel_);
  }
  void TearDown() override {
    // Whatever came before, the server still serves.
    inference::ModelInferResponse resp;
    EXPECT_TRUE(Infer(IdsRequest("m", {{1, 2}}), &resp).ok());
  }

  grpc::Status Infer(const inference::ModelInferRequest& req,
                     inference::ModelInferResponse* resp = nullptr) {
    return testing::Infer(stub_.get(), req, resp);
  }

  // The requests whose errors quote a client string, and their codes.
  static std::vector<std::pair<inference::ModelInferRequest, StatusCode>> BadInferRequests() {
    std::vector<std::pair<inference::ModelInferRequest, StatusCode>> out;
    out.emplace_back(IdsRequest(Huge(), {{1}}), StatusCode::NOT_FOUND);
    inference::ModelInferRequest r = IdsRequest("m", {{1}});
    r.set_model_version(Huge());
    out.emplace_back(r, StatusCode::NOT_FOUND);
    r = IdsRequest("m", {{1}});
    r.mutable_inputs(0)->set_name(Huge());
    out.emplace_back(r, StatusCode::INVALID_ARGUMENT);
    r = IdsRequest("m", {{1}});
    r.mutable_inputs(0)->set_datatype(Huge());
    out.emplace_back(r, StatusCode::INVALID_ARGUMENT);
    r = IdsRequest("m", {{1}});
    r.add_outputs()->set_name(Huge());
    out.emplace_back(r, StatusCode::INVALID_ARGUMENT);
    return out;
  }

  static TempDir* dir_;
  static ServerProcess* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

TempDir* HostileStringsTest::dir_ = nullptr;
ServerProcess* HostileStringsTest::server_ = nullptr;

TEST_F(HostileStringsTest, ModelInferQuotesEveryNameCut) {
  for (const auto& [req, code] : BadInferRequests()) {
    SCOPED_TRACE(req.model_name().size() > 100 ? "model name" : req.DebugString().substr(0, 300));
    ExpectBounded(Infer(req), code);
  }
}

TEST_F(HostileStringsTest, ModelInferParametersAndIdsOfAMebibyte) {
  // A string where a number belongs: refused, naming the parameter.
  for (const char* key : {"priority", "timeout"}) {
    inference::ModelInferRequest r = IdsRequest("m", {{1}});
    (*r.mutable_parameters())[key].set_string_param(Huge());
    ExpectBounded(Infer(r), StatusCode::INVALID_ARGUMENT, /*quoted=*/false);
  }
  // Unknown parameters are ignored, however large; the id is echoed in the
  // response body, not in a header.
  inference::ModelInferRequest r = IdsRequest("m", {{1}});
  (*r.mutable_parameters())[Huge()].set_string_param(Huge());
  r.set_id(Huge());
  inference::ModelInferResponse resp;
  const grpc::Status s = Infer(r, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message().substr(0, 200);
  EXPECT_EQ(resp.id().size(), kHuge);
}

TEST_F(HostileStringsTest, AShapeOfAHundredThousandDimensionsGetsAShortMessage) {
  inference::ModelInferRequest r = IdsRequest("m", {{1}});
  for (int i = 0; i < 100000; ++i) r.mutable_inputs(0)->add_shape(1);
  const grpc::Status s = Infer(r);
  ExpectBounded(s, StatusCode::INVALID_ARGUMENT, /*quoted=*/false);
  EXPECT_THAT(s.error_message(), HasSubstr("(rank 100002)"));
}

TEST_F(HostileStringsTest, ModelStreamInferQuotesEveryNameCutAndTheStreamGoesOn) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  auto stream = stub_->ModelStreamInfer(&ctx);
  for (const auto& [req, code] : BadInferRequests()) {
    ASSERT_TRUE(stream->Write(req));
    inference::ModelStreamInferResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_LT(resp.error_message().size(), kMaxMessage);
    EXPECT_THAT(resp.error_message(), HasSubstr("…' (1048576 bytes)"));
  }
  ASSERT_TRUE(stream->Write(IdsRequest("m", {{1, 2}})));
  inference::ModelStreamInferResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.error_message(), "");
  EXPECT_EQ(resp.infer_response().outputs_size(), 1);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(HostileStringsTest, MetadataConfigReadyAndStatisticsQuoteNamesAndVersionsCut) {
  for (const auto& [name, version, code] :
       {std::tuple{Huge(), std::string(), StatusCode::NOT_FOUND},
        std::tuple{std::string("m"), Huge(), StatusCode::NOT_FOUND}}) {
    {
      grpc::ClientContext ctx;
      inference::ModelMetadataRequest req;
      req.set_name(name);
      req.set_version(version);
      inference::ModelMetadataResponse resp;
      ExpectBounded(stub_->ModelMetadata(&ctx, req, &resp), code);
    }
    {
      grpc::ClientContext ctx;
      inference::ModelConfigRequest req;
      req.set_name(name);
      req.set_version(version);
      inference::ModelConfigResponse resp;
      ExpectBounded(stub_->ModelConfig(&ctx, req, &resp), code);
    }
    {
      grpc::ClientContext ctx;
      inference::ModelStatisticsRequest req;
      req.set_name(name);
      req.set_version(version);
      inference::ModelStatisticsResponse resp;
      ExpectBounded(stub_->ModelStatistics(&ctx, req, &resp), code);
    }
    {
      grpc::ClientContext ctx;
      inference::ModelReadyRequest req;
      req.set_name(name);
      req.set_version(version);
      inference::ModelReadyResponse resp;
      ASSERT_TRUE(stub_->ModelReady(&ctx, req, &resp).ok());
      EXPECT_FALSE(resp.ready());
    }
  }
  grpc::ClientContext ctx;
  inference::RepositoryIndexRequest req;
  req.set_repository_name(Huge());
  inference::RepositoryIndexResponse resp;
  ASSERT_TRUE(stub_->RepositoryIndex(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.models_size(), 1);
}

TEST_F(HostileStringsTest, HealthQuotesTheServiceNameCut) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(Huge());
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    grpc::health::v1::HealthCheckResponse resp;
    ExpectBounded(health->Check(&ctx, req, &resp), StatusCode::NOT_FOUND);
  }
  // Watch answers an unknown service with SERVICE_UNKNOWN, in the body.
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  auto watch = health->Watch(&ctx, req);
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN);
  ctx.TryCancel();
  watch->Finish();
}

}  // namespace
}  // namespace infer
