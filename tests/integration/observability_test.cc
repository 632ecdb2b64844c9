// End-to-end tests of the operational side of infer-server over loopback:
// request-size limits and their codes, the Prometheus endpoint, ModelStatistics,
// ModelStreamInfer, the config file, and TLS /
// mutual TLS with certificates made by the test. The real binary is started
// by each test (or suite) and stopped with a signal.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/loadgen/prometheus_text.h"
#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "tests/testing/kserve.h"
#include "tests/testing/server_process.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using grpc::StatusCode;
using ::infer::loadgen::HttpGet;
using ::infer::loadgen::ParsePrometheusText;
using ::infer::loadgen::Sample;
using ::infer::loadgen::SumOf;
using ::infer::testing::Concurrent;
using ::infer::testing::IdsRequest;
using ::infer::testing::Infer;
using ::infer::testing::Rows;
using ::infer::testing::ServerBinary;
using ::infer::testing::ServerProcess;
using ::infer::testing::Stats;
using ::infer::testing::TempDir;
using inference::GRPCInferenceService;

constexpr char kLimitedConfig[] = R"(
  backend: "embed_pool"
  max_batch_size: 8
  dynamic_batching { max_queue_delay_microseconds: 500 length_buckets: [16, 64] }
  parameters { key: "vocab_size" value { string_value: "1000" } }
  parameters { key: "embedding_size" value { string_value: "8" } }
  request_limits { max_client_batch_size: 4 max_input_length: 48 max_request_tokens: 96
                   max_tensor_elements: 150 max_text_bytes: 100 }
)";

std::unique_ptr<GRPCInferenceService::Stub> Stub(const ServerProcess& server) {
  return GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
}

class ObservabilityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ = new TempDir("repo");
    repo_->AddModel("limited", kLimitedConfig);
    server_ = testing::StartSharedServer(
        {"--model-repository", repo_->path().string(), "--max-receive-message-bytes", "65536"});
  }
  static void TearDownTestSuite() {
    testing::StopSharedServer(&server_);
    delete repo_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = Stub(*server_);
  }
  std::vector<Sample> Scrape() {
    absl::StatusOr<std::string> body = HttpGet(server_->metrics_port(), "/metrics");
    EXPECT_TRUE(body.ok()) << body.status();
    if (!body.ok()) return {};
    absl::StatusOr<std::vector<Sample>> samples = ParsePrometheusText(*body);
    EXPECT_TRUE(samples.ok()) << samples.status();
    return samples.ok() ? *samples : std::vector<Sample>{};
  }
  void ExpectRefused(const inference::ModelInferRequest& req, StatusCode code,
                     const std::string& text) {
    const grpc::Status s = Infer(stub_.get(), req);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(text), std::string::npos) << s.error_message();
  }

  static TempDir* repo_;
  static ServerProcess* server_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

TempDir* ObservabilityTest::repo_ = nullptr;
ServerProcess* ObservabilityTest::server_ = nullptr;

