#include "server/http/tei_routes.h"

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/build_config.h"
#include "runtime/json_parse.h"
#include "server/http/http_json.h"
#include "server/http/openai_embeddings.h"
#include "server/http/scoring_routes.h"

namespace infer {
namespace {

using nlohmann::json;

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// An error in TEI's shape and status.
HttpResponse TeiError(const absl::Status& status, bool empty = false) {
  return ScoringError(ScoringApi::kTeiPredict, status, empty);
}

// The answer's [n, width] FP32 embeddings, or null.
const Tensor* Embeddings(const InferResponse& response, const std::string& output) {
  for (const Tensor& t : response.outputs) {
    if (t.name == output && t.dtype == DataType::kFp32 && t.shape.size() == 2) return &t;
  }
  return nullptr;
}

// /embed: [[float, ..], ..], written by hand as the OpenAI answer is.
HttpResponse EmbedAnswer(const InferResponse& response, const std::string& output) {
  const Tensor* t = Embeddings(response, output);
  if (t == nullptr) return TeiError(absl::InternalError("the model's answer has no embeddings"));
  const int64_t n = t->shape[0], width = t->shape[1];
  std::string body = "[";
  body.reserve(static_cast<size_t>(n * width) * 12 + 2);
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) body.push_back(',');
    AppendJsonFloats(t->as<float>() + i * width, static_cast<size_t>(width), &body);
  }
  body.push_back(']');
  return {200, "application/json", std::move(body)};
}

// Appends [[item, ..], ..] to `body`: counts[i] items for input i, the
// items numbered on from 0 across the inputs and written by `item`. False
// when the counts ask for more than the `total` items there are.
template <typename Item>
bool AppendGrouped(const Tensor& counts, int64_t total, std::string* body, const Item& item) {
  body->push_back('[');
  int64_t at = 0;
  for (int64_t i = 0; i < counts.shape[0]; ++i) {
    *body += i > 0 ? ",[" : "[";
    const int64_t n = counts.as<int64_t>()[i];
    if (n < 0 || at + n > total) return false;
    for (int64_t k = 0; k < n; ++k, ++at) {
      if (k > 0) body->push_back(',');
      item(at);
    }
    body->push_back(']');
  }
  body->push_back(']');
  return true;
}

// /embed_all: each input's tokens' states, [[[float, ..], ..], ..].
HttpResponse EmbedAllAnswer(const InferResponse& response) {
  const Tensor* states = nullptr;
  const Tensor* counts = nullptr;
  for (const Tensor& t : response.outputs) {
    if (t.name == "token_embeddings" && t.dtype == DataType::kFp32 && t.shape.size() == 2) {
      states = &t;
    }
    if (t.name == "token_counts" && t.dtype == DataType::kInt64 && t.shape.size() == 1) counts = &t;
  }
  if (states == nullptr || counts == nullptr) {
    return TeiError(absl::InternalError("the model's answer has no token embeddings"));
  }
  const int64_t width = states->shape[1];
  std::string body;
  body.reserve(static_cast<size_t>(states->shape[0] * width) * 12 + 2);
  if (!AppendGrouped(*counts, states->shape[0], &body, [&](int64_t row) {
        AppendJsonFloats(states->as<float>() + row * width, static_cast<size_t>(width), &body);
      })) {
    return TeiError(absl::InternalError("the model's token counts do not match its states"));
  }
  return {200, "application/json", std::move(body)};
}

// /embed_sparse: each input's terms, [[{"index", "value"}, ..], ..].
HttpResponse SparseAnswer(const InferResponse& response) {
  const Tensor* counts = nullptr;
  const Tensor* indices = nullptr;
  const Tensor* values = nullptr;
  for (const Tensor& t : response.outputs) {
    if (t.shape.size() != 1) continue;
    if (t.name == "sparse_counts" && t.dtype == DataType::kInt64) counts = &t;
    if (t.name == "sparse_indices" && t.dtype == DataType::kInt64) indices = &t;
    if (t.name == "sparse_values" && t.dtype == DataType::kFp32) values = &t;
  }
  if (counts == nullptr || indices == nullptr || values == nullptr ||
      indices->shape[0] != values->shape[0]) {
    return TeiError(absl::InternalError("the model's answer has no sparse vectors"));
  }
  std::string body;
  body.reserve(static_cast<size_t>(values->shape[0]) * 32 + 2);
  if (!AppendGrouped(*counts, values->shape[0], &body, [&](int64_t at) {
        absl::StrAppend(&body, R"({"index":)", indices->as<int64_t>()[at], R"(,"value":)");
        AppendJsonFloat(values->as<float>()[at], &body);
        body.push_back('}');
      })) {
    return TeiError(absl::InternalError("the model's term counts do not match its terms"));
  }
  return {200, "application/json", std::move(body)};
}

