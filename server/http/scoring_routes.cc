#include "server/http/scoring_routes.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/request_source.h"
#include "runtime/json_parse.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "server/http/http_json.h"
#include "server/http/openai_embeddings.h"

namespace infer {
namespace {

using nlohmann::json;

bool IsRerank(ScoringApi api) { return api != ScoringApi::kTeiPredict; }
bool IsCohere(ScoringApi api) {
  return api == ScoringApi::kCohereV1 || api == ScoringApi::kCohereV2;
}

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// What the answer needs, filled as the engine has the request declared and
// decoded.
struct ScoringCall {
  explicit ScoringCall(ScoringApi a) : api(a) {}
  const ScoringApi api;
  json doc;                         // the body, read in place by the source
  std::vector<std::string> labels;  // the scores output's, in order
  bool multi_label = false;         // ...each through a sigmoid (TensorSpec)
  bool raw_scores = false;
  bool return_text = false;
  int64_t top_n = -1;  // Cohere, and predict's top_k: the results to return; -1: all
  // predict's function_to_apply: "sigmoid", "softmax", "none"; empty: by
  // the number of labels.
  std::string function;
  bool single = false;  // predict: one input, answered as one list
  bool empty = false;   // refused for an empty list (TEI's "Empty")
  // The documents (rerank) as the body gave them, for return_text.
  std::vector<const json*> documents;
};

// The model's `scores` output: FP32 [-1, labels].
const TensorSpec* ScoresOutput(const ModelSpec& spec) {
  for (const TensorSpec& t : spec.outputs) {
    if (t.name == "scores" && t.dtype == DataType::kFp32 && t.shape.size() == 2 && t.shape[1] > 0) {
      return &t;
    }
  }
  return nullptr;
}

// A text of a rerank's documents: a string, or (Cohere v1) an object with a
// "text" string.
const std::string* DocumentText(ScoringApi api, const json& v) {
  if (v.is_string()) return &v.get_ref<const std::string&>();
  if (api == ScoringApi::kCohereV1 && v.is_object()) {
    auto text = v.find("text");
    if (text != v.end() && text->is_string()) return &text->get_ref<const std::string&>();
  }
  return nullptr;
}

class ScoringSource final : public RequestSource {
 public:
  ScoringSource(std::string model, ScoringCall* call) : model_(std::move(model)), call_(call) {}
  const std::string& model_name() const override { return model_; }

  absl::Status Declare(const ModelSpec& spec, DeclaredRequest* declared) override {
    // An empty list is refused first, as TEI does (before the model's kind).
    const char* list = !IsRerank(call_->api)  ? "inputs"
                       : IsCohere(call_->api) ? "documents"
                                              : "texts";
    if (auto l = call_->doc.find(list); l != call_->doc.end() && l->is_array() && l->empty()) {
      call_->empty = true;
      return Invalid(absl::StrCat("`", list, "` cannot be empty"));
    }
    const TensorSpec* scores = ScoresOutput(spec);
    if (scores == nullptr) {
      // TEI: "Model is not a classifier model", a backend error (424).
      return absl::FailedPreconditionError(
          absl::StrCat("model ", Quote(spec.name),
                       " has no 'scores' output: it is not a classifier or re-ranker"));
    }
    const int64_t labels = scores->shape[1];
    call_->labels = scores->labels;
    call_->multi_label = scores->multi_label;
    for (auto i = static_cast<int64_t>(call_->labels.size()); i < labels; ++i) {
      call_->labels.push_back(absl::StrCat("LABEL_", i));
    }
    if (IsRerank(call_->api) && labels != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("model ", Quote(spec.name), " is not a re-ranker model: it gives ", labels,
                       " scores per input, a re-ranker one"));
    }
    const json& d = call_->doc;
    INFER_ASSIGN_OR_RETURN(call_->raw_scores, BoolField(d, "raw_scores", false));
    INFER_ASSIGN_OR_RETURN(
        call_->return_text,
        BoolField(d, IsCohere(call_->api) ? "return_documents" : "return_text", false));
    INFER_RETURN_IF_ERROR(TruncationFields(d, &truncate_, &left_));
    return IsRerank(call_->api) ? DeclareRerank(declared) : DeclarePredict(declared);
  }

