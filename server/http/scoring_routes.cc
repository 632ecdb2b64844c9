#include "server/http/scoring_routes.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/request_limits.h"
#include "engine/request_source.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"
#include "server/http/http_json.h"
#include "server/http/openai_embeddings.h"

namespace infer {
namespace {

using nlohmann::json;

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// One input's scores: the logits, or through a softmax (several labels) or
// a sigmoid (one label, or each of a multi-label classifier's, as
// transformers' pipeline gives them; TEI applies a softmax there too);
// `function` chooses otherwise.
std::vector<float> Activated(const float* logits, int64_t n, bool raw, bool multi_label,
                             const std::string& function = "") {
  std::vector<float> out(logits, logits + n);
  if (raw || function == "none") return out;
  if (function == "sigmoid" || (function.empty() && (n == 1 || multi_label))) {
    for (float& v : out) v = Sigmoid(v);
    return out;
  }
  const float max = *std::max_element(out.begin(), out.end());
  float sum = 0;
  for (float& v : out) sum += (v = std::exp(v - max));
  for (float& v : out) v /= sum;
  return out;
}

// Indices ordered by score, highest first (ties by index).
std::vector<size_t> ByScore(const std::vector<float>& scores) {
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
}

std::string NextId() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(absl::Hex(absl::ToUnixNanos(absl::Now())), "-",
                      counter.fetch_add(1, std::memory_order_relaxed));
}

// The response's scores, FP32 [n, labels], or null.
const Tensor* Scores(const ScoringCall& call, const InferResponse& response) {
  for (const Tensor& t : response.outputs) {
    if (t.name == "scores" && t.dtype == DataType::kFp32 && t.shape.size() == 2 &&
        t.shape[1] == static_cast<int64_t>(call.labels.size())) {
      return &t;
    }
  }
  return nullptr;
}

// /predict: each row's [{"score", "label"}], highest first, put at its place
// in the batch (call.rows) in *all. False when the answer is not the call's.
bool PlacePredictions(const ScoringCall& call, const InferResponse& response,
                      std::vector<json>* all) {
  const Tensor* t = Scores(call, response);
  if (t == nullptr || t->shape[0] != static_cast<int64_t>(call.rows.size())) return false;
  const int64_t labels = t->shape[1];
  for (size_t i = 0; i < call.rows.size(); ++i) {
    const std::vector<float> s = Activated(t->as<float>() + i * labels, labels, call.raw_scores,
                                           call.multi_label, call.function);
    json predictions = json::array();
    for (size_t k : ByScore(s)) {
      if (call.top_n >= 0 && static_cast<int64_t>(predictions.size()) >= call.top_n) break;
      predictions.push_back({{"score", s[k]}, {"label", call.labels[k]}});
    }
    if (call.rows[i] >= all->size()) return false;
    (*all)[call.rows[i]] = std::move(predictions);
  }
  return true;
}

HttpResponse Answer(const ScoringCall& call, const InferResponse& response) {
  const absl::Status no_scores = absl::InternalError("the model's answer has no scores");
  if (call.api == ScoringApi::kTeiPredict) {
    std::vector<json> all(call.rows.size());
    if (!PlacePredictions(call, response, &all)) return ScoringError(call.api, no_scores);
    return {200, "application/json", DumpJson(call.single ? all[0] : json(std::move(all)))};
  }
  const Tensor* t = Scores(call, response);
  if (t == nullptr) return ScoringError(call.api, no_scores);
  const int64_t n = t->shape[0];
  // Rerank: one score per document. Cohere's relevance_score is never raw.
  std::vector<float> scores(n);
  const bool raw = call.raw_scores && !IsCohere(call.api);
  for (int64_t i = 0; i < n; ++i) scores[i] = raw ? t->as<float>()[i] : Sigmoid(t->as<float>()[i]);
  std::vector<size_t> order = ByScore(scores);
  if (!IsCohere(call.api)) {
    json ranks = json::array();
    for (size_t i : order) {
      json rank = {{"index", i}};
      if (call.return_text) rank["text"] = *call.documents[i]->get_ptr<const std::string*>();
      rank["score"] = scores[i];
      ranks.push_back(std::move(rank));
    }
    return {200, "application/json", DumpJson(ranks)};
  }
  if (call.top_n >= 0 && static_cast<size_t>(call.top_n) < order.size()) order.resize(call.top_n);
  json results = json::array();
  for (size_t i : order) {
    json r = {{"index", i}, {"relevance_score", scores[i]}};
    if (call.return_text) {
      const json& d = *call.documents[i];
      r["document"] = d.is_string() ? json{{"text", d}} : d;
    }
    results.push_back(std::move(r));
  }
  const char* version = call.api == ScoringApi::kCohereV1 ? "1" : "2";
  json body = {
      {"id", NextId()},
      {"results", std::move(results)},
      {"meta", {{"api_version", {{"version", version}}}, {"billed_units", {{"search_units", 1}}}}}};
  return {200, "application/json", DumpJson(body)};
}

}  // namespace

