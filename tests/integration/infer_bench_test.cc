// infer-bench end to end: the real tool against a real infer-server started
// here, in closed-loop, open-loop and sweep modes, read back from --json.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/kserve.h"
#include "tests/testing/server_process.h"

namespace infer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::infer::testing::ServerBinary;
using ::infer::testing::ServerProcess;

struct BenchRun {
  int exit_code = -1;
  std::string output;
  json result;
};

// Runs infer-bench with `args` plus --json and --no-progress.
BenchRun RunBench(const std::vector<std::string>& args) {
  const fs::path out = fs::temp_directory_path() / absl::StrCat("infer_bench_", getpid(), ".json");
  fs::remove(out);
  std::vector<std::string> quoted;
  for (const std::string& a : args) quoted.push_back("'" + a + "'");
  const std::string cmd = absl::StrCat(INFER_BENCH_BINARY, " ", absl::StrJoin(quoted, " "),
                                       " --no-progress --json '", out.string(), "' 2>&1");
  BenchRun run;
  FILE* pipe = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.output.append(buf, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out);
  if (in) run.result = json::parse(in, nullptr, /*allow_exceptions=*/false);
  fs::remove(out);
  return run;
}

class InferBenchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start(ServerBinary(), {"--device", "cpu"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = new ServerProcess(*std::move(server));
  }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    EXPECT_EQ(*server_->Stop(SIGTERM), 0);
    delete server_;
    server_ = nullptr;
  }
  static std::vector<std::string> Common() {
    return {"-u",
            server_->address(),
            "-m",
            "embed_pool",
            "--metrics-url",
            absl::StrCat("127.0.0.1:", server_->metrics_port()),
            "--warmup-s",
            "0.3"};
  }
  static ServerProcess* server_;
};

ServerProcess* InferBenchTest::server_ = nullptr;

