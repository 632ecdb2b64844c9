// A POST body to TEI's and Cohere's routes through what the server does to
// it before it is queued: the first byte picks the route (TEI's /rerank,
// /predict, /embed, /similarity, /embed_all, /embed_sparse; Cohere's
// /v1/rerank, /v2/rerank) and its next two bits the model a base path
// /models/{name} names (none, "reranker", "text", "sparse"), the rest
// is the body: the depth-bounded JSON parse, the model's choice, then the
// route's request source through admission (the fields against the model,
// the declared limits of a rerank's N documents before anything is
// tokenised, tokenising, the checks on the decoded request), and the error
// in the route's shape when it is refused. Whatever the bytes: a status,
// never a crash, a read out of bounds, deep recursion, or an allocation in
// proportion to a size the client merely declared.
//
// The models are fuzz/served_models.h's ("reranker" answers scores; "ids"
// and "text" embeddings, "text" per-token ones too; "sparse" SPLADE's). Run with -max_len of at
// least 1 MiB and the JSON dictionary (fuzz/json.dict; scripts/fuzz.sh does both).
#include <cstddef>
#include <cstdint>

#include "fuzz/served_models.h"
#include "server/http/scoring_routes.h"
#include "server/http/tei_routes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infer::fuzzing::Served& served = infer::fuzzing::ServedModels();
  if (size == 0) return 0;
  const int route = data[0] % 8;
  static constexpr const char* kPathModels[] = {"", "reranker", "text", "sparse"};
  const absl::string_view path_model = kPathModels[(data[0] >> 3) % 4];
  const absl::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto admit = [](infer::RequestSource& source) {
    return infer::fuzzing::AdmitServed(source);
  };
  bool empty = false;
  absl::Status status;
  infer::ScoringApi api = infer::ScoringApi::kTeiPredict;  // TEI's error shape
  if (route < 4) {
    api = static_cast<infer::ScoringApi>(route);
    status = infer::AdmitScoringBody(api, *served.engine, body, admit, &empty, path_model);
  } else {
    using Kind = infer::EmbeddingsCall::Kind;
    const Kind kind = route == 6 ? Kind::kTokens : route == 7 ? Kind::kSparse : Kind::kPooled;
    status =
        infer::AdmitTeiEmbedBody(route == 5, *served.engine, body, admit, &empty, kind, path_model);
  }
  if (!status.ok()) {
    const infer::HttpResponse r = infer::ScoringError(api, status, empty);
    if (r.status < 400 || r.body.empty()) __builtin_trap();
  }
  return 0;
}