// /similarity: the cosine of each row after the first with the first.
HttpResponse SimilarityAnswer(const InferResponse& response, const std::string& output) {
  const Tensor* t = Embeddings(response, output);
  if (t == nullptr || t->shape[0] < 1) {
    return TeiError(absl::InternalError("the model's answer has no embeddings"));
  }
  const int64_t n = t->shape[0], width = t->shape[1];
  const float* source = t->as<float>();
  auto dot = [width](const float* a, const float* b) {
    double s = 0;
    for (int64_t c = 0; c < width; ++c) s += static_cast<double>(a[c]) * b[c];
    return s;
  };
  const double source_norm = std::sqrt(dot(source, source));
  std::vector<float> cosines;
  cosines.reserve(static_cast<size_t>(n - 1));
  for (int64_t i = 1; i < n; ++i) {
    const float* row = source + i * width;
    const double norms = source_norm * std::sqrt(dot(row, row));
    cosines.push_back(norms > 0 ? static_cast<float>(dot(source, row) / norms) : 0.0f);
  }
  std::string body;
  AppendJsonFloats(cosines.data(), cosines.size(), &body);
  return {200, "application/json", std::move(body)};
}

using Kind = EmbeddingsCall::Kind;

// The model an /embed, /embed_all or /embed_sparse body (`kind`) is for;
// `path_model` the one the path names, or empty (ChooseModel).
absl::StatusOr<std::string> ChooseEmbedModel(const Engine& engine, const json& doc,
                                             absl::string_view path_model, Kind kind) {
  return kind == Kind::kSparse
             ? ChooseModel(engine, doc, path_model, {"sparse"}, "a sparse (SPLADE) model")
             : ChooseModel(engine, doc, path_model, {"embed"}, "an embedding model");
}

// Submits `doc`, an /embed, /embed_all or /embed_sparse body (`kind`), to
// the model it is for.
void SubmitEmbed(Engine* engine, json doc, absl::string_view path_model, HttpReply reply,
                 bool similarity, Kind kind = Kind::kPooled) {
  absl::StatusOr<std::string> model = ChooseEmbedModel(*engine, doc, path_model, kind);
  if (!model.ok()) return reply.Send(TeiError(model.status()));
  auto call = std::make_shared<EmbeddingsCall>();
  call->tei = true;
  call->kind = kind;
  EmbeddingsSource source(*std::move(model), std::move(doc), call.get());
  auto shared = std::make_shared<HttpReply>(std::move(reply));
  engine->Submit(source, [shared, call, similarity](absl::StatusOr<InferResponse> r) {
    if (!r.ok()) return shared->Send(TeiError(r.status(), call->empty));
    auto response = std::make_shared<InferResponse>(*std::move(r));
    shared->SendFrom([response, call, similarity] {
      if (call->kind == Kind::kTokens) return EmbedAllAnswer(*response);
      if (call->kind == Kind::kSparse) return SparseAnswer(*response);
      return similarity ? SimilarityAnswer(*response, call->output)
                        : EmbedAnswer(*response, call->output);
    });
  });
}

// /similarity's body as an /embed body: the source sentence first, then
// the sentences (moved, not copied). The cosine divides by the norms, so
// the embeddings' normalisation does not matter.
absl::StatusOr<json> SimilarityAsEmbed(json doc, bool* empty) {
  json& inputs = doc["inputs"];
  const char* form = "'inputs' must be {\"source_sentence\": string, \"sentences\": [string, ...]}";
  if (!inputs.is_object()) return Invalid(form);
  auto source = inputs.find("source_sentence");
  auto sentences = inputs.find("sentences");
  if (source == inputs.end() || !source->is_string() || sentences == inputs.end() ||
      !sentences->is_array()) {
    return Invalid(form);
  }
  if (sentences->empty()) {
    *empty = true;
    return Invalid("`inputs.sentences` cannot be empty");
  }
  json embed = {{"inputs", json::array()}};
  embed["inputs"].get_ref<json::array_t&>().reserve(sentences->size() + 1);
  embed["inputs"].push_back(std::move(*source));
  for (json& s : *sentences) {
    if (!s.is_string()) return Invalid(form);
    embed["inputs"].push_back(std::move(s));
  }
  if (auto m = doc.find("model"); m != doc.end()) embed["model"] = std::move(*m);
  if (auto p = doc.find("parameters"); p != doc.end() && !p->is_null()) {
    if (!p->is_object()) return Invalid("'parameters' must be an object");
    for (const char* key : {"truncate", "truncation_direction", "prompt_name"}) {
      if (auto v = p->find(key); v != p->end()) embed[key] = std::move(*v);
    }
  }
  return embed;
}

