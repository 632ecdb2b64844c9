#include "server/http/openai_embeddings.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/json_parse.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "server/http/http_json.h"

namespace infer {
namespace {

using nlohmann::json;

const TensorSpec* FindInput(const ModelSpec& spec, absl::string_view name) {
  for (const TensorSpec& t : spec.inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The embedding output: "embedding", else the model's one FP32 output of
// rank 2 that is not computed on request only.
const TensorSpec* FindEmbedding(const ModelSpec& spec) {
  const TensorSpec* only = nullptr;
  int fp32 = 0;
  for (const TensorSpec& t : spec.outputs) {
    if (t.name == "embedding") return &t;
    if (t.dtype == DataType::kFp32 && t.shape.size() == 2 && !t.on_request) {
      only = &t;
      ++fp32;
    }
  }
  return fp32 == 1 ? only : nullptr;
}

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

}  // namespace

const char* ModelTask(const ModelSpec& spec) {
  for (const TensorSpec& t : spec.outputs) {
    if (t.name == "scores" && t.shape.size() == 2) return t.shape[1] == 1 ? "rerank" : "classify";
    if (t.name == "sparse_values") return "sparse";
  }
  return FindEmbedding(spec) != nullptr ? "embed" : nullptr;
}

absl::string_view PathModel(const HttpRequest& request) {
  return request.PathParam(kModelPathParam);
}

absl::Status CheckBodyModel(const json& body, absl::string_view path_model) {
  auto m = body.find("model");
  if (m == body.end() || m->is_null()) return absl::OkStatus();
  if (!m->is_string()) return Invalid("'model' must be a string");
  if (m->get_ref<const std::string&>() == path_model) return absl::OkStatus();
  return Invalid(absl::StrCat("'model' ", Quote(m->get_ref<const std::string&>()),
                              " is not the model the path names (", Quote(path_model),
                              "); leave 'model' out or name that one"));
}

absl::StatusOr<std::string> ChooseModel(const Engine& engine, const json& body,
                                        absl::string_view path_model,
                                        std::initializer_list<absl::string_view> tasks,
                                        absl::string_view what) {
  if (!path_model.empty()) {
    INFER_RETURN_IF_ERROR(CheckBodyModel(body, path_model));
    std::string name(path_model);
    INFER_ASSIGN_OR_RETURN(const ModelSpec* spec, engine.GetModelSpec(name));
    const char* task = ModelTask(*spec);
    for (absl::string_view t : tasks) {
      if (task != nullptr && t == task) return name;
    }
    return absl::FailedPreconditionError(absl::StrCat("model ", Quote(name), " is not ", what));
  }
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) return Invalid("'model' must be a string");
    return m->get<std::string>();
  }
  std::vector<std::string> fit;
  for (const std::string& name : engine.ModelNames()) {
    absl::StatusOr<const ModelSpec*> spec = engine.GetModelSpec(name);
    if (!spec.ok()) continue;
    const char* task = ModelTask(**spec);
    if (task == nullptr) continue;
    for (absl::string_view t : tasks) {
      if (t == task) {
        fit.push_back(name);
        break;
      }
    }
  }
  if (fit.size() == 1) return fit[0];
  if (fit.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("no loaded model is ", what));
  }
  return Invalid(absl::StrCat("several loaded models can answer (", absl::StrJoin(fit, ", "),
                              "); name one in 'model'"));
}

