#include "models/transformer/dense_head.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/checkpoint.h"
#include "models/simd_math.h"
#include "models/transformer/cpu_kernels.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

// Σ_k w[k] · v[k] in one fixed order whatever the CPU: 16 running sums
// (lane j takes k ≡ j mod 16; a GCC vector, so independent chains instead
// of one serial one), the remainder into lanes 0, 1, ..., then the lanes
// added pairwise. Compiled for AVX-512, AVX2 and the baseline below, the
// same operations in the same order (this file is compiled with
// -ffp-contract=off: no product is fused into an FMA where the target has
// them), so the same bits on every CPU; written as 16 / W vectors of W
// lanes, one register each on the target compiled for.
template <int W>
INFER_SIMD_INLINE float Dot(const float* w, const float* v, int64_t n) {
  // memcpy rather than simd::Load, whose by-value vectors the baseline's
  // ABI would pass in memory.
  using F = typename cpu::simd::Lanes<W>::F;
  constexpr int kParts = 16 / W;
  F acc[kParts] = {};
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    for (int p = 0; p < kParts; ++p) {
      F a, b;
      __builtin_memcpy(&a, w + k + p * W, sizeof a);
      __builtin_memcpy(&b, v + k + p * W, sizeof b);
      acc[p] += a * b;
    }
  }
  float lanes[16];
  __builtin_memcpy(lanes, acc, sizeof lanes);
  for (int j = 0; k < n; ++k, ++j) lanes[j] += w[k] * v[k];
  for (int width = 8; width >= 1; width /= 2) {
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

// y[r][o] = Dot(w[o], x[r]) for a layer's [out, in] weights: weight row
// by weight row, each against every input row while it is in cache.
template <int W>
INFER_SIMD_INLINE void Products(const float* x, int64_t rows, const float* w, int64_t in,
                                int64_t out, float* y) {
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t r = 0; r < rows; ++r) y[r * out + o] = Dot<W>(w + o * in, x + r * in, in);
  }
}
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void ProductsAvx512(
    const float* x, int64_t rows, const float* w, int64_t in, int64_t out, float* y) {
  Products<16>(x, rows, w, in, out, y);
}
__attribute__((target("avx2,fma"))) void ProductsAvx2(const float* x, int64_t rows, const float* w,
                                                      int64_t in, int64_t out, float* y) {
  Products<8>(x, rows, w, in, out, y);
}
void ProductsBaseline(const float* x, int64_t rows, const float* w, int64_t in, int64_t out,
                      float* y) {
  Products<4>(x, rows, w, in, out, y);
}

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
  if (kind == "GELU") return DenseHead::Activation::kGelu;
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": activation_function '", name,
                   "' is not computed; Tanh, Identity, ReLU and GELU are"));
}

const char* ActivationName(DenseHead::Activation a) {
  return a == DenseHead::Activation::kTanh   ? "tanh"
         : a == DenseHead::Activation::kRelu ? "relu"
         : a == DenseHead::Activation::kGelu ? "gelu"
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

absl::StatusOr<DenseHead> DenseHead::Load(const std::string& dir, int64_t width,
                                          const std::string& dense_path) {
  DenseHead head;
  head.width_ = width;
  const std::string path = dir + "/modules.json";
  INFER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> parsed, ParseOptionalJsonFile(path));
  auto inside = [&](const std::string& module_path) -> absl::Status {
    const std::filesystem::path p(module_path);
    if (module_path.empty() || p.is_absolute() || std::find(p.begin(), p.end(), "..") != p.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": the Dense module's path '",
                                                     module_path,
                                                     "' must be a folder inside the model folder"));
    }
    return absl::OkStatus();
  };
  if (!dense_path.empty()) {
    INFER_RETURN_IF_ERROR(inside(dense_path));
    int listed = 0;
    if (parsed.has_value() && parsed->is_array()) {
      for (const nlohmann::json& module : *parsed) {
        if (module.is_object() && module.contains("type") && module["type"].is_string() &&
            ClassName(module["type"].get<std::string>()) == "Dense") {
          ++listed;
        }
      }
    }
    if (listed > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " lists ", listed, " Dense modules; --dense-path replaces one, not several"));
    }
    INFER_ASSIGN_OR_RETURN(Layer layer, LoadLayer(dir, dense_path));
    if (layer.in != width) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/", dense_path,
                                                     "/config.json: in_features ", layer.in,
                                                     " but pooling gives ", width));
    }
    head.layers_.push_back(std::move(layer));
    if (!parsed.has_value() || !parsed->is_array()) return head;
  }
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
    if (at != 2 || !dense_path.empty()) continue;  // the one Dense: loaded above
    const std::string module_path = module.contains("path") && module["path"].is_string()
                                        ? module["path"].get<std::string>()
                                        : "";
    INFER_RETURN_IF_ERROR(inside(module_path));
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
  static const auto products = [] {
    switch (cpu::DetectSimdLevel()) {
      case cpu::SimdLevel::kAvx512:
        return ProductsAvx512;
      case cpu::SimdLevel::kAvx2:
        return ProductsAvx2;
      case cpu::SimdLevel::kBaseline:
        break;
    }
    return ProductsBaseline;
  }();
  const float* in = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    float* out = i + 1 == layers_.size() ? y : between[i];
    products(in, rows, l.weight.data(), l.in, l.out, out);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < l.out; ++o) {
        float sum = out[r * l.out + o];
        if (!l.bias.empty()) sum += l.bias[o];
        switch (l.activation) {
          case Activation::kTanh:
            sum = std::tanh(sum);
            break;
          case Activation::kRelu:
            sum = std::max(sum, 0.0f);
            break;
          case Activation::kGelu:
            sum = static_cast<float>(0.5 * sum * (1.0 + std::erf(sum * M_SQRT1_2)));
            break;
          case Activation::kIdentity:
            break;
        }
        out[r * l.out + o] = sum;
      }
      if (!l.norm_gamma.empty()) Normalize(l, out + r * l.out);
    }
    in = out;
  }
  if (normalize) cpu::L2NormalizeRows(y, rows, out_features());
}

void DenseHead::Normalize(const Layer& l, float* row) {
  double mean = 0, var = 0;
  for (int64_t o = 0; o < l.out; ++o) mean += row[o];
  mean /= static_cast<double>(l.out);
  for (int64_t o = 0; o < l.out; ++o) var += (row[o] - mean) * (row[o] - mean);
  const double inv = 1.0 / std::sqrt(var / static_cast<double>(l.out) + l.norm_eps);
  for (int64_t o = 0; o < l.out; ++o) {
    row[o] = static_cast<float>((row[o] - mean) * inv * l.norm_gamma[o] +
                                (l.norm_beta.empty() ? 0.0 : l.norm_beta[o]));
  }
}

std::vector<float> DenseHead::Apply(const float* x, int64_t rows, bool normalize) const {
  std::vector<std::vector<float>> between;
  std::vector<float*> between_ptrs;
  for (int64_t w : IntermediateWidths()) {
    between.emplace_back(rows * w);
    between_ptrs.push_back(between.back().data());
  }
  std::vector<float> y(rows * out_features());
  Apply(x, rows, between_ptrs, y.data(), normalize);
  return y;
}

std::string DenseHead::Describe() const {
  return absl::StrJoin(layers_, ", ", [](std::string* out, const Layer& l) {
    absl::StrAppend(out, l.path, " (", l.in, " -> ", l.out, ", ", ActivationName(l.activation),
                    l.norm_gamma.empty() ? "" : ", LayerNorm", ")");
  });
}

}  // namespace infer
