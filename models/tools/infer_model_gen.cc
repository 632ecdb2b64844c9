// infer-model-gen: writes BERT checkpoints in the Hugging Face layout
// (config.json, model.safetensors, vocab.txt) that the "bert" backend serves.
//
//   infer-model-gen --out DIR --preset bert-base [--seed 1] [--dtype f16]
//   infer-model-gen --out DIR --hidden 512 --layers 8 --heads 8 --intermediate 2048
//   infer-model-gen --out DIR --from model_repository/minilm --dtype f16
//
// Synthetic weights are seeded (the same seed gives the same file anywhere);
// --from converts an existing checkpoint instead (e.g. to FP16, half the
// bytes). --repository also writes a config.pbtxt, so DIR is a ready model
// repository entry.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "models/bert/bert_gen.h"

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "infer-model-gen: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, preset = "minilm-l6", from, dtype = "f32";
  uint64_t seed = 1;
  bool repository = false;
  int64_t hidden = 0, layers = 0, heads = 0, intermediate = 0, vocab = 0, max_position = 0;
  CLI::App app{
      "infer-model-gen: write a BERT checkpoint (config.json, model.safetensors, "
      "vocab.txt) with seeded synthetic weights, or convert one to FP16"};
  app.add_option("--out", out, "folder to write (created if missing)")->required();
  app.add_option("--preset", preset,
                 "shape to start from: " + absl::StrJoin(infer::BertPresetNames(), ", "))
      ->capture_default_str();
  app.add_option("--hidden", hidden, "hidden size (overrides the preset)");
  app.add_option("--layers", layers, "number of layers (overrides the preset)");
  app.add_option("--heads", heads, "attention heads (overrides the preset)");
  app.add_option("--intermediate", intermediate, "feed-forward size (overrides the preset)");
  app.add_option("--vocab", vocab, "vocabulary size, at least 128 (overrides the preset)");
  app.add_option("--max-position", max_position, "longest sequence (overrides the preset)");
  app.add_option("--seed", seed, "weight seed")->capture_default_str();
  app.add_option("--dtype", dtype, "storage of model.safetensors: f32 or f16")
      ->check(CLI::IsMember({"f32", "f16", "F32", "F16"}))
      ->capture_default_str();
  app.add_option("--from", from,
                 "convert this checkpoint folder to --dtype instead of generating one");
  app.add_flag("--repository", repository,
               "also write a config.pbtxt (backend \"bert\"), making --out a model repository "
               "entry");
  CLI11_PARSE(app, argc, argv);
  dtype = absl::AsciiStrToUpper(dtype);

  int64_t max_len = 0;
  if (!from.empty()) {
    if (absl::Status s = infer::ConvertCheckpoint(from, out, dtype); !s.ok()) return Fail(s);
    auto c = infer::ReadBertConfig(out + "/config.json");
    if (!c.ok()) return Fail(c.status());
    max_len = c->max_position_embeddings;
    std::printf("converted %s to %s in %s\n", from.c_str(), dtype.c_str(), out.c_str());
  } else {
    auto base = infer::BertPreset(preset);
    if (!base.ok()) return Fail(base.status());
    infer::BertGenOptions o;
    o.config = *base;
    o.seed = seed;
    o.dtype = dtype;
    if (hidden > 0) o.config.hidden_size = hidden;
    if (layers > 0) o.config.num_hidden_layers = layers;
    if (heads > 0) o.config.num_attention_heads = heads;
    if (intermediate > 0) o.config.intermediate_size = intermediate;
    if (vocab > 0) o.config.vocab_size = vocab;
    if (max_position > 0) o.config.max_position_embeddings = max_position;
    if (absl::Status s = infer::GenerateBertCheckpoint(out, o); !s.ok()) return Fail(s);
    max_len = o.config.max_position_embeddings;
    const infer::BertConfig& c = o.config;
    std::printf(
        "wrote %s: hidden %lld, %lld layers, %lld heads, intermediate %lld, vocab %lld, "
        "max positions %lld, %s, seed %llu\n",
        out.c_str(), static_cast<long long>(c.hidden_size),
        static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.num_attention_heads),
        static_cast<long long>(c.intermediate_size), static_cast<long long>(c.vocab_size),
        static_cast<long long>(c.max_position_embeddings), dtype.c_str(),
        static_cast<unsigned long long>(seed));
  }
  if (repository) {
    std::vector<int64_t> buckets;
    for (int64_t b = 16; b < max_len; b *= 2) buckets.push_back(b);
    buckets.push_back(max_len);
    std::ofstream cfg(out + "/config.pbtxt", std::ios::trunc);
    cfg << "backend: \"bert\"\nmax_batch_size: 32\ndynamic_batching {\n"
        << "  max_queue_delay_microseconds: 2000\n"
        << "  length_buckets: [" << absl::StrJoin(buckets, ", ") << "]\n"
        << "  max_batch_tokens: 8192\n"
        << "  default_queue_policy { max_queue_size: 1024 }\n}\n";
    if (!cfg.flush()) return Fail(absl::InternalError("cannot write " + out + "/config.pbtxt"));
  }
  return 0;
}
