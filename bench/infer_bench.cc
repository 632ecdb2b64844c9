// infer-bench: a KServe v2 gRPC load generator for infer-server, Triton or
// any server of the protocol. See --help, and bench/loadgen/runner.h for how
// load is generated and latency measured.
#include <grpc/grpc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/loadgen/prometheus_text.h"
#include "bench/loadgen/runner.h"
#include "bench/loadgen/server_figures.h"
#include "bench/loadgen/sweep.h"

namespace {

using infer::loadgen::LoadOptions;
using infer::loadgen::LoadResult;
using infer::loadgen::Sample;
using infer::loadgen::ServerFigures;
using infer::loadgen::ServerKind;
using json = nlohmann::json;

// Scrapes HOST:PORT/metrics (any server's: read leniently); empty on any
// failure.
std::vector<Sample> Scrape(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return {};
  }
  absl::StatusOr<std::string> body =
      infer::loadgen::HttpGet(address.substr(0, colon), port, "/metrics");
  if (!body.ok()) return {};
  absl::StatusOr<std::vector<Sample>> samples =
      infer::loadgen::ParsePrometheusText(*body, {.strict = false});
  return samples.ok() ? *samples : std::vector<Sample>{};
}

struct Step {
  std::string load;  // "concurrency 8" / "rate 200/s"
  double value = 0;
  LoadResult result;
  ServerFigures server;
  bool scraped = false;  // --metrics-url given and the window's first scrape answered
};

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

json EndpointsJson(const LoadResult& r) {
  json out = json::array();
  for (const infer::loadgen::EndpointCounts& e : r.endpoints) {
    json codes = json::object();
    for (const auto& [code, n] : e.codes) codes[infer::loadgen::CodeName(code)] = n;
    out.push_back({{"address", e.address}, {"sent", e.sent}, {"ok", e.ok}, {"codes", codes}});
  }
  return out;
}

json ToJson(const Step& s) {
  const LoadResult& r = s.result;
  json codes = json::object();
  for (const auto& [code, n] : r.codes) codes[infer::loadgen::CodeName(code)] = n;
  json j = {{"load", s.load},
            {"value", s.value},
            {"window_s", absl::ToDoubleSeconds(r.window)},
            {"sent", r.sent},
            {"ok", r.ok},
            {"completed_ok_in_window", r.completed_ok},
            {"throughput_per_s", r.throughput()},
            {"rows_per_s", r.row_throughput()},
            {"latency_ms",
             {{"p50", Ms(r.ok_latency.Percentile(50))},
              {"p90", Ms(r.ok_latency.Percentile(90))},
              {"p95", Ms(r.ok_latency.Percentile(95))},
              {"p99", Ms(r.ok_latency.Percentile(99))},
              {"p99.9", Ms(r.ok_latency.Percentile(99.9))},
              {"max", Ms(r.ok_latency.max())},
              {"mean", r.ok_latency.mean() / 1e6}}},
            {"error_latency_ms",
             {{"p50", Ms(r.error_latency.Percentile(50))},
              {"p99", Ms(r.error_latency.Percentile(99))},
              {"max", Ms(r.error_latency.max())}}},
            {"codes", codes},
            {"endpoints", EndpointsJson(r)},
            {"pacing",
             {{"issued", r.pacing.issued},
              {"late", r.pacing.late},
              {"max_lag_ms", absl::ToDoubleMilliseconds(r.pacing.max_lag)}}}};
  const ServerFigures& f = s.server;
  if (f.kind == ServerKind::kInferServer) {
    j["server"] = {{"kind", "infer-server"},
                   {"batch_rows_mean", f.batch_rows_mean},
                   {"padding_efficiency_mean", f.padding_efficiency_mean},
                   {"p50_ms", f.server_p50_ms},
                   {"p99_ms", f.server_p99_ms},
                   {"request_mean_ms", f.request_mean_ms},
                   {"queue_mean_ms", f.queue_mean_ms},
                   {"queue_depth_after", f.queue_depth_after},
                   {"queue_depth_peak", f.queue_depth_peak},
                   {"device_memory_budget_bytes", f.memory_limit_bytes},
                   {"device_memory_allocated_bytes", f.memory_used_after},
                   {"device_memory_peak_allocated_bytes", f.memory_peak_bytes},
                   {"device_memory_reserved_bytes", f.memory_reserved_after},
                   {"rejections", f.rejections}};
  } else if (f.kind == ServerKind::kTriton) {
    j["server"] = {{"kind", "triton"},
                   {"batch_rows_mean", f.batch_rows_mean},
                   {"request_mean_ms", f.request_mean_ms},
                   {"queue_mean_ms", f.queue_mean_ms},
                   {"queue_depth_after", f.queue_depth_after},
                   {"queue_depth_peak", f.queue_depth_peak},
                   {"gpu_memory_total_bytes", f.memory_limit_bytes},
                   {"gpu_memory_used_bytes", f.memory_used_after}};
  }
  return j;
}

