// TEI's /tokenize and /decode (declared in server/http/tei_routes.h): the
// model's own tokenizer, run on the HTTP thread. What a request may make it
// do is bounded by the model's request limits before any text is
// tokenised: max_client_batch_size texts and max_text_bytes of them for
// /tokenize, max_client_batch_size sequences and max_request_tokens ids for
// /decode.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/text/tokenizer.h"
#include "runtime/json_parse.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "server/http/http_json.h"
#include "server/http/openai_embeddings.h"
#include "server/http/scoring_routes.h"
#include "server/http/tei_routes.h"

namespace infer {
namespace {

using nlohmann::json;

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

struct TextModel {
  const Model* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  RequestLimits limits;
};

// The body's model (ChooseModel; `path_model`: the one the path names) and
// its tokenizer.
absl::StatusOr<TextModel> ChooseTextModel(const Engine& engine, const json& doc,
                                          absl::string_view path_model) {
  INFER_ASSIGN_OR_RETURN(std::string name, ChooseModel(engine, doc, path_model,
                                                       {"embed", "sparse", "rerank", "classify"},
                                                       "a model that tokenises text"));
  TextModel m;
  INFER_ASSIGN_OR_RETURN(m.model, engine.GetModel(name));
  INFER_ASSIGN_OR_RETURN(m.limits, engine.GetRequestLimits(name));
  m.tokenizer = m.model->tokenizer();
  if (m.tokenizer == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("model '", name, "' does not tokenise text"));
  }
  return m;
}

absl::Status CheckCount(const TextModel& m, size_t n, bool* empty) {
  if (n == 0) {
    *empty = true;
    return Invalid("`inputs` cannot be empty");
  }
  if (static_cast<int64_t>(n) > m.limits.max_client_batch_size) {
    return Invalid(absl::StrCat("batch size ", n, " > maximum allowed batch size ",
                                m.limits.max_client_batch_size));
  }
  return absl::OkStatus();
}

// [[{"id", "text", "special", "start", "stop"}, ..], ..]: each token's
// bytes of the (prompted) text, as TEI gives them; a special token's text
// is the token, without offsets.
absl::StatusOr<std::string> Tokenize(const Engine& engine, const json& doc,
                                     absl::string_view path_model, bool* empty) {
  INFER_ASSIGN_OR_RETURN(TextModel m, ChooseTextModel(engine, doc, path_model));
  auto inputs = doc.find("inputs");
  if (inputs == doc.end() || !(inputs->is_string() || inputs->is_array())) {
    return Invalid("'inputs' must be a string or an array of strings");
  }
  std::vector<const std::string*> texts;
  if (inputs->is_string()) {
    texts.push_back(&inputs->get_ref<const std::string&>());
  } else {
    INFER_RETURN_IF_ERROR(CheckCount(m, inputs->size(), empty));
    for (const json& t : *inputs) {
      if (!t.is_string()) return Invalid("'inputs' must be a string or an array of strings");
      texts.push_back(&t.get_ref<const std::string&>());
    }
  }
  INFER_ASSIGN_OR_RETURN(const bool special, BoolField(doc, "add_special_tokens", true));
  INFER_ASSIGN_OR_RETURN(const std::string prompt_name, StringField(doc, "prompt_name"));
  INFER_ASSIGN_OR_RETURN(const std::string prompt, m.model->PromptText(prompt_name));
  int64_t bytes = 0;
  for (const std::string* t : texts) {
    if (t->empty()) {  // as TEI: an empty text is refused, 400 "Empty"
      *empty = true;
      return Invalid("`inputs` cannot be empty");
    }
    bytes += static_cast<int64_t>(prompt.size() + t->size());
  }
  if (bytes > m.limits.max_text_bytes) {
    return Invalid(absl::StrCat("the texts have ", bytes, " bytes; model '", m.model->spec().name,
                                "' allows ", m.limits.max_text_bytes, " (max_text_bytes)"));
  }
  text::EncodeOptions options;
  options.add_special_tokens = special;
  json all = json::array();
  for (const std::string* t : texts) {
    const std::string text = prompt + *t;
    INFER_ASSIGN_OR_RETURN(text::Encoding e, m.tokenizer->Encode(text, std::nullopt, options));
    json tokens = json::array();
    for (size_t i = 0; i < e.size(); ++i) {
      const bool is_special = i < e.special_tokens_mask.size() && e.special_tokens_mask[i] != 0;
      json token = {{"id", e.ids[i]}, {"special", is_special}};
      if (is_special) {
        token["text"] = e.tokens[i];
        token["start"] = nullptr;
        token["stop"] = nullptr;
      } else {
        const size_t start = std::min<size_t>(e.offsets[i].start, text.size());
        const size_t stop = std::max(start, std::min<size_t>(e.offsets[i].end, text.size()));
        token["text"] = text.substr(start, stop - start);
        token["start"] = start;
        token["stop"] = stop;
      }
      tokens.push_back(std::move(token));
    }
    all.push_back(std::move(tokens));
  }
  return DumpJson(all);
}

// ["text", ..]: each sequence of ids decoded.
absl::StatusOr<std::string> Decode(const Engine& engine, const json& doc,
                                   absl::string_view path_model, bool* empty) {
  INFER_ASSIGN_OR_RETURN(TextModel m, ChooseTextModel(engine, doc, path_model));
  auto ids = doc.find("ids");
  const char* form = "'ids' must be an array of token ids or an array of such arrays";
  if (ids == doc.end() || !ids->is_array()) return Invalid(form);
  std::vector<const json*> rows;
  if (!ids->empty() && ids->front().is_array()) {
    INFER_RETURN_IF_ERROR(CheckCount(m, ids->size(), empty));
    for (const json& r : *ids) rows.push_back(&r);
  } else {
    rows.push_back(&*ids);
  }
  int64_t total = 0;
  for (const json* r : rows) {
    if (!r->is_array()) return Invalid(form);
    if (r->empty()) {  // as TEI: 400 "Empty"
      *empty = true;
      return Invalid("`input_ids` cannot be empty");
    }
    total += static_cast<int64_t>(r->size());
  }
  if (total > m.limits.max_request_tokens) {
    return Invalid(absl::StrCat("'ids' holds ", total, " ids; model '", m.model->spec().name,
                                "' allows ", m.limits.max_request_tokens, " (max_request_tokens)"));
  }
  INFER_ASSIGN_OR_RETURN(const bool skip, BoolField(doc, "skip_special_tokens", true));
  const int64_t vocab = m.tokenizer->vocab_size();
  json texts = json::array();
  for (const json* r : rows) {
    std::vector<int32_t> row;
    row.reserve(r->size());
    for (const json& v : *r) {
      if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0) ||
          (v.is_number_unsigned() && v.get<uint64_t>() >= static_cast<uint64_t>(vocab)) ||
          v.get<int64_t>() >= vocab) {
        return Invalid(absl::StrCat("'ids' holds ", QuoteJson(v), "; model '", m.model->spec().name,
                                    "' has ids in [0, ", vocab, ")"));
      }
      row.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    texts.push_back(m.tokenizer->Decode(row, skip));
  }
  return DumpJson(texts);
}

}  // namespace

namespace {

void Answer(Engine* engine, const HttpRequest& request, HttpReply reply, bool decode) {
  bool empty = false;
  absl::StatusOr<std::string> body = [&]() -> absl::StatusOr<std::string> {
    INFER_ASSIGN_OR_RETURN(json doc, ParseJson(request.body, "the request body"));
    if (!doc.is_object()) return Invalid("the request body is not a JSON object");
    const absl::string_view path_model = PathModel(request);
    return decode ? Decode(*engine, doc, path_model, &empty)
                  : Tokenize(*engine, doc, path_model, &empty);
  }();
  if (!body.ok()) return reply.Send(ScoringError(ScoringApi::kTeiPredict, body.status(), empty));
  reply.Send(HttpResponse{200, "application/json", *std::move(body)});
}

}  // namespace

void HandleTeiTokenize(Engine* engine, HttpRequest request, HttpReply reply) {
  Answer(engine, request, std::move(reply), /*decode=*/false);
}

void HandleTeiDecode(Engine* engine, HttpRequest request, HttpReply reply) {
  Answer(engine, request, std::move(reply), /*decode=*/true);
}

}  // namespace infer
