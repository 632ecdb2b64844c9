#include "server/metrics.h"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "server/gpu_metrics.h"

namespace infer {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

using Labels = std::vector<ClientMetric::Label>;

// The gRPC name of a status code (the code a client sees).
std::string CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "OK";
    case absl::StatusCode::kCancelled:
      return "CANCELLED";
    case absl::StatusCode::kUnknown:
      return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound:
      return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted:
      return "ABORTED";
    case absl::StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal:
      return "INTERNAL";
    case absl::StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss:
      return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    default:
      return absl::StrCat("CODE_", static_cast<int>(code));
  }
}

// Builds the families of one scrape, one metric at a time.
class Families {
 public:
  // Family `name` (created on first use, in order of first use).
  MetricFamily& Get(const std::string& name, MetricType type, const std::string& help) {
    auto it = index_.find(name);
    if (it != index_.end()) return families_[it->second];
    index_[name] = families_.size();
    MetricFamily& f = families_.emplace_back();
    f.name = name;
    f.help = help;
    f.type = type;
    return f;
  }
  void Gauge(const std::string& name, const std::string& help, Labels labels, double value) {
    ClientMetric& m = Get(name, MetricType::Gauge, help).metric.emplace_back();
    m.label = std::move(labels);
    m.gauge.value = value;
  }
  void Counter(const std::string& name, const std::string& help, Labels labels, double value) {
    ClientMetric& m = Get(name, MetricType::Counter, help).metric.emplace_back();
    m.label = std::move(labels);
    m.counter.value = value;
  }
  void Histo(const std::string& name, const std::string& help, Labels labels, const Histogram& h) {
    ClientMetric& m = Get(name, MetricType::Histogram, help).metric.emplace_back();
    m.label = std::move(labels);
    m.histogram.sample_count = h.count();
    m.histogram.sample_sum = h.sum();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.counts().size(); ++i) {
      cumulative += h.counts()[i];
      m.histogram.bucket.push_back({cumulative, i < h.bounds().size()
                                                    ? h.bounds()[i]
                                                    : std::numeric_limits<double>::infinity()});
    }
  }
  std::vector<MetricFamily> Take() { return std::move(families_); }

 private:
  std::vector<MetricFamily> families_;
  std::map<std::string, size_t> index_;
};