absl::Status EmbeddingsSource::Declare(const ModelSpec& spec, DeclaredRequest* declared) {
  call_->declared = true;
  call_->param = nullptr;
  const char* key = call_->tei ? "inputs" : "input";
  // An empty list is refused first, as TEI does (before the model's kind).
  if (auto input = doc_.find(key);
      call_->tei && input != doc_.end() && input->is_array() && input->empty()) {
    call_->empty = true;
    return Invalid("`inputs` cannot be empty");  // TEI's words
  }
  const TensorSpec* embedding = nullptr;
  using Kind = EmbeddingsCall::Kind;
  const char* wanted = call_->kind == Kind::kTokens   ? "token_embeddings"
                       : call_->kind == Kind::kSparse ? "sparse_values"
                                                      : nullptr;
  if (wanted == nullptr) {
    embedding = FindEmbedding(spec);
  } else {
    for (const TensorSpec& t : spec.outputs) {
      if (t.name == wanted) embedding = &t;
    }
  }
  if (embedding == nullptr) {
    // A model of another kind: TEI's backend error (424 there; 400 on the
    // OpenAI route, as every refusal there).
    return absl::FailedPreconditionError(
        absl::StrCat("model ", Quote(spec.name), " has no ",
                     call_->kind == Kind::kTokens   ? "per-token embeddings"
                     : call_->kind == Kind::kSparse ? "sparse (SPLADE) output"
                                                    : "embedding output"));
  }
  call_->output = embedding->name;
  if (call_->tei) {
    INFER_RETURN_IF_ERROR(DeclareTeiOptions(*embedding));
  } else if (embedding->normalizable) {
    // OpenAI's embeddings are unit vectors, and TEI's OpenAI route
    // normalises whatever the model's default.
    normalize_ = true;
  }
  call_->param = "encoding_format";
  if (auto f = doc_.find("encoding_format"); !call_->tei && f != doc_.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) {
      return Invalid("'encoding_format' must be \"float\" or \"base64\"");
    }
    call_->base64 = *f == "base64";
  }
  call_->param = "dimensions";
  // TEI's /embed_all and /embed_sparse have no "dimensions" (nor
  // "normalize"): ignored there, as TEI ignores fields it does not know.
  if (auto d = doc_.find("dimensions");
      call_->kind == EmbeddingsCall::Kind::kPooled && d != doc_.end() && !d->is_null()) {
    if (!d->is_number_integer()) return Invalid("'dimensions' must be an integer");
    // An integer past int64 is refused as 0 is: below 1.
    const int64_t dimensions =
        d->is_number_unsigned() && d->get<uint64_t>() > INT64_MAX ? 0 : d->get<int64_t>();
    INFER_RETURN_IF_ERROR(CheckDimensions(spec, *embedding, dimensions));
    dimensions_ = dimensions;
  }
  call_->param = "input";
  auto input = doc_.find(key);
  if (input == doc_.end()) return Invalid(absl::StrCat("'", key, "' is required"));
  if (!input->is_string() && (!input->is_array() || input->empty())) {
    return Invalid(absl::StrCat(
        "'", key,
        "' must be a string, an array of strings, an array of token ids, or an array of arrays "
        "of token ids, and not empty"));
  }
  input_ = &*input;
  text_ = input->is_string() || input->front().is_string();
  if (text_) {
    if (FindInput(spec, "text") == nullptr) {
      return Invalid(absl::StrCat("model ", Quote(spec.name), " takes token ids, not text: send '",
                                  key,
                                  "' as an array of token "
                                  "ids or an array of such arrays"));
    }
    // Strings: the "text" input, [n] BYTES. An empty one is refused, as
    // TEI (400 "Empty") and OpenAI's API do.
    auto add = [&](const std::string& text, size_t i) -> absl::Status {
      if (text.empty()) {
        call_->empty = true;
        if (call_->tei) return Invalid("`inputs` cannot be empty");  // TEI's words
        return Invalid(input->is_string()
                           ? std::string("'input' is an empty string")
                           : absl::StrCat("'input' element ", i, " is an empty string"));
      }
      declared->text_bytes += 4 + static_cast<int64_t>(text.size());
      return absl::OkStatus();
    };
    if (input->is_string()) {
      INFER_RETURN_IF_ERROR(add(input->get_ref<const std::string&>(), 0));
    } else {
      for (size_t i = 0; i < input->size(); ++i) {
        const json& v = (*input)[i];
        if (!v.is_string()) {
          return Invalid(absl::StrCat("'", key,
                                      "' mixes strings with other values; send strings or token "
                                      "arrays"));
        }
        INFER_RETURN_IF_ERROR(add(v.get_ref<const std::string&>(), i));
      }
    }
    shape_ = {input->is_string() ? 1 : static_cast<int64_t>(input->size())};
    declared->inputs.push_back({"text", shape_});
    return absl::OkStatus();
  }
  // Token arrays: "input_ids" [n, longest] INT64 padded with 0, and
  // "attention_mask" when the model has it, declared before either is
  // allocated.
  if (FindInput(spec, "input_ids") == nullptr) {
    return Invalid(absl::StrCat("model ", Quote(spec.name), " takes text, not token ids: send '",
                                key,
                                "' as a string or an array "
                                "of strings"));
  }
  if (input->front().is_array()) {
    rows_.reserve(input->size());
    for (const json& row : *input) rows_.push_back(&row);
  } else {
    rows_.push_back(&*input);
  }
  int64_t longest = 0;
  call_->tokens = 0;
  for (const json* row : rows_) {
    if (!row->is_array() || row->empty()) {
      call_->empty = row->is_array();  // TEI: 400 "Empty" for no ids
      if (call_->tei && call_->empty) return Invalid("`inputs` cannot be empty");
      return Invalid(absl::StrCat(
          "'", key, "' must be one array of token ids or an array of non-empty such arrays"));
    }
    longest = std::max<int64_t>(longest, static_cast<int64_t>(row->size()));
    call_->tokens += static_cast<int64_t>(row->size());
  }
  mask_ = FindInput(spec, "attention_mask") != nullptr;
  shape_ = {static_cast<int64_t>(rows_.size()), longest};
  declared->inputs.push_back({"input_ids", shape_});
  if (mask_) declared->inputs.push_back({"attention_mask", shape_});
  return absl::OkStatus();
}

