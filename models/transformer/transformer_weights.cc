#include "models/transformer/transformer_weights.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/checkpoint.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"

namespace infer {
namespace {

// Takes tensors out of a checkpoint by name, checking shapes; every error
// names the file.
class Tensors {
 public:
  Tensors(std::map<std::string, CheckpointTensor> t, std::string file)
      : t_(std::move(t)), file_(std::move(file)) {}

  bool Has(const std::string& name) const { return Find(name) != t_.end(); }

  absl::Status Take(const std::string& name, const std::vector<int64_t>& shape,
                    std::vector<float>* out) {
    auto it = Find(name);
    if (it == t_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_, ": checkpoint has no tensor '", name, "'"));
    }
    if (it->second.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(file_, ": tensor '", name, "' has shape ",
                                                     ShapeToString(it->second.shape),
                                                     "; the config needs ", ShapeToString(shape)));
    }
    *out = std::move(it->second.values);
    t_.erase(it);
    return absl::OkStatus();
  }
  // Appends the tensor's values to `out` (fusing Q, K and V, or gate and up).
  absl::Status Append(const std::string& name, const std::vector<int64_t>& shape,
                      std::vector<float>* out) {
    std::vector<float> v;
    INFER_RETURN_IF_ERROR(Take(name, shape, &v));
    out->insert(out->end(), v.begin(), v.end());
    return absl::OkStatus();
  }

 private:
  // `name`, or `name` under the prefix a task head's checkpoint adds.
  std::map<std::string, CheckpointTensor>::iterator Find(const std::string& name) {
    for (const char* prefix :
         {"", "bert.", "roberta.", "distilbert.", "mpnet.", "model.", "new.", "gte."}) {
      auto it = t_.find(prefix + name);
      if (it != t_.end()) return it;
    }
    return t_.end();
  }
  std::map<std::string, CheckpointTensor>::const_iterator Find(const std::string& name) const {
    return const_cast<Tensors*>(this)->Find(name);
  }

  std::map<std::string, CheckpointTensor> t_;
  std::string file_;
};

using W = TransformerWeights;

// The tensors of `file`: one safetensors file, or the shards a
// model.safetensors.index.json lists in its weight_map (plain file names in
// `dir`), merged.
absl::StatusOr<std::map<std::string, CheckpointTensor>> ReadCheckpointTensors(
    const std::string& dir, const std::string& file) {
  if (!absl::EndsWith(file, ".index.json")) return ReadSafetensors(file);
  INFER_ASSIGN_OR_RETURN(const std::string text, ReadCheckpointFile(file));
  absl::StatusOr<nlohmann::json> index = ParseJson(text, "the file");
  if (!index.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", index.status().message()));
  }
  if (!index->is_object() || !index->contains("weight_map") ||
      !(*index)["weight_map"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": no weight_map object"));
  }
  std::set<std::string> shards;
  for (const auto& [name, shard] : (*index)["weight_map"].items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": weight_map['", name, "'] is not a file name"));
    }
    const std::string s = shard.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": shard '", s, "' is not a file name in the folder"));
    }
    shards.insert(s);
  }
  std::map<std::string, CheckpointTensor> all;
  for (const std::string& shard : shards) {
    INFER_ASSIGN_OR_RETURN(auto tensors, ReadSafetensors(dir + "/" + shard));
    all.merge(tensors);
  }
  return all;
}

// One linear layer built from one or more stored ones (their rows
// concatenated in order), with biases when `bias`.
absl::Status Linear(Tensors& t, const std::vector<std::string>& names,
                    const std::vector<int64_t>& outs, int64_t in, bool bias, W::Linear* l) {
  l->in = in;
  l->out = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    INFER_RETURN_IF_ERROR(t.Append(names[i] + ".weight", {outs[i], in}, &l->w));
    if (bias) INFER_RETURN_IF_ERROR(t.Append(names[i] + ".bias", {outs[i]}, &l->b));
    l->out += outs[i];
  }
  return absl::OkStatus();
}

// A norm's scale and shift, stored as `weight` and `bias`, or as `gamma` and
// `beta` in checkpoints converted from the original TensorFlow BERT (e.g.
// google/bert_uncased_L-2_H-128_A-2 and the models trained from it), which
// transformers renames the same way when it loads them.
absl::Status Norm(Tensors& t, const std::string& name, int64_t size, bool bias, W::Norm* n) {
  const bool legacy = !t.Has(name + ".weight") && t.Has(name + ".gamma");
  INFER_RETURN_IF_ERROR(t.Take(name + (legacy ? ".gamma" : ".weight"), {size}, &n->gamma));
  if (bias) INFER_RETURN_IF_ERROR(t.Take(name + (legacy ? ".beta" : ".bias"), {size}, &n->beta));
  return absl::OkStatus();
}

