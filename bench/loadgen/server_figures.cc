#include "bench/loadgen/server_figures.h"

#include <algorithm>
#include <cmath>

namespace infer::loadgen {
namespace {

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

void SummarizeInferServer(const std::vector<Sample>& d, const std::vector<Sample>& after,
                          const std::string& model, ServerFigures* f) {
  const std::map<std::string, std::string> m = {{"model", model}};
  const auto mean = [&](const std::string& h) {
    return Ratio(SumOf(d, h + "_sum", m), SumOf(d, h + "_count", m));
  };
  f->batch_rows_mean = mean("infer_batch_size");
  f->padding_efficiency_mean = mean("infer_batch_padding_efficiency");
  f->queue_mean_ms = mean("infer_queue_duration_seconds") * 1e3;
  f->request_mean_ms = mean("infer_request_duration_seconds") * 1e3;
  const double p50 = HistogramQuantile(d, "infer_request_duration_seconds", 0.5, m);
  const double p99 = HistogramQuantile(d, "infer_request_duration_seconds", 0.99, m);
  f->server_p50_ms = std::isnan(p50) ? 0 : p50 * 1e3;
  f->server_p99_ms = std::isnan(p99) ? 0 : p99 * 1e3;
  f->memory_limit_bytes = SumOf(after, "infer_device_memory_budget_bytes");
  f->memory_used_after = SumOf(after, "infer_device_memory_allocated_bytes");
  f->memory_peak_bytes = SumOf(after, "infer_device_memory_peak_allocated_bytes");
  f->memory_reserved_after = SumOf(after, "infer_device_memory_reserved_bytes");
  for (const Sample& s : d) {
    if (s.name == "infer_rejections_total" && s.labels.count("model") &&
        s.labels.at("model") == model && s.labels.count("reason") && s.value > 0) {
      f->rejections[s.labels.at("reason")] += s.value;
    }
  }
}

// Triton's counters (https://github.com/triton-inference-server/server,
// docs/user_guide/metrics.md): counts, and cumulative durations in µs.
void SummarizeTriton(const std::vector<Sample>& d, const std::vector<Sample>& after,
                     const std::string& model, ServerFigures* f) {
  const std::map<std::string, std::string> m = {{"model", model}};
  const double success = SumOf(d, "nv_inference_request_success", m);
  f->batch_rows_mean =
      Ratio(SumOf(d, "nv_inference_count", m), SumOf(d, "nv_inference_exec_count", m));
  f->queue_mean_ms = Ratio(SumOf(d, "nv_inference_queue_duration_us", m), success) / 1e3;
  f->request_mean_ms = Ratio(SumOf(d, "nv_inference_request_duration_us", m), success) / 1e3;
  f->memory_limit_bytes = SumOf(after, "nv_gpu_memory_total_bytes");
  f->memory_used_after = SumOf(after, "nv_gpu_memory_used_bytes");
}

}  // namespace

ServerKind DetectServer(const std::vector<Sample>& samples) {
  for (const Sample& s : samples) {
    if (s.name.rfind("infer_", 0) == 0) return ServerKind::kInferServer;
    if (s.name.rfind("nv_inference_", 0) == 0) return ServerKind::kTriton;
  }
  return ServerKind::kUnknown;
}

double QueueDepth(const std::vector<Sample>& samples, const std::string& model) {
  return SumOf(samples, "infer_queue_depth", {{"model", model}}) +
         SumOf(samples, "nv_inference_pending_request_count", {{"model", model}});
}

ServerFigures Summarize(const std::vector<Sample>& before, const std::vector<Sample>& after,
                        const std::string& model, double queue_peak) {
  ServerFigures f;
  f.kind = DetectServer(after);
  if (f.kind == ServerKind::kUnknown) return f;
  const std::vector<Sample> d = Delta(after, before);
  if (f.kind == ServerKind::kInferServer) {
    SummarizeInferServer(d, after, model, &f);
  } else {
    SummarizeTriton(d, after, model, &f);
  }
  f.queue_depth_after = QueueDepth(after, model);
  f.queue_depth_peak = std::max(queue_peak, f.queue_depth_after);
  return f;
}

}  // namespace infer::loadgen
