// DenseHead: the sentence-transformers modules that follow pooling, read
// from a model folder's modules.json. sentence-transformers runs the
// modules in order: Transformer, Pooling, then any Dense projections
// (y = act(W x + b), e.g. LaBSE's 2_Dense), then Normalize. The encoder
// (models/transformer/encoder.h) computes the first two; this computes the
// Dense modules on the pooled rows.
//
// Module types are matched by their class name, the last part of the
// dotted type: older releases write "sentence_transformers.models.Dense",
// sentence-transformers 6.2 "sentence_transformers.base.modules.dense.Dense".
// A module of another type (a CNN, an LSTM, a custom module) or out
// of that order is refused at load, naming it: the embeddings would differ.
// A Dense module's weights are its folder's model.safetensors (linear.weight
// [out, in], linear.bias [out]); its activation is Tanh (the default),
// Identity, ReLU or GELU (erf).
//
// Written here rather than with oneDNN: one small matrix-vector product per
// pooled row (e.g. 768 x 768), next to a transformer's whole forward pass
// per token; plain loops (16 running sums per dot product) keep it exact
// FP32 in a fixed order on every CPU. It runs on the host whatever the
// encoder's device (the served model applies it after the download).
//
// Thread-safety: immutable after Load.
#ifndef INFER_MODELS_TRANSFORMER_DENSE_HEAD_H_
#define INFER_MODELS_TRANSFORMER_DENSE_HEAD_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace infer {

class DenseHead {
 public:
  // kGelu: the erf form (torch's nn.GELU, transformers' "gelu").
  enum class Activation { kIdentity, kTanh, kRelu, kGelu };
  struct Layer {
    int64_t in = 0, out = 0;
    std::vector<float> weight;  // [out, in]
    std::vector<float> bias;    // [out], or empty
    Activation activation = Activation::kTanh;
    std::string path;  // the module's folder, for logs
    // A LayerNorm over the activated row (ModernBERT's classification
    // head): γ [out], β [out] or empty, ε; none where norm_gamma is empty.
    std::vector<float> norm_gamma, norm_beta;
    float norm_eps = 1e-5f;
  };

  // The Dense modules of `dir`/modules.json, in order; none when the file is
  // absent or lists none. `width` is what pooling gives (the hidden size):
  // the first module must take it, and each the previous one's output.
  // INVALID_ARGUMENT naming the file for an unsupported module, a module out
  // of order, a width that does not chain, an unknown activation, or
  // weights of the wrong shape; NOT_FOUND for a missing weights file
  // (a pytorch_model.bin alone is named: it is not read).
  // `dense_path` (TEI's --dense-path), when given, is the folder of the one
  // Dense module instead of the one modules.json lists (or the only one,
  // when it lists none: models with several Dense folders such as
  // 2_Dense_256 and 2_Dense_1024); INVALID_ARGUMENT when modules.json lists
  // more than one or the folder is not inside `dir`.
  static absl::StatusOr<DenseHead> Load(const std::string& dir, int64_t width,
                                        const std::string& dense_path = "");
  // Layers taken elsewhere (a checkpoint's classification head); each must
  // take the previous one's output, the first `width`.
  static DenseHead FromLayers(int64_t width, std::vector<Layer> layers) {
    DenseHead head;
    head.width_ = width;
    head.layers_ = std::move(layers);
    return head;
  }

  bool empty() const { return layers_.empty(); }
  const std::vector<Layer>& layers() const { return layers_; }
  // The width of what Apply writes (`width` when empty).
  int64_t out_features() const { return layers_.empty() ? width_ : layers_.back().out; }
  int64_t WeightBytes() const;
  // Widths of the rows between modules (all but the last module's output),
  // for buffers the caller provides.
  std::vector<int64_t> IntermediateWidths() const;
  // x [rows, width] -> y [rows, out_features()], through `between`: one
  // buffer per IntermediateWidths() entry, [rows, that width]; each row of
  // y L2-normalised when `normalize` (sentence-transformers' Normalize,
  // after the Dense modules). y must not overlap x.
  void Apply(const float* x, int64_t rows, const std::vector<float*>& between, float* y,
             bool normalize = false) const;
  // The same with buffers of its own: [rows, out_features()].
  std::vector<float> Apply(const float* x, int64_t rows, bool normalize = false) const;
  // "2_Dense (768 -> 768, tanh)" for logs.
  std::string Describe() const;

 private:
  // A layer's LayerNorm over one activated row, in place.
  static void Normalize(const Layer& l, float* row);

  int64_t width_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_DENSE_HEAD_H_
