// OpenAI-compatible embeddings over an Engine, the API most embedding users'
// code already calls (as TEI, Infinity and vLLM answer it):
//
//   POST /v1/embeddings {"model": "minilm", "input": "a sentence" | ["a", "b"]
//                        | [101, 2023, 102] | [[101, 102], ...],
//                        "encoding_format": "float" | "base64", "dimensions": n}
//   -> {"object": "list", "data": [{"object": "embedding", "index": i,
//       "embedding": [...] | "<base64 of little-endian float32>"}],
//       "model": "...", "usage": {"prompt_tokens": n, "total_tokens": n}}
//   GET /v1/models, GET /v1/models/{model}
//
// Strings go to the model's BYTES input "text" (tokenised by the model);
// token arrays to "input_ids" (padded with 0, with an "attention_mask" when
// the model has one). The request is then decoded, limited and admitted
// exactly as a KServe request (DecodeInferRequest), so the limits, the
// errors and the statistics are the same. "dimensions" must equal the
// model's embedding width (no model here is trained for truncation).
// usage.prompt_tokens counts the token ids sent (without the padding), or
// for text the tokens the model's tokenizer made, [CLS] and [SEP] included
// (InferResponse::real_tokens).
//
// A body nested deeper than kMaxJsonDepth (runtime/json_parse.h) is refused
// while it is parsed, before any value past the limit exists.
//
// Errors use OpenAI's shape, {"error": {"message", "type", "param", "code"}},
// with the HTTP status of HttpStatusFor (server/http_json.h).
#ifndef INFER_SERVER_OPENAI_EMBEDDINGS_H_
#define INFER_SERVER_OPENAI_EMBEDDINGS_H_

#include <string>

#include "server/engine.h"
#include "server/http_server.h"

namespace infer {

// A /v1/embeddings body decoded into the engine's request, and how to
// answer it.
struct EmbeddingsCall {
  InferRequest request;
  std::string output;   // the model's embedding output
  bool base64 = false;  // encoding_format "base64"
  int64_t tokens = -1;  // token ids sent; -1 for text (the model counts them)
};

// Everything HandleEmbeddings does to a body before it submits it: the JSON
// (depth-bounded, runtime/json_parse.h), the model, the fields, the
// declared limits of token arrays, and DecodeInferRequest. On an error,
// *param is the request field at fault (OpenAI's "param"), or null.
absl::StatusOr<EmbeddingsCall> DecodeEmbeddingsRequest(Engine& engine, const HttpRequest& request,
                                                       const char** param);
// POST /v1/embeddings: DecodeEmbeddingsRequest, then the engine, then the
// answer in OpenAI's shape.
void HandleEmbeddings(Engine* engine, HttpRequest request, HttpReply reply);
// GET /v1/models (`model` empty) or /v1/models/{model}.
HttpResponse ListOpenAiModels(const Engine& engine, const std::string& model);
// An error in OpenAI's JSON shape.
HttpResponse OpenAiError(const absl::Status& status, const char* param = nullptr);

}  // namespace infer

#endif  // INFER_SERVER_OPENAI_EMBEDDINGS_H_
