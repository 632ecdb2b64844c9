// End-to-end tests of infer-server's drain on SIGTERM, over loopback with the
// real binary (README, "Running more than one"):
// 1. grace (--drain-grace-s): health NOT_SERVING, requests still served;
// 2. stop accepting: GOAWAY, open streams end UNAVAILABLE once answered;
// 3. every accepted request answered, exit 0 within --drain-timeout-s
//    (exit 1 when it cannot be).
// And the point of it: a client spread over two servers loses nothing while
// one of them restarts.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "tests/testing/kserve.h"
#include "tests/testing/server_process.h"

namespace infer {
namespace {

using grpc::StatusCode;
using ::infer::testing::Concurrent;
using ::infer::testing::IdsRequest;
using ::infer::testing::Infer;
using ::infer::testing::Rows;
using ::infer::testing::ServerBinary;
using ::infer::testing::ServerProcess;
using ::infer::testing::Stats;
using ::infer::testing::TempDir;
using inference::GRPCInferenceService;

// A model slow enough on the CPU (~0.1-0.2 s per request of 4 x 512 tokens on
// two cores) that a queue of such requests is still draining while the test
// looks at the server.
constexpr char kSlowConfig[] = R"(
  backend: "embed_pool"
  max_batch_size: 4
  dynamic_batching { max_queue_delay_microseconds: 0 }
  parameters { key: "vocab_size" value { string_value: "1000" } }
  parameters { key: "hidden_size" value { string_value: "2048" } }
  parameters { key: "embedding_size" value { string_value: "2048" } }
)";

// A model that answers at once.
constexpr char kFastConfig[] = R"(
  backend: "identity"
  max_batch_size: 8
  dynamic_batching { max_queue_delay_microseconds: 0 }
)";

