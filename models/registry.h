// Built-in model implementations, created by backend name from string
// parameters (as read from a model repository's config). Thread-safe.
#ifndef INFER_MODELS_REGISTRY_H_
#define INFER_MODELS_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/bert/bert_encoder.h"
#include "models/model.h"
#include "models/precision.h"
#include "runtime/device_context.h"

namespace infer {

using ModelParams = absl::flat_hash_map<std::string, std::string>;

// What a model's config says beyond its parameters.
struct BuiltinModelOptions {
  // The model's folder in the repository (where a checkpoint may live).
  std::string model_dir;
  // The config's (models/precision.h); a backend that cannot compute it
  // refuses with INVALID_ARGUMENT (or FAILED_PRECONDITION when the device
  // cannot).
  Precision precision = Precision::kAuto;
  // CUDA Graphs: used by the bert backend on a GPU, ignored elsewhere.
  BertGraphOptions cuda_graphs;
};

// Creates the model `backend` serves under `name`. INVALID_ARGUMENT for an
// unknown backend, an unknown parameter or a malformed value (each naming
// the key and what is accepted). The context is borrowed and must outlive
// the model.
absl::StatusOr<std::unique_ptr<Model>> CreateBuiltinModel(
    absl::string_view backend, const std::string& name, const ModelParams& params,
    const DeviceContext& context, const BuiltinModelOptions& options = BuiltinModelOptions());

std::vector<std::string> BuiltinBackends();

}  // namespace infer

#endif  // INFER_MODELS_REGISTRY_H_
