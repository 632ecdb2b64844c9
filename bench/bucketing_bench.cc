// bucketing-bench: what sequence-length classes buy on a mixed-length
// workload. The same model is served twice in one engine — with length
// buckets (16/32/64/128/256/512) and without (one queue) — and the same
// closed-loop workload runs against each, side by side: padding efficiency
// (real tokens / tokens computed), throughput, and p50/p99 latency.
//
//   build/bin/bucketing-bench [--model embed_pool|minilm] [--checkpoint DIR]
//       [--precision auto|fp32|bf16] [--device cpu|cuda:0] [--requests N]
//       [--clients C]
//
// embed_pool pads every batch to its longest sequence, so one queue wastes
// compute on padding. minilm (the bert backend, e.g. model_repository/minilm)
// packs batches: it computes real tokens only in both set-ups (efficiency
// 1), and what classes still buy is latency: short requests do not wait in a
// batch behind long ones, whose attention costs grow with their length.
//
// Workload: 70% of requests 4-32 tokens, 20% 33-128, 10% 129-512, cut to the
// model's longest sequence.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "models/bert/bert_model.h"
#include "models/embed_pool/embed_pool.h"

namespace {

struct RunResult {
  double seconds = 0;
  double p50_ms = 0, p99_ms = 0;
  double efficiency = 0;  // real / computed tokens
  uint64_t executions = 0;
  int errors = 0;
};

infer::InferRequest MakeRequest(const std::string& model, int64_t length, int64_t vocab,
                                std::mt19937& rng) {
  infer::InferRequest r;
  r.model_name = model;
  infer::Tensor t;
  t.name = "input_ids";
  t.dtype = infer::DataType::kInt64;
  t.shape = {1, length};
  std::vector<int64_t> ids(length);
  for (auto& id : ids) id = 1000 + rng() % (vocab - 1000);
  t.data.assign(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int64_t));
  r.inputs.push_back(std::move(t));
  return r;
}

// Drawn from the mix, then cut to the model's longest sequence (256 for
// all-MiniLM-L6-v2), so that no request is refused as too long.
int64_t DrawLength(std::mt19937& rng, int64_t max_length) {
  const int p = rng() % 100;
  int64_t n = 129 + rng() % 384;
  if (p < 70) {
    n = 4 + rng() % 29;
  } else if (p < 90) {
    n = 33 + rng() % 96;
  }
  return max_length > 0 ? std::min(n, max_length) : n;
}

