#include "models/registry.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace infer {

const ModelFamily* FindModelFamily(absl::string_view backend) {
  for (const ModelFamily* family : ModelFamilies()) {
    if (backend == family->backend) return family;
  }
  return nullptr;
}

std::vector<std::string> RegisteredBackends() {
  std::vector<std::string> names;
  for (const ModelFamily* family : ModelFamilies()) names.emplace_back(family->backend);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(absl::string_view backend,
                                                   const ModelOptions& options,
                                                   const DeviceContext& context) {
  const ModelFamily* family = FindModelFamily(backend);
  if (family == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown backend '", backend,
                     "'; built-in backends: ", absl::StrJoin(RegisteredBackends(), ", ")));
  }
  // In sorted order, so that the message does not depend on the map's.
  std::vector<std::string> keys;
  for (const auto& [key, value] : options.params) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    const auto& known = family->parameters;
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    if (known.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("backend '", backend, "' takes no parameters; got '", key, "'"));
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown parameter '", key, "' for backend '",
                                                   backend,
                                                   "'; known: ", absl::StrJoin(known, ", ")));
  }
  return family->create(options, context);
}

absl::Status ParseIntParam(const ModelParams& params, const std::string& key, int64_t* out) {
  auto it = params.find(key);
  if (it == params.end()) return absl::OkStatus();
  if (!absl::SimpleAtoi(it->second, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", key, "' = '", it->second, "' is not an integer"));
  }
  return absl::OkStatus();
}

absl::Status ParseBoolParam(const ModelParams& params, const std::string& key, bool* out) {
  auto it = params.find(key);
  if (it == params.end()) return absl::OkStatus();
  if (it->second != "true" && it->second != "false") {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", key, "' = '", it->second, "' is not true or false"));
  }
  *out = it->second == "true";
  return absl::OkStatus();
}

absl::Status CheckFixedPrecision(absl::string_view backend, const ModelOptions& options,
                                 Precision computed) {
  if (!options.PrecisionNamed() || options.precision == computed) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("precision '", PrecisionName(options.precision),
                                                 "': backend '", backend, "' computes ",
                                                 PrecisionName(computed), " only"));
}

}  // namespace infer
