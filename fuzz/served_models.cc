#include "fuzz/served_models.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/request_admission.h"
#include "models/bert/bert_gen.h"

namespace infer::fuzzing {
namespace {

constexpr char kIdsConfig[] = R"(
  backend: "embed_pool"
  max_batch_size: 8
  parameters { key: "vocab_size" value { string_value: "1000" } }
  parameters { key: "embedding_size" value { string_value: "8" } }
  parameters { key: "max_sequence_length" value { string_value: "64" } }
  dynamic_batching { priority_levels: 3 default_priority_level: 2 }
  request_limits { max_client_batch_size: 32 max_input_length: 48 max_request_tokens: 512
                   max_tensor_elements: 4096 max_text_bytes: 4096 }
)";
constexpr char kTextConfig[] = R"(
  backend: "bert"
  precision: "fp32"
  max_batch_size: 4
  request_limits { max_client_batch_size: 8 max_input_length: 64 max_request_tokens: 256
                   max_tensor_elements: 1024 max_text_bytes: 2048 }
)";

// A one-label BERT cross-encoder (tests/fixtures/classifiers/bert-reranker),
// for the rerank and classification bodies.
constexpr char kRerankerConfig[] = R"(
  backend: "transformer"
  precision: "fp32"
  max_batch_size: 4
  parameters { key: "checkpoint_dir" value { string_value: ")" INFER_RERANKER_FIXTURE R"(" } }
  request_limits { max_client_batch_size: 16 max_input_length: 64 max_request_tokens: 512
                   max_tensor_elements: 2048 max_text_bytes: 4096 }
)";

// A SPLADE model (tests/fixtures/sparse/bert-splade, a SparseEncoder
// folder), for TEI's /embed_sparse bodies.
constexpr char kSparseConfig[] = R"(
  backend: "transformer"
  precision: "fp32"
  max_batch_size: 4
  parameters { key: "checkpoint_dir" value { string_value: ")" INFER_SPARSE_FIXTURE R"(" } }
  request_limits { max_client_batch_size: 8 max_input_length: 64 max_request_tokens: 256
                   max_tensor_elements: 1024 max_text_bytes: 2048 }
)";

void Write(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file) << text;
}

Served* Load() {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("infer_fuzz_models_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "ids");
  Write(dir / "ids" / "config.pbtxt", kIdsConfig);
  BertGenOptions gen;
  gen.config = *BertPreset("tiny");
  if (!GenerateBertCheckpoint((dir / "text").string(), gen).ok()) abort();
  Write(dir / "text" / "config.pbtxt", kTextConfig);
  fs::create_directories(dir / "reranker");
  Write(dir / "reranker" / "config.pbtxt", kRerankerConfig);
  fs::create_directories(dir / "sparse");
  Write(dir / "sparse" / "config.pbtxt", kSparseConfig);

  auto* served = new Served;
  auto engine = Engine::Create({.device = "cpu"});
  if (!engine.ok()) abort();
  served->engine = *std::move(engine);
  if (!LoadModelRepository(dir.string(), served->engine.get()).ok()) abort();
  for (const char* name : {"ids", "text", "reranker", "sparse"}) {
    auto loaded = LoadModelFolder((dir / name).string(), served->engine->context(),
                                  served->engine->device()->info());
    if (!loaded.ok()) abort();
    served->policies[name] = *std::move(loaded);
  }
  fs::remove_all(dir);
  return served;
}

}  // namespace

Served& ServedModels() {
  static Served* served = Load();
  return *served;
}

absl::Status AdmitServed(RequestSource& source) {
  Served& served = ServedModels();
  auto it = served.policies.find(source.model_name());
  if (it == served.policies.end()) return absl::NotFoundError("not served");
  const LoadedModel& p = it->second;
  const AdmissionPolicy policy{p.model.get(), &p.batching, &p.limits, &served.memory};
  InferRequest request;
  AdmittedRequest admitted;
  RefusalReason reason;
  absl::Status status = AdmitRequest(policy, absl::Now(), source, &request, &admitted, &reason);
  if (status.ok()) {
    // What the batcher is told must respect the limits admission enforces
    // (zero rows is a valid, empty request).
    if (admitted.rows < 0 || admitted.rows > p.limits.max_client_batch_size ||
        admitted.seq_length < 0 || admitted.seq_length > p.limits.max_input_length) {
      __builtin_trap();
    }
  }
  return status;
}

}  // namespace infer::fuzzing
