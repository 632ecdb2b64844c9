// encoder-bench: throughput of the CPU BERT encoder across batch × length.
//
//   build/bin/encoder-bench --checkpoint DIR [--batches 1,8,32] [--lengths 16,64,256]
//
// DIR holds config.json and model.safetensors (e.g. model_repository/minilm
// after scripts/export-demo-models.sh). Prints sequences/s and tokens/s per
// shape (median of several runs after a warm-up).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "models/bert_cpu.h"

int main(int argc, char** argv) {
  std::string dir;
  std::vector<int64_t> batches = {1, 8, 32}, lengths = {16, 64, 256};
  int runs = 5;
  CLI::App app{"encoder-bench: CPU BERT encoder sequences/s and tokens/s by batch and length"};
  app.add_option("--checkpoint", dir, "folder with config.json and model.safetensors")->required();
  app.add_option("--batches", batches, "batch sizes")->delimiter(',')->capture_default_str();
  app.add_option("--lengths", lengths, "sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--runs", runs, "timed runs per shape (median reported)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto model = infer::BertEncoderCpu::Load(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const infer::BertConfig& c = (*model)->config();
  std::printf("encoder-bench (CPU, FP32): hidden %lld, %lld layers, %lld heads\n\n",
              static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_hidden_layers),
              static_cast<long long>(c.num_attention_heads));
  std::printf(
      "| batch | length | ms per batch | sequences/s | tokens/s |\n|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(1);
  for (int64_t b : batches) {
    for (int64_t len : lengths) {
      std::vector<int64_t> ids(b * len), mask(b * len, 1);
      for (auto& id : ids) id = 1000 + rng() % 20000;
      std::vector<double> ms;
      for (int r = 0; r <= runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        auto out = (*model)->Encode(ids, mask, b, len, true);
        const double t =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (!out.ok()) {
          std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
          return 1;
        }
        if (r > 0) ms.push_back(t);  // run 0 warms up
      }
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      std::printf("| %lld | %lld | %.2f | %.0f | %.0f |\n", static_cast<long long>(b),
                  static_cast<long long>(len), median, b * 1000.0 / median,
                  b * len * 1000.0 / median);
    }
  }
  return 0;
}
