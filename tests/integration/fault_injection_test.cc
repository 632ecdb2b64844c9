// Faults injected in the middle of serving, seen from gRPC clients: an
// in-process engine on a FaultyDevice (the CPU device with device allocations
// refused and a sticky device error, tests/testing/faulty_device.h) serving
// embed_pool models behind FaultyModels (batches failing at a stage, a model
// whose Prepare fails, a batch 10 times slower, tests/testing/faulty_model.h),
// through the real gRPC server on loopback.
//
// Each test shows that only the requests the fault hit fail, with the code
// the README's "Errors" table gives, and that the rest succeed; that the
// memory accounting (allocated, reserved, the admission's reservations of
// batches in flight, the device's own bytes) returns to its baseline; that
// health is right (NOT_SERVING only after the sticky error); and that
// nothing hangs: every call has a deadline, and the engine must settle and
// shut down within bounds.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "models/embed_pool/embed_pool.h"
#include "server/grpc/grpc_server.h"
#include "server/metrics.h"
#include "tests/testing/faulty_device.h"
#include "tests/testing/faulty_model.h"
#include "tests/testing/kserve.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::FaultRule;
using ::infer::testing::FaultStage;
using ::infer::testing::FaultyDevice;
using ::infer::testing::FaultyModel;
using ::infer::testing::FaultyModelOptions;
using ::infer::testing::IsOk;
using ::infer::testing::Rows;
using ::testing::HasSubstr;
using HealthStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

constexpr int kMaxBatch = 8;
constexpr int kWidth = 384;  // embed_pool's embedding size
// 8 sequences of 128 tokens: the dense output is 1.5 MiB, past the
// allocator's 2 MiB small segments (blocks up to 1 MiB), so a batch this
// large reserves a segment from the device whenever the cache is empty.
constexpr int kLong = 128;
constexpr auto kDeadline = std::chrono::seconds(20);

// The memory accounting a fault must leave as it found it. `reserved` is
// taken after emptying the allocator's cache.
struct Accounting {
  int64_t allocated = 0;    // blocks handed out by the allocator
  int64_t active = 0;       // allocated + blocks awaiting another stream
  int64_t reserved = 0;     // segments held from the device
  int64_t lost = 0;         // blocks never to be reused (a lost device)
  int64_t in_flight = 0;    // the admission's reservations of running batches
  int64_t device_held = 0;  // bytes the device itself has handed out
  bool operator==(const Accounting&) const = default;
};
void PrintTo(const Accounting& a, std::ostream* os) {
  *os << "{allocated " << a.allocated << ", active " << a.active << ", reserved " << a.reserved
      << ", lost " << a.lost << ", in flight " << a.in_flight << ", device " << a.device_held
      << "}";
}