// Waits (up to `timeout`) for `text` in the server's log.
bool WaitForLog(const ServerProcess& server, const std::string& text, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (server.log().find(text) == std::string::npos) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// Waits (up to 6 s) until `model` has run a batch: the requests sent before
// are then all accepted.
void WaitForFirstBatch(GRPCInferenceService::Stub* stub, const std::string& model) {
  for (int i = 0; i < 600 && Stats(stub, model).execution_count() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(Stats(stub, model).execution_count(), 0u);
}

// Waits (up to `timeout`) until a TCP connection to 127.0.0.1:`port` is
// refused.
bool WaitForListenerClosed(int port, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool refused = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0;
    close(fd);
    if (refused) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

bool NotServing(grpc::health::v1::Health::Stub* health) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse h;
  const grpc::Status s = health->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &h);
  return s.ok() && h.status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING;
}

TEST(DrainTest, GraceServesThenStopsAcceptingAnswersEverythingAndExitsZero) {
  TempDir repo("drain");
  repo.AddModel("slow", kSlowConfig);
  repo.AddModel("fast", kFastConfig);
  auto server = ServerProcess::Start(ServerBinary(),
                                     {"--device", "cpu", "--model-repository", repo.path().string(),
                                      "--drain-grace-s", "4", "--drain-timeout-s", "120"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto stub = GRPCInferenceService::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);

  // 24 slow requests in flight; the first answer shows they are all accepted.
  constexpr int kInFlight = 24;
  std::vector<StatusCode> codes(kInFlight, StatusCode::UNKNOWN);
  std::atomic<int> bad{0};
  std::thread sender(
      [&] { codes = Concurrent(stub.get(), IdsRequest("slow", Rows(4, 512)), kInFlight, &bad); });
  ASSERT_NO_FATAL_FAILURE(WaitForFirstBatch(stub.get(), "slow"));
  const absl::Time signalled = absl::Now();
  std::thread stopper([&] {
    absl::StatusOr<int> code = server->Stop(SIGTERM, absl::Seconds(120));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << server->log();
  });
  // 1. Grace: not ready, yet a new request is served.
  ASSERT_TRUE(WaitForLog(*server, "health is NOT_SERVING", absl::Seconds(10))) << server->log();
  EXPECT_TRUE(NotServing(health.get())) << "health must say NOT_SERVING during the grace period";
  {
    grpc::ClientContext ctx;
    inference::ServerReadyResponse ready;
    ASSERT_TRUE(stub->ServerReady(&ctx, inference::ServerReadyRequest(), &ready).ok());
    EXPECT_FALSE(ready.ready());
  }
  const grpc::Status during = Infer(stub.get(), IdsRequest("fast", Rows(1, 4)));
  EXPECT_TRUE(during.ok()) << during.error_message();
  const bool within_grace = absl::Now() - signalled < absl::Seconds(4);
  EXPECT_TRUE(within_grace) << "the checks above took longer than the grace period";
  // 2. Then no new calls: the listener is closed and GOAWAY sent.
  ASSERT_TRUE(WaitForLog(*server, "accepting no new calls", absl::Seconds(30))) << server->log();
  EXPECT_GE(absl::Now() - signalled, absl::Seconds(4)) << "the grace period was cut short";
  // Once the listener is closed (while the 24 slow requests still run), a
  // call from a new client finds no server. (A call already on the wire
  // when gRPC's Shutdown begins may be cancelled instead: that race is the
  // load balancers' to avoid, in the grace period.)
  ASSERT_TRUE(WaitForListenerClosed(server->port(), absl::Seconds(10)));
  // A new client: its own connection. (gRPC shares subchannels between
  // channels to one address by default, so without a local pool the call
  // could ride the test's open connection to the draining server, which
  // then cancels it.)
  grpc::ChannelArguments late_args;
  late_args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto late_stub = GRPCInferenceService::NewStub(
      grpc::CreateCustomChannel(server->address(), grpc::InsecureChannelCredentials(), late_args));
  grpc::ClientContext late_ctx;
  late_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  inference::ModelInferResponse ignored;
  const grpc::Status late =
      late_stub->ModelInfer(&late_ctx, IdsRequest("fast", Rows(1, 4)), &ignored);
  EXPECT_EQ(late.error_code(), StatusCode::UNAVAILABLE) << late.error_message();
  // 3. Everything accepted is answered; exit 0 (checked by the stopper).
  sender.join();
  stopper.join();
  for (int i = 0; i < kInFlight; ++i) EXPECT_EQ(codes[i], StatusCode::OK) << "request " << i;
  EXPECT_EQ(bad.load(), 0);
}

// Health.Watch (gRPC's client-side health checking) hears SERVING, then
// NOT_SERVING as the grace period starts, then the watch ends.
TEST(DrainTest, AHealthWatchHearsTheDrainAtOnceAndEnds) {
  TempDir repo("drain_watch");
  repo.AddModel("fast", kFastConfig);
  auto server = ServerProcess::Start(
      ServerBinary(),
      {"--device", "cpu", "--model-repository", repo.path().string(), "--drain-grace-s", "2"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto watch = health->Watch(&ctx, grpc::health::v1::HealthCheckRequest());
  grpc::health::v1::HealthCheckResponse h;
  ASSERT_TRUE(watch->Read(&h));
  EXPECT_EQ(h.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  {
    grpc::ClientContext other_ctx;
    grpc::health::v1::HealthCheckRequest other;
    other.set_service("no.such.Service");
    auto unknown = health->Watch(&other_ctx, other);
    ASSERT_TRUE(unknown->Read(&h));
    EXPECT_EQ(h.status(), grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN);
    other_ctx.TryCancel();
    EXPECT_EQ(unknown->Finish().error_code(), StatusCode::CANCELLED);
  }
  std::thread stopper([&] { EXPECT_EQ(*server->Stop(SIGTERM), 0) << server->log(); });
  const absl::Time signalled = absl::Now();
  ASSERT_TRUE(watch->Read(&h));
  EXPECT_EQ(h.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(2)) << "heard only after the grace period";
  EXPECT_FALSE(watch->Read(&h));
  EXPECT_TRUE(watch->Finish().ok());
  stopper.join();
}

TEST(DrainTest, AnOpenStreamIsAnsweredThenEndedAndDoesNotHoldTheExit) {
  TempDir repo("drain_stream");
  repo.AddModel("fast", kFastConfig);
  auto server = ServerProcess::Start(
      ServerBinary(),
      {"--device", "cpu", "--model-repository", repo.path().string(), "--drain-timeout-s", "60"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->ModelStreamInfer(&ctx);
  inference::ModelInferRequest req = IdsRequest("fast", Rows(1, 4));
  req.set_id("first");
  ASSERT_TRUE(stream->Write(req));
  inference::ModelStreamInferResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.error_message(), "");
  EXPECT_EQ(resp.infer_response().id(), "first");
  // The stream stays open and idle; the drain ends it instead of waiting.
  const absl::Time signalled = absl::Now();
  absl::StatusOr<int> code = server->Stop(SIGTERM, absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << server->log();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(20)) << "an idle stream held the drain";
  EXPECT_FALSE(stream->Read(&resp));
  const grpc::Status end = stream->Finish();
  EXPECT_EQ(end.error_code(), StatusCode::UNAVAILABLE) << end.error_message();
  EXPECT_NE(end.error_message().find("open a new stream"), std::string::npos)
      << end.error_message();
}

TEST(DrainTest, ADrainPastItsTimeoutExitsOneWithoutWaitingForTheRest) {
  TempDir repo("drain_timeout");
  repo.AddModel("slow", kSlowConfig);
  auto server = ServerProcess::Start(
      ServerBinary(),
      {"--device", "cpu", "--model-repository", repo.path().string(), "--drain-timeout-s", "1"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto stub = GRPCInferenceService::NewStub(channel);
  // 64 slow requests: several seconds of work, far more than the 1 s allowed.
  constexpr int kInFlight = 64;
  std::atomic<int> bad{0};
  std::vector<StatusCode> codes;
  std::thread sender(
      [&] { codes = Concurrent(stub.get(), IdsRequest("slow", Rows(4, 512)), kInFlight, &bad); });
  ASSERT_NO_FATAL_FAILURE(WaitForFirstBatch(stub.get(), "slow"));
  const absl::Time signalled = absl::Now();
  absl::StatusOr<int> code = server->Stop(SIGTERM, absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 1) << server->log();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(10)) << "the timeout bounds the exit";
  EXPECT_NE(server->log().find("drain timed out"), std::string::npos) << server->log();
  sender.join();
  int unanswered = 0;
  for (StatusCode c : codes) unanswered += c != StatusCode::OK;
  EXPECT_GT(unanswered, 0) << "some requests were cut off (the timeout was real)";
}

// A client whose channel spreads calls over two servers (round robin, on
// health) keeps running while one of them drains and exits: its health
// watch says NOT_SERVING at the start of the grace period, so new calls go to
// the other while the calls it holds are answered.
TEST(DrainTest, AClientOverTwoServersLosesNothingWhileOneDrains) {
  TempDir repo("drain_two");
  repo.AddModel("fast", kFastConfig);
  const std::vector<std::string> args = {
      "--device",        "cpu", "--model-repository", repo.path().string(),
      "--drain-grace-s", "1",   "--cpu-threads",      "1"};
  auto a = ServerProcess::Start(ServerBinary(), args);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = ServerProcess::Start(ServerBinary(), args);
  ASSERT_TRUE(b.ok()) << b.status();
  // Round robin over the servers that gRPC's client-side health checking
  // (Health.Watch) reports SERVING.
  grpc::ChannelArguments channel_args;
  channel_args.SetServiceConfigJSON(
      R"({"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}})");
  auto channel = grpc::CreateCustomChannel(
      absl::StrCat("ipv4:127.0.0.1:", a->port(), ",127.0.0.1:", b->port()),
      grpc::InsecureChannelCredentials(), channel_args);
  auto stub = GRPCInferenceService::NewStub(channel);

  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::mutex mu;
  std::map<std::string, int> failures;  // by code and message
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      const inference::ModelInferRequest req = IdsRequest("fast", Rows(1, 8));
      while (!stop.load()) {
        const grpc::Status s = Infer(stub.get(), req);
        if (s.ok()) {
          ++ok;
        } else {
          std::lock_guard<std::mutex> lock(mu);
          ++failures[absl::StrCat(s.error_code(), ": ", s.error_message())];
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int before = ok.load();
  absl::StatusOr<int> code = a->Stop(SIGTERM, absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << a->log();
  const int at_exit = ok.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (std::thread& c : clients) c.join();
  EXPECT_GT(before, 0);
  EXPECT_GT(ok.load(), at_exit) << "the other server took the load";
  std::string failed;
  for (const auto& [what, n] : failures) absl::StrAppend(&failed, n, " x ", what, "\n");
  EXPECT_TRUE(failures.empty()) << "failed while one server drained:\n" << failed;
  EXPECT_EQ(*b->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace infer
