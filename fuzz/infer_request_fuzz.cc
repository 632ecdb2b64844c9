// The bytes of a ModelInferRequest, as gRPC hands them to the server, through
// everything the server does to a request before it is queued: the version,
// the declared limits, decoding (DecodeInferRequest), then admission
// (AdmitRequest: the limits on the decoded tensors, the model's spec,
// tokenisation of text, sequence length and token limits, priority and
// deadline, device memory). Whatever the bytes, each step either passes or
// refuses with a status; nothing crashes, reads out of bounds, or allocates
// in proportion to a size the client merely declared.
//
// Two models are served, as a repository would declare them: "ids"
// (embed_pool, INT64 input_ids) and "text" (a tiny generated BERT with its
// WordPiece vocabulary, BYTES text or INT64 ids), both with tight request
// limits so that the limits are reached. The seed corpus (fuzz/corpus/
// infer_request_fuzz) holds valid requests for both.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "grpc_service.pb.h"
#include "models/bert_gen.h"
#include "server/engine.h"
#include "server/grpc_decode.h"
#include "server/memory_admission.h"
#include "server/model_repository.h"
#include "server/request_admission.h"

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

// What admission needs of one model: a second instance of it (the engine
// serves the first) with the batching policy and limits of its config.
struct Served {
  std::unique_ptr<infer::Engine> engine;
  std::map<std::string, infer::LoadedModel> policies;
  infer::MemoryAdmission memory{int64_t{1} << 30, 0};
};

void Write(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file) << text;
}

Served* Setup() {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("infer_request_fuzz_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "ids");
  Write(dir / "ids" / "config.pbtxt", kIdsConfig);
  infer::BertGenOptions gen;
  gen.config = *infer::BertPreset("tiny");
  if (!infer::GenerateBertCheckpoint((dir / "text").string(), gen).ok()) abort();
  Write(dir / "text" / "config.pbtxt", kTextConfig);

  auto* served = new Served;
  auto engine = infer::Engine::Create({.device = "cpu"});
  if (!engine.ok()) abort();
  served->engine = *std::move(engine);
  if (!infer::LoadModelRepository(dir.string(), served->engine.get()).ok()) abort();
  for (const char* name : {"ids", "text"}) {
    auto loaded = infer::LoadModelFolder((dir / name).string(), served->engine->context(),
                                         served->engine->device()->info());
    if (!loaded.ok()) abort();
    served->policies[name] = *std::move(loaded);
  }
  fs::remove_all(dir);
  return served;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Served* served = Setup();
  inference::ModelInferRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<infer::InferRequest> request = infer::DecodeInferRequest(*served->engine, &proto);
  if (!request.ok()) return 0;
  auto it = served->policies.find(request->model_name);
  if (it == served->policies.end()) return 0;  // the engine answers NOT_FOUND
  const infer::LoadedModel& p = it->second;
  const infer::AdmissionPolicy policy{p.model.get(), &p.batching, &p.limits, &served->memory};
  infer::AdmittedRequest admitted;
  infer::RefusalReason reason;
  if (infer::AdmitRequest(policy, absl::Now(), &*request, &admitted, &reason).ok()) {
    // What the batcher is told must respect the limits admission enforces
    // (zero rows is a valid, empty request).
    if (admitted.rows < 0 || admitted.rows > p.limits.max_client_batch_size ||
        admitted.seq_length < 0 || admitted.seq_length > p.limits.max_input_length) {
      __builtin_trap();
    }
  }
  return 0;
}