// The embeddings every encoder family stores under BERT's names: words, the
// position table (absolute positions), token types (when the family has a
// table), then the norm `norm` (with β).
absl::Status Embeddings(Tensors& t, const std::string& norm, W* w) {
  const TransformerSpec& s = w->spec;
  const int64_t h = s.hidden_size;
  INFER_RETURN_IF_ERROR(t.Take("embeddings.word_embeddings.weight", {s.vocab_size, h}, &w->word));
  if (s.absolute_positions) {
    INFER_RETURN_IF_ERROR(t.Take("embeddings.position_embeddings.weight",
                                 {s.max_position_embeddings, h}, &w->position));
  }
  if (s.type_vocab_size > 0) {
    INFER_RETURN_IF_ERROR(
        t.Take("embeddings.token_type_embeddings.weight", {s.type_vocab_size, h}, &w->token_type));
  }
  return Norm(t, norm, h, true, &w->embed_norm);
}

// bert, roberta, xlm-roberta, camembert, mpnet: the BERT layout.
absl::Status LoadBertLayout(Tensors& t, W* w) {
  const TransformerSpec& s = w->spec;
  const int64_t h = s.hidden_size, inter = s.intermediate_size;
  const bool mpnet = s.model_type == "mpnet";
  INFER_RETURN_IF_ERROR(Embeddings(t, "embeddings.LayerNorm", w));
  if (mpnet) {
    INFER_RETURN_IF_ERROR(t.Take("encoder.relative_attention_bias.weight",
                                 {s.relative_buckets, s.num_heads}, &w->relative_bias));
  }
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("encoder.layer.", i, ".");
    W::Layer& l = w->layers[i];
    if (mpnet) {
      const std::string a = p + "attention.attn.";
      INFER_RETURN_IF_ERROR(Linear(t, {a + "q", a + "k", a + "v"}, {h, h, h}, h, true, &l.qkv));
      INFER_RETURN_IF_ERROR(Linear(t, {a + "o"}, {h}, h, true, &l.attn_out));
      INFER_RETURN_IF_ERROR(Norm(t, p + "attention.LayerNorm", h, true, &l.attn_norm));
    } else {
      const std::string a = p + "attention.self.";
      INFER_RETURN_IF_ERROR(
          Linear(t, {a + "query", a + "key", a + "value"}, {h, h, h}, h, true, &l.qkv));
      INFER_RETURN_IF_ERROR(Linear(t, {p + "attention.output.dense"}, {h}, h, true, &l.attn_out));
      INFER_RETURN_IF_ERROR(Norm(t, p + "attention.output.LayerNorm", h, true, &l.attn_norm));
    }
    INFER_RETURN_IF_ERROR(Linear(t, {p + "intermediate.dense"}, {inter}, h, true, &l.ffn_in));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "output.dense"}, {h}, inter, true, &l.ffn_out));
    INFER_RETURN_IF_ERROR(Norm(t, p + "output.LayerNorm", h, true, &l.ffn_norm));
  }
  if (!s.labels.empty()) {
    const auto labels = static_cast<int64_t>(s.labels.size());
    const bool bert = s.model_type == "bert";
    INFER_RETURN_IF_ERROR(Linear(t, {bert ? "pooler.dense" : "classifier.dense"}, {h}, h, true,
                                 &w->classifier_dense));
    INFER_RETURN_IF_ERROR(Linear(t, {bert ? "classifier" : "classifier.out_proj"}, {labels}, h,
                                 true, &w->classifier_out));
  }
  return absl::OkStatus();
}

