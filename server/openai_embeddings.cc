#include "server/openai_embeddings.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/json_parse.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "server/grpc_decode.h"
#include "server/http_json.h"

namespace infer {
namespace {

using nlohmann::json;

const TensorSpec* FindInput(const ModelSpec& spec, absl::string_view name) {
  for (const TensorSpec& t : spec.inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The embedding output: "embedding", else the model's one FP32 output.
const TensorSpec* FindEmbedding(const ModelSpec& spec) {
  const TensorSpec* only = nullptr;
  int fp32 = 0;
  for (const TensorSpec& t : spec.outputs) {
    if (t.name == "embedding") return &t;
    if (t.dtype == DataType::kFp32) {
      only = &t;
      ++fp32;
    }
  }
  return fp32 == 1 ? only : nullptr;
}

struct Parsed {
  inference::ModelInferRequest proto;
  std::string output;
  bool base64 = false;
  int64_t tokens = -1;  // token ids sent; -1 for text (the model counts them)
};

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// Strings: the "text" input, [n] BYTES.
absl::Status AddTexts(const json& input, const ModelSpec& spec, inference::ModelInferRequest* p) {
  if (FindInput(spec, "text") == nullptr) {
    return Invalid(absl::StrCat("model ", Quote(spec.name),
                                " takes token ids, not text: send 'input' as an array of token "
                                "ids or an array of such arrays"));
  }
  auto* in = p->add_inputs();
  in->set_name("text");
  in->set_datatype("BYTES");
  std::string* raw = p->add_raw_input_contents();
  // The values are read where they are: the body is never copied.
  if (input.is_string()) {
    AppendBytesElement(input.get_ref<const std::string&>(), raw);
    in->add_shape(1);
    return absl::OkStatus();
  }
  for (const json& s : input) {
    if (!s.is_string()) {
      return Invalid("'input' mixes strings with other values; send strings or token arrays");
    }
    AppendBytesElement(s.get_ref<const std::string&>(), raw);
  }
  in->add_shape(static_cast<int64_t>(input.size()));
  return absl::OkStatus();
}

// Token arrays: "input_ids" [n, longest] INT64 padded with 0, and
// "attention_mask" when the model has it. The padded shape is checked
// against the model's limits before it is allocated.
absl::Status AddTokens(Engine& engine, const json& input, const ModelSpec& spec,
                       inference::ModelInferRequest* p, int64_t* tokens) {
  if (FindInput(spec, "input_ids") == nullptr) {
    return Invalid(absl::StrCat("model ", Quote(spec.name),
                                " takes text, not token ids: send 'input' as a string or an array "
                                "of strings"));
  }
  // The rows where they are in the body (one row, or each element).
  std::vector<const json*> rows;
  if (input.front().is_array()) {
    rows.reserve(input.size());
    for (const json& row : input) rows.push_back(&row);
  } else {
    rows.push_back(&input);
  }
  int64_t longest = 0;
  for (const json* row : rows) {
    if (!row->is_array() || row->empty()) {
      return Invalid("'input' must be one array of token ids or an array of non-empty such arrays");
    }
    longest = std::max<int64_t>(longest, static_cast<int64_t>(row->size()));
    *tokens += static_cast<int64_t>(row->size());
  }
  const bool mask = FindInput(spec, "attention_mask") != nullptr;
  const std::vector<int64_t> shape = {static_cast<int64_t>(rows.size()), longest};
  std::vector<DeclaredInput> declared = {{"input_ids", shape}};
  if (mask) declared.push_back({"attention_mask", shape});
  INFER_RETURN_IF_ERROR(engine.CheckDeclared(spec.name, declared, 0));
  std::string ids(static_cast<size_t>(shape[0] * shape[1]) * sizeof(int64_t), '\0');
  std::string ones(mask ? ids.size() : 0, '\0');
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < rows[r]->size(); ++c) {
      const json& v = (*rows[r])[c];
      if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
        return Invalid(absl::StrCat("'input' holds ", QuoteJson(v), " at [", r, "][", c,
                                    "], which is not a token id (a non-negative integer)"));
      }
      const int64_t id = v.get<int64_t>();
      const size_t at = (r * static_cast<size_t>(longest) + c) * sizeof(int64_t);
      std::memcpy(ids.data() + at, &id, sizeof(id));
      if (mask) {
        const int64_t one = 1;
        std::memcpy(ones.data() + at, &one, sizeof(one));
      }
    }
  }
  auto add = [&](const char* name, std::string data) {
    auto* in = p->add_inputs();
    in->set_name(name);
    in->set_datatype("INT64");
    for (int64_t d : shape) in->add_shape(d);
    *p->add_raw_input_contents() = std::move(data);
  };
  add("input_ids", std::move(ids));
  if (mask) add("attention_mask", std::move(ones));
  return absl::OkStatus();
}

absl::StatusOr<Parsed> Parse(Engine& engine, const HttpRequest& request, const char** param) {
  INFER_ASSIGN_OR_RETURN(const json doc, ParseJson(request.body, "the request body"));
  if (!doc.is_object()) return Invalid("the request body is not a JSON object");
  Parsed out;
  *param = "model";
  auto model = doc.find("model");
  if (model == doc.end() || !model->is_string()) return Invalid("'model' (a string) is required");
  INFER_ASSIGN_OR_RETURN(const ModelSpec* spec, engine.GetModelSpec(model->get<std::string>()));
  const TensorSpec* embedding = FindEmbedding(*spec);
  if (embedding == nullptr) {
    return Invalid(absl::StrCat("model ", Quote(spec->name), " has no embedding output"));
  }
  out.output = embedding->name;
  *param = "encoding_format";
  if (auto f = doc.find("encoding_format"); f != doc.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) {
      return Invalid("'encoding_format' must be \"float\" or \"base64\"");
    }
    out.base64 = *f == "base64";
  }
  *param = "dimensions";
  if (auto d = doc.find("dimensions"); d != doc.end() && !d->is_null()) {
    const int64_t width = embedding->shape.empty() ? -1 : embedding->shape.back();
    if (!d->is_number_integer() || d->get<int64_t>() != width) {
      return Invalid(absl::StrCat("'dimensions' must be the model's embedding width, ", width,
                                  "; model ", Quote(spec->name), " cannot shorten its embeddings"));
    }
  }
  *param = "input";
  auto input = doc.find("input");
  if (input == doc.end()) return Invalid("'input' is required");
  inference::ModelInferRequest& p = out.proto;
  p.set_model_name(spec->name);
  if (input->is_string()) {
    INFER_RETURN_IF_ERROR(AddTexts(*input, *spec, &p));
  } else if (!input->is_array() || input->empty()) {
    return Invalid(
        "'input' must be a string, an array of strings, an array of token ids, or an "
        "array of arrays of token ids, and not empty");
  } else if (input->front().is_string()) {
    INFER_RETURN_IF_ERROR(AddTexts(*input, *spec, &p));
  } else {
    out.tokens = 0;
    INFER_RETURN_IF_ERROR(AddTokens(engine, *input, *spec, &p, &out.tokens));
  }
  p.add_outputs()->set_name(out.output);
  *param = nullptr;
  return out;
}

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

