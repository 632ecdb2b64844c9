#include "models/bert/bert_encoder.h"

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"

namespace infer {
namespace {

using Tensors = std::map<std::string, CheckpointTensor>;

// The tensor `name` (or "bert." + name), which must have `shape`.
absl::StatusOr<std::vector<float>> Take(Tensors& t, const std::string& name,
                                        const std::vector<int64_t>& shape) {
  auto it = t.find(name);
  if (it == t.end()) it = t.find("bert." + name);
  if (it == t.end()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has no tensor '", name, "'"));
  }
  if (it->second.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has shape ",
                                                   ShapeToString(it->second.shape),
                                                   "; the config needs ", ShapeToString(shape)));
  }
  return std::move(it->second.values);
}

}  // namespace

int64_t BertWeights::ParameterCount() const {
  int64_t n = static_cast<int64_t>(word.size() + position.size() + token_type.size() +
                                   embed_norm.gamma.size() + embed_norm.beta.size());
  for (const Layer& l : layers) {
    for (const Linear* lin : {&l.q, &l.k, &l.v, &l.attn_out, &l.ffn_in, &l.ffn_out}) {
      n += static_cast<int64_t>(lin->w.size() + lin->b.size());
    }
    for (const Norm* norm : {&l.attn_norm, &l.ffn_norm}) {
      n += static_cast<int64_t>(norm->gamma.size() + norm->beta.size());
    }
  }
  return n;
}

BertWeights::Linear FusedQkv(const BertWeights::Layer& layer) {
  BertWeights::Linear qkv;
  qkv.in = layer.q.in;
  qkv.out = layer.q.out + layer.k.out + layer.v.out;
  for (const BertWeights::Linear* l : {&layer.q, &layer.k, &layer.v}) {
    qkv.w.insert(qkv.w.end(), l->w.begin(), l->w.end());
    qkv.b.insert(qkv.b.end(), l->b.begin(), l->b.end());
  }
  return qkv;
}

absl::StatusOr<BertWeights> LoadBertWeights(const std::string& dir) {
  BertWeights w;
  INFER_ASSIGN_OR_RETURN(w.config, ReadBertConfig(dir + "/config.json"));
  INFER_ASSIGN_OR_RETURN(Tensors t, ReadSafetensors(dir + "/model.safetensors"));
  const BertConfig& c = w.config;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  auto take = [&](const std::string& name, std::vector<int64_t> shape,
                  std::vector<float>* out) -> absl::Status {
    absl::StatusOr<std::vector<float>> v = Take(t, name, shape);
    if (!v.ok()) {
      return absl::Status(v.status().code(),
                          absl::StrCat(dir, "/model.safetensors: ", v.status().message()));
    }
    *out = *std::move(v);
    return absl::OkStatus();
  };
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in,
                    BertWeights::Linear* l) -> absl::Status {
    l->out = out;
    l->in = in;
    INFER_RETURN_IF_ERROR(take(prefix + ".weight", {out, in}, &l->w));
    return take(prefix + ".bias", {out}, &l->b);
  };
  auto norm = [&](const std::string& prefix, BertWeights::Norm* n) -> absl::Status {
    INFER_RETURN_IF_ERROR(take(prefix + ".weight", {h}, &n->gamma));
    return take(prefix + ".bias", {h}, &n->beta);
  };
  INFER_RETURN_IF_ERROR(take("embeddings.word_embeddings.weight", {c.vocab_size, h}, &w.word));
  INFER_RETURN_IF_ERROR(
      take("embeddings.position_embeddings.weight", {c.max_position_embeddings, h}, &w.position));
  INFER_RETURN_IF_ERROR(
      take("embeddings.token_type_embeddings.weight", {c.type_vocab_size, h}, &w.token_type));
  INFER_RETURN_IF_ERROR(norm("embeddings.LayerNorm", &w.embed_norm));
  w.layers.resize(c.num_hidden_layers);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = absl::StrCat("encoder.layer.", i, ".");
    BertWeights::Layer& l = w.layers[i];
    INFER_RETURN_IF_ERROR(linear(p + "attention.self.query", h, h, &l.q));
    INFER_RETURN_IF_ERROR(linear(p + "attention.self.key", h, h, &l.k));
    INFER_RETURN_IF_ERROR(linear(p + "attention.self.value", h, h, &l.v));
    INFER_RETURN_IF_ERROR(linear(p + "attention.output.dense", h, h, &l.attn_out));
    INFER_RETURN_IF_ERROR(norm(p + "attention.output.LayerNorm", &l.attn_norm));
    INFER_RETURN_IF_ERROR(linear(p + "intermediate.dense", inter, h, &l.ffn_in));
    INFER_RETURN_IF_ERROR(linear(p + "output.dense", h, inter, &l.ffn_out));
    INFER_RETURN_IF_ERROR(norm(p + "output.LayerNorm", &l.ffn_norm));
  }
  return w;
}

}  // namespace infer
