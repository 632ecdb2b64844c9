// What a server's own Prometheus metrics say about one load run, read from
// a scrape when the measured window began and one after the run. Knows the
// series of infer-server (infer_*) and of Triton (nv_*); any other server
// gives no figures.
#ifndef INFER_BENCH_LOADGEN_SERVER_FIGURES_H_
#define INFER_BENCH_LOADGEN_SERVER_FIGURES_H_

#include <map>
#include <string>
#include <vector>

#include "bench/loadgen/prometheus_text.h"

namespace infer::loadgen {

enum class ServerKind { kUnknown, kInferServer, kTriton };

struct ServerFigures {
  ServerKind kind = ServerKind::kUnknown;
  // Rows per execution over the window (both servers).
  double batch_rows_mean = 0;
  // infer-server: real / padded tokens per batch, mean.
  double padding_efficiency_mean = 0;
  // Request latency (arrival to answer, successful requests): the mean (both
  // servers), and for infer-server the quantiles of its histogram (as
  // histogram_quantile would give them).
  double request_mean_ms = 0;
  double server_p50_ms = 0, server_p99_ms = 0;
  // Mean time in the queue, successful requests (both servers).
  double queue_mean_ms = 0;
  // Requests waiting in the model's queue: after the run, and the most seen
  // by the samples taken during the window (Triton: pending requests).
  double queue_depth_after = 0, queue_depth_peak = 0;
  // Device memory after the run (infer-server: its allocator against the
  // budget; Triton: GPU memory used against the GPU's total).
  double memory_limit_bytes = 0, memory_used_after = 0;
  double memory_peak_bytes = 0;      // infer-server: highest allocated since it started
  double memory_reserved_after = 0;  // infer-server: reserved by its allocator
  // infer-server: requests refused, by reason, within the window.
  std::map<std::string, double> rejections;
};

// The server kind that `samples` come from.
ServerKind DetectServer(const std::vector<Sample>& samples);

// Requests waiting in `model`'s queue now.
double QueueDepth(const std::vector<Sample>& samples, const std::string& model);

// The figures of `model` from scrapes at the start of the window and after
// the run; `queue_peak` is the largest QueueDepth sampled meanwhile.
ServerFigures Summarize(const std::vector<Sample>& before, const std::vector<Sample>& after,
                        const std::string& model, double queue_peak);

}  // namespace infer::loadgen

#endif  // INFER_BENCH_LOADGEN_SERVER_FIGURES_H_
