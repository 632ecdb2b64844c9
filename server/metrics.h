// Prometheus metrics of an Engine in the text exposition format (built as
// prometheus-cpp MetricFamily values and written by its TextSerializer),
// served on GET /metrics (by the REST front end, server/http/http_routes.h, and
// by MetricsServer on a port of its own), and the periodic tail-latency
// summary the server writes to its log.
//
// Why not prometheus-cpp's Exposer: it runs civetweb, whose threads are
// created with a fixed 100 KiB stack; cuBLAS's static thread-local storage
// alone is larger, so with the CUDA libraries loaded civetweb cannot start a
// thread at all. (Triton, too, serves prometheus-cpp's serialization from
// its own HTTP server.)
//
// Every value is read from the engine when it is scraped (the engine keeps
// cumulative statistics and histograms; see ModelStats), so there is nothing
// to keep in step and a scrape costs one statistics copy per model. The
// metric names, types and labels are listed in the README ("Metrics").
// GPU telemetry (the infer_gpu_* gauges and the log's GPU line) comes from an
// NvmlTelemetry when one is given, read from its cache (at most one driver
// read per second however often it is scraped); without one those metrics
// are absent.
//
// Ownership: the Engine, and the NvmlTelemetry and ApiKey when given, are
// borrowed and must outlive both classes. Thread-safe.
#ifndef INFER_SERVER_METRICS_H_
#define INFER_SERVER_METRICS_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "runtime/nvml_telemetry.h"
#include "server/api_key.h"
#include "server/http/http_server.h"

namespace infer {

// The engine's metrics in the Prometheus text format, as /metrics serves
// them, with the GPU's telemetry when `gpu` is given, and the requests
// refused for their API key when `api_key` is given and enabled.
std::string RenderMetrics(const Engine& engine, const NvmlTelemetry* gpu = nullptr,
                          const ApiKey* api_key = nullptr);

// The answer to GET /metrics (200, the text format's content type), for
// MetricsServer and the REST front end alike.
HttpResponse MetricsResponse(const Engine& engine, const NvmlTelemetry* gpu = nullptr,
                             const ApiKey* api_key = nullptr);

// GET (or HEAD) /metrics on a port of its own (Triton's 8002), on an
// HttpServer (server/http/http_server.h): 200 and the metrics; other paths 404,
// other methods 405. A client has 5 s to send its request; at most 64
// connections at once.
class MetricsServer {
 public:
  // Serves on `address` (host:port as HttpServerOptions::address; port 0
  // picks a free one). INVALID_ARGUMENT for a malformed address;
  // UNAVAILABLE naming the address and the reason when it cannot listen.
  // `tls`: the TLS files of HttpServerOptions (tls_cert_file, tls_key_file,
  // tls_client_ca_file); the rest of it is ignored.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                              const Engine* engine,
                                                              const NvmlTelemetry* gpu = nullptr,
                                                              const ApiKey* api_key = nullptr,
                                                              const HttpServerOptions& tls = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;

 private:
  explicit MetricsServer(std::unique_ptr<HttpServer> http);
  std::unique_ptr<HttpServer> http_;
};

// One interval of one model, for the log summary.
struct IntervalSummary {
  std::string model;
  uint64_t answered = 0;        // requests answered in the interval (any code)
  uint64_t failed = 0;          // of which not OK
  double p50_s = 0, p99_s = 0;  // latency of the successful ones
  int64_t queued = 0;           // waiting now, all buckets
};

// Writes, every `interval`, one log line per model that had traffic (p50 and
// p99 of the interval's successful requests, answers and failures, queue
// depth), one line of device memory pressure and, with `gpu`, one line of
// GPU telemetry (at debug level in an interval without traffic). Stops (and
// joins) on destruction.
class LatencyReporter {
 public:
  LatencyReporter(const Engine* engine, absl::Duration interval,
                  const NvmlTelemetry* gpu = nullptr);
  ~LatencyReporter();
  LatencyReporter(const LatencyReporter&) = delete;
  LatencyReporter& operator=(const LatencyReporter&) = delete;

  // The summaries since the previous call (or since construction), and
  // the lines they make; used by the thread, public for tests.
  std::vector<IntervalSummary> TakeInterval();
  static std::string FormatModelLine(const IntervalSummary& s, absl::Duration interval);
  static std::string FormatMemoryLine(const Engine& engine);

 private:
  void Loop();

  const Engine* const engine_;
  const absl::Duration interval_;
  const NvmlTelemetry* const gpu_;  // may be null
  struct Snapshot {
    Histogram latency{LatencyBoundsSeconds()};
    uint64_t answered = 0, failed = 0;
  };
  std::map<std::string, Snapshot> previous_;  // by model; the reporting thread or tests only

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace infer

#endif  // INFER_SERVER_METRICS_H_
