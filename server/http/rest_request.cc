#include "server/http/rest_request.h"

#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/json_parse.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"
#include "server/kserve/input_checks.h"
#include "server/kserve/proto_request.h"

namespace infer {
namespace {

using nlohmann::json;

absl::Status Invalid(absl::string_view what, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(what, " ", problem));
}

bool BoolParameter(const json& object, const char* name) {
  if (!object.is_object()) return false;
  auto p = object.find("parameters");
  if (p == object.end() || !p->is_object()) return false;
  auto v = p->find(name);
  return v != p->end() && v->is_boolean() && v->get<bool>();
}

absl::StatusOr<std::string> StringField(const json& object, const char* name,
                                        absl::string_view what, bool required) {
  auto it = object.find(name);
  if (it == object.end()) {
    if (required) return Invalid(what, absl::StrCat("has no '", name, "'"));
    return std::string();
  }
  if (!it->is_string()) return Invalid(what, absl::StrCat("'", name, "' is not a string"));
  return it->get<std::string>();
}

}  // namespace

absl::Status RestRequestSource::Declare(const ModelSpec&, DeclaredRequest* declared) {
  body_ = std::move(request_->body);
  size_t header_bytes = body_.size();
  if (absl::string_view json_length = request_->Header("inference-header-content-length");
      !json_length.empty()) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(json_length, &n) || n > body_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Inference-Header-Content-Length ", Quote(json_length),
                       " is not a number of bytes within the body's ", body_.size()));
    }
    header_bytes = static_cast<size_t>(n);
  }
  INFER_ASSIGN_OR_RETURN(
      doc_, ParseJson(absl::string_view(body_.data(), header_bytes), "the request body"));
  if (!doc_.is_object()) return absl::InvalidArgumentError("the request body is not a JSON object");
  INFER_ASSIGN_OR_RETURN(id_, StringField(doc_, "id", "the request", false));
  if (auto p = doc_.find("parameters"); p != doc_.end()) {
    if (!p->is_object()) return absl::InvalidArgumentError("'parameters' is not a JSON object");
    for (const auto& [key, value] : p->items()) {
      if (IsTextParameter(key)) {
        const bool flag = value.is_boolean() && value.get<bool>();
        // An integer past int64 is refused as not positive.
        const int64_t number =
            !value.is_number_integer() ? -1
            : value.is_number_unsigned() &&
                    value.get<uint64_t>() >
                        static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                ? -1
                : value.get<int64_t>();
        INFER_RETURN_IF_ERROR(
            ApplyTextParameter(key, value.is_boolean() ? &flag : nullptr,
                               value.is_string() ? &value.get_ref<const std::string&>() : nullptr,
                               value.is_number_integer() ? &number : nullptr, &text_));
        continue;
      }
      if (!IsSchedulingParameter(key)) continue;  // Triton ignores what it does not know
      if (!value.is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' must be an integer"));
      }
      if (value.is_number_unsigned() &&
          value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return SchedulingParameterNotAnInteger(key);
      }
      scheduling_.emplace_back(key, value.get<int64_t>());
    }
    choices_->all_binary = BoolParameter(doc_, "binary_data_output");
  }
  auto inputs = doc_.find("inputs");
  if (inputs == doc_.end() || !inputs->is_array()) {
    return absl::InvalidArgumentError("the request has no 'inputs' array");
  }
  size_t binary_offset = header_bytes;
  inputs_.reserve(inputs->size());
  for (size_t i = 0; i < inputs->size(); ++i) {
    const json& in = (*inputs)[i];
    if (!in.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "] is not a JSON object"));
    }
    Input& input = inputs_.emplace_back();
    INFER_ASSIGN_OR_RETURN(input.name,
                           StringField(in, "name", absl::StrCat("inputs[", i, "]"), true));
    const std::string what = absl::StrCat("input ", Quote(input.name));
    INFER_ASSIGN_OR_RETURN(input.datatype, StringField(in, "datatype", what, true));
    auto shape = in.find("shape");
    if (shape == in.end() || !shape->is_array()) return Invalid(what, "has no 'shape' array");
    input.shape.reserve(shape->size());
    for (const json& d : *shape) {
      if (!d.is_number_integer()) {
        return Invalid(what, "has a 'shape' value that is not an integer");
      }
      input.shape.push_back(d.get<int64_t>());
    }
    auto params = in.find("parameters");
    auto size =
        params != in.end() && params->is_object() ? params->find("binary_data_size") : in.end();
    if (params != in.end() && params->is_object() && size != params->end()) {
      if (!size->is_number_unsigned() || size->get<uint64_t>() > body_.size() - binary_offset) {
        return Invalid(what, absl::StrCat("has binary_data_size ", QuoteJson(*size), " but ",
                                          body_.size() - binary_offset,
                                          " bytes of binary data are left in the body"));
      }
      input.offset = binary_offset;
      input.size = static_cast<size_t>(size->get<uint64_t>());
      binary_offset += input.size;
    } else {
      auto data = in.find("data");
      if (data == in.end()) {
        return Invalid(what, "has neither 'data' nor parameters.binary_data_size");
      }
      input.data = &*data;
    }
  }
  if (binary_offset != body_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body holds ", body_.size() - binary_offset,
                     " bytes of binary data past the inputs' binary_data_size values"));
  }
  if (auto outputs = doc_.find("outputs"); outputs != doc_.end()) {
    if (!outputs->is_array()) return absl::InvalidArgumentError("'outputs' is not an array");
    for (size_t i = 0; i < outputs->size(); ++i) {
      const json& o = (*outputs)[i];
      if (!o.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat("outputs[", i, "] is not a JSON object"));
      }
      INFER_ASSIGN_OR_RETURN(std::string name,
                             StringField(o, "name", absl::StrCat("outputs[", i, "]"), true));
      outputs_.push_back(name);
      choices_->binary_outputs.emplace_back(std::move(name), BoolParameter(o, "binary_data"));
    }
  }
  INFER_RETURN_IF_ERROR(CheckVersion(model_, version_));
  for (const Input& input : inputs_) {
    declared->inputs.push_back({input.name, input.shape});
    if (input.datatype != "BYTES") continue;
    declared->text_bytes +=
        input.data != nullptr ? JsonTextBytes(*input.data) : static_cast<int64_t>(input.size);
  }
  return absl::OkStatus();
}