absl::Status LoadDistilBert(Tensors& t, W* w) {
  const TransformerSpec& s = w->spec;
  const int64_t h = s.hidden_size, inter = s.intermediate_size;
  INFER_RETURN_IF_ERROR(Embeddings(t, "embeddings.LayerNorm", w));
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("transformer.layer.", i, ".");
    const std::string a = p + "attention.";
    W::Layer& l = w->layers[i];
    INFER_RETURN_IF_ERROR(
        Linear(t, {a + "q_lin", a + "k_lin", a + "v_lin"}, {h, h, h}, h, true, &l.qkv));
    INFER_RETURN_IF_ERROR(Linear(t, {a + "out_lin"}, {h}, h, true, &l.attn_out));
    INFER_RETURN_IF_ERROR(Norm(t, p + "sa_layer_norm", h, true, &l.attn_norm));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "ffn.lin1"}, {inter}, h, true, &l.ffn_in));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "ffn.lin2"}, {h}, inter, true, &l.ffn_out));
    INFER_RETURN_IF_ERROR(Norm(t, p + "output_layer_norm", h, true, &l.ffn_norm));
  }
  if (!s.labels.empty()) {
    const auto labels = static_cast<int64_t>(s.labels.size());
    INFER_RETURN_IF_ERROR(Linear(t, {"pre_classifier"}, {h}, h, true, &w->classifier_dense));
    INFER_RETURN_IF_ERROR(Linear(t, {"classifier"}, {labels}, h, true, &w->classifier_out));
  }
  return absl::OkStatus();
}

absl::Status LoadModernBert(Tensors& t, W* w) {
  const TransformerSpec& s = w->spec;
  const int64_t h = s.hidden_size, inter = s.intermediate_size;
  INFER_RETURN_IF_ERROR(t.Take("embeddings.tok_embeddings.weight", {s.vocab_size, h}, &w->word));
  INFER_RETURN_IF_ERROR(Norm(t, "embeddings.norm", h, s.norm_bias, &w->embed_norm));
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    W::Layer& l = w->layers[i];
    if (i > 0) INFER_RETURN_IF_ERROR(Norm(t, p + "attn_norm", h, s.norm_bias, &l.attn_norm));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "attn.Wqkv"}, {3 * h}, h, s.qkv_bias, &l.qkv));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "attn.Wo"}, {h}, h, s.attn_out_bias, &l.attn_out));
    INFER_RETURN_IF_ERROR(Norm(t, p + "mlp_norm", h, s.norm_bias, &l.ffn_norm));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "mlp.Wi"}, {2 * inter}, h, s.ffn_in_bias, &l.ffn_in));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "mlp.Wo"}, {h}, inter, s.ffn_out_bias, &l.ffn_out));
  }
  INFER_RETURN_IF_ERROR(Norm(t, "final_norm", h, s.norm_bias, &w->final_norm));
  if (!s.labels.empty()) {
    // ModernBertForSequenceClassification: head.dense, head.norm, classifier.
    INFER_RETURN_IF_ERROR(
        Linear(t, {"head.dense"}, {h}, h, s.classifier_dense_bias, &w->classifier_dense));
    INFER_RETURN_IF_ERROR(Norm(t, "head.norm", h, s.norm_bias, &w->classifier_norm));
    INFER_RETURN_IF_ERROR(Linear(t, {"classifier"}, {static_cast<int64_t>(s.labels.size())}, h,
                                 true, &w->classifier_out));
  }
  return absl::OkStatus();
}

// NomicBERT (transformer_spec.h): Wqkv holds q, k and v; the gated MLP's
// fc12 is the activated half and fc11 the other.
absl::Status LoadNomicBert(Tensors& t, W* w) {
  const TransformerSpec& s = w->spec;
  const int64_t h = s.hidden_size, inter = s.intermediate_size;
  INFER_RETURN_IF_ERROR(Embeddings(t, "emb_ln", w));
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("encoder.layers.", i, ".");
    W::Layer& l = w->layers[i];
    INFER_RETURN_IF_ERROR(Linear(t, {p + "attn.Wqkv"}, {3 * h}, h, s.qkv_bias, &l.qkv));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "attn.out_proj"}, {h}, h, s.attn_out_bias, &l.attn_out));
    INFER_RETURN_IF_ERROR(Norm(t, p + "norm1", h, true, &l.attn_norm));
    if (s.gated) {
      INFER_RETURN_IF_ERROR(
          Linear(t, {p + "mlp.fc12", p + "mlp.fc11"}, {inter, inter}, h, s.ffn_in_bias, &l.ffn_in));
    } else {
      INFER_RETURN_IF_ERROR(Linear(t, {p + "mlp.fc1"}, {inter}, h, s.ffn_in_bias, &l.ffn_in));
    }
    INFER_RETURN_IF_ERROR(Linear(t, {p + "mlp.fc2"}, {h}, inter, s.ffn_out_bias, &l.ffn_out));
    INFER_RETURN_IF_ERROR(Norm(t, p + "norm2", h, true, &l.ffn_norm));
  }
  return absl::OkStatus();
}