// Polls `done` for at most 20 s; false if it never came true.
bool WaitUntil(const std::function<bool()>& done) {
  const absl::Time end = absl::Now() + absl::Seconds(20);
  while (!done()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

inference::ModelInferRequest Request(const std::string& model, const std::string& id, int rows,
                                     int length) {
  inference::ModelInferRequest req = testing::IdsRequest(model, Rows(rows, length));
  req.set_id(id);
  return req;
}

class FaultInjectionTest : public ::testing::Test {
 protected:
  struct ModelSetup {
    std::string name;
    FaultyModelOptions faults;
  };

  // The engine on a FaultyDevice, each model an embed_pool behind a
  // FaultyModel, the gRPC server on loopback; then a warm-up of every shape
  // the tests send, and the baseline.
  void Start(std::vector<ModelSetup> models, absl::Duration queue_delay = absl::Milliseconds(2)) {
    EngineOptions options;
    options.device = "cpu";
    options.device_options.cpu_threads = 1;
    options.create_device = [this](absl::string_view spec, const DeviceOptions& o) {
      return FaultyDevice::Create(spec, o, &device_);
    };
    options.on_device_lost = [this](const absl::Status&) { ++device_lost_reports_; };
    auto engine = Engine::Create(options);
    ASSERT_THAT(engine, IsOk());
    engine_ = *std::move(engine);
    for (ModelSetup& m : models) {
      EmbedPoolOptions e;
      e.name = m.name + "_inner";
      e.embedding_size = kWidth;
      auto inner = EmbedPoolModel::Create(e, engine_->context());
      ASSERT_THAT(inner, IsOk());
      m.faults.name = m.name;
      auto model = std::make_unique<FaultyModel>(*std::move(inner), m.faults);
      models_.push_back(model.get());
      QueueOptions q;
      q.max_batch_size = kMaxBatch;
      q.max_queue_delay = queue_delay;
      ASSERT_THAT(engine_->AddModel(std::move(model), q), IsOk());
    }
    GrpcServerOptions server_options;
    server_options.address = "127.0.0.1:0";
    auto server = GrpcServer::Start(server_options, engine_.get());
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                       grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel);
    health_ = grpc::health::v1::Health::NewStub(channel);
    for (const ModelSetup& m : models) {
      if (!m.faults.failures.empty() && m.faults.failures[0].id_prefix.empty()) continue;
      for (int rows : {1, kMaxBatch}) {
        for (int length : {16, kLong}) {
          ASSERT_TRUE(Infer(Request(m.name, "warm-up", rows, length)).ok());
        }
      }
    }
    baseline_ = Settled();
  }

  void TearDown() override {
    if (server_ != nullptr) server_->StopAccepting(absl::Seconds(1));
    if (engine_ != nullptr) {
      const absl::Time start = absl::Now();
      engine_->Shutdown();
      EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the engine's shutdown hung";
    }
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
  }

  grpc::Status Infer(const inference::ModelInferRequest& req,
                     inference::ModelInferResponse* resp = nullptr,
                     std::chrono::milliseconds timeout = kDeadline) {
    inference::ModelInferResponse ignored;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    return stub_->ModelInfer(&ctx, req, resp != nullptr ? resp : &ignored);
  }

  // Waits (at most 10 s) until no batch holds a memory reservation or a
  // pipeline slot, empties the allocator's cache and reads the accounting.
  Accounting Settled() {
    const absl::Time end = absl::Now() + absl::Seconds(10);
    while (engine_->GetMemoryAdmissionStats().in_flight_bytes != 0 ||
           engine_->pipeline()->stats().in_flight != 0) {
      if (absl::Now() > end) {
        ADD_FAILURE() << "batches still in flight 10 s after their answers";
        break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    engine_->allocator()->EmptyCache();
    const AllocatorStats a = engine_->allocator()->stats();
    return {a.allocated_bytes,
            a.active_bytes,
            a.reserved_bytes,
            a.lost_bytes,
            engine_->GetMemoryAdmissionStats().in_flight_bytes,
            device_->held_bytes()};
  }

  HealthStatus Health() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    EXPECT_TRUE(health_->Check(&ctx, req, &resp).ok());
    return resp.status();
  }

  // Healthy and serving: SERVING, ready, and every model answers.
  void ExpectServing() {
    EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);
    EXPECT_TRUE(engine_->Ready());
    for (const FaultyModel* m : models_) {
      const std::string& name = m->spec().name;
      EXPECT_TRUE(engine_->ModelReady(name)) << name;
    }
    EXPECT_TRUE(Infer(Request(models_[0]->spec().name, "after", 2, 16)).ok());
    EXPECT_EQ(device_lost_reports_.load(), 0);
  }

  std::string Metrics() { return RenderMetrics(*engine_); }

  FaultyDevice* device_ = nullptr;  // owned by the engine
  std::atomic<int> device_lost_reports_{0};
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<GrpcServer> server_;
  std::vector<FaultyModel*> models_;  // owned by the engine
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  Accounting baseline_;
};

// --- the allocator's device refusing --------------------------------------

TEST_F(FaultInjectionTest, ADeviceAllocationRefusedOnceIsRetriedByTheAllocator) {
  ASSERT_NO_FATAL_FAILURE(Start({{"m", {}}}));
  const uint64_t retries = engine_->allocator()->stats().alloc_retries;
  device_->FailAllocations(0, 1);
  inference::ModelInferResponse resp;
  grpc::Status s = Infer(Request("m", "big", kMaxBatch, kLong), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.raw_output_contents(0).size(), size_t{kMaxBatch} * kWidth * sizeof(float));
  EXPECT_EQ(device_->allocation_faults(), 1) << "the fault never fired: the test shows nothing";
  EXPECT_EQ(engine_->allocator()->stats().alloc_retries, retries + 1);
  EXPECT_EQ(Settled(), baseline_);
  ExpectServing();
}

TEST_F(FaultInjectionTest, TheNthDeviceAllocationRefusedFailsOnlyTheRequestThatAskedForIt) {
  ASSERT_NO_FATAL_FAILURE(Start({{"m", {}}}));
  // The third device allocation from now and the allocator's retry of it
  // are refused. Requests go one at a time, each on an empty cache, so each
  // reserves from the device; the one the fault hits is alone in its batch.
  device_->FailAllocations(2, 2);
  std::vector<int> failed;
  for (int i = 0; i < 8; ++i) {
    engine_->allocator()->EmptyCache();
    const int64_t faults_before = device_->allocation_faults();
    grpc::Status s = Infer(Request("m", absl::StrCat("r", i), kMaxBatch, kLong));
    if (device_->allocation_faults() > faults_before) {
      failed.push_back(i);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr("model 'm' failed"));
      EXPECT_THAT(s.error_message(), HasSubstr("injected"));
    } else {
      EXPECT_TRUE(s.ok()) << i << ": " << s.error_message();
    }
  }
  EXPECT_EQ(device_->allocation_faults(), 2);
  EXPECT_EQ(failed.size(), 1u) << "both refusals belong to one request's allocation";
  EXPECT_EQ(Settled(), baseline_);
  EXPECT_THAT(Metrics(), HasSubstr("infer_device_memory_ooms_total{device=\"cpu\"} 1\n"));
  ExpectServing();
}