HttpResponse ScoringError(ScoringApi api, const absl::Status& status, bool empty) {
  if (IsCohere(api)) {
    return {HttpStatusFor(status.code()), "application/json",
            DumpJson(json{{"message", std::string(status.message())}})};
  }
  int http = empty ? 400 : 422;
  // TEI's ErrorType, as serde writes it (the variant's name).
  const char* type = empty ? "Empty" : "Validation";
  switch (empty ? absl::StatusCode::kInvalidArgument : status.code()) {
    case absl::StatusCode::kNotFound:
      http = 404;
      break;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable:
      http = 429;
      type = "Overloaded";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      http = 504;
      type = "Backend";
      break;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kFailedPrecondition:  // no loaded model can answer, or the
                                                 // model named is of another kind
      http = 424;
      type = "Backend";
      break;
    default:
      break;
  }
  return {http, "application/json",
          DumpJson(json{{"error", std::string(status.message())}, {"error_type", type}})};
}

void HandleScoring(ScoringApi api, Engine* engine, HttpRequest request, HttpReply reply) {
  absl::StatusOr<json> doc = ParseJson(request.body, "the request body");
  if (!doc.ok()) return reply.Send(ScoringError(api, doc.status()));
  if (!doc->is_object()) {
    return reply.Send(ScoringError(api, Invalid("the request body is not a JSON object")));
  }
  request.body.clear();  // parsed
  SubmitScoring(api, engine, *std::move(doc), std::move(reply), PathModel(request));
}

namespace {

absl::StatusOr<std::string> ScoringModel(ScoringApi api, const Engine& engine, const json& doc,
                                         absl::string_view path_model) {
  return IsRerank(api)
             ? ChooseModel(engine, doc, path_model, {"rerank"}, "a re-ranker")
             : ChooseModel(engine, doc, path_model, {"rerank", "classify"}, "a classifier");
}

// A /predict batch mixing single texts and pairs, checked as the one
// request the client sent: its rows and text bytes against the model's
// limits, before either part is declared.
absl::Status CheckWholeBatch(const Engine& engine, const std::string& model,
                             const PredictBatchShape& batch) {
  INFER_ASSIGN_OR_RETURN(const RequestLimits limits, engine.GetRequestLimits(model));
  const int64_t rows[] = {batch.rows};
  const DeclaredInput whole[] = {{"text", rows}, {"text_pair", rows}};
  return CheckDeclaredLimits(limits, model, whole, batch.text_bytes, /*sequence_length=*/0);
}

// The two parts of a mixed /predict batch, joined: the answer is sent once
// both are done, in the batch's order; a refusal of either part is sent as
// soon as it comes, and the other part's answer is dropped.
struct PredictJoin {
  std::mutex mu;
  int pending = 2;       // parts not yet answered
  bool refused = false;  // a refusal was sent
  std::shared_ptr<ScoringCall> calls[2];
  std::shared_ptr<InferResponse> responses[2];
};

// A part's refusal in the batch's terms: the model names a row by its
// place in the part ("element 2"), the client knows it by its place in the
// batch. A refusal of the part as a whole (its tokens over
// max_request_tokens) counts the part's rows, not the batch's: it says so.
absl::Status InBatchTerms(const absl::Status& status, const ScoringCall& part) {
  const std::vector<size_t>& rows = part.rows;
  const absl::string_view message = status.message();
  static constexpr absl::string_view kElement = "element ";
  const size_t at = message.find(kElement);
  if (at == absl::string_view::npos) {
    if (status.code() != absl::StatusCode::kInvalidArgument) return status;
    return absl::Status(
        status.code(),
        absl::StrCat(message, " (the batch's ", rows.size(),
                     part.kind == 1 ? " single texts, served apart from its pairs)"
                                    : " pairs, served apart from its single texts)"));
  }
  const size_t digits = at + kElement.size();
  size_t end = digits;
  while (end < message.size() && absl::ascii_isdigit(message[end])) ++end;
  size_t index = 0;
  if (end == digits || !absl::SimpleAtoi(message.substr(digits, end - digits), &index) ||
      index >= rows.size()) {
    return status;
  }
  return absl::Status(status.code(),
                      absl::StrCat(message.substr(0, digits), rows[index], message.substr(end)));
}

HttpResponse JoinedAnswer(const PredictJoin& join) {
  std::vector<json> all(join.calls[0]->rows.size() + join.calls[1]->rows.size());
  for (int part = 0; part < 2; ++part) {
    if (!PlacePredictions(*join.calls[part], *join.responses[part], &all)) {
      return ScoringError(ScoringApi::kTeiPredict,
                          absl::InternalError("the model's answer has no scores"));
    }
  }
  return {200, "application/json", DumpJson(json(std::move(all)))};
}

void SubmitMixedPredict(Engine* engine, const std::string& model, std::shared_ptr<const json> doc,
                        const PredictBatchShape& batch, HttpReply reply) {
  if (absl::Status whole = CheckWholeBatch(*engine, model, batch); !whole.ok()) {
    // Counted like a refusal of the engine's own (the model is known).
    engine->CountRefusal(model, whole, RefusalReason::kOverLimit).IgnoreError();
    return reply.Send(ScoringError(ScoringApi::kTeiPredict, whole));
  }
  auto join = std::make_shared<PredictJoin>();
  auto shared = std::make_shared<HttpReply>(std::move(reply));
  // Called once per part submitted, with its answer or its refusal.
  auto finish = [join, shared](int part, absl::StatusOr<InferResponse> r) {
    std::lock_guard<std::mutex> lock(join->mu);
    --join->pending;
    if (join->refused) return;
    if (!r.ok()) {
      join->refused = true;
      const ScoringCall& call = *join->calls[part];
      return shared->Send(
          ScoringError(ScoringApi::kTeiPredict, InBatchTerms(r.status(), call), call.empty));
    }
    join->responses[part] = std::make_shared<InferResponse>(*std::move(r));
    if (join->pending > 0) return;
    shared->SendFrom([join] { return JoinedAnswer(*join); });
  };
  for (int part = 0; part < 2; ++part) {
    auto call = std::make_shared<ScoringCall>(ScoringApi::kTeiPredict);
    call->doc = doc;
    call->kind = part + 1;  // the single texts, then the pairs
    {
      std::lock_guard<std::mutex> lock(join->mu);
      join->calls[part] = call;
      if (join->refused) return;  // the first part was refused: the second is not run
    }
    ScoringSource source(model, call.get());
    engine->Submit(source,
                   [finish, part](absl::StatusOr<InferResponse> r) { finish(part, std::move(r)); });
  }
}

}  // namespace