absl::StatusOr<json> ParseBody(const HttpRequest& request) {
  absl::StatusOr<json> doc = ParseJson(request.body, "the request body");
  if (doc.ok() && !doc->is_object()) return Invalid("the request body is not a JSON object");
  return doc;
}

void Similarity(Engine* engine, json doc, absl::string_view path_model, HttpReply reply) {
  bool empty = false;
  absl::StatusOr<json> embed = SimilarityAsEmbed(std::move(doc), &empty);
  if (!embed.ok()) return reply.Send(TeiError(embed.status(), empty));
  SubmitEmbed(engine, *std::move(embed), path_model, std::move(reply), /*similarity=*/true);
}

const char* TeiDtype(const std::string& precision) {
  if (precision == "fp16") return "float16";
  if (precision == "bf16") return "bfloat16";
  return "float32";
}

json InfoOf(const Engine& engine, const std::string& name, const ModelSpec& spec) {
  json info = {{"model_id", name},
               {"model_sha", nullptr},
               {"model_dtype", TeiDtype(spec.precision)},
               {"served_model_name", name}};
  // Why model_dtype, where the model chose it (precision auto).
  if (!spec.precision_reason.empty()) info["model_dtype_reason"] = spec.precision_reason;
  const char* task = ModelTask(spec);
  if (task != nullptr && std::string(task) != "embed" && std::string(task) != "sparse") {
    json id2label = json::object(), label2id = json::object();
    for (const TensorSpec& o : spec.outputs) {
      if (o.name != "scores") continue;
      for (size_t i = 0; i < o.labels.size(); ++i) {
        id2label[std::to_string(i)] = o.labels[i];
        label2id[o.labels[i]] = i;
      }
    }
    info["model_type"] = {{std::string(task) == "rerank" ? "reranker" : "classifier",
                           {{"id2label", std::move(id2label)}, {"label2id", std::move(label2id)}}}};
  } else {
    info["model_type"] = {
        {"embedding", {{"pooling", spec.pooling.empty() ? json(nullptr) : json(spec.pooling)}}}};
  }
  if (absl::StatusOr<QueueOptions> q = engine.GetBatchingOptions(name); q.ok()) {
    info["max_concurrent_requests"] = q->max_queue_size;
    info["max_batch_tokens"] = q->max_batch_tokens;
    info["max_batch_requests"] = q->max_batch_size;
  }
  if (absl::StatusOr<RequestLimits> l = engine.GetRequestLimits(name); l.ok()) {
    // The model's own length where it states one, within the server's
    // limit on sequence length (0: none).
    int64_t length = l->max_input_length;
    if (spec.max_sequence_length > 0 && (length <= 0 || spec.max_sequence_length < length)) {
      length = spec.max_sequence_length;
    }
    info["max_input_length"] = length;
    info["auto_truncate"] = spec.auto_truncate;
    info["max_client_batch_size"] = l->max_client_batch_size;
  }
  info["prompts"] = spec.prompts;
  // What the model's outputs were checked against at load (or that they
  // were not).
  if (!spec.quality_check.empty()) info["quality_check"] = spec.quality_check;
  info["version"] = INFER_VERSION;
  info["sha"] = nullptr;
  info["docker_label"] = nullptr;
  return info;
}

}  // namespace

void HandleTeiEmbed(Engine* engine, HttpRequest request, HttpReply reply) {
  absl::StatusOr<json> doc = ParseBody(request);
  if (!doc.ok()) return reply.Send(TeiError(doc.status()));
  request.body.clear();  // parsed
  SubmitEmbed(engine, *std::move(doc), PathModel(request), std::move(reply),
              /*similarity=*/false);
}