TEST_F(FaultInjectionTest, ABatchWhoseAllocationIsRefusedIsRetriedInHalvesAndAllSucceed) {
  // A long queue delay: the eight requests sent at once form one batch.
  ASSERT_NO_FATAL_FAILURE(Start({{"m", {}}}, absl::Milliseconds(500)));
  engine_->allocator()->EmptyCache();
  device_->FailAllocations(0, 2);
  std::vector<inference::ModelInferRequest> requests;
  for (int i = 0; i < kMaxBatch; ++i) requests.push_back(Request("m", absl::StrCat(i), 1, kLong));
  std::vector<inference::ModelInferResponse> responses;
  const std::vector<grpc::Status> statuses =
      testing::InferAll(stub_.get(), requests, kDeadline, &responses);
  for (int i = 0; i < kMaxBatch; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    EXPECT_EQ(responses[i].id(), absl::StrCat(i));
    EXPECT_EQ(responses[i].raw_output_contents(0).size(), size_t{kWidth} * sizeof(float));
  }
  EXPECT_EQ(device_->allocation_faults(), 2);
  EXPECT_THAT(Metrics(), HasSubstr("infer_oom_batch_splits_total{model=\"m\"} 1\n"));
  EXPECT_EQ(Settled(), baseline_);
  ExpectServing();
}

// --- the model failing ----------------------------------------------------

// Requests marked for a fault at each stage among unmarked ones, all sent at
// once: exactly the requests of the batches a fault hit fail, INTERNAL.
TEST_F(FaultInjectionTest, AModelFailingAtAnyStageFailsOnlyTheBatchesItHit) {
  FaultyModelOptions faults;
  const std::vector<std::pair<std::string, FaultStage>> marks = {
      {"prepare-", FaultStage::kPrepare},   {"upload-", FaultStage::kUpload},
      {"compute-", FaultStage::kCompute},   {"throw-", FaultStage::kComputeThrows},
      {"download-", FaultStage::kDownload}, {"finish-", FaultStage::kFinish}};
  for (const auto& [prefix, stage] : marks) faults.failures.push_back({prefix, stage});
  ASSERT_NO_FATAL_FAILURE(Start({{"m", faults}}));

  std::vector<inference::ModelInferRequest> requests;
  for (int i = 0; i < 96; ++i) {
    const std::string id = i % 16 == 5 ? absl::StrCat(marks[(i / 16) % marks.size()].first, i)
                                       : absl::StrCat("ok-", i);
    requests.push_back(Request("m", id, 1 + i % 3, i % 2 == 0 ? 16 : 40));
  }
  std::vector<inference::ModelInferResponse> responses;
  const std::vector<grpc::Status> statuses =
      testing::InferAll(stub_.get(), requests, kDeadline, &responses);

  std::set<std::string> hit;
  for (const auto& batch : models_[0]->faulted_batches()) hit.insert(batch.begin(), batch.end());
  int failed = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string& id = requests[i].id();
    const grpc::Status& s = statuses[i];
    if (id.rfind("ok-", 0) != 0) EXPECT_TRUE(hit.contains(id)) << id << " met no fault";
    if (hit.contains(id)) {
      ++failed;
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << id << ": " << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr("model 'm' failed: "));
      EXPECT_THAT(s.error_message(), HasSubstr("injected")) << id;
    } else {
      ASSERT_TRUE(s.ok()) << id << ": " << s.error_message();
      EXPECT_EQ(responses[i].id(), id);
      EXPECT_EQ(responses[i].raw_output_contents(0).size(),
                size_t(1 + i % 3) * kWidth * sizeof(float));
    }
  }
  EXPECT_LT(failed, 96) << "every request failed: nothing shows the fault stayed in its batches";
  const inference::ModelStatistics stats = testing::Stats(stub_.get(), "m");
  EXPECT_EQ(stats.inference_stats().fail().count(), failed);
  EXPECT_EQ(Settled(), baseline_);
  ExpectServing();
}

