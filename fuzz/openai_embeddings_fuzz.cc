// A POST /v1/embeddings body through what the server does to it before it
// is queued: DecodeEmbeddingsRequest (the depth-bounded JSON parse, the
// model, the fields, the declared limits of token arrays, DecodeInferRequest,
// exactly as HandleEmbeddings calls it), the error in OpenAI's shape when it
// is refused, and admission when it is not. Whatever the bytes: a status,
// never a crash, a read out of bounds, deep recursion, or an allocation in
// proportion to a size the client merely declared.
//
// The models are fuzz/served_models.h's ("ids" takes token arrays, "text"
// strings or token arrays). Run with -max_len of at least 1 MiB and the JSON
// dictionary (fuzz/json.dict; scripts/fuzz.sh does both), so that deep and
// wide bodies are reached.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/served_models.h"
#include "server/openai_embeddings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infer::fuzzing::Served& served = infer::fuzzing::ServedModels();
  infer::HttpRequest request;
  request.method = "POST";
  request.path = "/v1/embeddings";
  request.body.assign(reinterpret_cast<const char*>(data), size);
  const char* param = nullptr;
  absl::StatusOr<infer::EmbeddingsCall> call =
      infer::DecodeEmbeddingsRequest(*served.engine, request, &param);
  if (!call.ok()) {
    const infer::HttpResponse r = infer::OpenAiError(call.status(), param);
    if (r.status < 400 || r.body.empty()) __builtin_trap();
    return 0;
  }
  infer::fuzzing::AdmitServed(std::move(call->request));
  return 0;
}