  absl::Status Decode(const ModelSpec&, InferRequest* request) override {
    request->requested_outputs = {"scores"};
    request->truncate = truncate_;
    request->truncate_left = left_;
    auto tensor = [](const char* name, const std::vector<const std::string*>& texts) {
      Tensor t{name, DataType::kBytes, {static_cast<int64_t>(texts.size())}, {}};
      size_t bytes = 0;
      for (const std::string* s : texts) bytes += 4 + s->size();
      t.data.reserve(bytes);
      for (const std::string* s : texts) AppendBytesElement(*s, &t.data);
      return t;
    };
    request->inputs.push_back(tensor(first_name_, firsts_));
    if (!seconds_.empty()) request->inputs.push_back(tensor(second_name_, seconds_));
    return absl::OkStatus();
  }

 private:
  absl::Status DeclareRerank(DeclaredRequest* declared) {
    const ScoringApi api = call_->api;
    const json& d = call_->doc;
    auto query = d.find("query");
    if (query == d.end() || !query->is_string()) return Invalid("'query' (a string) is required");
    const char* key = IsCohere(api) ? "documents" : "texts";
    auto docs = d.find(key);
    if (docs == d.end() || !docs->is_array()) {
      return Invalid(absl::StrCat("'", key, "' (an array of strings) is required"));
    }
    if (docs->empty()) {
      call_->empty = true;
      return Invalid(absl::StrCat("`", key, "` cannot be empty"));
    }
    if (IsCohere(api)) {
      if (auto n = d.find("top_n"); n != d.end() && !n->is_null()) {
        if (!n->is_number_integer() || n->get<int64_t>() < 1) {
          return Invalid("'top_n' must be a positive integer");
        }
        call_->top_n = n->get<int64_t>();
      }
    }
    first_name_ = "query";
    second_name_ = "documents";
    firsts_ = {&query->get_ref<const std::string&>()};
    declared->text_bytes = 4 + static_cast<int64_t>(firsts_[0]->size());
    seconds_.reserve(docs->size());
    for (size_t i = 0; i < docs->size(); ++i) {
      const std::string* text = DocumentText(api, (*docs)[i]);
      if (text == nullptr) {
        return Invalid(
            absl::StrCat("'", key, "' element ", i, " is not a string",
                         api == ScoringApi::kCohereV1 ? " or an object with a 'text' string" : ""));
      }
      if (text->empty() && firsts_[0]->empty()) {  // TEI: an empty pair is 400 "Empty"
        call_->empty = true;
        return Invalid(absl::StrCat("`", key, "` cannot be empty"));
      }
      seconds_.push_back(text);
      call_->documents.push_back(&(*docs)[i]);
      declared->text_bytes += 4 + static_cast<int64_t>(text->size());
    }
    shape_first_ = {1};
    shape_second_ = {static_cast<int64_t>(seconds_.size())};
    declared->inputs.push_back({"query", shape_first_});
    declared->inputs.push_back({"documents", shape_second_});
    return absl::OkStatus();
  }

  // TEI's inputs: a string, a pair [a, b], or a batch [[a], [a, b], ...].
  absl::Status DeclarePredict(DeclaredRequest* declared) {
    const json& d = call_->doc;
    if (auto p = d.find("parameters"); p != d.end() && !p->is_null()) {
      if (!p->is_object()) return Invalid("'parameters' must be an object");
      if (auto k = p->find("top_k"); k != p->end() && !k->is_null()) {
        if (!k->is_number_integer() || k->get<int64_t>() < 1) {
          return Invalid("'parameters.top_k' must be a positive integer");
        }
        call_->top_n = k->get<int64_t>();
      }
      if (auto f = p->find("function_to_apply"); f != p->end() && !f->is_null()) {
        if (*f != "sigmoid" && *f != "softmax" && *f != "none") {
          return Invalid(
              "'parameters.function_to_apply' must be \"sigmoid\", \"softmax\" or \"none\"");
        }
        call_->function = f->get<std::string>();
      }
    }
    auto inputs = d.find("inputs");
    const char* forms =
        "'inputs' must be a string, a pair of strings [string, string], or a batch of single "
        "strings and pairs [[string], [string, string], ...]";
    if (inputs == d.end()) return Invalid(forms);
    std::vector<const json*> rows;
    if (inputs->is_string()) {
      call_->single = true;
      rows.push_back(&*inputs);
    } else if (inputs->is_array() && !inputs->empty() && inputs->front().is_string()) {
      call_->single = true;
      rows.push_back(&*inputs);
    } else if (inputs->is_array()) {
      if (inputs->empty()) {
        call_->empty = true;
        return Invalid("`inputs` cannot be empty");
      }
      for (const json& row : *inputs) rows.push_back(&row);
    } else {
      return Invalid(forms);
    }
    first_name_ = "text";
    second_name_ = "text_pair";
    int kind = 0;  // 1: single texts, 2: pairs
    for (size_t i = 0; i < rows.size(); ++i) {
      const json& row = *rows[i];
      std::vector<const std::string*> texts;
      if (row.is_string()) {
        texts.push_back(&row.get_ref<const std::string&>());
      } else if (row.is_array() && (row.size() == 1 || row.size() == 2)) {
        for (const json& t : row) {
          if (!t.is_string()) return Invalid(forms);
          texts.push_back(&t.get_ref<const std::string&>());
        }
      } else {
        return Invalid(forms);
      }
      if (texts[0]->empty() && texts.back()->empty()) {  // TEI: 400 "Empty"
        call_->empty = true;
        return Invalid("`inputs` cannot be empty");
      }
      const int this_kind = static_cast<int>(texts.size());
      if (kind != 0 && this_kind != kind) {
        return Invalid("'inputs' mixes single strings and pairs; send them in separate requests");
      }
      kind = this_kind;
      firsts_.push_back(texts[0]);
      if (texts.size() == 2) seconds_.push_back(texts[1]);
      for (const std::string* t : texts)
        declared->text_bytes += 4 + static_cast<int64_t>(t->size());
    }
    shape_first_ = {static_cast<int64_t>(firsts_.size())};
    shape_second_ = shape_first_;
    declared->inputs.push_back({"text", shape_first_});
    if (!seconds_.empty()) declared->inputs.push_back({"text_pair", shape_second_});
    return absl::OkStatus();
  }

