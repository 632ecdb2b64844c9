// Hugging Face text-embeddings-inference's (TEI 1.9's) embedding and
// tokenizer routes (/tokenize and /decode: below; server/http/tei_tokenize.cc),
// with its JSON shapes and statuses, so that its clients (Hugging Face's
// InferenceClient, LangChain's and LlamaIndex's TEI integrations) work
// unchanged:
//
//   POST /embed       {"inputs": "a" | ["a", "b"] | [ids] | [[ids], ..],
//                      "truncate", "truncation_direction", "prompt_name",
//                      "normalize" (default true), "dimensions"}
//     -> [[float, ..], ..]   one embedding per input, in order
//   POST /embed_all   {"inputs", "truncate", "truncation_direction", "prompt_name"}
//     -> [[[float, ..], ..], ..]  per input, each token's last hidden state
//                                 (special tokens included), unpooled
//   POST /embed_sparse {"inputs", "truncate", "truncation_direction", "prompt_name"}
//     -> [[{"index": id, "value": float}, ..], ..]  per input, a SPLADE
//                                 model's non-zero terms, ids ascending
//   POST /similarity  {"inputs": {"source_sentence": "a", "sentences": ["b", ..]},
//                      "parameters": {"truncate", "truncation_direction",
//                      "prompt_name"}}
//     -> [float, ..]         the cosine similarity of each sentence's
//                            embedding to the source's
//   GET  /info        the model's TEI Info: model_id, model_dtype,
//                     model_type ({"embedding": {"pooling"}}, pooling
//                     "splade" for a sparse model, or
//                     {"classifier" | "reranker": {"id2label", "label2id"}}),
//                     the limits (max_input_length, max_batch_tokens,
//                     max_batch_requests, max_client_batch_size,
//                     max_concurrent_requests) and the version
//   POST /            the model's task, as TEI routes it: /embed for an
//                     embedding model (/similarity when "inputs" is a
//                     source_sentence object), /embed_sparse for a SPLADE
//                     model, /rerank for a re-ranker
//                     given a "query", /predict otherwise
//
// The model: the body's "model" (or /info's ?model=) where it names one,
// else the one loaded model that can answer (ChooseModel); under a model's
// base path /models/{name} (server/http/route_table.h), that model, as a
// TEI server answers with its one. The options go
// to the model (InferRequest's truncate, prompt_name, normalize,
// dimensions), which judges them: an unknown prompt, or dimensions the
// model cannot give, is refused naming the reason.
//
// Errors: TEI's {"error", "error_type"} and statuses (ScoringError for the
// TEI APIs). Bodies are parsed depth-bounded (runtime/json_parse.h).
//
// Ownership: the Engine is borrowed and outlives every call.
#ifndef INFER_SERVER_HTTP_TEI_ROUTES_H_
#define INFER_SERVER_HTTP_TEI_ROUTES_H_

#include <functional>

#include "engine/engine.h"
#include "engine/request_source.h"
#include "server/http/http_server.h"
#include "server/http/openai_embeddings.h"

namespace infer {

// POST /embed, /embed_all and /embed_sparse.
void HandleTeiEmbed(Engine* engine, HttpRequest request, HttpReply reply);
void HandleTeiEmbedAll(Engine* engine, HttpRequest request, HttpReply reply);
void HandleTeiEmbedSparse(Engine* engine, HttpRequest request, HttpReply reply);
// POST /similarity.
void HandleTeiSimilarity(Engine* engine, HttpRequest request, HttpReply reply);
// POST /tokenize {"inputs": "a" | ["a", ..], "add_special_tokens" (default
// true), "prompt_name"} -> [[{"id", "text", "special", "start", "stop"}, ..], ..]:
// the model's tokenizer on each text (with the prompt before it), each
// token with its bytes of the text (a special token: the token, no
// offsets). POST /decode {"ids": [id, ..] | [[id, ..], ..],
// "skip_special_tokens" (default true)} -> ["text", ..]. Both run the
// tokenizer on the HTTP thread, within the model's request limits
// (max_client_batch_size texts; max_text_bytes of them, or
// max_request_tokens ids), checked before any is tokenised.
void HandleTeiTokenize(Engine* engine, HttpRequest request, HttpReply reply);
void HandleTeiDecode(Engine* engine, HttpRequest request, HttpReply reply);
// POST /: one of the above, /rerank or /predict, by the body and the
// model's task.
void HandleTeiRoot(Engine* engine, HttpRequest request, HttpReply reply);
// What /embed (or, with `similarity`, /similarity; with `kind`, /embed_all
// or /embed_sparse) does to `body` (any bytes) before it is queued, for a
// fuzz target: the depth-bounded parse, the model's choice, then its
// request source handed to `admit` (the engine's admission pass). The first
// refusal (`*empty` set for an empty list), else `admit`'s status.
// `path_model`: the model a base path /models/{name} names, or empty.
absl::Status AdmitTeiEmbedBody(bool similarity, const Engine& engine, absl::string_view body,
                               const std::function<absl::Status(RequestSource&)>& admit,
                               bool* empty,
                               EmbeddingsCall::Kind kind = EmbeddingsCall::Kind::kPooled,
                               absl::string_view path_model = {});
// GET /info, for `model` (empty: the one loaded model, else the first of
// them by name, with every model's Info in "models").
HttpResponse TeiInfo(const Engine& engine, const std::string& model);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_TEI_ROUTES_H_