TEST_F(ObservabilityTest, EachRequestLimitHasItsCodeAndNamesTheLimit) {
  ExpectRefused(IdsRequest("limited", Rows(5, 2)), StatusCode::INVALID_ARGUMENT,
                "over the limit of 4 per request of model 'limited' "
                "(request_limits.max_client_batch_size)");
  ExpectRefused(IdsRequest("limited", Rows(1, 49)), StatusCode::INVALID_ARGUMENT,
                "over the limit of 48 of model 'limited' (request_limits.max_input_length)");
  ExpectRefused(IdsRequest("limited", Rows(3, 40)), StatusCode::INVALID_ARGUMENT,
                "120 tokens, over the limit of 96 of model 'limited' "
                "(request_limits.max_request_tokens)");
  ExpectRefused(IdsRequest("limited", Rows(4, 40)), StatusCode::INVALID_ARGUMENT,
                "over the limit of 150 elements per tensor of model 'limited' "
                "(request_limits.max_tensor_elements)");
  {
    // A declared shape of 2^62 elements with 8 bytes of data: refused on
    // the declared shape, before the contents are decoded, without
    // allocating for it.
    inference::ModelInferRequest req = IdsRequest("limited", Rows(1, 1));
    req.mutable_inputs(0)->mutable_shape()->Set(0, int64_t{1} << 31);
    req.mutable_inputs(0)->mutable_shape()->Set(1, int64_t{1} << 31);
    ExpectRefused(req, StatusCode::INVALID_ARGUMENT,
                  "shape [2147483648,2147483648], over the limit of 150 elements per tensor");
  }
  {
    // Typed contents (int64_contents) are decoded into a copy; the limit on
    // the declared shape comes first, so a request over it is refused before
    // that copy, whatever its contents (here fewer than the shape says).
    inference::ModelInferRequest req;
    req.set_model_name("limited");
    auto* in = req.add_inputs();
    in->set_name("input_ids");
    in->set_datatype("INT64");
    in->add_shape(1);
    in->add_shape(151);
    for (int i = 0; i < 3; ++i) in->mutable_contents()->add_int64_contents(101);
    ExpectRefused(req, StatusCode::INVALID_ARGUMENT,
                  "over the limit of 150 elements per tensor of model 'limited' "
                  "(request_limits.max_tensor_elements)");
  }
  {
    // The token limits too are checked on the declared shape, before the
    // payload (here 8 bytes, far fewer than the shape says) is looked at.
    inference::ModelInferRequest req = IdsRequest("limited", Rows(1, 1));
    req.mutable_inputs(0)->mutable_shape()->Set(1, 49);
    ExpectRefused(req, StatusCode::INVALID_ARGUMENT,
                  "input has 49 tokens per sequence, over the limit of 48 of model 'limited' "
                  "(request_limits.max_input_length)");
    req.mutable_inputs(0)->mutable_shape()->Set(0, 3);
    req.mutable_inputs(0)->mutable_shape()->Set(1, 40);
    ExpectRefused(req, StatusCode::INVALID_ARGUMENT,
                  "request has 3 sequences of 40 tokens = 120 tokens, over the limit of 96");
  }
  {
    inference::ModelInferRequest req;
    req.set_model_name("limited");
    auto* in = req.add_inputs();
    in->set_name("text");
    in->set_datatype("BYTES");
    in->add_shape(2);
    in->mutable_contents()->add_bytes_contents(std::string(60, 'a'));
    in->mutable_contents()->add_bytes_contents(std::string(60, 'b'));
    ExpectRefused(req, StatusCode::INVALID_ARGUMENT,
                  "over the limit of 100 of model 'limited' (request_limits.max_text_bytes)");
  }
  // Server-wide: a message over --max-receive-message-bytes (65536) is
  // refused by gRPC before it is read.
  ExpectRefused(IdsRequest("limited", Rows(2, 5000)), StatusCode::RESOURCE_EXHAUSTED, "65536");
  // The server keeps serving, and within the limits a request over
  // max_batch_size is still fine.
  EXPECT_TRUE(Infer(stub_.get(), IdsRequest("limited", Rows(4, 24))).ok());
}

TEST_F(ObservabilityTest, MetricsScrapeGrowsWithRequestsAndShowsDeviceMemory) {
  ASSERT_GT(server_->metrics_port(), 0) << server_->log();
  const std::vector<Sample> before = Scrape();
  const std::map<std::string, std::string> short_bucket = {{"model", "limited"},
                                                           {"length_bucket", "16"}};
  std::atomic<int> bad{0};
  const std::vector<StatusCode> codes =
      Concurrent(stub_.get(), IdsRequest("limited", Rows(1, 10)), 40, &bad);
  for (StatusCode c : codes) EXPECT_EQ(c, StatusCode::OK);
  ExpectRefused(IdsRequest("limited", Rows(1, 70)), StatusCode::INVALID_ARGUMENT,
                "request_limits.max_input_length");
  const std::vector<Sample> after = Scrape();
  const auto grew = [&](const std::string& name, const std::map<std::string, std::string>& l) {
    return SumOf(after, name, l) - SumOf(before, name, l);
  };
  EXPECT_EQ(grew("infer_request_duration_seconds_count", short_bucket), 40);
  EXPECT_EQ(grew("infer_queue_duration_seconds_count", short_bucket), 40);
  EXPECT_EQ(grew("infer_batch_size_sum", short_bucket), 40) << "rows of the executed batches";
  EXPECT_GT(grew("infer_compute_duration_seconds_count", short_bucket), 0);
  EXPECT_EQ(grew("infer_requests_total", {{"model", "limited"}, {"code", "OK"}}), 40);
  EXPECT_EQ(grew("infer_rejections_total", {{"model", "limited"}, {"reason", "over_limit"}}), 1);
  // What histogram_quantile would give for p99 over this scrape.
  const double p99 = ::infer::loadgen::HistogramQuantile(after, "infer_request_duration_seconds",
                                                         0.99, {{"model", "limited"}});
  EXPECT_GT(p99, 0.0);
  EXPECT_LT(p99, 30.0);
  for (const char* gauge :
       {"infer_device_memory_total_bytes", "infer_device_memory_budget_bytes",
        "infer_device_memory_headroom_bytes", "infer_device_memory_reserved_bytes",
        "infer_device_memory_allocated_bytes", "infer_device_memory_peak_allocated_bytes",
        "infer_device_memory_largest_free_block_bytes"}) {
    EXPECT_EQ(::infer::loadgen::CountOf(after, gauge, {{"device", "cpu"}}), 1) << gauge;
  }
  EXPECT_GT(SumOf(after, "infer_device_memory_budget_bytes"), 0);
  EXPECT_EQ(SumOf(after, "infer_queue_depth", {{"model", "limited"}}), 0);
}