RunResult Run(infer::Engine* engine, const std::string& model, int64_t vocab, int64_t max_length,
              int requests, int clients) {
  std::vector<double> latencies(requests);
  std::atomic<int> next{0}, errors{0};
  const infer::ModelStats before = *engine->GetModelStats(model);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(1000 + c);  // same lengths for both models
      for (int i = next++; i < requests; i = next++) {
        infer::InferRequest r = MakeRequest(model, DrawLength(rng, max_length), vocab, rng);
        const auto t0 = std::chrono::steady_clock::now();
        if (!engine->Infer(std::move(r)).ok()) ++errors;
        latencies[i] =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
      }
    });
  }
  for (auto& t : threads) t.join();
  RunResult out;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  out.p50_ms = latencies[requests / 2];
  out.p99_ms = latencies[std::min<int>(requests - 1, requests * 99 / 100)];
  const infer::ModelStats after = *engine->GetModelStats(model);
  out.efficiency = static_cast<double>(after.real_tokens - before.real_tokens) /
                   static_cast<double>(after.computed_tokens - before.computed_tokens);
  out.executions = after.execution_count - before.execution_count;
  out.errors = errors.load();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device, model_kind = "embed_pool", checkpoint, precision_name = "auto";
  int requests = 2000, clients = 32;
  CLI::App app{"bucketing-bench: length classes vs one queue on a mixed-length workload"};
  app.add_option("--model", model_kind, "embed_pool or minilm")->capture_default_str();
  app.add_option("--checkpoint", checkpoint, "minilm: the checkpoint folder");
  app.add_option("--precision", precision_name, "minilm: auto, fp32 or bf16")
      ->capture_default_str();
  app.add_option("--device", device, "cpu or cuda:N (default: GPU if usable)");
  app.add_option("--requests", requests, "requests per run")->capture_default_str();
  app.add_option("--clients", clients, "concurrent closed-loop clients")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  infer::EngineOptions eo;
  eo.device = device;
  auto engine = infer::Engine::Create(eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  auto precision = infer::ParsePrecision(precision_name);
  if (!precision.ok() || (model_kind != "embed_pool" && model_kind != "minilm") ||
      (model_kind == "minilm" && checkpoint.empty())) {
    std::fprintf(stderr,
                 "--model embed_pool, or --model minilm --checkpoint DIR "
                 "[--precision auto|fp32|bf16]\n");
    return 1;
  }
  int64_t vocab = 30000, max_length = 0;
  std::string precision_used = "fp32";
  for (const char* name : {"flat", "classes"}) {
    absl::StatusOr<std::unique_ptr<infer::Model>> model;
    if (model_kind == "minilm") {
      infer::BertModelOptions o;
      o.name = name;
      o.checkpoint_dir = checkpoint;
      o.precision = *precision;
      auto bert = infer::BertModel::Create(o, (*engine)->context());
      if (bert.ok()) {
        vocab = (*bert)->encoder().spec().vocab_size;
        model = std::unique_ptr<infer::Model>(std::move(*bert));
      } else {
        model = bert.status();
      }
    } else {
      infer::EmbedPoolOptions o;
      o.name = name;
      auto pool = infer::EmbedPoolModel::Create(o, (*engine)->context());
      if (pool.ok()) {
        model = std::unique_ptr<infer::Model>(std::move(*pool));
      } else {
        model = pool.status();
      }
    }
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
      return 1;
    }
    precision_used = (*model)->spec().precision;
    max_length = (*model)->spec().max_sequence_length;
    infer::QueueOptions q;
    q.max_batch_size = 32;
    q.max_queue_delay = absl::Milliseconds(2);
    if (std::string(name) == "classes") q.length_buckets = {16, 32, 64, 128, 256, 512};
    if (!model.ok() || !(*engine)->AddModel(*std::move(model), q).ok()) return 1;
  }
  Run(engine->get(), "flat", vocab, max_length, 100, clients);  // warm-up
  Run(engine->get(), "classes", vocab, max_length, 100, clients);
  const RunResult flat = Run(engine->get(), "flat", vocab, max_length, requests, clients);
  const RunResult classes = Run(engine->get(), "classes", vocab, max_length, requests, clients);

  std::printf(
      "bucketing-bench on %s, model %s (%s): %d requests, %d closed-loop clients, lengths "
      "70%% 4-32, 20%% 33-128, 10%% 129-512 (cut to %lld); max_batch_size 32, max_queue_delay "
      "2 ms\n\n",
      (*engine)->device()->spec().c_str(), model_kind.c_str(), precision_used.c_str(), requests,
      clients, static_cast<long long>(max_length > 0 ? max_length : 512));
  std::printf(
      "| queueing | padding efficiency | executions | req/s | p50 ms | p99 ms | "
      "errors |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& [label, r] :
       {std::pair{"one queue", flat}, std::pair{"length classes", classes}}) {
    std::printf("| %s | %.2f | %llu | %.0f | %.2f | %.2f | %d |\n", label, r.efficiency,
                static_cast<unsigned long long>(r.executions), requests / r.seconds, r.p50_ms,
                r.p99_ms, r.errors);
  }
  std::printf(
      "\nlength classes vs one queue: efficiency %.2fx, throughput %.2fx, p50 %.2fx, "
      "p99 %.2fx\n",
      classes.efficiency / flat.efficiency, flat.seconds / classes.seconds,
      classes.p50_ms / flat.p50_ms, classes.p99_ms / flat.p99_ms);
  return 0;
}