// GTE "new" (transformer_spec.h): qkv_proj holds q, k and v (or q_proj,
// k_proj and v_proj when config.json's pack_qkv is false); up_gate_proj
// holds the up rows, then the activated gate rows, swapped here into the
// description's order.
absl::Status LoadGte(Tensors& t, W* w) {
  const TransformerSpec& s = w->spec;
  const int64_t h = s.hidden_size, inter = s.intermediate_size;
  INFER_RETURN_IF_ERROR(Embeddings(t, "embeddings.LayerNorm", w));
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("encoder.layer.", i, ".");
    const std::string a = p + "attention.";
    W::Layer& l = w->layers[i];
    if (t.Has(a + "qkv_proj.weight")) {
      INFER_RETURN_IF_ERROR(Linear(t, {a + "qkv_proj"}, {3 * h}, h, true, &l.qkv));
    } else {
      INFER_RETURN_IF_ERROR(
          Linear(t, {a + "q_proj", a + "k_proj", a + "v_proj"}, {h, h, h}, h, true, &l.qkv));
    }
    INFER_RETURN_IF_ERROR(Linear(t, {a + "o_proj"}, {h}, h, true, &l.attn_out));
    INFER_RETURN_IF_ERROR(Norm(t, p + "attn_ln", h, true, &l.attn_norm));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "mlp.up_gate_proj"}, {2 * inter}, h, false, &l.ffn_in));
    std::rotate(l.ffn_in.w.begin(), l.ffn_in.w.begin() + inter * h, l.ffn_in.w.end());
    INFER_RETURN_IF_ERROR(Linear(t, {p + "mlp.down_proj"}, {h}, inter, true, &l.ffn_out));
    INFER_RETURN_IF_ERROR(Norm(t, p + "mlp_ln", h, true, &l.ffn_norm));
  }
  if (!s.labels.empty()) {
    const auto labels = static_cast<int64_t>(s.labels.size());
    INFER_RETURN_IF_ERROR(Linear(t, {"pooler.dense"}, {h}, h, true, &w->classifier_dense));
    INFER_RETURN_IF_ERROR(Linear(t, {"classifier"}, {labels}, h, true, &w->classifier_out));
  }
  return absl::OkStatus();
}

// qwen3, qwen2, llama, mistral.
absl::Status LoadDecoder(Tensors& t, W* w) {
  const TransformerSpec& s = w->spec;
  const int64_t h = s.hidden_size, inter = s.intermediate_size;
  const int64_t qw = s.q_width(), kvw = s.kv_width();
  INFER_RETURN_IF_ERROR(t.Take("embed_tokens.weight", {s.vocab_size, h}, &w->word));
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    const std::string a = p + "self_attn.";
    W::Layer& l = w->layers[i];
    INFER_RETURN_IF_ERROR(Norm(t, p + "input_layernorm", h, false, &l.attn_norm));
    INFER_RETURN_IF_ERROR(Linear(t, {a + "q_proj", a + "k_proj", a + "v_proj"}, {qw, kvw, kvw}, h,
                                 s.qkv_bias, &l.qkv));
    INFER_RETURN_IF_ERROR(Linear(t, {a + "o_proj"}, {h}, qw, s.attn_out_bias, &l.attn_out));
    if (s.qk_norm) {
      INFER_RETURN_IF_ERROR(Norm(t, a + "q_norm", s.head_dim, false, &l.q_norm));
      INFER_RETURN_IF_ERROR(Norm(t, a + "k_norm", s.head_dim, false, &l.k_norm));
    }
    INFER_RETURN_IF_ERROR(Norm(t, p + "post_attention_layernorm", h, false, &l.ffn_norm));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "mlp.gate_proj", p + "mlp.up_proj"}, {inter, inter}, h,
                                 s.ffn_in_bias, &l.ffn_in));
    INFER_RETURN_IF_ERROR(Linear(t, {p + "mlp.down_proj"}, {h}, inter, s.ffn_out_bias, &l.ffn_out));
  }
  INFER_RETURN_IF_ERROR(Norm(t, "norm", h, false, &w->final_norm));
  if (!s.labels.empty()) {  // *ForSequenceClassification's `score`, without a bias
    INFER_RETURN_IF_ERROR(Linear(t, {"score"}, {static_cast<int64_t>(s.labels.size())}, h, false,
                                 &w->classifier_out));
  }
  return absl::OkStatus();
}