std::vector<MetricFamily> CollectEngine(const Engine& engine, const NvmlTelemetry* gpu) {
  Families f;
  for (const std::string& model : engine.ModelNames()) {
    absl::StatusOr<ModelStats> stats = engine.GetModelStats(model);
    absl::StatusOr<std::vector<int64_t>> depths = engine.GetQueueDepths(model);
    if (!stats.ok() || !depths.ok()) continue;
    const ModelStats& s = *stats;
    for (size_t b = 0; b < s.buckets.size(); ++b) {
      const LengthBucketStats& lb = s.buckets[b];
      const Labels labels = {
          {"model", model},
          {"length_bucket", lb.max_length > 0 ? absl::StrCat(lb.max_length) : "+Inf"}};
      f.Histo("infer_request_duration_seconds",
              "Time from arrival to answer of successful requests, by model and length bucket",
              labels, lb.request_seconds);
      f.Histo("infer_queue_duration_seconds",
              "Time requests waited from arrival until their batch reached the device", labels,
              lb.queue_seconds);
      f.Histo("infer_compute_duration_seconds",
              "Time of one batch execution: input staging, upload, compute, download, output "
              "split",
              labels, lb.compute_seconds);
      f.Histo("infer_batch_size", "Rows (sequences) per executed batch", labels, lb.batch_rows);
      f.Histo("infer_batch_padding_efficiency",
              "Real tokens / tokens computed per executed batch (below 1 only for models that "
              "pad sequences to the batch's longest; 1 for models that pack them)",
              labels, lb.padding_efficiency);
      f.Gauge("infer_queue_depth", "Requests waiting now, by model and length bucket", labels,
              b < depths->size() ? static_cast<double>((*depths)[b]) : 0.0);
    }
    for (const auto& [code, n] : s.requests_by_code) {
      f.Counter("infer_requests_total",
                "Inference requests answered, by gRPC status code (a split request counts once)",
                {{"model", model}, {"code", CodeName(code)}}, static_cast<double>(n));
    }
    for (const auto& [reason, n] :
         {std::pair{"queue_full", s.rejected_queue_full},
          std::pair{"deadline", s.rejected_deadline}, std::pair{"memory", s.rejected_memory},
          std::pair{"invalid", s.rejected_invalid}, std::pair{"over_limit", s.rejected_over_limit},
          std::pair{"shutdown", s.rejected_shutdown}, std::pair{"cancelled", s.cancelled}}) {
      f.Counter("infer_rejections_total",
                "Requests answered without running, by reason: queue_full (UNAVAILABLE), "
                "deadline (DEADLINE_EXCEEDED), memory (RESOURCE_EXHAUSTED: cannot fit the VRAM "
                "budget), invalid and over_limit (INVALID_ARGUMENT), shutdown (UNAVAILABLE while "
                "draining), cancelled (CANCELLED by the client)",
                {{"model", model}, {"reason", reason}}, static_cast<double>(n));
    }
    const Labels m = {{"model", model}};
    if (absl::StatusOr<const ModelSpec*> spec = engine.GetModelSpec(model); spec.ok()) {
      f.Gauge(
          "infer_model_info",
          "1 per loaded model, labelled with its backend, the precision it computes in "
          "(fp32, bf16, fp16, int8, fp8; empty for a model that computes nothing) and its device",
          {{"model", model},
           {"backend", (*spec)->backend},
           {"precision", (*spec)->precision},
           {"device", engine.device()->spec()}},
          1.0);
      for (const auto& [figure, value] :
           {std::pair{"min_cosine", (*spec)->check_min_cosine},
            std::pair{"neighbour_overlap", (*spec)->check_neighbour_overlap},
            std::pair{"spearman", (*spec)->check_spearman}}) {
        if (!value.has_value()) continue;
        f.Gauge("infer_model_quality_check",
                "The model's outputs against the CPU's FP32 at load, on the quality gate's "
                "texts (models/bert/precision_check.h): the lowest cosine, the top-10 neighbour "
                "agreement, or a classifier's lowest Spearman",
                {{"model", model}, {"figure", figure}}, *value);
      }
    }
    f.Counter("infer_inferences_total", "Rows (sequences) answered successfully", m,
              static_cast<double>(s.inference_count));
    f.Counter("infer_executions_total", "Batches executed", m,
              static_cast<double>(s.execution_count));
    f.Counter("infer_tokens_total",
              "Tokens of the executed requests (real) and tokens computed for them (computed: "
              "with padding for models that pad, the same for models that pack)",
              {{"model", model}, {"kind", "real"}}, static_cast<double>(s.real_tokens));
    f.Counter("infer_tokens_total", "", {{"model", model}, {"kind", "computed"}},
              static_cast<double>(s.computed_tokens));
    f.Counter("infer_request_splits_total", "Requests over max_batch_size split across executions",
              m, static_cast<double>(s.request_splits));
    f.Counter("infer_oom_batch_splits_total",
              "Batches that ran out of device memory despite admission and were retried in "
              "halves",
              m, static_cast<double>(s.oom_batch_splits));
  }

  const Device& device = *engine.device();
  const Labels d = {{"device", device.spec()}};
  const AllocatorStats a = engine.allocator()->stats();
  const Engine::MemoryAdmissionStats adm = engine.GetMemoryAdmissionStats();
  const auto bytes = [&](const char* name, const char* help, int64_t v) {
    f.Gauge(absl::StrCat("infer_device_memory_", name, "_bytes"), help, d, static_cast<double>(v));
  };
  bytes("total", "Memory of the device (host RAM for cpu)", device.info().total_memory_bytes);
  bytes("budget", "Hard cap on memory the server reserves on the device", a.budget_bytes);
  bytes("headroom", "Share of the budget kept free of batches", adm.headroom_bytes);
  bytes("weights", "Held by the models' weights", adm.weight_bytes);
  bytes("batches_in_flight", "Estimated peak of the batches running now (admission)",
        adm.in_flight_bytes);
  bytes("reserved", "Reserved from the device by the caching allocator", a.reserved_bytes);
  bytes("allocated", "Handed out by the caching allocator and not yet freed", a.allocated_bytes);
  bytes("peak_allocated", "Highest allocated since start", a.peak_allocated_bytes);
  bytes("largest_free_block", "Largest free cached block", a.largest_free_block_bytes);
  bytes("cached_free", "Reserved, free and reusable", a.cached_free_bytes);
  f.Gauge("infer_device_memory_fragmentation_ratio", "1 - largest free block / cached free bytes",
          d, a.fragmentation);
  f.Counter("infer_device_memory_alloc_retries_total",
            "Allocations that freed the cache and retried after running out", d,
            static_cast<double>(a.alloc_retries));
  f.Counter("infer_device_memory_ooms_total",
            "Allocations refused with RESOURCE_EXHAUSTED (over the budget)", d,
            static_cast<double>(a.ooms));
  bytes("gemm_workspaces", "Held for good by the compute streams' GEMM (cuBLAS) workspaces",
        adm.workspace_bytes);
  bytes("lost", "Blocks never to be reused because the device was lost", a.lost_bytes);
  const Engine::DeviceHealth health = engine.GetDeviceHealth();
  f.Gauge("infer_device_lost",
          "1 once the device has failed in a way that needs a process restart (a sticky CUDA "
          "error: illegal address, kernel failure, uncorrectable ECC)",
          d, health.lost ? 1.0 : 0.0);
  f.Counter("infer_device_lost_errors_total",
            "Batches that failed because the device was lost (answered UNAVAILABLE)", d,
            static_cast<double>(health.errors));
  f.Gauge("infer_server_ready", "1 while serving, 0 while draining or after the device was lost",
          {}, engine.Ready() ? 1.0 : 0.0);
  std::vector<MetricFamily> families = f.Take();
  if (gpu != nullptr) {
    for (MetricFamily& g : GpuMetricFamilies(gpu->Sample(), gpu->device_spec())) {
      families.push_back(std::move(g));
    }
  }
  return families;
}

}  // namespace

