#include "server/http/http_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace infer {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

nlohmann::json Scalar(const Message& m, const Reflection* r, const FieldDescriptor* f, int index) {
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

}  // namespace

nlohmann::json ProtoToJson(const Message& message) {
  nlohmann::json out = nlohmann::json::object();
  const auto* descriptor = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* f = descriptor->field(i);
    if (f->is_map()) {
      nlohmann::json map = nlohmann::json::object();
      const FieldDescriptor* key = f->message_type()->map_key();
      const FieldDescriptor* value = f->message_type()->map_value();
      for (int j = 0; j < r->FieldSize(message, f); ++j) {
        const Message& entry = r->GetRepeatedMessage(message, f, j);
        const nlohmann::json k = Scalar(entry, entry.GetReflection(), key, -1);
        map[k.is_string() ? k.get<std::string>() : k.dump()] =
            Scalar(entry, entry.GetReflection(), value, -1);
      }
      out[f->name()] = std::move(map);
    } else if (f->is_repeated()) {
      nlohmann::json list = nlohmann::json::array();
      for (int j = 0; j < r->FieldSize(message, f); ++j) list.push_back(Scalar(message, r, f, j));
      out[f->name()] = std::move(list);
    } else if (f->containing_oneof() != nullptr ||
               f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(message, f)) out[f->name()] = Scalar(message, r, f, -1);
    } else {
      out[f->name()] = Scalar(message, r, f, -1);
    }
  }
  return out;
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
      return 500;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    default:  // INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, ALREADY_EXISTS,
              // ABORTED, CANCELLED, UNKNOWN: Triton answers them 400
      return 400;
  }
}

void AppendJsonFloat(float value, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, r.ptr);
}

void AppendJsonFloats(const float* values, size_t n, std::string* out) {
  out->reserve(out->size() + n * 12 + 2);
  out->push_back('[');
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonFloat(values[i], out);
  }
  out->push_back(']');
}

std::string JsonString(const std::string& s) { return DumpJson(nlohmann::json(s)); }

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<bool> BoolField(const nlohmann::json& doc, const char* key, bool otherwise) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return otherwise;
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be true or false"));
  }
  return it->get<bool>();
}

absl::StatusOr<std::string> StringField(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::string();
  if (!it->is_string())
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be a string"));
  return it->get<std::string>();
}

absl::Status TruncationFields(const nlohmann::json& doc, std::optional<bool>* truncate,
                              bool* left) {
  if (auto t = doc.find("truncate"); t != doc.end() && !t->is_null()) {
    if (!t->is_boolean()) return absl::InvalidArgumentError("'truncate' must be true or false");
    *truncate = t->get<bool>();
  }
  *left = false;
  if (auto t = doc.find("truncation_direction"); t != doc.end() && !t->is_null()) {
    if (*t == "left" || *t == "Left") {
      *left = true;
    } else if (*t != "right" && *t != "Right") {
      return absl::InvalidArgumentError("'truncation_direction' must be \"left\" or \"right\"");
    }
  }
  return absl::OkStatus();
}

}  // namespace infer
