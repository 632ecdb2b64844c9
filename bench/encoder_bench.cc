// encoder-bench: throughput of the transformer encoder, on the CPU (oneDNN,
// FP32, BF16 or INT8) or a GPU (FP16, cuBLAS + fused kernels).
//
//   build/bin/encoder-bench --checkpoint DIR [--device cpu|cuda:0]
//                           [--precision auto|fp32|bf16|int8|fp16|fp8] [--threads N]
//                           [--batches 1,8,32] [--lengths 16,64,256]
//                           [--sequences FILE] [--runs 5] [--json FILE]
//                           [--batch-invariant on|off] [--cuda-fused-epilogues on|off]
//                           [--splade off|max|sum] [--pooling mean|cls|last]
//
// DIR holds config.json and model.safetensors (model_repository/minilm after
// scripts/export-demo-models.sh, or one from infer-model-gen).
//
// Grid mode (default): for each batch × length, random token ids, every
// token real. Sequences mode (--sequences FILE, JSON {"batches": [[[ids of
// one sequence], ...], ...]}): the given batches of sequences of any
// lengths, encoded packed as the server does; bench/encoder_vs_torch.py
// writes such a file for its mixed-length comparison.
//
// Each batch is packed and uploaded once; a timed run is one Encode on the
// device plus a stream synchronisation, i.e. the forward pass as the
// server's compute stage runs it. Reports the median of --runs after one
// warm-up (in sequences mode, of the time for all batches). With --splade
// (a checkpoint with a masked-LM head), a run is what a SPLADE model's batch
// runs instead: every token's last hidden state, then the SPLADE head into
// [sequences, vocab] (its buffers taken from the allocator per run, as the
// server's batches take them). --pooling picks the embedding's pooling
// (mean by default): with cls or last the CPU encoder computes the last
// layer for the pooled token alone, as a cross-encoder's or a [CLS]- or
// last-token-pooled model's batches run.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/transformer/encoder.h"
#include "models/transformer/load_encoder.h"
#include "models/transformer/splade_head.h"
#include "runtime/caching_allocator.h"
#include "runtime/compute_stream.h"
#include "runtime/device.h"
#include "runtime/staging_pool.h"

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "encoder-bench: %s\n", s.ToString().c_str());
  return 1;
}

// One packed batch resident on the device.
struct DeviceBatch {
  infer::PackedSequencesView view;
  std::vector<int32_t> host;  // the packed buffer (its offsets serve as host_offsets)
  infer::DeviceBuffer input, output;
};

absl::StatusOr<DeviceBatch> Upload(const std::vector<std::vector<int64_t>>& sequences,
                                   int64_t out_width, infer::Device* device,
                                   infer::CachingAllocator* allocator, infer::Stream* stream) {
  DeviceBatch b;
  infer::PackedLayout layout;
  layout.rows = static_cast<int64_t>(sequences.size());
  for (const auto& s : sequences) layout.tokens += static_cast<int64_t>(s.size());
  b.host.resize(layout.bytes() / sizeof(int32_t));
  int64_t row = 0, token = 0, longest = 0, width = 0;
  for (const auto& s : sequences) {
    infer::AppendPackedRows(s.data(), nullptr, nullptr, 1, static_cast<int64_t>(s.size()), layout,
                            b.host.data(), &row, &token, &longest, &width);
  }
  auto input = infer::DeviceBuffer::Allocate(allocator, layout.bytes(), stream);
  if (!input.ok()) return input.status();
  auto output = infer::DeviceBuffer::Allocate(allocator, layout.rows * out_width * 4, stream);
  if (!output.ok()) return output.status();
  b.input = *std::move(input);
  b.output = *std::move(output);
  absl::Status st = device->CopyToDevice(b.input.get(), b.host.data(), layout.bytes(), stream);
  if (st.ok()) st = device->SynchronizeStream(stream);
  if (!st.ok()) return st;
  b.view = layout.View(b.input.as<int32_t>(), b.host.data() + layout.offsets(), longest, width);
  return b;
}

// One batch's pass: Encode, or with `splade` the states and the SPLADE head.
absl::Status Run(const infer::TransformerEncoder& encoder, infer::Pooling pooling,
                 const infer::SpladePooling* splade, infer::CachingAllocator* allocator,
                 infer::Stream* stream, DeviceBatch& b) {
  if (splade == nullptr) return encoder.Encode(stream, b.view, pooling, true, b.output.as<float>());
  const infer::SpladeHead& head = *encoder.splade();
  const int64_t tokens = b.view.tokens;
  auto states =
      infer::DeviceBuffer::Allocate(allocator, tokens * encoder.spec().hidden_size * 4, stream);
  if (!states.ok()) return states.status();
  auto scratch = infer::DeviceBuffer::Allocate(allocator, head.ScratchBytes(tokens), stream);
  if (!scratch.ok()) return scratch.status();
  absl::Status st = encoder.EncodeWithStates(stream, b.view, infer::Pooling::kMean, false, nullptr,
                                             states->as<float>());
  if (!st.ok()) return st;
  return head.Run(stream, states->as<float>(), b.view.host_offsets, b.view.offsets, b.view.rows,
                  tokens, *splade, b.output.as<float>(), scratch->get());
}