void HandleTeiEmbedAll(Engine* engine, HttpRequest request, HttpReply reply) {
  absl::StatusOr<json> doc = ParseBody(request);
  if (!doc.ok()) return reply.Send(TeiError(doc.status()));
  request.body.clear();
  SubmitEmbed(engine, *std::move(doc), PathModel(request), std::move(reply), false, Kind::kTokens);
}

void HandleTeiEmbedSparse(Engine* engine, HttpRequest request, HttpReply reply) {
  absl::StatusOr<json> doc = ParseBody(request);
  if (!doc.ok()) return reply.Send(TeiError(doc.status()));
  request.body.clear();
  SubmitEmbed(engine, *std::move(doc), PathModel(request), std::move(reply), false, Kind::kSparse);
}

void HandleTeiSimilarity(Engine* engine, HttpRequest request, HttpReply reply) {
  absl::StatusOr<json> doc = ParseBody(request);
  if (!doc.ok()) return reply.Send(TeiError(doc.status()));
  request.body.clear();
  Similarity(engine, *std::move(doc), PathModel(request), std::move(reply));
}

void HandleTeiRoot(Engine* engine, HttpRequest request, HttpReply reply) {
  absl::StatusOr<json> doc = ParseBody(request);
  if (!doc.ok()) return reply.Send(TeiError(doc.status()));
  request.body.clear();
  const absl::string_view path_model = PathModel(request);
  if (auto inputs = doc->find("inputs"); inputs != doc->end() && inputs->is_object()) {
    return Similarity(engine, *std::move(doc), path_model, std::move(reply));
  }
  absl::StatusOr<std::string> model =
      ChooseModel(*engine, *doc, path_model, {"embed", "sparse", "rerank", "classify"},
                  "an embedding, sparse, re-ranking or classification model");
  if (!model.ok()) return reply.Send(TeiError(model.status()));
  absl::StatusOr<const ModelSpec*> spec = engine->GetModelSpec(*model);
  if (!spec.ok()) return reply.Send(TeiError(spec.status()));
  const std::string task = ModelTask(**spec);
  (*doc)["model"] = *model;
  if (task == "embed") {
    return SubmitEmbed(engine, *std::move(doc), path_model, std::move(reply), false);
  }
  if (task == "sparse") {
    return SubmitEmbed(engine, *std::move(doc), path_model, std::move(reply), false, Kind::kSparse);
  }
  const bool rerank = task == "rerank" && doc->contains("query");
  SubmitScoring(rerank ? ScoringApi::kTeiRerank : ScoringApi::kTeiPredict, engine, *std::move(doc),
                std::move(reply), path_model);
}

absl::Status AdmitTeiEmbedBody(bool similarity, const Engine& engine, absl::string_view body,
                               const std::function<absl::Status(RequestSource&)>& admit,
                               bool* empty, EmbeddingsCall::Kind kind,
                               absl::string_view path_model) {
  *empty = false;
  absl::StatusOr<json> doc = ParseJson(body, "the request body");
  if (doc.ok() && !doc->is_object()) return Invalid("the request body is not a JSON object");
  if (!doc.ok()) return doc.status();
  if (similarity) {
    doc = SimilarityAsEmbed(*std::move(doc), empty);
    if (!doc.ok()) return doc.status();
  }
  absl::StatusOr<std::string> model = ChooseEmbedModel(engine, *doc, path_model, kind);
  if (!model.ok()) return model.status();
  EmbeddingsCall call;
  call.tei = true;
  call.kind = kind;
  EmbeddingsSource source(*std::move(model), *std::move(doc), &call);
  absl::Status status = admit(source);
  *empty = call.empty;
  return status;
}

HttpResponse TeiInfo(const Engine& engine, const std::string& model) {
  std::vector<std::string> names = model.empty() ? engine.ModelNames() : std::vector{model};
  if (names.empty()) {
    return TeiError(absl::FailedPreconditionError("no model is loaded"));
  }
  json all = json::array();
  for (const std::string& name : names) {
    absl::StatusOr<const ModelSpec*> spec = engine.GetModelSpec(name);
    if (!spec.ok()) return TeiError(spec.status());
    all.push_back(InfoOf(engine, name, **spec));
  }
  json info = all[0];
  if (all.size() > 1) info["models"] = std::move(all);
  return {200, "application/json", DumpJson(info)};
}

}  // namespace infer
