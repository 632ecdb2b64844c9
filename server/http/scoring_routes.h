// Rerank and classification over HTTP, in the shapes their clients already
// speak, over any model with a `scores` output (a sequence-classification
// checkpoint, models/bert/bert_model.h):
//
//   Hugging Face text-embeddings-inference (TEI 1.9's JSON and statuses):
//     POST /rerank  {"query", "texts": [..], "truncate", "truncation_direction",
//                    "raw_scores", "return_text"}
//       -> [{"index", "score", "text"?}], highest score first
//     POST /predict {"inputs": "a" | ["a", "b"] (a pair) | [["a"], ["a", "b"], ..],
//                    "truncate", "truncation_direction", "raw_scores",
//                    "parameters": {"top_k", "function_to_apply"}}
//       -> [{"score", "label"}] (or one such list per input), highest first;
//          Hugging Face's text-classification parameters (which its
//          InferenceClient sends) keep the top_k best, and choose the
//          function ("sigmoid", "softmax" or "none"). A batch that mixes
//          single texts and pairs, as TEI takes, runs as two requests to
//          the model (one per kind; each counted in its statistics), the
//          whole batch's rows and text bytes checked first against the
//          model's limits (as TEI checks its batch size first; a refusal
//          there is not in the model's statistics), the token limits on
//          each part; answered in the batch's order, or with the first
//          refusal of either part, at once, naming rows by their place
//          in the batch.
//   Cohere (Jina's rerank API is Cohere's v1):
//     POST /v1/rerank {"model", "query", "documents": ["..." | {"text": ".."}],
//                      "top_n", "return_documents"}
//     POST /v2/rerank {"model", "query", "documents": ["..."], "top_n"}
//       -> {"id", "results": [{"index", "relevance_score", "document"?:
//          {"text"}}], "meta": {"api_version": {"version"}, "billed_units"}}
//
// A rerank of one query against N documents is one request of N pairs
// (inputs `query` [1] and `documents` [N]): the engine's limits count all N
// (max_client_batch_size, max_request_tokens, max_text_bytes) before
// anything is tokenised, and a large N is split across batches like any
// large request. Rerank needs a model with one score per pair (TEI's
// "re-ranker": num_labels 1); predict any classifier. Scores are the
// logits through a sigmoid (one label) or a softmax (several), as TEI
// gives them; raw_scores keeps the logits. Cohere's relevance_score is the
// sigmoid. top_n above N returns all N, as Cohere's API does.
//
// The model: the body's "model" where it names one, else the one loaded
// model that can answer (refused, naming the candidates, when there are
// none or several: TEI serves one model, this server many); under a
// model's base path /models/{name} (server/http/route_table.h) that model,
// as TEI answers with its one (ChooseModel).
//
// Errors: TEI's {"error", "error_type"} with TEI's statuses and type names
// as TEI writes them (a limit or a malformed input 422 "Validation", an
// empty list or text 400 "Empty", a full queue or the memory budget 429
// "Overloaded", a model failure or a model of another kind than the route
// serves 424 "Backend"); Cohere's {"message"} with the KServe front end's
// statuses (HttpStatusFor). Bodies are parsed depth-bounded (runtime/json_parse.h).
//
// Ownership: the Engine is borrowed and outlives every call.
#ifndef INFER_SERVER_HTTP_SCORING_ROUTES_H_
#define INFER_SERVER_HTTP_SCORING_ROUTES_H_

#include <functional>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/request_source.h"
#include "server/http/http_server.h"
#include "server/http/scoring_source.h"

namespace infer {

// Answers `request` (a POST with a JSON body) in `api`'s shapes, for the
// model its path names (PathModel) if it names one.
void HandleScoring(ScoringApi api, Engine* engine, HttpRequest request, HttpReply reply);
// The same for a body already parsed (a JSON object); `path_model` as
// ChooseModel takes it (server/http/openai_embeddings.h).
void SubmitScoring(ScoringApi api, Engine* engine, nlohmann::json body, HttpReply reply,
                   absl::string_view path_model = {});

// What SubmitScoring does to `body` (any bytes) before it is queued,
// for a fuzz target: the depth-bounded parse, the model's choice, then its
// request source handed to `admit` (the engine's admission pass). The
// first refusal (`*empty` set for an empty list), else `admit`'s status.
// `path_model`: the model a base path /models/{name} names, or empty.
absl::Status AdmitScoringBody(ScoringApi api, const Engine& engine, absl::string_view body,
                              const std::function<absl::Status(RequestSource&)>& admit, bool* empty,
                              absl::string_view path_model = {});

// An error in `api`'s JSON shape and status; `empty`: a refusal of an
// empty list (TEI's 400 "Empty").
HttpResponse ScoringError(ScoringApi api, const absl::Status& status, bool empty = false);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_SCORING_ROUTES_H_
