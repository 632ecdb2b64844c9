// OpenAI-compatible embeddings over an Engine, the API most embedding users'
// code already calls (as TEI, Infinity and vLLM answer it):
//
//   POST /v1/embeddings {"model": "minilm", "input": "a sentence" | ["a", "b"]
//                        | [101, 2023, 102] | [[101, 102], ...],
//                        "encoding_format": "float" | "base64", "dimensions": n}
//   -> {"object": "list", "data": [{"object": "embedding", "index": i,
//       "embedding": [...] | "<base64 of little-endian float32>"}],
//       "model": "...", "usage": {"prompt_tokens": n, "total_tokens": n}}
//   GET /v1/models, GET /v1/models/{model}   (OpenAI's fields, and "task")
//
// Strings go to the model's BYTES input "text" (tokenised by the model);
// token arrays to "input_ids" (padded with 0, with an "attention_mask" when
// the model has one), decoded straight into the engine's request. The body
// is a request source (engine/request_source.h): the engine looks the model
// up, checks the limits on the declared shape before the ids are
// allocated, and admits it as any other request, with the same errors and
// statistics. "dimensions" below the model's embedding width cuts each
// embedding to its first columns and normalises it again, for a model
// trained for it (TensorSpec::matryoshka); otherwise only the width is
// accepted (CheckDimensions names the reason). The embeddings are
// L2-normalised whatever the model's default (OpenAI's are unit vectors, as
// TEI's OpenAI route gives them); an empty string is refused.
// usage.prompt_tokens counts the token ids sent (without the padding), or
// for text the tokens the model's tokenizer made, [CLS] and [SEP] included
// (InferResponse::real_tokens).
//
// A body nested deeper than kMaxJsonDepth (runtime/json_parse.h) is refused
// while it is parsed, before any value past the limit exists.
//
// Errors use OpenAI's shape, {"error": {"message", "type", "param", "code"}},
// with the HTTP status of HttpStatusFor (server/http/http_json.h).
#ifndef INFER_SERVER_HTTP_OPENAI_EMBEDDINGS_H_
#define INFER_SERVER_HTTP_OPENAI_EMBEDDINGS_H_

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/request_source.h"
#include "server/http/http_server.h"

namespace infer {

// How to answer a /v1/embeddings request, filled as the engine has it
// declared and decoded.
struct EmbeddingsCall {
  std::string output;   // the model's embedding output
  bool base64 = false;  // encoding_format "base64"
  int64_t tokens = -1;  // token ids sent; -1 for text (the model counts them)
  // The request field an error concerns (OpenAI's "param"), or null; and
  // whether the engine got as far as asking what the request declares.
  const char* param = nullptr;
  bool declared = false;
  // TEI's /embed instead (server/http/tei_routes.h): the texts or ids in
  // "inputs", with its "truncate", "truncation_direction", "prompt_name",
  // "normalize" (default true) and "dimensions"; `empty` is set when it is
  // refused for an empty list, text or token array (TEI's 400 "Empty").
  bool tei = false;
  // What TEI's route asks for: the pooled embedding (/embed), every token's
  // state (/embed_all: the model's token_embeddings and token_counts; no
  // "normalize" or "dimensions"), or the sparse vector (/embed_sparse: a
  // SPLADE model's sparse_counts, sparse_indices and sparse_values).
  enum class Kind { kPooled, kTokens, kSparse };
  Kind kind = Kind::kPooled;
  bool empty = false;
};

// A parsed /v1/embeddings body as the engine's request source. Declare
// checks the fields against the model (its embedding output,
// encoding_format, dimensions, text or token ids) and declares the inputs;
// Decode builds them. Both record in the EmbeddingsCall what the answer
// needs.
class EmbeddingsSource final : public RequestSource {
 public:
  EmbeddingsSource(std::string model, nlohmann::json doc, EmbeddingsCall* call)
      : model_(std::move(model)), doc_(std::move(doc)), call_(call) {}
  EmbeddingsSource(EmbeddingsSource&&) = default;
  const std::string& model_name() const override { return model_; }
  absl::Status Declare(const ModelSpec& spec, DeclaredRequest* declared) override;
  absl::Status Decode(const ModelSpec& spec, InferRequest* request) override;

 private:
  absl::Status DeclareTeiOptions(const TensorSpec& embedding);

  std::string model_;
  nlohmann::json doc_;
  EmbeddingsCall* call_;  // borrowed
  // From Declare, for Decode: views into doc_ (it does not move between
  // the two), and the shape declared.
  const nlohmann::json* input_ = nullptr;
  std::vector<const nlohmann::json*> rows_;
  std::vector<int64_t> shape_;
  bool text_ = false;
  bool mask_ = false;
  int64_t dimensions_ = 0;
  // TEI's options (EmbeddingsCall::tei).
  std::optional<bool> truncate_, normalize_;
  bool truncate_left_ = false;
  std::string prompt_name_;
};

// The body's JSON (depth-bounded, runtime/json_parse.h) and its model name:
// what HandleEmbeddings needs before it submits. The model is the body's
// "model" (required), or under a model's base path the path's (PathModel;
// the body may leave "model" out, and naming another model is
// INVALID_ARGUMENT, 400 as OpenAI answers a malformed request). On an
// error, call->param names the field at fault, or is null.
absl::StatusOr<EmbeddingsSource> ParseEmbeddingsRequest(const HttpRequest& request,
                                                        EmbeddingsCall* call);
// POST /v1/embeddings: ParseEmbeddingsRequest, then the engine, then the
// answer in OpenAI's shape.
void HandleEmbeddings(Engine* engine, HttpRequest request, HttpReply reply);
// What a model is for, as GET /v1/models lists it: "embed" (an embedding
// output), "sparse" (SPLADE's sparse vectors), "rerank" (one score per
// input: a cross-encoder), "classify" (several scores with their labels), or
// null.
const char* ModelTask(const ModelSpec& spec);
// The path parameter naming the model a request's base path is for
// (/models/{name}/..., server/http/route_table.h), and its value: empty
// when the path names none.
inline constexpr char kModelPathParam[] = "model";
absl::string_view PathModel(const HttpRequest& request);
// The model a TEI or Cohere body is for. When the path names one
// (`path_model`, PathModel): that one, as a single-model server answers
// with its model; a body "model" naming another is INVALID_ARGUMENT, and a
// model whose ModelTask is not one of `tasks` FAILED_PRECONDITION naming
// `what`. Otherwise the body's "model" where it names one, else the one
// loaded model whose ModelTask is one of `tasks` (TEI serves one model,
// this server many): INVALID_ARGUMENT naming the candidates when several
// are, FAILED_PRECONDITION naming `what` when none is.
absl::StatusOr<std::string> ChooseModel(const Engine& engine, const nlohmann::json& body,
                                        absl::string_view path_model,
                                        std::initializer_list<absl::string_view> tasks,
                                        absl::string_view what);
// The body's "model" against the model the path names: OK when it is
// absent, null or that model; else INVALID_ARGUMENT naming both.
absl::Status CheckBodyModel(const nlohmann::json& body, absl::string_view path_model);
// GET /v1/models (`model` empty) or /v1/models/{model}, each model with its
// "task" (ModelTask) beside OpenAI's fields.
HttpResponse ListOpenAiModels(const Engine& engine, const std::string& model);
// An error in OpenAI's JSON shape.
HttpResponse OpenAiError(const absl::Status& status, const char* param = nullptr);

}  // namespace infer

#endif  // INFER_SERVER_HTTP_OPENAI_EMBEDDINGS_H_
