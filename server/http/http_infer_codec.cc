#include "server/http/http_infer_codec.h"

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "runtime/json_parse.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"
#include "server/http/http_json.h"

namespace infer {
namespace {

using nlohmann::json;

// Deeper "data" nesting than any shape has is refused before it is walked.
constexpr int kMaxDataDepth = 32;

absl::Status Invalid(absl::string_view what, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(what, " ", problem));
}

// Calls f(T{}) with the C type of `dtype` when JSON numbers or booleans can
// carry it; false (f not called) for BYTES, FP16 and BF16.
template <typename F>
bool WithNumericType(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kBool:
      f(bool{});
      return true;
    case DataType::kUint8:
      f(uint8_t{});
      return true;
    case DataType::kUint16:
      f(uint16_t{});
      return true;
    case DataType::kUint32:
      f(uint32_t{});
      return true;
    case DataType::kUint64:
      f(uint64_t{});
      return true;
    case DataType::kInt8:
      f(int8_t{});
      return true;
    case DataType::kInt16:
      f(int16_t{});
      return true;
    case DataType::kInt32:
      f(int32_t{});
      return true;
    case DataType::kInt64:
      f(int64_t{});
      return true;
    case DataType::kFp32:
      f(float{});
      return true;
    case DataType::kFp64:
      f(double{});
      return true;
    case DataType::kBytes:
    case DataType::kFp16:
    case DataType::kBf16:
      break;
  }
  return false;
}

// Leaves of a (possibly nested) JSON array, in row-major order.
absl::Status CollectLeaves(const json& data, int depth, const std::string& what,
                           std::vector<const json*>* leaves) {
  if (!data.is_array()) {
    leaves->push_back(&data);
    return absl::OkStatus();
  }
  if (depth >= kMaxDataDepth) {
    return Invalid(what, absl::StrCat("has 'data' nested deeper than ", kMaxDataDepth));
  }
  for (const json& v : data) INFER_RETURN_IF_ERROR(CollectLeaves(v, depth + 1, what, leaves));
  return absl::OkStatus();
}

template <typename T>
absl::Status AppendValue(const json& v, int64_t index, DataType dtype, const std::string& what,
                         std::string* out) {
  T value{};
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean())
      return Invalid(what, absl::StrCat("value at index ", index, " is not true or false"));
    value = v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    bool fits = false;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      fits = u <= static_cast<uint64_t>(std::numeric_limits<T>::max());
      value = static_cast<T>(u);
    } else if (v.is_number_integer()) {
      const int64_t s = v.get<int64_t>();
      fits = std::is_signed_v<T>
                 ? (s >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                    s <= static_cast<int64_t>(std::numeric_limits<T>::max()))
                 : (s >= 0 && static_cast<uint64_t>(s) <=
                                  static_cast<uint64_t>(std::numeric_limits<T>::max()));
      value = static_cast<T>(s);
    } else {
      return Invalid(what, absl::StrCat("value at index ", index, " is not an integer (datatype ",
                                        DataTypeName(dtype), ")"));
    }
    if (!fits) {
      return Invalid(what, absl::StrCat("value ", QuoteJson(v), " at index ", index,
                                        " does not fit ", DataTypeName(dtype)));
    }
  } else {
    if (!v.is_number()) {
      return Invalid(what, absl::StrCat("value at index ", index, " is not a number (datatype ",
                                        DataTypeName(dtype), ")"));
    }
    value = static_cast<T>(v.get<double>());
  }
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
  return absl::OkStatus();
}