TEST_F(InferBenchTest, ClosedLoopReportsThroughputPercentilesAndServerFigures) {
  std::vector<std::string> args = Common();
  for (const char* a :
       {"--concurrency", "8", "--duration-s", "2", "-b", "2", "--lengths", "16:0.7,64:0.3"}) {
    args.push_back(a);
  }
  const BenchRun run = RunBench(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(run.result.is_object()) << run.output;
  const json& step = run.result["steps"][0];
  EXPECT_EQ(step["load"], "concurrency 8");
  EXPECT_GT(step["ok"].get<int64_t>(), 50) << run.output;
  EXPECT_EQ(step["ok"], step["sent"]) << "no errors expected";
  EXPECT_EQ(step["codes"]["OK"], step["ok"]);
  EXPECT_GT(step["throughput_per_s"].get<double>(), 10.0);
  EXPECT_NEAR(step["rows_per_s"].get<double>(), 2 * step["throughput_per_s"].get<double>(), 1e-6);
  const json& lat = step["latency_ms"];
  EXPECT_GT(lat["p50"].get<double>(), 0.0);
  EXPECT_LE(lat["p50"].get<double>(), lat["p99"].get<double>());
  EXPECT_LE(lat["p99"].get<double>(), lat["p99.9"].get<double>());
  EXPECT_LE(lat["p99.9"].get<double>(), lat["max"].get<double>());
  // From the server's /metrics: it batched (8 in flight), and says so.
  ASSERT_TRUE(step.contains("server")) << run.output;
  EXPECT_GT(step["server"]["batch_rows_mean"].get<double>(), 2.0) << run.output;
  EXPECT_GT(step["server"]["device_memory_budget_bytes"].get<double>(), 0.0);
  EXPECT_NE(run.output.find("p99.9 ms"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("server: mean batch"), std::string::npos) << run.output;
}

TEST_F(InferBenchTest, ARequestBudgetEndsTheWindowAtTheLastAnswer) {
  // 200 requests at concurrency 100, no warm-up: sending stops when the
  // budget is spent, while about 100 requests are still in flight. The
  // window must reach the last answer. Check it with Little's law: never
  // more than 100 requests are in flight, so the summed latency of all 200
  // is at most 100 x the window — i.e. throughput x mean latency <= 100. A
  // window that ended when sending stopped is about half as long and breaks
  // this bound.
  std::vector<std::string> args = Common();
  for (const char* a :
       {"--concurrency", "100", "--requests", "200", "--warmup-s", "0", "--lengths", "64"}) {
    args.push_back(a);
  }
  const BenchRun run = RunBench(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json& step = run.result["steps"][0];
  EXPECT_EQ(step["sent"], 200);
  EXPECT_EQ(step["ok"], 200);
  const double throughput = step["throughput_per_s"].get<double>();
  EXPECT_NEAR(throughput, 200 / step["window_s"].get<double>(), 1e-6);
  const double mean_s = step["latency_ms"]["mean"].get<double>() / 1000;
  EXPECT_LE(throughput * mean_s, 100 * 1.01) << run.output;
}

TEST_F(InferBenchTest, OpenLoopSendsOnScheduleAndCountsErrorsByCode) {
  std::vector<std::string> args = Common();
  for (const char* a : {"--rate", "200", "--arrivals", "poisson", "--duration-s", "2"}) {
    args.push_back(a);
  }
  BenchRun run = RunBench(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json& step = run.result["steps"][0];
  EXPECT_NEAR(step["sent"].get<double>(), 400.0, 100.0) << "200/s for 2 s";
  EXPECT_EQ(step["ok"], step["sent"]);
  EXPECT_GT(step["pacing"]["issued"].get<int64_t>(), 0);

  // Every request over the model's 512 tokens: all INVALID_ARGUMENT, counted
  // by code with their latency; the tool still exits 0 (it measured).
  args = Common();
  for (const char* a : {"--rate", "50", "--duration-s", "1", "--lengths", "600"}) {
    args.push_back(a);
  }
  run = RunBench(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json& bad = run.result["steps"][0];
  EXPECT_EQ(bad["ok"], 0);
  EXPECT_GT(bad["codes"]["INVALID_ARGUMENT"].get<int64_t>(), 20);
  EXPECT_GT(bad["error_latency_ms"]["max"].get<double>(), 0.0);
  EXPECT_NE(run.output.find("errors by code: INVALID_ARGUMENT"), std::string::npos) << run.output;
}

TEST_F(InferBenchTest, SweepFindsTheHighestLoadMeetingTheTarget) {
  std::vector<std::string> args = Common();
  for (const char* a :
       {"--concurrency-range", "1:3:1", "--duration-s", "0.5", "--p99-target-ms", "5000"}) {
    args.push_back(a);
  }
  const BenchRun run = RunBench(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.result["steps"].size(), 3u) << run.output;
  EXPECT_EQ(run.result["best_step"], 2) << "a 5 s target is met at every step";
  EXPECT_NE(run.output.find("highest load meeting p99 <= 5000 ms"), std::string::npos)
      << run.output;
}

TEST_F(InferBenchTest, ASweepWithNoPassingStepRunsEveryStepAndSaysSo) {
  std::vector<std::string> args = Common();
  for (const char* a :
       {"--concurrency-range", "1:2:1", "--duration-s", "0.3", "--p99-target-ms", "0.000001"}) {
    args.push_back(a);
  }
  const BenchRun run = RunBench(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.result["steps"].size(), 2u) << "failing steps before any pass do not stop it";
  EXPECT_EQ(run.result["best_step"], -1);
  EXPECT_NE(run.output.find("no step met p99 <= 1e-06 ms"), std::string::npos) << run.output;
}

TEST_F(InferBenchTest, OpenLoopLatencyCountsFromTheIntendedSendTime) {
  // 20000 requests/s with one request in flight at a time: far more than
  // one connection answers one by one, so the sender falls further and
  // further behind its schedule. Measured from the intended send times,
  // latency grows with that lag (hundreds of ms by the end); measured from
  // when each request actually left, it would stay near one round trip
  // (a few ms). The closed loop at concurrency 1 shows that round trip.
  std::vector<std::string> open = Common();
  for (const char* a : {"--rate", "20000", "--max-outstanding", "1", "--duration-s", "0.25",
                        "--warmup-s", "0", "--lengths", "16"}) {
    open.push_back(a);
  }
  const BenchRun lagging = RunBench(open);
  ASSERT_EQ(lagging.exit_code, 0) << lagging.output;
  const json& step = lagging.result["steps"][0];
  EXPECT_EQ(step["sent"], 5000) << "every request meant for the window is sent";
  EXPECT_EQ(step["ok"], 5000);
  EXPECT_GT(step["pacing"]["late"].get<int64_t>(), 1000) << lagging.output;
  std::vector<std::string> closed = Common();
  for (const char* a : {"--concurrency", "1", "--duration-s", "0.5", "--lengths", "16"}) {
    closed.push_back(a);
  }
  const BenchRun round_trip = RunBench(closed);
  ASSERT_EQ(round_trip.exit_code, 0) << round_trip.output;
  // Compared with each other, not with a time: a loaded machine (tests
  // run side by side) stretches the round trip, not the ratio.
  const double rtt_p50 = round_trip.result["steps"][0]["latency_ms"]["p50"].get<double>();
  EXPECT_GT(step["latency_ms"]["p50"].get<double>(), 50.0) << lagging.output;
  EXPECT_GT(step["latency_ms"]["p50"].get<double>(), 10 * rtt_p50) << lagging.output;
  // Throughput counts the answers within the 0.25 s window, not the 5000
  // sent meanwhile and answered later.
  EXPECT_LT(step["completed_ok_in_window"].get<int64_t>(), 5000);
  EXPECT_NEAR(step["throughput_per_s"].get<double>(),
              step["completed_ok_in_window"].get<double>() / 0.25, 1e-6);
}

// A fleet without a proxy: -u a,b spreads the channels over both servers and
// counts each one's answers.
TEST_F(InferBenchTest, SeveralEndpointsShareTheLoadAndAreCountedApart) {
  auto other = ServerProcess::Start(ServerBinary(), {"--device", "cpu"});
  ASSERT_TRUE(other.ok()) << other.status();
  const BenchRun run =
      RunBench({"-u", absl::StrCat(server_->address(), ",", other->address()), "-m", "embed_pool",
                "--concurrency", "4", "--duration-s", "1", "--warmup-s", "0.2"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json& step = run.result["steps"][0];
  ASSERT_EQ(step["endpoints"].size(), 2u) << run.output;
  int64_t sent = 0;
  for (int i = 0; i < 2; ++i) {
    const json& e = step["endpoints"][i];
    EXPECT_EQ(e["address"], i == 0 ? server_->address() : other->address());
    EXPECT_GT(e["ok"].get<int64_t>(), 10) << "endpoint " << i << " took no share\n" << run.output;
    EXPECT_EQ(e["ok"], e["sent"]);
    sent += e["sent"].get<int64_t>();
  }
  EXPECT_EQ(sent, step["sent"].get<int64_t>());
  EXPECT_NE(run.output.find(absl::StrCat(other->address(), ": sent")), std::string::npos)
      << run.output;
  EXPECT_EQ(*other->Stop(SIGTERM), 0);
}

TEST(InferBenchCliTest, BadArgumentsAreRefusedWithTheReason) {
  BenchRun run = RunBench({"-m", "x", "--concurrency", "2", "--rate", "5"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("give exactly one of"), std::string::npos) << run.output;
  run = RunBench({"-m", "x", "--concurrency", "2", "--lengths", "32-16"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("sequence lengths '32-16'"), std::string::npos) << run.output;
  run = RunBench({"-m", "x", "--concurrency-range", "1:2:0.5"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("whole numbers"), std::string::npos) << run.output;
  run = RunBench({"-m", "x", "--concurrency", "2", "--input", "text", "--mask-input", "m"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("goes with token ids"), std::string::npos) << run.output;
  run = RunBench({"-u", "127.0.0.1:1,,127.0.0.1:2", "-m", "x", "--concurrency", "1"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("empty endpoint"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace infer
