// The identity family in the model registry (models/registry.h).
#include <memory>

#include "absl/strings/str_cat.h"
#include "models/identity/identity.h"
#include "models/registry.h"

namespace infer {
namespace {

absl::StatusOr<std::unique_ptr<Model>> Create(const ModelOptions& options, const DeviceContext&) {
  if (options.PrecisionNamed()) {
    return absl::InvalidArgumentError(absl::StrCat("precision '", PrecisionName(options.precision),
                                                   "': backend 'identity' computes nothing"));
  }
  return std::unique_ptr<Model>(new IdentityModel(options.name));
}

}  // namespace

extern const ModelFamily kIdentityFamily;
const ModelFamily kIdentityFamily = {"identity", {}, Create};

}  // namespace infer