void PrintHeader() {
  std::printf("%-16s %9s %9s %8s %11s %8s %8s %8s %8s %8s %8s\n", "load", "sent", "ok", "errors",
              "ok/s", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms");
}

void PrintRow(const Step& s) {
  const LoadResult& r = s.result;
  std::printf("%-16s %9lld %9lld %8lld %11.1f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n",
              s.load.c_str(), static_cast<long long>(r.sent), static_cast<long long>(r.ok),
              static_cast<long long>(r.sent - r.ok), r.throughput(),
              Ms(r.ok_latency.Percentile(50)), Ms(r.ok_latency.Percentile(90)),
              Ms(r.ok_latency.Percentile(95)), Ms(r.ok_latency.Percentile(99)),
              Ms(r.ok_latency.Percentile(99.9)), Ms(r.ok_latency.max()));
}

void PrintDetails(const Step& s) {
  const LoadResult& r = s.result;
  std::string codes;
  for (const auto& [code, n] : r.codes) {
    if (code != grpc::StatusCode::OK)
      absl::StrAppend(&codes, " ", infer::loadgen::CodeName(code), " ", n);
  }
  if (!codes.empty()) {
    std::printf("  errors by code:%s; error latency p50 %.2f ms, p99 %.2f ms\n", codes.c_str(),
                Ms(r.error_latency.Percentile(50)), Ms(r.error_latency.Percentile(99)));
  }
  for (const infer::loadgen::EndpointCounts& e : r.endpoints) {
    if (r.endpoints.size() < 2) break;
    std::printf("  %s: sent %lld, ok %lld, errors %lld\n", e.address.c_str(),
                static_cast<long long>(e.sent), static_cast<long long>(e.ok),
                static_cast<long long>(e.sent - e.ok));
  }
  if (r.pacing.issued > 0 && r.pacing.late > 0) {
    std::printf(
        "  pacing: %lld of %lld sends left over 1 ms late (max %.1f ms); their latency still "
        "counts from the intended time\n",
        static_cast<long long>(r.pacing.late), static_cast<long long>(r.pacing.issued),
        absl::ToDoubleMilliseconds(r.pacing.max_lag));
  }
  const ServerFigures& f = s.server;
  const double limit = std::max(1.0, f.memory_limit_bytes);
  if (f.kind == ServerKind::kInferServer) {
    std::string rejections;
    for (const auto& [reason, n] : f.rejections) absl::StrAppend(&rejections, " ", reason, " ", n);
    std::printf(
        "  server: mean batch %.2f rows, padding efficiency %.2f, p50 %.2f ms, p99 %.2f ms, "
        "mean queue %.2f ms; queue depth peak %.0f, after %.0f; device memory allocated %.1f%% "
        "of budget (peak %.1f%%, reserved %.1f%%)%s%s\n",
        f.batch_rows_mean, f.padding_efficiency_mean, f.server_p50_ms, f.server_p99_ms,
        f.queue_mean_ms, f.queue_depth_peak, f.queue_depth_after, 100 * f.memory_used_after / limit,
        100 * f.memory_peak_bytes / limit, 100 * f.memory_reserved_after / limit,
        rejections.empty() ? "" : "; rejections:", rejections.c_str());
  } else if (f.kind == ServerKind::kTriton) {
    std::printf(
        "  server (Triton): mean batch %.2f rows, mean request %.2f ms, mean queue %.2f ms; "
        "pending requests peak %.0f, after %.0f; GPU memory used %.1f%% of total\n",
        f.batch_rows_mean, f.request_mean_ms, f.queue_mean_ms, f.queue_depth_peak,
        f.queue_depth_after, 100 * f.memory_used_after / limit);
  } else if (s.scraped) {
    std::printf("  server: its /metrics has neither infer-server's nor Triton's series\n");
  }
}

// "a:b:step" → a, a+step, ..., b.
bool ParseRange(const std::string& text, std::vector<double>* out) {
  std::vector<std::string> p = absl::StrSplit(text, ':');
  double a = 0, b = 0, step = 0;
  if (p.size() != 3 || !absl::SimpleAtod(p[0], &a) || !absl::SimpleAtod(p[1], &b) ||
      !absl::SimpleAtod(p[2], &step) || !(a > 0) || b < a || !(step > 0) || (b - a) / step > 1000) {
    return false;
  }
  for (double v = a; v <= b + 1e-9; v += step) out->push_back(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  LoadOptions o;
  std::string input = "ids", arrivals = "constant", json_path, metrics_url, rate_range,
              concurrency_range;
  double warmup_s = 1, duration_s = 10, timeout_ms = 30000, p99_target_ms = 0,
         max_error_fraction = 0.001;
  bool no_progress = false;
  CLI::App app{
      "infer-bench: load generator for KServe v2 / Triton gRPC inference servers "
      "(inference.GRPCInferenceService/ModelInfer).\n\n"
      "Closed loop (--concurrency N): N requests always in flight; latency is each request's "
      "round trip. Open loop (--rate R): requests are sent on a schedule (constant spacing or "
      "Poisson arrivals) whatever the server does, and latency counts from each request's "
      "*intended* send time, so a server that stalls is charged for every request that "
      "should have gone out meanwhile (no coordinated omission); every request meant for the "
      "window is sent, however late. Percentiles come from a high-dynamic-range histogram "
      "(0.1% resolution, 1 ns to 18 min).\n\n"
      "The measured window is --duration-s after --warmup-s of the same load (or, with "
      "--requests, from the warm-up's end to the last answer of that many requests). "
      "Latency and errors are those of the requests meant to be sent in the window, each "
      "followed to its answer; throughput (ok/s) counts the OK answers that arrive within the "
      "window. Reports sent/OK/errors, ok/s, p50/p90/p95/p99/p99.9/max latency and errors by "
      "gRPC code (with their latency). With --metrics-url, the server's own /metrics are "
      "scraped when the window begins, once a second during it (peak queue depth) and after "
      "the run: for infer-server the mean batch size, padding efficiency, server-side "
      "p50/p99 and mean queue time, queue depth, device memory against the budget and "
      "rejections by reason; for Triton (nv_* metrics) the mean batch size, mean request and "
      "queue times, pending requests and GPU memory.\n\n"
      "A sweep (--rate-range or --concurrency-range) runs each step in turn; with "
      "--p99-target-ms it reports the highest load whose p99 is at or under the target with at "
      "most --max-error-fraction errors, and stops at the first failing step after a passing "
      "one.\n\n"
      "Requests are token ids ([batch, length] of 101 ... 102 around ids in [1000, 2000); INT64 "
      "input_ids by default, see --input-name, --ids-datatype, --mask-input, --type-ids-input) "
      "or text (BYTES text [batch] of length-2 words 'hello', see --text-column).",
      "infer-bench"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("-u,--url", o.address,
                 "server host:port, or several separated by commas (a fleet without a proxy: "
                 "channels go round them, at least one each, and each one's answers are counted)")
      ->capture_default_str();
  app.add_option("-m,--model", o.model, "model name")->required();
  app.add_option("-b,--batch-size", o.batch, "rows per request")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--input", input, "ids (INT64 input_ids) or text (BYTES text)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ids", "text"}));
  app.add_option("--input-name", o.format.input_name,
                 "name of the ids or text input (default input_ids / text)");
  app.add_option("--ids-datatype", o.format.ids_datatype,
                 "datatype of the ids (and of the mask and type ids): INT64 or INT32")
      ->capture_default_str()
      ->check(CLI::IsMember({"INT64", "INT32"}));
  app.add_option("--mask-input", o.format.mask_input,
                 "ids only: also send this input, all ones, shaped as the ids (e.g. "
                 "attention_mask)");
  app.add_option("--type-ids-input", o.format.type_ids_input,
                 "ids only: also send this input, all zeros, shaped as the ids (e.g. "
                 "token_type_ids)");
  app.add_flag("--text-column", o.format.text_column,
               "text only: shape the text input [batch, 1] rather than [batch]");
  app.add_option("--lengths", o.lengths,
                 "sequence lengths: 128 (fixed), 16-512 (uniform), or a weighted mix "
                 "16:0.7,128:0.2,512:0.1")
      ->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "closed loop: requests in flight")
      ->check(CLI::Range(1, 100000));
  app.add_option("--rate", o.rate, "open loop: requests per second")->check(CLI::Range(1e-3, 1e7));
  app.add_option("--arrivals", arrivals, "open loop schedule: constant or poisson")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "poisson"}));
  app.add_option("--rate-range", rate_range, "open-loop sweep START:END:STEP (requests/s)");
  app.add_option("--concurrency-range", concurrency_range, "closed-loop sweep START:END:STEP");
  app.add_option("--p99-target-ms", p99_target_ms,
                 "sweep: report the highest load with p99 at or under this")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-error-fraction", max_error_fraction,
                 "sweep: a step passes only with at most this share of errors")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--warmup-s", warmup_s, "seconds of load before measuring")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  CLI::Option* duration_option =
      app.add_option("--duration-s", duration_s, "seconds measured (per sweep step)")
          ->capture_default_str()
          ->check(CLI::Range(0.01, 86400.0));
  app.add_option("--requests", o.requests,
                 "measure this many requests, then stop (0: none); without --duration-s the "
                 "window has no time limit, with it whichever comes first ends the window")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--channels", o.channels, "gRPC channels (TCP connections)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--threads", o.threads, "open loop: sending threads (the rate is split)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--timeout-ms", timeout_ms, "per-request deadline")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3.6e6));
  app.add_option("--max-outstanding", o.max_outstanding,
                 "open loop: most requests in flight; beyond it sending waits (and the wait "
                 "counts in latency)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}));
  app.add_option("--seed", o.seed, "random seed (lengths, Poisson gaps)")->capture_default_str();
  app.add_option("--metrics-url", metrics_url,
                 "host:port of the server's Prometheus endpoint (infer-server: 127.0.0.1:8002)");
  app.add_option("--json", json_path, "also write the results as JSON to this file");
  app.add_flag("--no-progress", no_progress, "no live progress line (default: on a terminal)");
  CLI11_PARSE(app, argc, argv);
  // Keep gRPC initialised for the whole run: each load phase creates and
  // drops its channels, and letting the library shut down and start again
  // between phases (or shut down while its threads finish the last
  // callbacks at exit) races inside gRPC.
  grpc_init();
  struct GrpcShutdown {
    ~GrpcShutdown() { grpc_shutdown_blocking(); }
  } grpc_shutdown_at_exit;

  o.format.kind =
      input == "text" ? infer::loadgen::InputKind::kText : infer::loadgen::InputKind::kTokenIds;
  if (absl::Status s = infer::loadgen::ValidateRequestFormat(o.format); !s.ok()) {
    std::fprintf(stderr, "infer-bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (o.requests > 0 && duration_option->count() == 0) duration_s = 86400;  // the budget ends it
  o.arrivals = arrivals == "poisson" ? infer::loadgen::Arrivals::kPoisson
                                     : infer::loadgen::Arrivals::kConstant;
  o.warmup = absl::Seconds(warmup_s);
  o.duration = absl::Seconds(duration_s);
  o.timeout = absl::Milliseconds(timeout_ms);

  // The loads to run: one, or a sweep.
  std::vector<std::pair<bool, double>> loads;  // (open loop?, value)
  const int modes =
      (o.concurrency > 0) + (o.rate > 0) + !rate_range.empty() + !concurrency_range.empty();
  if (modes != 1) {
    std::fprintf(stderr,
                 "infer-bench: give exactly one of --concurrency, --rate, --rate-range, "
                 "--concurrency-range\n");
    return 2;
  }
  std::vector<double> values;
  if (!rate_range.empty() || !concurrency_range.empty()) {
    if (!ParseRange(rate_range.empty() ? concurrency_range : rate_range, &values)) {
      std::fprintf(stderr,
                   "infer-bench: a range is START:END:STEP with 0 < START <= END, STEP > 0 and "
                   "at most 1000 steps\n");
      return 2;
    }
    if (!concurrency_range.empty()) {
      for (double v : values) {
        if (v != std::floor(v) || v > 100000) {
          std::fprintf(stderr,
                       "infer-bench: --concurrency-range steps must be whole numbers in "
                       "[1, 100000]; got %g\n",
                       v);
          return 2;
        }
      }
    } else if (values.back() > 1e7) {
      std::fprintf(stderr, "infer-bench: --rate-range must stay within 1e7 requests/s\n");
      return 2;
    }
    for (double v : values) loads.push_back({!rate_range.empty(), v});
  } else {
    loads.push_back({o.rate > 0, o.rate > 0 ? o.rate : o.concurrency});
  }

  const bool progress = !no_progress && isatty(STDERR_FILENO);
  const std::string measured =
      o.requests > 0 && duration_option->count() == 0
          ? absl::StrCat(o.requests, " requests measured")
          : absl::StrCat(
                absl::StrFormat("%.1f", duration_s), " s measured",
                o.requests > 0 ? absl::StrCat(" (at most ", o.requests, " requests)") : "");
  std::printf(
      "infer-bench: model '%s' at %s, batch %lld, lengths %s, %s input, %s after %.1f s "
      "warm-up\n",
      o.model.c_str(), o.address.c_str(), static_cast<long long>(o.batch), o.lengths.c_str(),
      input.c_str(), measured.c_str(), warmup_s);
  PrintHeader();
  std::fflush(stdout);
  std::vector<Step> steps;
  infer::loadgen::SweepJudge judge(p99_target_ms, max_error_fraction);
  const bool judged = p99_target_ms > 0 && loads.size() > 1;
  for (const auto& [open, value] : loads) {
    LoadOptions step_options = o;
    step_options.rate = open ? value : 0;
    step_options.concurrency = open ? 0 : static_cast<int>(value);
    if (progress) {
      step_options.on_progress = [](const std::string& line) {
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
      };
    }
    // The server's counters are read when the measured window begins (not
    // before the warm-up) and after the run; the queue depth is sampled
    // during the window.
    std::atomic<bool> sampling{true};
    std::atomic<bool> measuring{false};
    std::atomic<double> queue_peak{0};
    std::vector<Sample> before;
    std::mutex before_mu;
    std::thread sampler;
    if (!metrics_url.empty()) {
      step_options.on_measure_start = [&] {
        std::vector<Sample> s = Scrape(metrics_url);
        std::lock_guard<std::mutex> lock(before_mu);
        before = std::move(s);
        measuring.store(true);
      };
      sampler = std::thread([&] {
        while (sampling.load()) {
          if (measuring.load()) {
            const std::vector<Sample> s = Scrape(metrics_url);
            const double depth = infer::loadgen::QueueDepth(s, o.model);
            if (depth > queue_peak.load()) queue_peak.store(depth);
          }
          for (int i = 0; i < 10 && sampling.load(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }
      });
    }
    absl::StatusOr<LoadResult> result = infer::loadgen::RunLoad(step_options);
    sampling.store(false);
    if (sampler.joinable()) sampler.join();
    if (progress) std::fprintf(stderr, "\r\033[K");
    if (!result.ok()) {
      std::fprintf(stderr, "infer-bench: %s\n", std::string(result.status().message()).c_str());
      return 2;
    }
    Step step;
    step.value = value;
    step.load =
        open ? absl::StrFormat("rate %g/s", value) : absl::StrFormat("concurrency %g", value);
    step.result = *std::move(result);
    if (!metrics_url.empty()) {
      std::lock_guard<std::mutex> lock(before_mu);
      const std::vector<Sample> after = Scrape(metrics_url);
      if (before.empty() || after.empty()) {
        std::fprintf(stderr,
                     "infer-bench: cannot scrape (or parse) http://%s/metrics; no server "
                     "figures\n",
                     metrics_url.c_str());
      } else {
        step.scraped = true;
        step.server = infer::loadgen::Summarize(before, after, o.model, queue_peak.load());
      }
    }
    PrintRow(step);
    PrintDetails(step);
    std::fflush(stdout);
    steps.push_back(std::move(step));
    if (judged && !judge.Add(steps.back().result)) {
      std::printf("(stopping: this step fails the target after a passing one)\n");
      break;
    }
  }
  const int best = judge.best();
  if (judged) {
    if (best >= 0) {
      std::printf("highest load meeting p99 <= %g ms with <= %g%% errors: %s (%.1f ok/s)\n",
                  p99_target_ms, 100 * max_error_fraction, steps[best].load.c_str(),
                  steps[best].result.throughput());
    } else {
      std::printf("no step met p99 <= %g ms with <= %g%% errors\n", p99_target_ms,
                  100 * max_error_fraction);
    }
  }
  if (!json_path.empty()) {
    json j = {{"model", o.model},         {"url", o.address},     {"batch_size", o.batch},
              {"lengths", o.lengths},     {"input", input},       {"warmup_s", warmup_s},
              {"duration_s", duration_s}, {"arrivals", arrivals}, {"steps", json::array()}};
    for (const Step& s : steps) j["steps"].push_back(ToJson(s));
    if (judged) {
      j["p99_target_ms"] = p99_target_ms;
      j["best_step"] = best;
    }
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}
