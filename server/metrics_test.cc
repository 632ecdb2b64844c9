#include "server/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "bench/loadgen/prometheus_text.h"
#include "models/embed_pool/embed_pool.h"
#include "runtime/nvml_telemetry.h"
#include "server/gpu_metrics.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"

namespace infer {
namespace {

using ::infer::loadgen::CountOf;
using ::infer::loadgen::HistogramQuantile;
using ::infer::loadgen::ParsePrometheusText;
using ::infer::loadgen::Sample;
using ::infer::loadgen::SumOf;
using ::infer::testing::IsOk;

InferRequest Ids(int64_t rows, int64_t len) {
  return testing::IdsRequest("embed_pool", rows, len, 7);
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::Create({.device = "cpu"});
    ASSERT_THAT(engine, IsOk());
    engine_ = *std::move(engine);
    QueueOptions q;
    q.max_batch_size = 8;
    q.max_queue_delay = absl::Milliseconds(1);
    q.length_buckets = {16, 128};
    auto model = EmbedPoolModel::Create(EmbedPoolOptions{}, engine_->context());
    ASSERT_THAT(model, IsOk());
    ASSERT_THAT(engine_->AddModel(*std::move(model), q), IsOk());
  }
  std::vector<Sample> Scrape() {
    absl::StatusOr<std::vector<Sample>> s = ParsePrometheusText(RenderMetrics(*engine_));
    EXPECT_THAT(s, IsOk());
    return s.ok() ? *s : std::vector<Sample>{};
  }
  std::unique_ptr<Engine> engine_;
};

TEST_F(MetricsTest, HistogramsGrowWithRequestsPerLengthBucket) {
  const std::vector<Sample> before = Scrape();
  const std::map<std::string, std::string> short_bucket = {{"model", "embed_pool"},
                                                           {"length_bucket", "16"}};
  const std::map<std::string, std::string> long_bucket = {{"model", "embed_pool"},
                                                          {"length_bucket", "128"}};
  EXPECT_EQ(SumOf(before, "infer_request_duration_seconds_count", short_bucket), 0);
  for (int i = 0; i < 5; ++i) ASSERT_THAT(engine_->Infer(Ids(1, 8)), IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_THAT(engine_->Infer(Ids(2, 100)), IsOk());
  EXPECT_THAT(
      engine_->Infer(Ids(1, 200)),
      ::infer::testing::StatusIs(absl::StatusCode::kInvalidArgument, "its longest length bucket"));
  const std::vector<Sample> after = Scrape();
  EXPECT_EQ(SumOf(after, "infer_request_duration_seconds_count", short_bucket), 5);
  EXPECT_EQ(SumOf(after, "infer_request_duration_seconds_count", long_bucket), 3);
  EXPECT_EQ(SumOf(after, "infer_queue_duration_seconds_count", short_bucket), 5);
  EXPECT_EQ(SumOf(after, "infer_batch_size_sum", long_bucket), 6) << "2 rows x 3 requests";
  EXPECT_GT(SumOf(after, "infer_compute_duration_seconds_count", {{"model", "embed_pool"}}), 0);
  // 43 finite bounds + the +Inf bucket per series.
  EXPECT_EQ(CountOf(after, "infer_request_duration_seconds_bucket", short_bucket), 44);
  EXPECT_EQ(SumOf(after, "infer_requests_total", {{"model", "embed_pool"}, {"code", "OK"}}), 8);
  EXPECT_EQ(
      SumOf(after, "infer_requests_total", {{"model", "embed_pool"}, {"code", "INVALID_ARGUMENT"}}),
      1);
  EXPECT_EQ(
      SumOf(after, "infer_rejections_total", {{"model", "embed_pool"}, {"reason", "over_limit"}}),
      1)
      << "longer than the last bucket";
  const double p99 =
      HistogramQuantile(after, "infer_request_duration_seconds", 0.99, {{"model", "embed_pool"}});
  EXPECT_GT(p99, 0);
  EXPECT_LT(p99, 100);
  EXPECT_EQ(SumOf(after, "infer_queue_depth", {{"model", "embed_pool"}}), 0);
  EXPECT_EQ(CountOf(after, "infer_queue_depth", {{"model", "embed_pool"}}), 2);
}

TEST_F(MetricsTest, DeviceMemoryGaugesArePresentAndConsistent) {
  ASSERT_THAT(engine_->Infer(Ids(4, 32)), IsOk());
  const std::vector<Sample> s = Scrape();
  const std::map<std::string, std::string> dev = {{"device", "cpu"}};
  for (const char* name :
       {"total", "budget", "headroom", "weights", "batches_in_flight", "reserved", "allocated",
        "peak_allocated", "largest_free_block", "cached_free"}) {
    EXPECT_EQ(CountOf(s, absl::StrCat("infer_device_memory_", name, "_bytes"), dev), 1) << name;
  }
  const double budget = SumOf(s, "infer_device_memory_budget_bytes", dev);
  EXPECT_GT(budget, 0);
  EXPECT_LE(SumOf(s, "infer_device_memory_reserved_bytes", dev), budget);
  EXPECT_GE(SumOf(s, "infer_device_memory_peak_allocated_bytes", dev),
            SumOf(s, "infer_device_memory_weights_bytes", dev));
  EXPECT_NEAR(SumOf(s, "infer_device_memory_headroom_bytes", dev), budget * 0.1, budget * 0.01);
  EXPECT_EQ(SumOf(s, "infer_server_ready"), 1);
}

TEST_F(MetricsTest, ServedOverHttpOnItsOwnPort) {
  auto server = MetricsServer::Start("127.0.0.1:0", engine_.get());
  ASSERT_THAT(server, IsOk());
  ASSERT_THAT(engine_->Infer(Ids(1, 8)), IsOk());
  absl::StatusOr<std::string> body = ::infer::loadgen::HttpGet((*server)->port(), "/metrics");
  ASSERT_THAT(body, IsOk());
  absl::StatusOr<std::vector<Sample>> s = ParsePrometheusText(*body);
  ASSERT_THAT(s, IsOk()) << *body;
  EXPECT_EQ(SumOf(*s, "infer_request_duration_seconds_count", {{"model", "embed_pool"}}), 1);
  EXPECT_FALSE(::infer::loadgen::HttpGet((*server)->port(), "/nothing").ok());
  // A port in use is refused with the address named.
  auto clash = MetricsServer::Start(absl::StrCat("127.0.0.1:", (*server)->port()), engine_.get());
  EXPECT_THAT(clash, ::infer::testing::StatusIs(absl::StatusCode::kUnavailable,
                                                "metrics: cannot listen for HTTP on '127.0.0.1:"));
  EXPECT_THAT(MetricsServer::Start("8002", engine_.get()),
              ::infer::testing::StatusIs(absl::StatusCode::kInvalidArgument, "is not host:port"));
}

TEST_F(MetricsTest, ATricklingOrIdleClientHoldsTheEndpointForAtMostTwoSeconds) {
  auto server = MetricsServer::Start("127.0.0.1:0", engine_.get());
  ASSERT_THAT(server, IsOk());
  auto connect_to = [&] {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>((*server)->port()));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
  };
  // One client sends a byte every 300 ms and never ends its header (each
  // byte alone would beat a per-read timeout); another connects and says
  // nothing. A scrape behind them is answered once their 2 s are up.
  const int trickler = connect_to();
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (int i = 0; i < 30 && !done.load(); ++i) {
      send(trickler, "G", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int idle = connect_to();
  const absl::Time t0 = absl::Now();
  absl::StatusOr<std::string> body = ::infer::loadgen::HttpGet((*server)->port(), "/metrics");
  const absl::Duration waited = absl::Now() - t0;
  done.store(true);
  trickle.join();
  close(trickler);
  close(idle);
  ASSERT_THAT(body, IsOk());
  EXPECT_NE(body->find("infer_server_ready"), std::string::npos);
  // About 2 s for each of the two ahead of it; far less than the 9 s the
  // trickle would last.
  EXPECT_LT(waited, absl::Seconds(6));
}

TEST_F(MetricsTest, LatencySummaryCoversOneIntervalAtATime) {
  LatencyReporter reporter(engine_.get(), absl::Hours(1));  // the thread stays idle
  for (int i = 0; i < 4; ++i) ASSERT_THAT(engine_->Infer(Ids(1, 8)), IsOk());
  EXPECT_FALSE(engine_->Infer(Ids(1, 500)).ok());
  std::vector<IntervalSummary> first = reporter.TakeInterval();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].answered, 5u);
  EXPECT_EQ(first[0].failed, 1u);
  EXPECT_GT(first[0].p99_s, 0);
  EXPECT_GE(first[0].p99_s, first[0].p50_s);
  const std::string line = LatencyReporter::FormatModelLine(first[0], absl::Seconds(10));
  EXPECT_NE(line.find("model 'embed_pool' last 10s: 5 answered (0.5/s), 1 failed, p50 "),
            std::string::npos)
      << line;
  std::vector<IntervalSummary> second = reporter.TakeInterval();
  EXPECT_EQ(second[0].answered, 0u) << "each interval counts only its own requests";
  EXPECT_EQ(second[0].p99_s, 0);
  EXPECT_NE(LatencyReporter::FormatMemoryLine(*engine_).find("device cpu memory: "),
            std::string::npos);
}

// GPU telemetry from the fake libnvidia-ml (runtime/testdata/fake_nvml.cc),
// whose device 1 reads 37%, 12 GiB used, 67 C, 312.456 W, 1755 MHz, throttle
// reasons sw_power_cap, sw_thermal and one unnamed (0x100), 3 correctable and
// 1 uncorrectable remapped rows with a remap pending, and has no ECC counts
// or retired pages (NOT_SUPPORTED).
TEST_F(MetricsTest, GpuGaugesFromNvmlAndNoneWithout) {
  DeviceInfo gpu;
  gpu.kind = DeviceKind::kCuda;
  gpu.ordinal = 3;
  gpu.uuid = "GPU-11111111-2222-3333-4444-555555555555";
  NvmlOptions options;
  options.library = INFER_FAKE_NVML;
  auto nvml = NvmlTelemetry::Open(gpu, options);
  ASSERT_THAT(nvml, IsOk());
  absl::StatusOr<std::vector<Sample>> parsed =
      ParsePrometheusText(RenderMetrics(*engine_, nvml->get()));
  ASSERT_THAT(parsed, IsOk());
  const std::vector<Sample>& s = *parsed;
  const std::map<std::string, std::string> dev = {{"device", "cuda:3"}};
  EXPECT_DOUBLE_EQ(SumOf(s, "infer_gpu_utilization_ratio", dev), 0.37);
  EXPECT_DOUBLE_EQ(SumOf(s, "infer_gpu_memory_used_bytes", dev), 12884901888.0);
  EXPECT_DOUBLE_EQ(SumOf(s, "infer_gpu_temperature_celsius", dev), 67);
  EXPECT_DOUBLE_EQ(SumOf(s, "infer_gpu_power_watts", dev), 312.456);
  EXPECT_DOUBLE_EQ(SumOf(s, "infer_gpu_sm_clock_hertz", dev), 1755e6);
  EXPECT_EQ(CountOf(s, "infer_gpu_throttle_reasons", dev), 7);
  for (const auto& [reason, on] : std::map<std::string, double>{{"gpu_idle", 0},
                                                                {"sw_power_cap", 1},
                                                                {"hw_slowdown", 0},
                                                                {"sw_thermal", 1},
                                                                {"hw_thermal", 0},
                                                                {"hw_power_brake", 0},
                                                                {"other", 1}}) {
    EXPECT_EQ(CountOf(s, "infer_gpu_throttle_reasons", {{"device", "cuda:3"}, {"reason", reason}}),
              1)
        << reason;
    EXPECT_EQ(SumOf(s, "infer_gpu_throttle_reasons", {{"device", "cuda:3"}, {"reason", reason}}),
              on)
        << reason;
  }
  EXPECT_EQ(SumOf(s, "infer_gpu_remapped_rows", {{"cause", "correctable"}}), 3);
  EXPECT_EQ(SumOf(s, "infer_gpu_remapped_rows", {{"cause", "uncorrectable"}}), 1);
  EXPECT_EQ(SumOf(s, "infer_gpu_row_remap_pending", dev), 1);
  EXPECT_EQ(CountOf(s, "infer_gpu_row_remap_failed", dev), 1);
  EXPECT_EQ(SumOf(s, "infer_gpu_row_remap_failed", dev), 0) << "a real zero";
  // Not supported by this device: absent, not zero.
  EXPECT_EQ(CountOf(s, "infer_gpu_ecc_uncorrected_errors_total"), 0);
  EXPECT_EQ(CountOf(s, "infer_gpu_ecc_uncorrected_errors_lifetime_total"), 0);
  EXPECT_EQ(CountOf(s, "infer_gpu_retired_pages"), 0);
  // The engine's own device metrics are still there, beside.
  EXPECT_EQ(CountOf(s, "infer_device_memory_reserved_bytes", {{"device", "cpu"}}), 1);

  // Without NVML there is no GPU metric at all.
  for (const Sample& sample : Scrape()) {
    EXPECT_NE(sample.name.rfind("infer_gpu_", 0), 0u) << sample.name;
  }

  const std::string line = FormatGpuLine((*nvml)->Sample(), "cuda:3", int64_t{10} << 30);
  EXPECT_EQ(line,
            "gpu cuda:3: utilisation 37%, memory used 12.00 GiB by all processes (driver) vs "
            "10.00 GiB reserved by this server, 67 C, 312.5 W, SM 1755 MHz, throttle "
            "sw_power_cap,sw_thermal,other 0x100, row remapping pending (GPU reset)");
  EXPECT_EQ(FormatGpuLine(GpuTelemetrySample{}, "cuda:0", 0), "gpu cuda:0: no readings");
}

TEST_F(MetricsTest, GpuGaugesAreServedOverHttpWithTheTelemetryGiven) {
  DeviceInfo gpu;
  gpu.kind = DeviceKind::kCuda;
  gpu.uuid = "GPU-00000000-1111-2222-3333-444444444444";
  NvmlOptions options;
  options.library = INFER_FAKE_NVML;
  auto nvml = NvmlTelemetry::Open(gpu, options);
  ASSERT_THAT(nvml, IsOk());
  auto server = MetricsServer::Start("127.0.0.1:0", engine_.get(), nvml->get());
  ASSERT_THAT(server, IsOk());
  absl::StatusOr<std::string> body = ::infer::loadgen::HttpGet((*server)->port(), "/metrics");
  ASSERT_THAT(body, IsOk());
  absl::StatusOr<std::vector<Sample>> s = ParsePrometheusText(*body);
  ASSERT_THAT(s, IsOk()) << *body;
  const std::map<std::string, std::string> dev = {{"device", "cuda:0"}};
  EXPECT_DOUBLE_EQ(SumOf(*s, "infer_gpu_utilization_ratio", dev), 0.12);
  EXPECT_EQ(SumOf(*s, "infer_gpu_ecc_uncorrected_errors_total", dev), 2);
  EXPECT_EQ(SumOf(*s, "infer_gpu_ecc_uncorrected_errors_lifetime_total", dev), 9);
  EXPECT_EQ(SumOf(*s, "infer_gpu_retired_pages", {{"cause", "multiple_single_bit"}}), 4);
  EXPECT_EQ(CountOf(*s, "infer_gpu_retired_pages", {{"cause", "double_bit"}}), 1);
  EXPECT_EQ(CountOf(*s, "infer_gpu_power_watts"), 0) << "NOT_SUPPORTED on this device";
  EXPECT_EQ(CountOf(*s, "infer_gpu_remapped_rows"), 0);
  EXPECT_EQ(SumOf(*s, "infer_gpu_throttle_reasons", {{"reason", "gpu_idle"}}), 1);
}

}  // namespace
}  // namespace infer
