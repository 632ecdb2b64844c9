// The load generator's engine: sends KServe v2 ModelInfer calls over gRPC
// (callback API, any number of channels) in a closed loop (N requests always
// in flight) or an open loop (a target rate, constant or Poisson, latency
// counted from each request's intended send time), and collects latency,
// throughput and status codes. Works against any KServe v2 server.
#ifndef INFER_BENCH_LOADGEN_RUNNER_H_
#define INFER_BENCH_LOADGEN_RUNNER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/latency_histogram.h"
#include "bench/loadgen/pacer.h"
#include "bench/loadgen/workload.h"
#include "grpc_service.grpc.pb.h"

namespace infer::loadgen {

struct LoadOptions {
  // host:port, or several separated by commas (a fleet without a proxy):
  // channels go round the endpoints (at least one each) and calls round the
  // channels, and LoadResult::endpoints counts each endpoint's answers.
  std::string address = "127.0.0.1:8001";
  std::string model;
  RequestFormat format;  // what the requests carry
  int64_t batch = 1;
  std::string lengths = "128";
  // Exactly one of these drives the load.
  int concurrency = 0;  // closed loop: requests in flight
  double rate = 0.0;    // open loop: requests per second
  Arrivals arrivals = Arrivals::kConstant;
  absl::Duration warmup = absl::Seconds(1);     // sent and answered, not counted
  absl::Duration duration = absl::Seconds(10);  // the measured window
  int64_t requests = 0;                         // > 0: stop after this many measured sends
  int channels = 1;                             // gRPC channels (connections)
  int threads = 1;                              // open loop: pacing threads (rate split)
  absl::Duration timeout = absl::Seconds(30);   // per-request deadline
  int64_t max_outstanding = 10000;              // open loop: cap on requests in flight
  uint64_t seed = 1;
  // Called about once a second during the run with a one-line status.
  std::function<void(const std::string&)> on_progress;
  // Called once, on its own thread, when the warm-up ends and the measured
  // window begins (e.g. to scrape the server's counters at that moment).
  std::function<void()> on_measure_start;
};

// One endpoint's share of the measured requests.
struct EndpointCounts {
  std::string address;
  int64_t sent = 0;
  int64_t ok = 0;
  std::map<grpc::StatusCode, int64_t> codes;
};

struct LoadResult {
  // The measured window: the duration after the warm-up; or, when the
  // request budget ran out first, from the end of the warm-up to the last
  // measured answer.
  absl::Duration window;
  // Measured requests: those meant to be sent within the window (by their
  // intended time). Each is followed to its answer, however late, so its
  // latency and status count even when it is answered after the window.
  int64_t sent = 0;
  int64_t ok = 0;       // of which answered OK
  int64_t rows_ok = 0;  // their batch rows
  std::map<grpc::StatusCode, int64_t> codes;
  LatencyHistogram ok_latency;     // ns; open loop: from the intended send time
  LatencyHistogram error_latency;  // ns, of the non-OK answers
  // Throughput: OK answers (of any request) that arrived within the window,
  // and their rows. Answers after it do not count, so neither the requests
  // still in flight at the end (closed loop) nor a backlog answered late
  // (open loop) stretches or inflates it. When the budget ended the window,
  // these are `ok` and `rows_ok`.
  int64_t completed_ok = 0;
  int64_t completed_rows = 0;
  OpenLoopResult pacing;                  // open loop only
  std::vector<EndpointCounts> endpoints;  // in the order given
  double throughput() const {             // OK answers per second
    return completed_ok / std::max(1e-9, absl::ToDoubleSeconds(window));
  }
  double row_throughput() const {  // OK rows per second
    return completed_rows / std::max(1e-9, absl::ToDoubleSeconds(window));
  }
};

// Runs one load phase (warm-up, then the measured window, then waits for
// the outstanding answers). In the open loop every request whose intended
// time falls before the window's end is sent, however late the sender gets
// (a server stall near the end cannot drop the requests it delayed). The
// requests of every length the mix can draw are built before the clock
// starts when they total at most 256 MiB (otherwise each is built on its
// first use). INVALID_ARGUMENT for bad options.
absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options);

// "OK", "UNAVAILABLE", ...
std::string CodeName(grpc::StatusCode code);

}  // namespace infer::loadgen

#endif  // INFER_BENCH_LOADGEN_RUNNER_H_