std::string RenderMetrics(const Engine& engine, const NvmlTelemetry* gpu, const ApiKey* api_key) {
  std::vector<MetricFamily> families = CollectEngine(engine, gpu);
  if (api_key != nullptr && api_key->enabled()) {
    Families f;
    for (const auto& [frontend, name] :
         {std::pair{ApiKey::kHttp, "http"}, {ApiKey::kGrpc, "grpc"}}) {
      f.Counter("infer_unauthenticated_requests_total",
                "Requests refused for a missing or wrong API key (HTTP 401, gRPC UNAUTHENTICATED)",
                {{"frontend", name}}, static_cast<double>(api_key->refusals(frontend)));
    }
    for (MetricFamily& m : f.Take()) families.push_back(std::move(m));
  }
  return prometheus::TextSerializer().Serialize(families);
}

HttpResponse MetricsResponse(const Engine& engine, const NvmlTelemetry* gpu,
                             const ApiKey* api_key) {
  return {200, "text/plain; version=0.0.4; charset=utf-8", RenderMetrics(engine, gpu, api_key)};
}

MetricsServer::MetricsServer(std::unique_ptr<HttpServer> http) : http_(std::move(http)) {}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const { return http_->port(); }

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                    const Engine* engine,
                                                                    const NvmlTelemetry* gpu,
                                                                    const ApiKey* api_key,
                                                                    const HttpServerOptions& tls) {
  HttpServerOptions options;
  options.address = address;
  options.tls_cert_file = tls.tls_cert_file;
  options.tls_key_file = tls.tls_key_file;
  options.tls_client_ca_file = tls.tls_client_ca_file;
  options.threads = 1;
  // A scrape is a GET: nothing to read past the headers.
  options.max_body_bytes = 1 << 10;
  options.max_buffered_body_bytes = 1 << 20;
  options.max_connections = 64;
  options.request_timeout = absl::Seconds(5);
  options.idle_timeout = absl::Seconds(30);
  auto http =
      HttpServer::Start(options, [engine, gpu, api_key](HttpRequest request, HttpReply reply) {
        HttpResponse r;
        if (request.path != "/metrics") {
          r = {404, "text/plain", "metrics are at /metrics\n"};
        } else if (request.method != "GET" && request.method != "HEAD") {
          r = {405, "text/plain", "use GET\n", {{"Allow", "GET"}}};
        } else {
          r = MetricsResponse(*engine, gpu, api_key);
        }
        reply.Send(std::move(r));
      });
  if (!http.ok()) {
    return absl::Status(http.status().code(), absl::StrCat("metrics: ", http.status().message()));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(*std::move(http)));
}