// On one ModelStreamInfer stream: the failed batches' requests are answered
// with their error (and id) in the stream, which goes on serving the rest.
TEST_F(FaultInjectionTest, AComputeFaultOnAStreamAnswersTheHitRequestsAndTheStreamGoesOn) {
  FaultyModelOptions faults;
  faults.failures.push_back({"compute-", FaultStage::kCompute});
  ASSERT_NO_FATAL_FAILURE(Start({{"m", faults}}));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
  auto stream = stub_->ModelStreamInfer(&ctx);
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(
        stream->Write(Request("m", absl::StrCat(i % 10 == 3 ? "compute-" : "ok-", i), 1, 16)));
  }
  stream->WritesDone();
  std::map<std::string, std::string> errors;  // by id; "" for an answer
  inference::ModelStreamInferResponse resp;
  while (stream->Read(&resp)) {
    const inference::ModelInferResponse& r = resp.infer_response();
    errors[r.id()] = resp.error_message();
    if (resp.error_message().empty()) {
      EXPECT_EQ(r.raw_output_contents(0).size(), size_t{kWidth} * sizeof(float)) << r.id();
    }
  }
  const grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(errors.size(), size_t{kCalls}) << "every request answered once";
  std::set<std::string> hit;
  for (const auto& batch : models_[0]->faulted_batches()) hit.insert(batch.begin(), batch.end());
  EXPECT_GE(hit.size(), 4u);
  for (const auto& [id, error] : errors) {
    if (hit.contains(id)) {
      EXPECT_EQ(error, "INTERNAL: model 'm' failed: injected compute fault") << id;
    } else {
      EXPECT_EQ(error, "") << id;
    }
  }
  EXPECT_EQ(Settled(), baseline_);
  ExpectServing();
}

TEST_F(FaultInjectionTest, AModelWhosePrepareAlwaysFailsHarmsNoOtherModel) {
  FaultyModelOptions broken;
  broken.failures.push_back({"", FaultStage::kPrepare});
  ASSERT_NO_FATAL_FAILURE(Start({{"m", {}}, {"broken", broken}}));
  std::vector<inference::ModelInferRequest> requests;
  for (int i = 0; i < 64; ++i) {
    requests.push_back(Request(i % 2 == 0 ? "m" : "broken", absl::StrCat(i), 1 + i % 4, 24));
  }
  const std::vector<grpc::Status> statuses = testing::InferAll(stub_.get(), requests, kDeadline);
  for (int i = 0; i < 64; ++i) {
    const grpc::Status& s = statuses[i];
    if (i % 2 == 0) {
      EXPECT_TRUE(s.ok()) << i << ": " << s.error_message();
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << i << ": " << s.error_message();
      EXPECT_EQ(s.error_message(), "model 'broken' failed: injected prepare fault");
    }
  }
  EXPECT_EQ(testing::Stats(stub_.get(), "broken").inference_stats().fail().count(), 32);
  EXPECT_EQ(testing::Stats(stub_.get(), "m").inference_stats().fail().count(), 0);
  EXPECT_EQ(Settled(), baseline_);
  ExpectServing();
}

// --- a slow batch ---------------------------------------------------------

