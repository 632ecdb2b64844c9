// A POST /v1/embeddings body through what the server does to it before it
// is queued: ParseEmbeddingsRequest (the depth-bounded JSON parse, the
// model's name), then its EmbeddingsSource through admission (the fields
// against the model, the declared limits of token arrays, decoding, the
// checks on the decoded request), exactly as HandleEmbeddings hands it to
// the engine, and the error in OpenAI's shape when it is refused. Whatever the bytes: a status,
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
#include "server/http/openai_embeddings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infer::fuzzing::ServedModels();
  infer::HttpRequest request;
  request.method = "POST";
  request.path = "/v1/embeddings";
  request.body.assign(reinterpret_cast<const char*>(data), size);
  infer::EmbeddingsCall call;
  absl::StatusOr<infer::EmbeddingsSource> source = infer::ParseEmbeddingsRequest(request, &call);
  absl::Status status = source.ok() ? infer::fuzzing::AdmitServed(*source) : source.status();
  if (!status.ok()) {
    const infer::HttpResponse r = infer::OpenAiError(status, call.param);
    if (r.status < 400 || r.body.empty()) __builtin_trap();
  }
  return 0;
}