TEST_F(ObservabilityTest, ModelStatisticsMatchTheRequestsSent) {
  const inference::ModelStatistics before = Stats(stub_.get(), "limited");
  constexpr int kOk = 12;
  for (int i = 0; i < kOk; ++i) {
    ASSERT_TRUE(Infer(stub_.get(), IdsRequest("limited", Rows(2, 20))).ok());
  }
  ExpectRefused(IdsRequest("limited", Rows(9, 2)), StatusCode::INVALID_ARGUMENT, "max_client");
  {
    // Refused by the front end: the payload does not match the shape, and
    // an unknown version. Each counts as one failed request.
    inference::ModelInferRequest req = IdsRequest("limited", Rows(1, 4));
    req.mutable_raw_input_contents(0)->resize(8);
    ExpectRefused(req, StatusCode::INVALID_ARGUMENT, "bytes");
    req = IdsRequest("limited", Rows(1, 4));
    req.set_model_version("7");
    ExpectRefused(req, StatusCode::NOT_FOUND, "has no version '7'");
  }
  const inference::ModelStatistics after = Stats(stub_.get(), "limited");
  const inference::InferStatistics& a = after.inference_stats();
  const inference::InferStatistics& b = before.inference_stats();
  EXPECT_EQ(after.inference_count() - before.inference_count(), 2u * kOk) << "rows";
  EXPECT_EQ(a.success().count() - b.success().count(), static_cast<uint64_t>(kOk));
  EXPECT_EQ(a.fail().count() - b.fail().count(), 3u);
  EXPECT_EQ(a.queue().count() - b.queue().count(), static_cast<uint64_t>(kOk));
  for (const auto* d : {&a.compute_input(), &a.compute_infer(), &a.compute_output()}) {
    EXPECT_EQ(d->count(), a.success().count());
  }
  EXPECT_GT(a.compute_infer().ns() - b.compute_infer().ns(), 0u);
  // Queue and the compute phases follow one another within each request.
  const auto grew = [](const inference::StatisticDuration& x,
                       const inference::StatisticDuration& y) { return x.ns() - y.ns(); };
  EXPECT_GE(grew(a.success(), b.success()), grew(a.queue(), b.queue()) +
                                                grew(a.compute_input(), b.compute_input()) +
                                                grew(a.compute_infer(), b.compute_infer()) +
                                                grew(a.compute_output(), b.compute_output()));
  uint64_t executions = 0;
  for (const auto& batch : after.batch_stats()) {
    executions += batch.compute_infer().count();
    EXPECT_EQ(batch.compute_input().count(), batch.compute_infer().count());
    EXPECT_EQ(batch.compute_output().count(), batch.compute_infer().count());
  }
  EXPECT_EQ(executions, after.execution_count());
  EXPECT_GT(after.last_inference(), 0u);
}

