// The model registry: a table of model families, each {backend name,
// accepted parameters, create}. A model repository's config.pbtxt names its
// family by `backend` and configures it with `parameters` (strings); the
// repository loader (server/kserve/model_repository.h) and embedders create
// models through CreateModel. Family-specific options travel as that
// family's parameters: nothing here names a family.
//
// Adding a family: its folder under models/ with its Model and a
// `const ModelFamily` describing it, and one line in the table of
// models/families.cc (with its declaration there).
//
// Thread-safe (the table is constant).
#ifndef INFER_MODELS_REGISTRY_H_
#define INFER_MODELS_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "models/model.h"
#include "models/precision.h"
#include "runtime/device_context.h"

namespace infer {

using ModelParams = absl::flat_hash_map<std::string, std::string>;

// Triton's `optimization.cuda` block: CUDA Graphs for a family that
// captures them on a GPU (ignored by the others, and on the CPU).
struct CudaGraphsConfig {
  std::optional<bool> enabled;  // unset: the family's default
  int64_t max_tokens = 0;       // 0: the family's default
};

// What a family's create gets: the config's fields every family shares,
// and its own parameters (only keys it accepts; the registry checked).
struct ModelOptions {
  std::string name;
  // The model's folder in the repository (where a checkpoint may live);
  // may be empty for a model that needs none.
  std::string model_dir;
  // A family that cannot compute it refuses with INVALID_ARGUMENT (or
  // FAILED_PRECONDITION when the device cannot).
  Precision precision = Precision::kAuto;
  // True when `precision` is the server's default (infer-server
  // --precision) rather than the config's: a family that computes in one
  // precision only then keeps its own instead of refusing
  // (CheckFixedPrecision).
  bool precision_is_server_default = false;
  ModelParams params;
  CudaGraphsConfig cuda_graphs;

  // True when the config itself named `precision` (neither auto nor the
  // server's default): what a family that computes one precision only must
  // honour or refuse.
  bool PrecisionNamed() const {
    return precision != Precision::kAuto && !precision_is_server_default;
  }
};

struct ModelFamily {
  // The config.pbtxt `backend` that selects it.
  const char* backend;
  // The parameters it accepts; any other is refused before create runs.
  std::vector<std::string> parameters;
  // The model, borrowing `context` (which outlives it). INVALID_ARGUMENT
  // for a malformed value, naming the key and what is accepted.
  absl::StatusOr<std::unique_ptr<Model>> (*create)(const ModelOptions& options,
                                                   const DeviceContext& context);
};

// Every registered family (models/families.cc), in the table's order.
absl::Span<const ModelFamily* const> ModelFamilies();
// The family `backend` names, or null.
const ModelFamily* FindModelFamily(absl::string_view backend);
// The backends, sorted.
std::vector<std::string> RegisteredBackends();

// Creates the model `backend` serves under options.name. INVALID_ARGUMENT
// for an unknown backend (naming the registered ones) or a parameter the
// family does not accept (naming those it does); otherwise the family's
// create.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(absl::string_view backend,
                                                   const ModelOptions& options,
                                                   const DeviceContext& context);

// Helpers for families' create functions: the parameter `key`, when given,
// as an integer / true or false / one of `choices`; INVALID_ARGUMENT naming
// the key and the value otherwise.
absl::Status ParseIntParam(const ModelParams& params, const std::string& key, int64_t* out);
absl::Status ParseBoolParam(const ModelParams& params, const std::string& key, bool* out);
// A family that computes in one precision only accepts that, auto, or any
// server default (options.precision_is_server_default); INVALID_ARGUMENT
// naming both otherwise.
absl::Status CheckFixedPrecision(absl::string_view backend, const ModelOptions& options,
                                 Precision computed);

}  // namespace infer

#endif  // INFER_MODELS_REGISTRY_H_