absl::Status EmbeddingsSource::DeclareTeiOptions(const TensorSpec& embedding) {
  call_->param = nullptr;
  INFER_RETURN_IF_ERROR(TruncationFields(doc_, &truncate_, &truncate_left_));
  INFER_ASSIGN_OR_RETURN(prompt_name_, StringField(doc_, "prompt_name"));
  if (call_->kind != EmbeddingsCall::Kind::kPooled) return absl::OkStatus();
  // TEI normalises unless asked not to, whatever the model's default
  // (where the model lets a request choose; elsewhere only an explicit
  // "normalize" is, and it is refused).
  if (embedding.normalizable) normalize_ = true;
  if (auto n = doc_.find("normalize"); n != doc_.end() && !n->is_null()) {
    INFER_ASSIGN_OR_RETURN(normalize_, BoolField(doc_, "normalize", true));
  }
  return absl::OkStatus();
}

absl::Status EmbeddingsSource::Decode(const ModelSpec&, InferRequest* request) {
  switch (call_->kind) {
    case EmbeddingsCall::Kind::kPooled:
      request->requested_outputs = {call_->output};
      break;
    case EmbeddingsCall::Kind::kTokens:
      request->requested_outputs = {"token_embeddings", "token_counts"};
      break;
    case EmbeddingsCall::Kind::kSparse:
      request->requested_outputs = {"sparse_counts", "sparse_indices", "sparse_values"};
      break;
  }
  request->dimensions = dimensions_;
  request->truncate = truncate_;
  request->truncate_left = truncate_left_;
  request->normalize = normalize_;
  request->prompt_name = prompt_name_;
  if (text_) {
    Tensor text{"text", DataType::kBytes, shape_, {}};
    text.data.reserve(static_cast<size_t>(shape_[0]) * 4);
    // The values are read where they are: the body is never copied.
    if (input_->is_string()) {
      AppendBytesElement(input_->get_ref<const std::string&>(), &text.data);
    } else {
      for (const json& v : *input_) AppendBytesElement(v.get_ref<const std::string&>(), &text.data);
    }
    request->inputs.push_back(std::move(text));
    call_->param = nullptr;
    return absl::OkStatus();
  }
  const size_t longest = static_cast<size_t>(shape_[1]);
  Tensor ids{"input_ids", DataType::kInt64, shape_,
             std::string(rows_.size() * longest * sizeof(int64_t), '\0')};
  Tensor mask{"attention_mask", DataType::kInt64, shape_,
              std::string(mask_ ? ids.data.size() : 0, '\0')};
  for (size_t r = 0; r < rows_.size(); ++r) {
    for (size_t c = 0; c < rows_[r]->size(); ++c) {
      const json& v = (*rows_[r])[c];
      if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
        return Invalid(absl::StrCat("'", call_->tei ? "inputs" : "input", "' holds ", QuoteJson(v),
                                    " at [", r, "][", c,
                                    "], which is not a token id (a non-negative integer)"));
      }
      ids.mutable_as<int64_t>()[r * longest + c] = v.get<int64_t>();
      if (mask_) mask.mutable_as<int64_t>()[r * longest + c] = 1;
    }
  }
  request->inputs.push_back(std::move(ids));
  if (mask_) request->inputs.push_back(std::move(mask));
  call_->param = nullptr;
  return absl::OkStatus();
}