TEST_F(ObservabilityTest, StreamInferAnswersEveryRequestByIdAndKeepsGoingAfterErrors) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub_->ModelStreamInfer(&ctx);
  constexpr int kRequests = 30;
  for (int i = 0; i < kRequests; ++i) {
    // Every fifth is over the client batch limit.
    inference::ModelInferRequest req = IdsRequest("limited", Rows(i % 5 == 4 ? 6 : 1, 3 + i % 7));
    req.set_id(absl::StrCat("r", i));
    ASSERT_TRUE(stream->Write(req));
  }
  stream->WritesDone();
  std::map<std::string, inference::ModelStreamInferResponse> answers;
  inference::ModelStreamInferResponse resp;
  while (stream->Read(&resp)) answers[resp.infer_response().id()] = resp;
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), static_cast<size_t>(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    const inference::ModelStreamInferResponse& a = answers[absl::StrCat("r", i)];
    if (i % 5 == 4) {
      EXPECT_NE(a.error_message().find("INVALID_ARGUMENT: input 'input_ids' has batch dimension 6"),
                std::string::npos)
          << a.error_message();
    } else {
      EXPECT_EQ(a.error_message(), "") << i;
      EXPECT_EQ(a.infer_response().model_name(), "limited");
      ASSERT_EQ(a.infer_response().outputs_size(), 1);
      EXPECT_EQ(a.infer_response().outputs(0).shape(1), 8);
    }
  }
}