absl::Status RestRequestSource::Decode(const ModelSpec&, InferRequest* request) {
  request->id = std::move(id_);
  request->inputs.reserve(inputs_.size());
  for (Input& input : inputs_) {
    const std::string what = absl::StrCat("input ", Quote(input.name));
    Tensor t;
    t.name = std::move(input.name);
    INFER_ASSIGN_OR_RETURN(t.dtype, InputDataType(input.datatype, what));
    t.shape = std::move(input.shape);
    INFER_RETURN_IF_ERROR(ElementCount(t.shape, what).status());
    if (input.data != nullptr) {
      INFER_RETURN_IF_ERROR(JsonDataToTensorBytes(*input.data, t.dtype, t.shape, what, &t.data));
    } else {
      if (t.dtype != DataType::kBytes) {
        INFER_RETURN_IF_ERROR(CheckRawInputSize(t.dtype, t.shape, input.size, what));
      }
      t.data.assign(body_, input.offset, input.size);
    }
    request->inputs.push_back(std::move(t));
  }
  request->requested_outputs = std::move(outputs_);
  for (const auto& [key, value] : scheduling_) {
    INFER_RETURN_IF_ERROR(ApplySchedulingParameter(key, value, request));
  }
  request->truncate = text_.truncate;
  request->truncate_left = text_.truncate_left;
  request->prompt_name = text_.prompt_name;
  request->normalize = text_.normalize;
  request->dimensions = text_.dimensions;
  // Decoded: the body and its JSON are not needed while the request waits.
  doc_ = json();
  std::string().swap(body_);
  return absl::OkStatus();
}

}  // namespace infer
