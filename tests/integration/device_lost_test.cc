// A lost device seen from a gRPC client: an in-process engine and the real
// gRPC server on loopback, with a model whose device work starts failing as
// a GPU does after a sticky CUDA error (the fault is injected in the test's
// model, not in the server). The infer-server binary's reaction to the same
// event (drain, then exit status 1) is server/main.cc's on_device_lost.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "server/grpc/grpc_server.h"
#include "server/metrics.h"
#include "tests/testing/kserve.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"

namespace infer {
namespace {

using ::infer::testing::IdsRequest;
using ::infer::testing::IsOk;

// Answers each request with its row count; once LoseDevice() is called,
// every Compute fails with DeviceLostError, as CUDA calls do after a
// sticky error.
class DeviceModel final : public Model {
 public:
  DeviceModel() {
    spec_.name = "m";
    spec_.inputs = {{"input_ids", DataType::kInt64, {-1, -1}}};
    spec_.outputs = {{"rows", DataType::kInt64, {-1}}};
  }
  const ModelSpec& spec() const override { return spec_; }
  absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const> requests) override {
    auto batch = std::make_unique<Batch>();
    batch->lost = &lost_;
    for (const InferRequest* r : requests) batch->rows.push_back(RequestBatchSize(*r));
    return std::unique_ptr<ModelBatch>(std::move(batch));
  }
  void LoseDevice() { lost_ = true; }

 private:
  struct Batch final : ModelBatch {
    const std::atomic<bool>* lost = nullptr;
    std::vector<int64_t> rows;
    absl::Status Upload(Stream*) override { return absl::OkStatus(); }
    absl::Status Compute(Stream*) override {
      if (*lost) return DeviceLostError("cudaErrorIllegalAddress (injected)");
      return absl::OkStatus();
    }
    absl::Status Download(Stream*) override { return absl::OkStatus(); }
    absl::Status Finish(absl::Span<InferResponse* const> responses) override {
      return testing::AnswerInt64Scalars("rows", rows, responses);
    }
  };
  ModelSpec spec_;
  std::atomic<bool> lost_{false};
};

TEST(DeviceLostOverGrpcTest, HealthFlipsRequestsGetUnavailableAndTheLossIsCountedOnce) {
  EngineOptions options;
  options.device = "cpu";
  std::atomic<int> reported{0};
  options.on_device_lost = [&](const absl::Status&) { ++reported; };
  auto engine = Engine::Create(options);
  ASSERT_THAT(engine, IsOk());
  auto model = std::make_unique<DeviceModel>();
  DeviceModel* device_model = model.get();
  QueueOptions q;
  q.max_batch_size = 8;
  q.max_queue_delay = absl::Milliseconds(1);
  ASSERT_THAT((*engine)->AddModel(std::move(model), q), IsOk());
  GrpcServerOptions server_options;
  server_options.address = "127.0.0.1:0";
  auto server = GrpcServer::Start(server_options, engine->get());
  ASSERT_THAT(server, IsOk());
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);
  auto infer = [&](inference::ModelInferResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub->ModelInfer(&ctx, IdsRequest("m", {{1, 2, 3}}), resp);
  };
  auto health_status = [&] {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    EXPECT_TRUE(health->Check(&ctx, req, &resp).ok());
    return resp.status();
  };

  inference::ModelInferResponse resp;
  ASSERT_TRUE(infer(&resp).ok());
  EXPECT_EQ(health_status(), grpc::health::v1::HealthCheckResponse::SERVING);

  device_model->LoseDevice();
  grpc::Status s = infer(&resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("the device is lost"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("injected"), std::string::npos) << s.error_message();
  EXPECT_EQ(health_status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  {
    grpc::ClientContext ctx;
    inference::ServerReadyRequest req;
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(stub->ServerReady(&ctx, req, &ready).ok());
    EXPECT_FALSE(ready.ready());
  }
  // Refused at the door from now on, still naming why.
  s = infer(&resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("the device is lost"), std::string::npos) << s.error_message();

  const std::string metrics = RenderMetrics(**engine);
  EXPECT_NE(metrics.find("infer_device_lost{device=\"cpu\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("infer_device_lost_errors_total{device=\"cpu\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("infer_server_ready 0"), std::string::npos);
  EXPECT_EQ(reported.load(), 1);

  (*engine)->Shutdown();
  (*server)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace infer