absl::StatusOr<EmbeddingsCall> DecodeEmbeddingsRequest(Engine& engine, const HttpRequest& request,
                                                       const char** param) {
  *param = nullptr;
  INFER_ASSIGN_OR_RETURN(Parsed parsed, Parse(engine, request, param));
  *param = "input";
  INFER_ASSIGN_OR_RETURN(InferRequest decoded, DecodeInferRequest(engine, &parsed.proto));
  *param = nullptr;
  return EmbeddingsCall{std::move(decoded), std::move(parsed.output), parsed.base64, parsed.tokens};
}

void HandleEmbeddings(Engine* engine, HttpRequest request, HttpReply reply) {
  const char* param = nullptr;
  absl::StatusOr<EmbeddingsCall> call = DecodeEmbeddingsRequest(*engine, request, &param);
  if (!call.ok()) return reply.Send(OpenAiError(call.status(), param));
  auto shared = std::make_shared<HttpReply>(std::move(reply));
  engine->Submit(std::move(call->request),
                 [shared, output = std::move(call->output), base64 = call->base64,
                  tokens = call->tokens](absl::StatusOr<InferResponse> r) {
                   if (!r.ok()) return shared->Send(OpenAiError(r.status()));
                   auto response = std::make_shared<InferResponse>(*std::move(r));
                   shared->SendFrom([response, output, base64, tokens] {
                     return Encode(*response, output, base64, tokens);
                   });
                 });
}

HttpResponse ListOpenAiModels(const Engine& engine, const std::string& model) {
  auto entry = [](const std::string& name) {
    return json{{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "infer"}};
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
