// Reading the fields of a tokenizer.json component, with errors that name
// the component and the field: a file that is not what it claims is refused
// at load, never half-read.
#ifndef INFER_MODELS_TEXT_JSON_FIELDS_H_
#define INFER_MODELS_TEXT_JSON_FIELDS_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace infer::text {

// The "type" of a component object ("" with an error when there is none).
inline absl::StatusOr<std::string> ComponentType(const nlohmann::json& j, const char* what) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(what, " is not an object"));
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has no \"type\""));
  }
  return it->get<std::string>();
}

inline absl::Status FieldError(const std::string& type, const char* field, const char* want) {
  return absl::InvalidArgumentError(
      absl::StrCat(type, ": field \"", field, "\" is missing or not ", want));
}

// A field that may be absent (then `fallback`).
inline absl::StatusOr<bool> OptionalBool(const nlohmann::json& j, const std::string& type,
                                         const char* field, bool fallback) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return FieldError(type, field, "a boolean");
  return it->get<bool>();
}

inline absl::StatusOr<std::string> RequiredString(const nlohmann::json& j, const std::string& type,
                                                  const char* field) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_string()) return FieldError(type, field, "a string");
  return it->get<std::string>();
}

inline absl::StatusOr<std::optional<std::string>> OptionalString(const nlohmann::json& j,
                                                                 const std::string& type,
                                                                 const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return FieldError(type, field, "a string");
  return std::optional<std::string>(it->get<std::string>());
}

inline absl::StatusOr<int64_t> OptionalInt(const nlohmann::json& j, const std::string& type,
                                           const char* field, int64_t fallback) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) return FieldError(type, field, "an integer");
  return it->get<int64_t>();
}

// The components of a Sequence: the array `field` of `j`, each element
// through `from_json` (the component's own factory, which returns
// StatusOr<std::unique_ptr<T>>); the first error is returned as it is.
template <typename T, typename FromJson>
absl::StatusOr<std::vector<std::unique_ptr<T>>> ComponentList(const nlohmann::json& j,
                                                              const std::string& type,
                                                              const char* field,
                                                              FromJson from_json) {
  auto list = j.find(field);
  if (list == j.end() || !list->is_array()) return FieldError(type, field, "an array");
  std::vector<std::unique_ptr<T>> parts;
  for (const nlohmann::json& part : *list) {
    absl::StatusOr<std::unique_ptr<T>> p = from_json(part);
    if (!p.ok()) return p.status();
    parts.push_back(*std::move(p));
  }
  return parts;
}

}  // namespace infer::text

#endif  // INFER_MODELS_TEXT_JSON_FIELDS_H_