// Median milliseconds of `runs` timed passes over `batches` (after one
// warm-up pass).
absl::StatusOr<double> Time(const infer::TransformerEncoder& encoder, infer::Pooling pooling,
                            const infer::SpladePooling* splade, infer::Device* device,
                            infer::CachingAllocator* allocator, infer::Stream* stream,
                            std::vector<DeviceBatch>& batches, int runs) {
  std::vector<double> ms;
  for (int r = 0; r <= runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (DeviceBatch& b : batches) {
      absl::Status st = Run(encoder, pooling, splade, allocator, stream, b);
      if (st.ok()) st = device->SynchronizeStream(stream);
      if (!st.ok()) return st;
    }
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) ms.push_back(t);  // run 0 warms up
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, device_spec = "cpu", json_path, sequences_path, precision_name = "auto";
  std::vector<int64_t> batches = {1, 8, 32}, lengths = {16, 64, 256};
  std::string graphs = "on", invariant = "off", fused_epilogues = "off", splade_name = "off",
              pooling_name = "mean";
  int64_t graph_max_tokens = infer::EncoderGraphOptions().max_tokens;
  int runs = 5, threads = 0;
  CLI::App app{"encoder-bench: BERT encoder sequences/s and tokens/s"};
  app.add_option("--checkpoint", dir, "folder with config.json and model.safetensors")->required();
  app.add_option("--device", device_spec, "cpu or cuda:N")->capture_default_str();
  app.add_option("--precision", precision_name, "auto, fp32, bf16, int8 (CPU), fp16 or fp8 (GPU)")
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU compute threads (0: one per usable core)")
      ->capture_default_str();
  app.add_option("--batches", batches, "batch sizes")->delimiter(',')->capture_default_str();
  app.add_option("--lengths", lengths, "sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--sequences", sequences_path,
                 "JSON {\"batches\": [[[ids], ...], ...]}: time these batches instead of the grid");
  app.add_option("--runs", runs, "timed runs (median reported)")->capture_default_str();
  app.add_option("--cuda-graphs", graphs, "on or off: CUDA graphs for small batches (GPU)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--graph-max-tokens", graph_max_tokens,
                 "largest batch, in tokens, that replays a CUDA graph")
      ->capture_default_str();
  app.add_option("--batch-invariant", invariant,
                 "on or off: each embedding bit-identical whatever its batch (CPU)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--cuda-fused-epilogues", fused_epilogues,
                 "on or off: the FFN's bias + GELU in cuBLASLt's GEMM epilogue (GPU)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--splade", splade_name,
                 "off, max or sum: time a SPLADE model's pass (states, then the masked-LM head "
                 "and SPLADE pooling of log(1 + ReLU))")
      ->check(CLI::IsMember({"off", "max", "sum"}))
      ->capture_default_str();
  app.add_option("--pooling", pooling_name,
                 "mean, cls or last: the embedding's pooling (cls and last: the CPU encoder's "
                 "last layer computes the pooled token alone)")
      ->check(CLI::IsMember({"mean", "cls", "last"}))
      ->capture_default_str();
  app.add_option("--json", json_path, "also write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  const infer::Pooling pooling = pooling_name == "cls"    ? infer::Pooling::kCls
                                 : pooling_name == "last" ? infer::Pooling::kLastToken
                                                          : infer::Pooling::kMean;
  auto precision = infer::ParsePrecision(precision_name);
  if (!precision.ok()) return Fail(precision.status());
  infer::DeviceOptions device_options;
  device_options.cpu_threads = threads;
  auto device = infer::CreateDevice(device_spec, device_options);
  if (!device.ok()) return Fail(device.status());
  auto allocator = infer::CachingAllocator::Create(device->get(), {});
  if (!allocator.ok()) return Fail(allocator.status());
  auto staging = infer::HostStagingPool::Create(device->get(), {});
  if (!staging.ok()) return Fail(staging.status());
  // A compute stream with its GEMM workspace, as the server's pipeline has.
  auto stream = infer::ComputeStream::Create(device->get(), allocator->get());
  if (!stream.ok()) return Fail(stream.status());
  const infer::DeviceContext context{device->get(), allocator->get(), staging->get()};
  infer::EncoderOptions options;
  options.precision = *precision;
  options.graphs.enabled = graphs == "on";
  options.graphs.max_tokens = graph_max_tokens;
  options.batch_invariant = invariant == "on";
  options.cublaslt_epilogues = fused_epilogues == "on";
  options.masked_lm_head = splade_name != "off";
  auto encoder = infer::LoadEncoder(dir, context, options);
  if (!encoder.ok()) return Fail(encoder.status());
  infer::SpladePooling splade_pooling;
  splade_pooling.sum = splade_name == "sum";
  const infer::SpladePooling* splade = splade_name == "off" ? nullptr : &splade_pooling;
  if (splade != nullptr && (*encoder)->splade() == nullptr) {
    return Fail(absl::InvalidArgumentError(dir + ": --splade needs a masked-LM head"));
  }
  const infer::TransformerSpec& c = (*encoder)->spec();
  const std::string precision_used = infer::PrecisionName((*encoder)->precision());
  std::printf("encoder-bench on %s (%s, %s; %s): %s%s\n\n", device_spec.c_str(),
              (*device)->info().name.c_str(), precision_used.c_str(),
              (*encoder)->Implementation().c_str(), c.Describe().c_str(),
              splade == nullptr
                  ? absl::StrCat("; ", infer::PoolingName(pooling), " pooling").c_str()
                  : "; then the SPLADE head");
  nlohmann::json out = {{"device", (*device)->info().name},
                        {"precision", precision_used},
                        {"implementation", (*encoder)->Implementation()},
                        {"pooling", splade == nullptr ? infer::PoolingName(pooling) : "splade"},
                        {"results", nlohmann::json::array()}};
  auto upload = [&](const std::vector<std::vector<int64_t>>& seqs) {
    return Upload(seqs, splade == nullptr ? c.hidden_size : (*encoder)->splade()->vocab(),
                  device->get(), allocator->get(), stream->get());
  };

  if (!sequences_path.empty()) {
    std::ifstream in(sequences_path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("batches") || !j["batches"].is_array()) {
      return Fail(absl::InvalidArgumentError(sequences_path + ": not {\"batches\": [...]}"));
    }
    std::vector<DeviceBatch> device_batches;
    int64_t sequences = 0, tokens = 0;
    for (const auto& batch : j["batches"]) {
      std::vector<std::vector<int64_t>> seqs;
      for (const auto& s : batch) {
        seqs.push_back(s.get<std::vector<int64_t>>());
        for (int64_t id : seqs.back()) {
          if (id < 0 || id >= c.vocab_size) {
            return Fail(absl::InvalidArgumentError("token id outside the vocabulary"));
          }
        }
        if (static_cast<int64_t>(seqs.back().size()) > c.MaxSequenceLength()) {
          return Fail(absl::InvalidArgumentError("sequence longer than the model's positions"));
        }
        tokens += static_cast<int64_t>(seqs.back().size());
      }
      sequences += static_cast<int64_t>(seqs.size());
      auto b = upload(seqs);
      if (!b.ok()) return Fail(b.status());
      device_batches.push_back(*std::move(b));
    }
    auto ms = Time(**encoder, pooling, splade, device->get(), allocator->get(), stream->get(),
                   device_batches, runs);
    if (!ms.ok()) return Fail(ms.status());
    std::printf(
        "%zu batches, %lld sequences, %lld tokens: %.3f ms, %.0f sequences/s, %.0f "
        "tokens/s\n",
        device_batches.size(), static_cast<long long>(sequences), static_cast<long long>(tokens),
        *ms, sequences * 1000.0 / *ms, tokens * 1000.0 / *ms);
    out["results"].push_back({{"batches", device_batches.size()},
                              {"sequences", sequences},
                              {"tokens", tokens},
                              {"ms", *ms}});
  } else {
    std::printf(
        "| batch | length | ms per batch | sequences/s | tokens/s |\n|---:|---:|---:|---:|---:|\n");
    std::mt19937 rng(1);
    for (int64_t b : batches) {
      for (int64_t len : lengths) {
        if (len > c.MaxSequenceLength()) continue;
        std::vector<std::vector<int64_t>> seqs(b, std::vector<int64_t>(len));
        // Ids past the first 1000 (BERT's unused and special tokens) where
        // the vocabulary is that large.
        const int64_t first = c.vocab_size > 2000 ? 1000 : 0;
        for (auto& s : seqs) {
          for (auto& id : s) id = first + static_cast<int64_t>(rng() % (c.vocab_size - first));
        }
        auto batch = upload(seqs);
        if (!batch.ok()) return Fail(batch.status());
        std::vector<DeviceBatch> one;
        one.push_back(*std::move(batch));
        auto ms = Time(**encoder, pooling, splade, device->get(), allocator->get(), stream->get(),
                       one, runs);
        if (!ms.ok()) return Fail(ms.status());
        std::printf("| %lld | %lld | %.3f | %.0f | %.0f |\n", static_cast<long long>(b),
                    static_cast<long long>(len), *ms, b * 1000.0 / *ms, b * len * 1000.0 / *ms);
        std::fflush(stdout);
        out["results"].push_back({{"batch", b}, {"length", len}, {"ms", *ms}});
      }
    }
  }
  if (!json_path.empty()) std::ofstream(json_path, std::ios::trunc) << out.dump() << "\n";
  return 0;
}