  std::string model_;
  ScoringCall* call_;  // borrowed
  // From Declare, for Decode: views into the call's body.
  const char* first_name_ = "";
  const char* second_name_ = "";
  std::vector<const std::string*> firsts_, seconds_;
  std::vector<int64_t> shape_first_, shape_second_;
  std::optional<bool> truncate_;
  bool left_ = false;
};

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

HttpResponse Answer(const ScoringCall& call, const InferResponse& response) {
  const Tensor* t = nullptr;
  for (const Tensor& o : response.outputs) {
    if (o.name == "scores") t = &o;
  }
  if (t == nullptr || t->dtype != DataType::kFp32 || t->shape.size() != 2 ||
      t->shape[1] != static_cast<int64_t>(call.labels.size())) {
    return ScoringError(call.api, absl::InternalError("the model's answer has no scores"));
  }
  const int64_t n = t->shape[0], labels = t->shape[1];
  if (call.api == ScoringApi::kTeiPredict) {
    json all = json::array();
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<float> s = Activated(t->as<float>() + i * labels, labels, call.raw_scores,
                                             call.multi_label, call.function);
      json predictions = json::array();
      for (size_t k : ByScore(s)) {
        if (call.top_n >= 0 && static_cast<int64_t>(predictions.size()) >= call.top_n) break;
        predictions.push_back({{"score", s[k]}, {"label", call.labels[k]}});
      }
      all.push_back(std::move(predictions));
    }
    return {200, "application/json", DumpJson(call.single ? all[0] : all)};
  }
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
  SubmitScoring(api, engine, *std::move(doc), std::move(reply));
}

namespace {

absl::StatusOr<std::string> ScoringModel(ScoringApi api, const Engine& engine, const json& doc) {
  return IsRerank(api) ? ChooseModel(engine, doc, {"rerank"}, "a re-ranker")
                       : ChooseModel(engine, doc, {"rerank", "classify"}, "a classifier");
}

}  // namespace

absl::Status AdmitScoringBody(ScoringApi api, const Engine& engine, absl::string_view body,
                              const std::function<absl::Status(RequestSource&)>& admit,
                              bool* empty) {
  ScoringCall call(api);
  INFER_ASSIGN_OR_RETURN(call.doc, ParseJson(body, "the request body"));
  if (!call.doc.is_object()) return Invalid("the request body is not a JSON object");
  INFER_ASSIGN_OR_RETURN(std::string model, ScoringModel(api, engine, call.doc));
  ScoringSource source(std::move(model), &call);
  absl::Status status = admit(source);
  *empty = call.empty;
  return status;
}

void SubmitScoring(ScoringApi api, Engine* engine, json body, HttpReply reply) {
  auto call = std::make_shared<ScoringCall>(api);
  call->doc = std::move(body);
  absl::StatusOr<std::string> model = ScoringModel(api, *engine, call->doc);
  if (!model.ok()) return reply.Send(ScoringError(api, model.status()));
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
