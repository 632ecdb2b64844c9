// The models the request fuzz targets serve, loaded as a model repository
// would declare them: "ids" (embed_pool, INT64 input_ids) and "text" (a tiny
// generated BERT with its WordPiece vocabulary: BYTES text, or INT64 ids
// with an attention mask) and "reranker" (the one-label BERT cross-encoder
// of tests/fixtures/classifiers: scores of texts, pairs, or a query against
// documents) and "sparse" (the BERT SPLADE model of tests/fixtures/sparse),
// all with tight request limits so that fuzzed requests reach
// them. Each target makes the request source its front end
// makes (engine/request_source.h) and hands it to AdmitServed: the one
// admission pass every request makes before it is queued.
#ifndef INFER_FUZZ_SERVED_MODELS_H_
#define INFER_FUZZ_SERVED_MODELS_H_

#include <map>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/memory_admission.h"
#include "engine/request_source.h"
#include "server/kserve/model_repository.h"

namespace infer::fuzzing {

struct Served {
  std::unique_ptr<Engine> engine;  // serves both models (decoding looks them up)
  // A second instance of each, with its config's batching policy and limits,
  // for admission without queueing.
  std::map<std::string, LoadedModel> policies;
  MemoryAdmission memory{int64_t{1} << 30, 0};
};

// Made once per process (never freed: the fuzzer exits without tearing it
// down).
Served& ServedModels();

// AdmitRequest on `source` under its model's policy (declared limits,
// decoding, the checks on the decoded request); traps (a crash the fuzzer
// reports) when admission lets through what its limits forbid. The
// refusal, or OK; NOT_FOUND for a model that is not served.
absl::Status AdmitServed(RequestSource& source);

}  // namespace infer::fuzzing

#endif  // INFER_FUZZ_SERVED_MODELS_H_