// Batches take 20 ms; one takes 200 ms. Requests queued behind it wait, and
// only those whose deadline is shorter than the wait fail, DEADLINE_EXCEEDED;
// the slow batch's own client giving up harms nothing.
TEST_F(FaultInjectionTest, ABatchTenTimesSlowerDelaysOthersButFailsOnlyShortDeadlines) {
  FaultyModelOptions slow;
  slow.compute_time = absl::Milliseconds(20);
  slow.slow_prefix = "slow";
  ASSERT_NO_FATAL_FAILURE(Start({{"m", slow}}));

  // The slow batch with a patient client, and one whose client gives up
  // while it runs.
  std::atomic<bool> slow_ok{false};
  std::thread slow_client([&] { slow_ok = Infer(Request("m", "slow-patient", 1, 16)).ok(); });
  if (!WaitUntil([&] { return models_[0]->slow_batches_started() == 1; })) {
    slow_client.join();
    FAIL() << "the slow batch never started";
  }
  // Sent while the slow batch runs (one compute thread: they queue behind
  // it): patient ones and ones with 30 ms deadlines.
  std::vector<inference::ModelInferRequest> patient, hasty;
  for (int i = 0; i < 16; ++i) {
    patient.push_back(Request("m", absl::StrCat("patient-", i), 1, 16));
    hasty.push_back(Request("m", absl::StrCat("hasty-", i), 1, 16));
  }
  std::vector<grpc::Status> hasty_statuses;
  std::thread hasty_client([&] {
    hasty_statuses = testing::InferAll(stub_.get(), hasty, std::chrono::milliseconds(30));
  });
  const std::vector<grpc::Status> patient_statuses =
      testing::InferAll(stub_.get(), patient, kDeadline);
  hasty_client.join();
  slow_client.join();
  EXPECT_TRUE(slow_ok);
  for (const grpc::Status& s : patient_statuses) EXPECT_TRUE(s.ok()) << s.error_message();
  int hasty_failed = 0;
  for (const grpc::Status& s : hasty_statuses) {
    if (s.ok()) continue;
    ++hasty_failed;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  }
  EXPECT_GT(hasty_failed, 0) << "nothing waited behind the slow batch";

  // A client that gives up on the slow batch while it runs.
  grpc::Status s = Infer(Request("m", "slow-hasty", 1, 16), nullptr, std::chrono::milliseconds(50));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_EQ(Settled(), baseline_);
  EXPECT_EQ(models_[0]->slow_batches_started(), 2);
  ExpectServing();
}

// --- a sticky device error ------------------------------------------------

// The device is lost under load: every call is answered, none INTERNAL;
// those after the loss get UNAVAILABLE naming it; health turns NOT_SERVING;
// the loss is reported once; no reservation is left behind and no block
// freed after the loss is handed out again.
TEST_F(FaultInjectionTest, AStickyDeviceErrorTurnsNotServingAndAnswersEveryCallUnavailable) {
  ASSERT_NO_FATAL_FAILURE(Start({{"m", {}}}));
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, unavailable{0}, other{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop; ++i) {
        grpc::Status s = Infer(Request("m", absl::StrCat(c, "-", i), 1 + i % 8, 16 + 8 * c));
        if (s.ok()) {
          ++ok;
        } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
                   s.error_message().find("the device is lost") != std::string::npos) {
          ++unavailable;
        } else {
          ++other;
          ADD_FAILURE() << s.error_code() << ": " << s.error_message();
        }
      }
    });
  }
  const bool served = WaitUntil([&] { return ok >= 50; });
  device_->LoseDevice();
  const bool refused = WaitUntil([&] { return unavailable >= 50; });
  stop = true;
  for (std::thread& t : clients) t.join();
  ASSERT_TRUE(served) << "50 requests were not served before the loss";
  ASSERT_TRUE(refused) << "50 requests were not refused after the loss";
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(device_->lost_calls(), 0);

  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(engine_->Ready());
  EXPECT_EQ(device_lost_reports_.load(), 1);
  const std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("infer_device_lost{device=\"cpu\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("infer_server_ready 0\n"));

  // Nothing is reserved for batches any more, nothing allocated beyond the
  // weights; blocks freed after the loss are kept out of use (lost), so
  // active exceeds allocated by exactly them.
  const Accounting after = Settled();
  EXPECT_EQ(after.in_flight, 0);
  EXPECT_EQ(after.allocated, baseline_.allocated);
  EXPECT_EQ(after.active, baseline_.active + after.lost);
  EXPECT_EQ(after.device_held, after.reserved);
}

}  // namespace
}  // namespace infer
