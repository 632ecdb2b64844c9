#include "server/http/scoring_source.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"
#include "server/http/http_json.h"

namespace infer {
namespace {

using nlohmann::json;

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

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

// A row of a /predict input: a single text ("a" or ["a"]) or a pair
// (["a", "b"]); views into the body.
struct PredictRow {
  int kind = 0;  // 1: a single text, 2: a pair, 0: neither (malformed)
  const std::string* texts[2] = {nullptr, nullptr};
  // Its bytes in the engine's 4-byte-length layout.
  int64_t Bytes() const {
    int64_t bytes = 0;
    for (int i = 0; i < kind; ++i) bytes += 4 + static_cast<int64_t>(texts[i]->size());
    return bytes;
  }
};

PredictRow ReadPredictRow(const json& row) {
  PredictRow r;
  if (row.is_string()) {
    r.kind = 1;
    r.texts[0] = &row.get_ref<const std::string&>();
    return r;
  }
  if (!row.is_array() || row.empty() || row.size() > 2) return r;
  for (size_t i = 0; i < row.size(); ++i) {
    if (!row[i].is_string()) return PredictRow{};
    r.texts[i] = &row[i].get_ref<const std::string&>();
  }
  r.kind = static_cast<int>(row.size());
  return r;
}

}  // namespace

PredictBatchShape PredictBatch(const json& doc) {
  PredictBatchShape shape;
  auto inputs = doc.find("inputs");
  if (inputs == doc.end() || !inputs->is_array() || inputs->empty() ||
      inputs->front().is_string()) {
    return shape;  // not a batch: one text or one pair
  }
  for (const json& row : *inputs) {
    const PredictRow r = ReadPredictRow(row);
    if (r.kind == 0) continue;
    shape.singles |= r.kind == 1;
    shape.pairs |= r.kind == 2;
    ++shape.rows;
    shape.text_bytes += r.Bytes();
  }
  return shape;
}

const TensorSpec* ScoresOutput(const ModelSpec& spec) {
  for (const TensorSpec& t : spec.outputs) {
    if (t.name == "scores" && t.dtype == DataType::kFp32 && t.shape.size() == 2 && t.shape[1] > 0) {
      return &t;
    }
  }
  return nullptr;
}

absl::Status ScoringSource::Declare(const ModelSpec& spec, DeclaredRequest* declared) {
  // An empty list is refused first, as TEI does (before the model's kind).
  const char* list = !IsRerank(call_->api)  ? "inputs"
                     : IsCohere(call_->api) ? "documents"
                                            : "texts";
  if (auto l = call_->doc->find(list); l != call_->doc->end() && l->is_array() && l->empty()) {
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
  const json& d = *call_->doc;
  INFER_ASSIGN_OR_RETURN(call_->raw_scores, BoolField(d, "raw_scores", false));
  INFER_ASSIGN_OR_RETURN(
      call_->return_text,
      BoolField(d, IsCohere(call_->api) ? "return_documents" : "return_text", false));
  INFER_RETURN_IF_ERROR(TruncationFields(d, &truncate_, &left_));
  return IsRerank(call_->api) ? DeclareRerank(declared) : DeclarePredict(declared);
}

absl::Status ScoringSource::Decode(const ModelSpec&, InferRequest* request) {
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

absl::Status ScoringSource::DeclareRerank(DeclaredRequest* declared) {
  const ScoringApi api = call_->api;
  const json& d = *call_->doc;
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
absl::Status ScoringSource::DeclarePredict(DeclaredRequest* declared) {
  const json& d = *call_->doc;
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
    const PredictRow row = ReadPredictRow(*rows[i]);
    if (row.kind == 0) return Invalid(forms);
    if (row.texts[0]->empty() && row.texts[row.kind - 1]->empty()) {  // TEI: 400 "Empty"
      call_->empty = true;
      return Invalid("`inputs` cannot be empty");
    }
    if (call_->kind != 0 && row.kind != call_->kind) continue;  // the other part's
    if (kind != 0 && row.kind != kind) {  // the route splits such a batch (PredictBatch)
      return Invalid("'inputs' mixes single strings and pairs");
    }
    kind = row.kind;
    call_->rows.push_back(i);
    firsts_.push_back(row.texts[0]);
    if (row.kind == 2) seconds_.push_back(row.texts[1]);
    declared->text_bytes += row.Bytes();
  }
  shape_first_ = {static_cast<int64_t>(firsts_.size())};
  shape_second_ = shape_first_;
  declared->inputs.push_back({"text", shape_first_});
  if (!seconds_.empty()) declared->inputs.push_back({"text_pair", shape_second_});
  return absl::OkStatus();
}

}  // namespace infer