TEST(ServerConfigTest, ConfigFileSetsOptionsAndTheCommandLineWins) {
  TempDir dir("config");
  const fs::path config = dir.path() / "server.toml";
  std::ofstream(config) << "# infer-server options\n"
                           "device = \"cpu\"\n"
                           "max-receive-message-bytes = 4096\n"
                           "log-summary-interval-s = 0.2\n";
  auto server = ServerProcess::Start(ServerBinary(), {"--config", config.string()});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Stub(*server);
  const grpc::Status big = Infer(stub.get(), IdsRequest("embed_pool", Rows(2, 400)));
  EXPECT_EQ(big.error_code(), StatusCode::RESOURCE_EXHAUSTED) << big.error_message();
  EXPECT_TRUE(Infer(stub.get(), IdsRequest("embed_pool", Rows(1, 10))).ok());
  // The periodic summary reports the traffic.
  std::string log;
  for (int i = 0; i < 100; ++i) {
    log = server->log();
    if (log.find("model 'embed_pool' last 0.2s: 1 answered") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(log.find("model 'embed_pool' last 0.2s: 1 answered"), std::string::npos) << log;
  EXPECT_NE(log.find("p99 "), std::string::npos);
  EXPECT_NE(log.find("device cpu memory: "), std::string::npos);
  ASSERT_EQ(*server->Stop(SIGTERM), 0);

  // The command line overrides the file.
  auto wider = ServerProcess::Start(
      ServerBinary(), {"--config", config.string(), "--max-receive-message-bytes", "1000000"});
  ASSERT_TRUE(wider.ok()) << wider.status();
  EXPECT_TRUE(Infer(Stub(*wider).get(), IdsRequest("embed_pool", Rows(2, 400))).ok());
  ASSERT_EQ(*wider->Stop(SIGTERM), 0);

  // A bad file fails at start naming the file, the option and the problem.
  std::ofstream(config) << "max-receive-message-bytes = \"lots\"\n";
  auto bad = ServerProcess::Start(ServerBinary(), {"--config", config.string()});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--max-receive-message-bytes: Value lots"),
            std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find(config.string()), std::string::npos);
  std::ofstream(config) << "max-recieve-message-bytes = 5\n";
  auto misspelt = ServerProcess::Start(ServerBinary(), {"--config", config.string()});
  ASSERT_FALSE(misspelt.ok());
  EXPECT_NE(misspelt.status().message().find("unknown option 'max-recieve-message-bytes'"),
            std::string::npos)
      << misspelt.status();
}

// Runs openssl to make a CA, a server certificate for 127.0.0.1 and a
// client certificate, all signed by the CA, under `dir`.
bool MakeCertificates(const fs::path& dir) {
  const std::string d = dir.string();
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script = absl::StrCat(
      "set -e; cd '", d, "'; ", "openssl req -x509 ", key,
      " -keyout ca.key -out ca.pem -days 2 -subj /CN=infer-test-ca; ", "openssl req ", key,
      " -keyout server.key -out server.csr -subj /CN=localhost; ",
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > server.ext; ",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 ",
      "-extfile server.ext -out server.pem; ", "openssl req ", key,
      " -keyout client.key -out client.csr -subj /CN=infer-test-client; ",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 ",
      "-out client.pem; ", "openssl req -x509 ", key,
      " -keyout other.key -out other.pem -days 2 -subj /CN=stranger", " > openssl.log 2>&1");
  return std::system(("bash -c \"" + script + "\" > /dev/null 2>&1").c_str()) == 0;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// ServerLive over a channel with these credentials.
grpc::Status Live(const ServerProcess& server,
                  const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  auto stub = GRPCInferenceService::NewStub(grpc::CreateChannel(server.address(), creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  inference::ServerLiveResponse live;
  return stub->ServerLive(&ctx, inference::ServerLiveRequest(), &live);
}

TEST(TlsTest, TlsAndMutualTlsHandshakes) {
  TempDir dir("tls");
  ASSERT_TRUE(MakeCertificates(dir.path())) << Read(dir.path() / "openssl.log");
  const fs::path p = dir.path();
  grpc::SslCredentialsOptions trusting;
  trusting.pem_root_certs = Read(p / "ca.pem");
  grpc::SslCredentialsOptions with_cert = trusting;
  with_cert.pem_private_key = Read(p / "client.key");
  with_cert.pem_cert_chain = Read(p / "client.pem");
  grpc::SslCredentialsOptions stranger = trusting;  // a self-signed cert the CA never signed
  stranger.pem_private_key = Read(p / "other.key");
  stranger.pem_cert_chain = Read(p / "other.pem");
  grpc::SslCredentialsOptions untrusting;
  untrusting.pem_root_certs = Read(p / "other.pem");

  {  // TLS: any client that trusts the CA; plaintext and untrusting fail.
    auto server = ServerProcess::Start(
        ServerBinary(), {"--device", "cpu", "--tls-cert-file", (p / "server.pem").string(),
                         "--tls-key-file", (p / "server.key").string()});
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_NE(server->log().find("(TLS)"), std::string::npos);
    EXPECT_TRUE(Live(*server, grpc::SslCredentials(trusting)).ok());
    EXPECT_TRUE(Live(*server, grpc::SslCredentials(with_cert)).ok());
    EXPECT_EQ(Live(*server, grpc::InsecureChannelCredentials()).error_code(),
              StatusCode::UNAVAILABLE);
    EXPECT_EQ(Live(*server, grpc::SslCredentials(untrusting)).error_code(),
              StatusCode::UNAVAILABLE);
    EXPECT_EQ(*server->Stop(SIGTERM), 0);
  }
  {  // Mutual TLS: only clients with a certificate the CA signed.
    auto server = ServerProcess::Start(
        ServerBinary(),
        {"--device", "cpu", "--tls-cert-file", (p / "server.pem").string(), "--tls-key-file",
         (p / "server.key").string(), "--tls-client-ca-file", (p / "ca.pem").string()});
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_NE(server->log().find("(mutual TLS)"), std::string::npos);
    EXPECT_TRUE(Live(*server, grpc::SslCredentials(with_cert)).ok());
    EXPECT_EQ(Live(*server, grpc::SslCredentials(trusting)).error_code(), StatusCode::UNAVAILABLE)
        << "a client without a certificate is refused";
    EXPECT_EQ(Live(*server, grpc::SslCredentials(stranger)).error_code(), StatusCode::UNAVAILABLE)
        << "a certificate the CA did not sign is refused";
    // An inference over mutual TLS works end to end.
    auto stub = GRPCInferenceService::NewStub(
        grpc::CreateChannel(server->address(), grpc::SslCredentials(with_cert)));
    EXPECT_TRUE(Infer(stub.get(), IdsRequest("embed_pool", Rows(2, 5))).ok());
    EXPECT_EQ(*server->Stop(SIGTERM), 0);
  }
  {  // Bad TLS settings fail at start, naming the problem.
    auto half = ServerProcess::Start(
        ServerBinary(), {"--device", "cpu", "--tls-cert-file", (p / "server.pem").string()});
    ASSERT_FALSE(half.ok());
    EXPECT_NE(half.status().message().find("TLS needs both the certificate"), std::string::npos)
        << half.status();
    auto not_pem = ServerProcess::Start(
        ServerBinary(), {"--device", "cpu", "--tls-cert-file", (p / "server.ext").string(),
                         "--tls-key-file", (p / "server.key").string()});
    ASSERT_FALSE(not_pem.ok());
    EXPECT_NE(not_pem.status().message().find("holds no PEM block"), std::string::npos)
        << not_pem.status();
  }
}

}  // namespace
}  // namespace infer
