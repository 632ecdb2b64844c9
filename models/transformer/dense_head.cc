#include "models/transformer/dense_head.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/checkpoint.h"
#include "models/transformer/cpu_kernels.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

// The class name of a module type: the part after the last dot.
std::string ClassName(const std::string& type) {
  const size_t dot = type.rfind('.');
  return dot == std::string::npos ? type : type.substr(dot + 1);
}

// Where each module kind may stand: Transformer, Pooling, Dense..., Normalize.
// A SparseEncoder's MLMTransformer and SpladePooling stand where
// Transformer and Pooling do (models/transformer/splade_head.h computes them).
int Stage(const std::string& kind) {
  if (kind == "Transformer" || kind == "MLMTransformer") return 0;
  if (kind == "Pooling" || kind == "SpladePooling") return 1;
  if (kind == "Dense") return 2;
  if (kind == "Normalize") return 3;
  return -1;
}

absl::StatusOr<DenseHead::Activation> ActivationFromName(const std::string& name,
                                                         const std::string& where) {
  const std::string kind = ClassName(name);
  if (kind == "Tanh") return DenseHead::Activation::kTanh;
  if (kind == "Identity") return DenseHead::Activation::kIdentity;
  if (kind == "ReLU") return DenseHead::Activation::kRelu;
  return absl::InvalidArgumentError(absl::StrCat(where, ": activation_function '", name,
                                                 "' is not computed; Tanh, Identity and ReLU are"));
}

const char* ActivationName(DenseHead::Activation a) {
  return a == DenseHead::Activation::kTanh   ? "tanh"
         : a == DenseHead::Activation::kRelu ? "relu"
                                             : "identity";
}

absl::StatusOr<int64_t> PositiveInt(const nlohmann::json& j, const char* key,
                                    const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 1 ||
      j[key].get<int64_t>() > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", key, "' must be an integer from 1 to 1048576"));
  }
  return j[key].get<int64_t>();
}

absl::StatusOr<DenseHead::Layer> LoadLayer(const std::string& dir, const std::string& path) {
  const std::string folder = dir + "/" + path;
  const std::string config_path = folder + "/config.json";
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> config, ParseOptionalJsonFile(config_path));
  if (!config.has_value() || !config->is_object()) {
    return absl::NotFoundError(absl::StrCat(config_path, " is missing or not a JSON object"));
  }
  DenseHead::Layer layer;
  layer.path = path;
  INFER_ASSIGN_OR_RETURN(layer.in, PositiveInt(*config, "in_features", config_path));
  INFER_ASSIGN_OR_RETURN(layer.out, PositiveInt(*config, "out_features", config_path));
  const bool bias = !config->contains("bias") || (*config)["bias"] == true;
  const std::string activation =
      config->contains("activation_function") && (*config)["activation_function"].is_string()
          ? (*config)["activation_function"].get<std::string>()
          : "torch.nn.modules.activation.Tanh";  // sentence-transformers' default
  INFER_ASSIGN_OR_RETURN(layer.activation, ActivationFromName(activation, config_path));
  const std::string weights_path = folder + "/model.safetensors";
  if (!std::filesystem::exists(weights_path)) {
    return absl::NotFoundError(absl::StrCat(
        weights_path, " not found",
        std::filesystem::exists(folder + "/pytorch_model.bin")
            ? " (the module has pytorch_model.bin, which is not read: save it as safetensors)"
            : ""));
  }
  INFER_ASSIGN_OR_RETURN(auto tensors, ReadSafetensors(weights_path));
  auto take = [&](const char* name, std::vector<int64_t> shape,
                  std::vector<float>* into) -> absl::Status {
    auto it = tensors.find(name);
    if (it == tensors.end() || it->second.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(weights_path, ": '", name, "' must be [",
                                                     absl::StrJoin(shape, ", "), "]",
                                                     it == tensors.end() ? " (absent)" : ""));
    }
    *into = std::move(it->second.values);
    return absl::OkStatus();
  };
  INFER_RETURN_IF_ERROR(take("linear.weight", {layer.out, layer.in}, &layer.weight));
  if (bias) INFER_RETURN_IF_ERROR(take("linear.bias", {layer.out}, &layer.bias));
  return layer;
}

}  // namespace