// The masked-LM head's tensor names in one family.
struct MaskedLmNames {
  std::string dense, norm, decoder;  // decoder: ".weight", and ".bias" or the bias below
  std::string bias;                  // the decoder's bias under its other name, or ""
};

MaskedLmNames MaskedLmNamesOf(const std::string& model_type) {
  if (model_type == "bert") {
    return {"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
            "cls.predictions.decoder", "cls.predictions.bias"};
  }
  if (model_type == "distilbert") {
    return {"vocab_transform", "vocab_layer_norm", "vocab_projector", ""};
  }
  return {"lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", "lm_head.bias"};
}

// The masked-LM head of the BERT layout's families and DistilBERT's
// (TransformerWeights::MaskedLm).
absl::Status LoadMaskedLm(Tensors& t, bool tied, W* w) {
  const TransformerSpec& s = w->spec;
  const int64_t h = s.hidden_size;
  W::MaskedLm& m = w->masked_lm;
  const MaskedLmNames n = MaskedLmNamesOf(s.model_type);
  if (!t.Has(n.dense + ".weight")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint has no masked-LM head (", n.dense,
        ".*): SPLADE needs a *ForMaskedLM checkpoint, as sentence-transformers' MLMTransformer "
        "loads it"));
  }
  INFER_RETURN_IF_ERROR(Linear(t, {n.dense}, {h}, h, true, &m.dense));
  INFER_RETURN_IF_ERROR(Norm(t, n.norm, h, true, &m.norm));
  m.decoder.in = h;
  m.decoder.out = s.vocab_size;
  if (t.Has(n.decoder + ".weight")) {
    INFER_RETURN_IF_ERROR(t.Take(n.decoder + ".weight", {s.vocab_size, h}, &m.decoder.w));
  } else if (tied) {
    m.decoder.w = w->word;  // the word embeddings, as transformers ties them
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint has no tensor '", n.decoder,
                     ".weight' and config.json's tie_word_embeddings is false"));
  }
  // BERT's and RoBERTa's decoder bias is stored under either name
  // (transformers ties the two).
  const std::string bias =
      t.Has(n.decoder + ".bias") || n.bias.empty() ? n.decoder + ".bias" : n.bias;
  return t.Take(bias, {s.vocab_size}, &m.decoder.b);
}

// MPNet's bucket of a relative position (key - query), as transformers'
// MPNetEncoder.relative_position_bucket computes it (always 32 buckets and a
// maximum distance of 128, in FP32): exact below 8 positions, then
// logarithmic, with separate halves for keys before and after the query.
int64_t RelativeBucket(int64_t relative) {
  constexpr int64_t kBuckets = 32 / 2, kMaxExact = kBuckets / 2, kMaxDistance = 128;
  int64_t bucket = 0;
  int64_t n = -relative;
  if (n < 0) bucket += kBuckets;
  n = n < 0 ? -n : n;
  if (n < kMaxExact) return bucket + n;
  const float scaled = std::log(static_cast<float>(n) / kMaxExact) /
                       static_cast<float>(std::log(double{kMaxDistance} / kMaxExact)) *
                       static_cast<float>(kBuckets - kMaxExact);
  return bucket + std::min<int64_t>(kMaxExact + static_cast<int64_t>(scaled), kBuckets - 1);
}

}  // namespace

int64_t TransformerWeights::ParameterCount() const {
  auto n = [](const std::vector<float>& v) { return static_cast<int64_t>(v.size()); };
  int64_t total = n(word) + n(position) + n(token_type) + n(relative_bias) + n(embed_norm.gamma) +
                  n(embed_norm.beta) + n(final_norm.gamma) + n(final_norm.beta);
  for (const Linear* lin :
       {&classifier_dense, &classifier_out, &masked_lm.dense, &masked_lm.decoder}) {
    total += n(lin->w) + n(lin->b);
  }
  total += n(masked_lm.norm.gamma) + n(masked_lm.norm.beta) + n(classifier_norm.gamma) +
           n(classifier_norm.beta);
  for (const Layer& l : layers) {
    for (const Linear* lin : {&l.qkv, &l.attn_out, &l.ffn_in, &l.ffn_out}) {
      total += n(lin->w) + n(lin->b);
    }
    for (const Norm* norm : {&l.attn_norm, &l.ffn_norm, &l.q_norm, &l.k_norm}) {
      total += n(norm->gamma) + n(norm->beta);
    }
  }
  return total;
}