namespace {

HttpResponse Encode(const InferResponse& response, const std::string& output, bool base64,
                    int64_t tokens) {
  const Tensor* t = nullptr;
  for (const Tensor& o : response.outputs) {
    if (o.name == output) t = &o;
  }
  if (t == nullptr || t->dtype != DataType::kFp32 || t->shape.size() != 2) {
    return OpenAiError(absl::InternalError("the model's answer has no [n, width] FP32 embedding"));
  }
  if (tokens < 0) tokens = response.real_tokens;
  const int64_t n = t->shape[0], width = t->shape[1];
  // Written by hand rather than through nlohmann::json, which holds every
  // value as a node and prints floats as doubles (17 digits).
  std::string body = R"({"object":"list","data":[)";
  for (int64_t i = 0; i < n; ++i) {
    const float* row = t->as<float>() + i * width;
    absl::StrAppend(&body, i > 0 ? "," : "", R"({"object":"embedding","index":)", i,
                    R"(,"embedding":)");
    if (base64) {
      absl::StrAppend(
          &body, "\"",
          absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(row),
                                               static_cast<size_t>(width) * sizeof(float))),
          "\"");
    } else {
      AppendJsonFloats(row, static_cast<size_t>(width), &body);
    }
    body.push_back('}');
  }
  absl::StrAppend(&body, R"(],"model":)", JsonString(response.model_name),
                  R"(,"usage":{"prompt_tokens":)", tokens, R"(,"total_tokens":)", tokens, "}}");
  return {200, "application/json", std::move(body)};
}

}  // namespace

HttpResponse OpenAiError(const absl::Status& status, const char* param) {
  const int http = HttpStatusFor(status.code());
  const char* type = http == 429   ? "rate_limit_error"
                     : http >= 500 ? "server_error"
                                   : "invalid_request_error";
  json code = nullptr;
  if (status.code() == absl::StatusCode::kNotFound) code = "model_not_found";
  json doc = {{"error",
               {{"message", std::string(status.message())},
                {"type", type},
                {"param", param == nullptr ? json(nullptr) : json(param)},
                {"code", code}}}};
  return {http, "application/json", DumpJson(doc)};
}

absl::StatusOr<EmbeddingsSource> ParseEmbeddingsRequest(const HttpRequest& request,
                                                        EmbeddingsCall* call) {
  call->param = nullptr;
  INFER_ASSIGN_OR_RETURN(json doc, ParseJson(request.body, "the request body"));
  if (!doc.is_object()) return Invalid("the request body is not a JSON object");
  call->param = "model";
  std::string name(PathModel(request));
  if (!name.empty()) {
    INFER_RETURN_IF_ERROR(CheckBodyModel(doc, name));
  } else {
    auto model = doc.find("model");
    if (model == doc.end() || !model->is_string()) {
      return Invalid("'model' (a string) is required");
    }
    name = model->get<std::string>();
  }
  call->param = nullptr;
  return EmbeddingsSource(std::move(name), std::move(doc), call);
}

void HandleEmbeddings(Engine* engine, HttpRequest request, HttpReply reply) {
  // What the answer needs, filled as the engine has the request decoded.
  auto call = std::make_shared<EmbeddingsCall>();
  absl::StatusOr<EmbeddingsSource> source = ParseEmbeddingsRequest(request, call.get());
  if (!source.ok()) return reply.Send(OpenAiError(source.status(), call->param));
  request.body.clear();  // parsed; the source reads the document
  auto shared = std::make_shared<HttpReply>(std::move(reply));
  engine->Submit(*source, [shared, call](absl::StatusOr<InferResponse> r) {
    if (!r.ok()) {
      // A refusal while the request was declared or decoded names its
      // field; one before, its model.
      const char* param = call->declared                                     ? call->param
                          : r.status().code() == absl::StatusCode::kNotFound ? "model"
                                                                             : nullptr;
      return shared->Send(OpenAiError(r.status(), param));
    }
    auto response = std::make_shared<InferResponse>(*std::move(r));
    shared->SendFrom(
        [response, call] { return Encode(*response, call->output, call->base64, call->tokens); });
  });
}

HttpResponse ListOpenAiModels(const Engine& engine, const std::string& model) {
  auto entry = [&engine](const std::string& name) {
    json e = {{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "infer"}};
    if (absl::StatusOr<const ModelSpec*> spec = engine.GetModelSpec(name); spec.ok()) {
      if (const char* task = ModelTask(**spec); task != nullptr) e["task"] = task;
    }
    return e;
  };
  if (!model.empty()) {
    if (absl::StatusOr<const ModelSpec*> spec = engine.GetModelSpec(model); !spec.ok()) {
      return OpenAiError(spec.status(), "model");
    }
    return {200, "application/json", DumpJson(entry(model))};
  }
  json data = json::array();
  for (const std::string& name : engine.ModelNames()) data.push_back(entry(name));
  return {200, "application/json", DumpJson(json{{"object", "list"}, {"data", std::move(data)}})};
}

}  // namespace infer