absl::StatusOr<DenseHead> DenseHead::Load(const std::string& dir, int64_t width) {
  DenseHead head;
  head.width_ = width;
  const std::string path = dir + "/modules.json";
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> parsed, ParseOptionalJsonFile(path));
  if (!parsed.has_value() || !parsed->is_array()) return head;
  int stage = -1;  // of the last module seen
  for (const nlohmann::json& module : *parsed) {
    if (!module.is_object() || !module.contains("type") || !module["type"].is_string()) continue;
    const std::string type = module["type"].get<std::string>();
    const std::string where = module.contains("path") && module["path"].is_string()
                                  ? absl::StrCat(" (", module["path"].get<std::string>(), ")")
                                  : "";
    const int at = Stage(ClassName(type));
    if (at < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " lists the module ", type, where,
          "; only Transformer, Pooling, Dense and Normalize are computed (and SPLADE's "
          "MLMTransformer and SpladePooling), so its "
          "embeddings would differ"));
    }
    if (at < stage || (at == stage && at != 2)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " lists ", type, where,
                       " out of the order Transformer, Pooling, Dense..., Normalize"));
    }
    stage = at;
    if (at != 2) continue;
    const std::string module_path = module.contains("path") && module["path"].is_string()
                                        ? module["path"].get<std::string>()
                                        : "";
    const std::filesystem::path p(module_path);
    if (module_path.empty() || p.is_absolute() || std::find(p.begin(), p.end(), "..") != p.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": the Dense module's path '",
                                                     module_path,
                                                     "' must be a folder inside the model folder"));
    }
    INFER_ASSIGN_OR_RETURN(Layer layer, LoadLayer(dir, module_path));
    const int64_t takes = head.out_features();
    if (layer.in != takes) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/", module_path,
                                                     "/config.json: in_features ", layer.in,
                                                     " but the module before gives ", takes));
    }
    head.layers_.push_back(std::move(layer));
  }
  return head;
}

int64_t DenseHead::WeightBytes() const {
  int64_t bytes = 0;
  for (const Layer& l : layers_) {
    bytes += static_cast<int64_t>((l.weight.size() + l.bias.size()) * sizeof(float));
  }
  return bytes;
}

std::vector<int64_t> DenseHead::IntermediateWidths() const {
  std::vector<int64_t> widths;
  for (size_t i = 0; i + 1 < layers_.size(); ++i) widths.push_back(layers_[i].out);
  return widths;
}

void DenseHead::Apply(const float* x, int64_t rows, const std::vector<float*>& between, float* y,
                      bool normalize) const {
  const float* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    float* out = i + 1 == layers_.size() ? y : between[i];
    for (int64_t r = 0; r < rows; ++r) {
      const float* v = in + r * l.in;
      for (int64_t o = 0; o < l.out; ++o) {
        const float* w = l.weight.data() + o * l.in;
        float sum = 0;
        for (int64_t k = 0; k < l.in; ++k) sum += w[k] * v[k];
        if (!l.bias.empty()) sum += l.bias[o];
        switch (l.activation) {
          case Activation::kTanh:
            sum = std::tanh(sum);
            break;
          case Activation::kRelu:
            sum = std::max(sum, 0.0f);
            break;
          case Activation::kIdentity:
            break;
        }
        out[r * l.out + o] = sum;
      }
    }
    in = out;
  }
  if (normalize) cpu::L2NormalizeRows(y, rows, out_features());
}

std::string DenseHead::Describe() const {
  return absl::StrJoin(layers_, ", ", [](std::string* out, const Layer& l) {
    absl::StrAppend(out, l.path, " (", l.in, " -> ", l.out, ", ", ActivationName(l.activation),
                    ")");
  });
}

}  // namespace infer