template <typename T>
absl::Status AppendAll(const std::vector<const json*>& leaves, DataType dtype,
                       const std::string& what, std::string* out) {
  out->reserve(leaves.size() * sizeof(T));
  for (size_t i = 0; i < leaves.size(); ++i) {
    INFER_RETURN_IF_ERROR(AppendValue<T>(*leaves[i], static_cast<int64_t>(i), dtype, what, out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status JsonDataToTensorBytes(const json& data, DataType dtype,
                                   absl::Span<const int64_t> shape, const std::string& what,
                                   std::string* out) {
  INFER_ASSIGN_OR_RETURN(const int64_t count, ElementCount(shape, what));
  std::vector<const json*> leaves;
  INFER_RETURN_IF_ERROR(CollectLeaves(data, 0, what, &leaves));
  if (static_cast<int64_t>(leaves.size()) != count) {
    return Invalid(what, absl::StrCat("has ", leaves.size(), " values in 'data'; its shape ",
                                      ShapeToString(shape), " needs ", count));
  }
  if (dtype == DataType::kBytes) {
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!leaves[i]->is_string()) {
        return Invalid(what,
                       absl::StrCat("value at index ", i, " is not a string (datatype BYTES)"));
      }
      AppendBytesElement(leaves[i]->get_ref<const std::string&>(), out);
    }
    return absl::OkStatus();
  }
  absl::Status status;
  if (WithNumericType(dtype, [&](auto type) {
        status = AppendAll<decltype(type)>(leaves, dtype, what, out);
      })) {
    return status;
  }
  return Invalid(what, absl::StrCat("has datatype ", DataTypeName(dtype),
                                    ", which JSON cannot carry; send it as binary data "
                                    "(parameters.binary_data_size)"));
}

namespace {

// JsonTextBytes below `depth`.
int64_t TextBytes(const json& data, int depth) {
  if (data.is_string()) return 4 + static_cast<int64_t>(data.get_ref<const std::string&>().size());
  if (!data.is_array() || depth >= kMaxDataDepth) return 0;
  int64_t bytes = 0;
  for (const json& v : data) bytes += TextBytes(v, depth + 1);
  return bytes;
}

}  // namespace

int64_t JsonTextBytes(const json& data) { return TextBytes(data, 0); }

namespace {

template <typename T>
json ValuesAsJson(const Tensor& t) {
  const size_t n = t.data.size() / sizeof(T);
  json values = json::array();
  values.get_ref<json::array_t&>().reserve(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
    values.push_back(v);
  }
  return values;
}

// The tensor's values as a flat JSON array; null for FP16/BF16, which are
// always sent as binary.
json TensorData(const Tensor& t) {
  if (t.dtype == DataType::kBytes) {
    json values = json::array();
    absl::StatusOr<int64_t> count = ElementCount(t.shape, t.name);
    absl::StatusOr<std::vector<absl::string_view>> elements =
        count.ok() ? BytesElements(t, *count, t.name)
                   : absl::StatusOr<std::vector<absl::string_view>>(count.status());
    if (elements.ok()) {
      for (absl::string_view e : *elements) values.push_back(std::string(e));
    }
    return values;
  }
  json values = nullptr;
  WithNumericType(t.dtype, [&](auto type) { values = ValuesAsJson<decltype(type)>(t); });
  return values;
}

}  // namespace

RestBody EncodeRestInferResponse(const InferResponse& response, const RestOutputChoices& choices) {
  // Written by hand (values through nlohmann::json only for types other
  // than FP32), so that an embedding's floats print in their shortest form.
  std::string out =
      absl::StrCat(R"({"model_name":)", JsonString(response.model_name), R"(,"model_version":"1")");
  if (!response.id.empty()) absl::StrAppend(&out, R"(,"id":)", JsonString(response.id));
  out += R"(,"outputs":[)";
  // Appended after the JSON, in order, once its length is known.
  std::vector<const Tensor*> binary;
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& t = response.outputs[i];
    absl::StrAppend(&out, i > 0 ? "," : "", R"({"name":)", JsonString(t.name), R"(,"datatype":")",
                    DataTypeName(t.dtype), R"(","shape":)", DumpJson(json(t.shape)));
    bool as_binary = choices.all_binary || t.dtype == DataType::kFp16 ||
                     t.dtype == DataType::kBf16;  // JSON cannot carry them
    for (const auto& [name, flag] : choices.binary_outputs) {
      if (name == t.name) as_binary = flag || as_binary;
    }
    if (as_binary) {
      absl::StrAppend(&out, R"(,"parameters":{"binary_data_size":)", t.data.size(), "}}");
      binary.push_back(&t);
    } else if (t.dtype == DataType::kFp32) {
      out += R"(,"data":)";
      AppendJsonFloats(t.as<float>(), t.data.size() / sizeof(float), &out);
      out += "}";
    } else {
      absl::StrAppend(&out, R"(,"data":)", DumpJson(TensorData(t)), "}");
    }
  }
  out += "]}";
  RestBody body;
  body.json_length = out.size();
  body.binary = !binary.empty();
  body.content_type = body.binary ? "application/octet-stream" : "application/json";
  size_t total = out.size();
  for (const Tensor* t : binary) total += t->data.size();
  out.reserve(total);
  for (const Tensor* t : binary) out += t->data;
  body.body = std::move(out);
  return body;
}

}  // namespace infer
