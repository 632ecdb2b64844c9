// encoder-bench: throughput of the BERT encoder across batch × length, on the
// CPU (FP32, OpenBLAS) or a GPU (FP16, cuBLAS + fused kernels).
//
//   build/bin/encoder-bench --checkpoint DIR [--device cpu|cuda:0]
//                           [--batches 1,8,32] [--lengths 16,64,256] [--json FILE]
//
// DIR holds config.json and model.safetensors (model_repository/minilm after
// scripts/export-demo-models.sh, or one from infer-model-gen). Token ids are
// random, every token real. Ids and mask are uploaded once per shape; each
// timed run is one Encode on the device plus a stream synchronisation, i.e.
// the forward pass as the server's compute stage runs it. Reports the median
// of --runs after one warm-up run. bench/encoder_vs_torch.py runs the same
// shapes through PyTorch and prints the ratio.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "models/bert_encoder.h"
#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/staging_pool.h"

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "encoder-bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, device_spec = "cpu", json_path;
  std::vector<int64_t> batches = {1, 8, 32}, lengths = {16, 64, 256};
  int runs = 5;
  CLI::App app{"encoder-bench: BERT encoder sequences/s and tokens/s by batch and length"};
  app.add_option("--checkpoint", dir, "folder with config.json and model.safetensors")->required();
  app.add_option("--device", device_spec, "cpu or cuda:N")->capture_default_str();
  app.add_option("--batches", batches, "batch sizes")->delimiter(',')->capture_default_str();
  app.add_option("--lengths", lengths, "sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--runs", runs, "timed runs per shape (median reported)")->capture_default_str();
  app.add_option("--json", json_path, "also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  auto device = infer::CreateDevice(device_spec);
  if (!device.ok()) return Fail(device.status());
  auto allocator = infer::CachingAllocator::Create(device->get(), {});
  if (!allocator.ok()) return Fail(allocator.status());
  auto staging = infer::HostStagingPool::Create(device->get(), {});
  if (!staging.ok()) return Fail(staging.status());
  auto stream = (*device)->CreateStream();
  if (!stream.ok()) return Fail(stream.status());
  const infer::DeviceContext context{device->get(), allocator->get(), staging->get()};
  auto encoder = infer::LoadBertEncoder(dir, context);
  if (!encoder.ok()) return Fail(encoder.status());
  const infer::BertConfig& c = (*encoder)->config();
  const bool gpu = (*device)->info().kind == infer::DeviceKind::kCuda;
  std::printf("encoder-bench on %s (%s, %s): hidden %lld, %lld layers, %lld heads\n\n",
              device_spec.c_str(), (*device)->info().name.c_str(), gpu ? "FP16" : "FP32",
              static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_hidden_layers),
              static_cast<long long>(c.num_attention_heads));
  std::printf(
      "| batch | length | ms per batch | sequences/s | tokens/s |\n|---:|---:|---:|---:|---:|\n");
  std::ofstream json;
  if (!json_path.empty()) {
    json.open(json_path, std::ios::trunc);
    json << "{\"device\": \"" << (*device)->info().name << "\", \"results\": [";
  }
  std::mt19937 rng(1);
  bool first = true;
  for (int64_t b : batches) {
    for (int64_t len : lengths) {
      if (len > c.max_position_embeddings) continue;
      const int64_t tokens = b * len;
      std::vector<int64_t> host(2 * tokens, 1);  // ids, then the mask (all real)
      for (int64_t i = 0; i < tokens; ++i) host[i] = 1000 + rng() % (c.vocab_size - 1000);
      auto input = infer::DeviceBuffer::Allocate(allocator->get(), host.size() * 8, stream->get());
      auto output =
          infer::DeviceBuffer::Allocate(allocator->get(), b * c.hidden_size * 4, stream->get());
      if (!input.ok()) return Fail(input.status());
      if (!output.ok()) return Fail(output.status());
      absl::Status st =
          (*device)->CopyToDevice(input->get(), host.data(), host.size() * 8, stream->get());
      if (st.ok()) st = (*device)->SynchronizeStream(stream->get());
      if (!st.ok()) return Fail(st);
      std::vector<double> ms;
      for (int r = 0; r <= runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        st = (*encoder)->Encode(stream->get(), input->as<int64_t>(), input->as<int64_t>() + tokens,
                                b, len, infer::BertPooling::kMean, true, output->as<float>());
        if (st.ok()) st = (*device)->SynchronizeStream(stream->get());
        if (!st.ok()) return Fail(st);
        const double t =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (r > 0) ms.push_back(t);  // run 0 warms up
      }
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      std::printf("| %lld | %lld | %.3f | %.0f | %.0f |\n", static_cast<long long>(b),
                  static_cast<long long>(len), median, b * 1000.0 / median,
                  tokens * 1000.0 / median);
      std::fflush(stdout);
      if (json.is_open()) {
        json << (first ? "" : ", ") << "{\"batch\": " << b << ", \"length\": " << len
             << ", \"ms\": " << median << "}";
        first = false;
      }
    }
  }
  if (json.is_open()) json << "]}\n";
  return 0;
}