absl::StatusOr<TransformerWeights> LoadTransformerWeights(const std::string& dir,
                                                          bool masked_lm_head) {
  TransformerWeights w;
  INFER_ASSIGN_OR_RETURN(w.spec, ReadTransformerSpec(dir + "/config.json"));
  std::string file = dir + "/model.safetensors";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec) &&
      std::filesystem::exists(dir + "/model.safetensors.index.json", ec)) {
    file = dir + "/model.safetensors.index.json";
  }
  INFER_ASSIGN_OR_RETURN(auto tensors, ReadCheckpointTensors(dir, file));
  Tensors t(std::move(tensors), file);
  w.layers.resize(w.spec.num_layers);
  const std::string& type = w.spec.model_type;
  if (type == "modernbert") {
    INFER_RETURN_IF_ERROR(LoadModernBert(t, &w));
  } else if (type == "qwen3" || type == "qwen2" || type == "llama" || type == "mistral") {
    INFER_RETURN_IF_ERROR(LoadDecoder(t, &w));
  } else if (type == "distilbert") {
    INFER_RETURN_IF_ERROR(LoadDistilBert(t, &w));
  } else if (type == "nomic_bert") {
    INFER_RETURN_IF_ERROR(LoadNomicBert(t, &w));
  } else if (type == "new" || type == "gte") {
    INFER_RETURN_IF_ERROR(LoadGte(t, &w));
  } else {
    INFER_RETURN_IF_ERROR(LoadBertLayout(t, &w));
  }
  if (masked_lm_head) {
    if (type != "bert" && type != "roberta" && type != "xlm-roberta" && type != "camembert" &&
        type != "distilbert") {
      return absl::InvalidArgumentError(absl::StrCat(
          file,
          ": a masked-LM head (SPLADE) is read for bert, roberta, xlm-roberta, camembert and "
          "distilbert; this model is '",
          type, "'"));
    }
    absl::Status s = LoadMaskedLm(t, w.spec.tie_word_embeddings, &w);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(file, ": ", s.message()));
  }
  return w;
}

std::vector<float> RopeInverseFrequencies(const TransformerSpec& spec, double theta) {
  const int64_t half = spec.head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int64_t j = 0; j < half; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(spec.head_dim);
    inv_freq[j] = 1.0f / std::pow(static_cast<float>(theta), exponent) /
                  static_cast<float>(spec.rope_linear_factor);
  }
  return inv_freq;
}

std::vector<float> RelativeBiasByDistance(const TransformerWeights& w) {
  const TransformerSpec& c = w.spec;
  if (c.relative_buckets <= 0 || w.relative_bias.empty()) return {};
  const int64_t span = c.max_position_embeddings, width = 2 * span - 1;
  std::vector<float> out(c.num_heads * width);
  for (int64_t head = 0; head < c.num_heads; ++head) {
    for (int64_t d = -(span - 1); d < span; ++d) {
      out[head * width + d + span - 1] = w.relative_bias[RelativeBucket(d) * c.num_heads + head];
    }
  }
  return out;
}

DenseHead ClassificationHead(const TransformerWeights& w) {
  const TransformerSpec& s = w.spec;
  if (s.labels.empty()) return DenseHead();
  auto layer = [](const TransformerWeights::Linear& l, DenseHead::Activation a, const char* name) {
    DenseHead::Layer out;
    out.in = l.in;
    out.out = l.out;
    out.weight = l.w;
    out.bias = l.b;
    out.activation = a;
    out.path = name;
    return out;
  };
  using Head = TransformerSpec::HeadActivation;
  const DenseHead::Activation act =
      s.classifier_activation == Head::kRelu   ? DenseHead::Activation::kRelu
      : s.classifier_activation == Head::kGelu ? DenseHead::Activation::kGelu
                                               : DenseHead::Activation::kTanh;
  std::vector<DenseHead::Layer> head;
  if (s.classifier_dense) {
    head.push_back(layer(w.classifier_dense, act, "classifier dense"));
    if (w.classifier_norm.present()) {
      head.back().norm_gamma = w.classifier_norm.gamma;
      head.back().norm_beta = w.classifier_norm.beta;
      head.back().norm_eps = static_cast<float>(s.norm_eps);
    }
  }
  head.push_back(layer(w.classifier_out, DenseHead::Activation::kIdentity, "classifier out"));
  return DenseHead::FromLayers(s.hidden_size, std::move(head));
}

}  // namespace infer