absl::Status AdmitScoringBody(ScoringApi api, const Engine& engine, absl::string_view body,
                              const std::function<absl::Status(RequestSource&)>& admit, bool* empty,
                              absl::string_view path_model) {
  INFER_ASSIGN_OR_RETURN(json parsed, ParseJson(body, "the request body"));
  if (!parsed.is_object()) return Invalid("the request body is not a JSON object");
  auto doc = std::make_shared<const json>(std::move(parsed));
  INFER_ASSIGN_OR_RETURN(std::string model, ScoringModel(api, engine, *doc, path_model));
  const PredictBatchShape batch =
      api == ScoringApi::kTeiPredict ? PredictBatch(*doc) : PredictBatchShape{};
  const bool mixed = batch.singles && batch.pairs;
  if (mixed) INFER_RETURN_IF_ERROR(CheckWholeBatch(engine, model, batch));
  for (int kind : mixed ? std::vector<int>{1, 2} : std::vector<int>{0}) {
    ScoringCall call(api);
    call.doc = doc;
    call.kind = kind;
    ScoringSource source(model, &call);
    absl::Status status = admit(source);
    *empty = call.empty;
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

void SubmitScoring(ScoringApi api, Engine* engine, json body, HttpReply reply,
                   absl::string_view path_model) {
  auto doc = std::make_shared<const json>(std::move(body));
  absl::StatusOr<std::string> model = ScoringModel(api, *engine, *doc, path_model);
  if (!model.ok()) return reply.Send(ScoringError(api, model.status()));
  if (api == ScoringApi::kTeiPredict) {
    if (const PredictBatchShape batch = PredictBatch(*doc); batch.singles && batch.pairs) {
      return SubmitMixedPredict(engine, *model, std::move(doc), batch, std::move(reply));
    }
  }
  auto call = std::make_shared<ScoringCall>(api);
  call->doc = std::move(doc);
  ScoringSource source(*std::move(model), call.get());
  auto shared = std::make_shared<HttpReply>(std::move(reply));
  engine->Submit(source, [shared, call](absl::StatusOr<InferResponse> r) {
    if (!r.ok()) {
      return shared->Send(ScoringError(call->api, r.status(), call->empty));
    }
    auto response = std::make_shared<InferResponse>(*std::move(r));
    shared->SendFrom([response, call] { return Answer(*call, *response); });
  });
}

}  // namespace infer