LatencyReporter::LatencyReporter(const Engine* engine, absl::Duration interval,
                                 const NvmlTelemetry* gpu)
    : engine_(engine), interval_(interval), gpu_(gpu) {
  TakeInterval();  // the baseline
  thread_ = std::thread([this] { Loop(); });
}

LatencyReporter::~LatencyReporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<IntervalSummary> LatencyReporter::TakeInterval() {
  std::vector<IntervalSummary> out;
  for (const std::string& model : engine_->ModelNames()) {
    absl::StatusOr<ModelStats> stats = engine_->GetModelStats(model);
    absl::StatusOr<std::vector<int64_t>> depths = engine_->GetQueueDepths(model);
    if (!stats.ok() || !depths.ok()) continue;
    Snapshot now;
    for (const LengthBucketStats& b : stats->buckets) now.latency.Add(b.request_seconds);
    for (const auto& [code, n] : stats->requests_by_code) {
      now.answered += n;
      if (code != absl::StatusCode::kOk) now.failed += n;
    }
    Snapshot& before = previous_[model];
    IntervalSummary s;
    s.model = model;
    s.answered = now.answered - before.answered;
    s.failed = now.failed - before.failed;
    const Histogram delta = now.latency.Since(before.latency);
    s.p50_s = delta.Quantile(0.5);
    s.p99_s = delta.Quantile(0.99);
    for (int64_t d : *depths) s.queued += d;
    before = std::move(now);
    out.push_back(std::move(s));
  }
  return out;
}

std::string LatencyReporter::FormatModelLine(const IntervalSummary& s, absl::Duration interval) {
  return absl::StrFormat(
      "model '%s' last %gs: %d answered (%.1f/s), %d failed, p50 %.3f ms, p99 %.3f ms, %d queued",
      s.model, absl::ToDoubleSeconds(interval), s.answered,
      static_cast<double>(s.answered) / absl::ToDoubleSeconds(interval), s.failed, s.p50_s * 1e3,
      s.p99_s * 1e3, s.queued);
}

std::string LatencyReporter::FormatMemoryLine(const Engine& engine) {
  const AllocatorStats a = engine.allocator()->stats();
  const Engine::MemoryAdmissionStats adm = engine.GetMemoryAdmissionStats();
  const double budget = static_cast<double>(std::max<int64_t>(1, a.budget_bytes));
  return absl::StrFormat(
      "device %s memory: %.1f%% of budget reserved, %.1f%% allocated (peak %.1f%%), batches in "
      "flight %.1f%%, largest free block %d bytes",
      engine.device()->spec(), 100.0 * static_cast<double>(a.reserved_bytes) / budget,
      100.0 * static_cast<double>(a.allocated_bytes) / budget,
      100.0 * static_cast<double>(a.peak_allocated_bytes) / budget,
      100.0 * static_cast<double>(adm.in_flight_bytes) / budget, a.largest_free_block_bytes);
}

void LatencyReporter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, absl::ToChronoNanoseconds(interval_), [this] { return stop_; })) {
    lock.unlock();
    bool any = false;
    for (const IntervalSummary& s : TakeInterval()) {
      if (s.answered == 0 && s.queued == 0) continue;
      any = true;
      if (s.failed > 0) {
        spdlog::warn("{}", FormatModelLine(s, interval_));
      } else {
        spdlog::info("{}", FormatModelLine(s, interval_));
      }
    }
    if (any) spdlog::info("{}", FormatMemoryLine(*engine_));
    if (gpu_ != nullptr) {
      const std::string line = FormatGpuLine(gpu_->Sample(), gpu_->device_spec(),
                                             engine_->allocator()->stats().reserved_bytes);
      spdlog::log(any ? spdlog::level::info : spdlog::level::debug, "{}", line);
    }
    lock.lock();
  }
}

}  // namespace infer
