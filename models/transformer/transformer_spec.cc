#include "models/transformer/transformer_spec.h"

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/checkpoint.h"
#include "models/transformer/config_fields.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"

namespace infer {
namespace config_detail {

absl::StatusOr<ActivationKind> Activation(const Fields& f, const char* field,
                                          const std::string& fallback) {
  INFER_ASSIGN_OR_RETURN(const std::string act, f.String(field, fallback));
  if (act == "gelu") return ActivationKind::kGelu;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") {
    return ActivationKind::kGeluTanh;
  }
  if (act == "silu" || act == "swish") return ActivationKind::kSilu;
  return f.Bad(absl::StrCat("field '", field, "' = '", act,
                            "'; supported: gelu, gelu_new, gelu_pytorch_tanh, silu"));
}

absl::Status CommonSizes(const Fields& f, TransformerSpec* s, const SizeNames& names) {
  INFER_ASSIGN_OR_RETURN(s->vocab_size, f.Positive("vocab_size"));
  INFER_ASSIGN_OR_RETURN(s->hidden_size, f.Positive(names.hidden));
  INFER_ASSIGN_OR_RETURN(s->num_layers, f.Positive(names.layers));
  INFER_ASSIGN_OR_RETURN(s->num_heads, f.Positive(names.heads));
  INFER_ASSIGN_OR_RETURN(s->num_kv_heads, f.Positive(names.kv_heads, s->num_heads));
  INFER_ASSIGN_OR_RETURN(s->intermediate_size,
                         f.Positive(names.intermediate, names.intermediate_fallback));
  INFER_ASSIGN_OR_RETURN(s->max_position_embeddings, f.Positive(names.positions));
  INFER_ASSIGN_OR_RETURN(s->pad_token_id, f.NonNegative("pad_token_id", 0));
  if (f.Has("head_dim")) {
    INFER_ASSIGN_OR_RETURN(s->head_dim, f.Positive("head_dim"));
  } else {
    if (s->hidden_size % s->num_heads != 0) {
      return f.Bad(absl::StrCat(names.hidden, " ", s->hidden_size, " is not divisible by ",
                                names.heads, " ", s->num_heads));
    }
    s->head_dim = s->hidden_size / s->num_heads;
  }
  // Bounds no real checkpoint reaches, so that a malformed config.json
  // cannot size a per-layer table or a position table past memory.
  if (s->num_layers > kMaxLayers) {
    return f.Bad(absl::StrCat(names.layers, " ", s->num_layers, " is over ", kMaxLayers));
  }
  if (s->max_position_embeddings > kMaxPositionEmbeddings) {
    return f.Bad(absl::StrCat(names.positions, " ", s->max_position_embeddings, " is over ",
                              kMaxPositionEmbeddings));
  }
  if (s->num_heads % s->num_kv_heads != 0) {
    return f.Bad(absl::StrCat(names.heads, " ", s->num_heads, " is not a multiple of ",
                              names.kv_heads, " ", s->num_kv_heads));
  }
  if (s->pad_token_id >= s->vocab_size) {
    return f.Bad(absl::StrCat("field 'pad_token_id' = ", s->pad_token_id, " is outside [0, ",
                              s->vocab_size, ")"));
  }
  s->window.assign(s->num_layers, 0);
  return absl::OkStatus();
}

// The labels of a *ForSequenceClassification checkpoint (architectures),
// from id2label ({"0": "a", ...}) or num_labels (default 2, as transformers).
bool NamesSequenceClassifier(const Fields& f) {
  if (!f.Has("architectures") || !f.at("architectures").is_array()) return false;
  bool classifier = false;
  for (const Json& a : f.at("architectures")) {
    classifier |=
        a.is_string() && absl::EndsWith(a.get<std::string>(), "ForSequenceClassification");
  }
  return classifier;
}

absl::Status ClassificationLabels(const Fields& f, TransformerSpec* s) {
  if (!NamesSequenceClassifier(f)) return absl::OkStatus();
  if (f.Has("problem_type")) {
    const Json& p = f.at("problem_type");
    if (!p.is_string() || (p != "multi_label_classification" &&
                           p != "single_label_classification" && p != "regression")) {
      return f.Bad(
          "field 'problem_type' must be single_label_classification, "
          "multi_label_classification or regression");
    }
    s->multi_label = p == "multi_label_classification";
  }
  if (f.Has("id2label")) {
    const Json& m = f.at("id2label");
    if (!m.is_object() || m.empty() || static_cast<int64_t>(m.size()) > kMaxLabels) {
      return f.Bad(absl::StrCat("field 'id2label' must map 1 to ", kMaxLabels, " ids to labels"));
    }
    s->labels.resize(m.size());
    for (size_t i = 0; i < m.size(); ++i) {
      const std::string key = std::to_string(i);
      if (!m.contains(key) || !m[key].is_string()) {
        return f.Bad(absl::StrCat("field 'id2label' must name every id from 0 to ", m.size() - 1,
                                  " with a string; id ", key, " is not"));
      }
      s->labels[i] = m[key].get<std::string>();
    }
    return absl::OkStatus();
  }
  INFER_ASSIGN_OR_RETURN(const int64_t n, f.Positive("num_labels", 2));
  if (n > kMaxLabels) return f.Bad(absl::StrCat("field 'num_labels' is over ", kMaxLabels));
  for (int64_t i = 0; i < n; ++i) s->labels.push_back(absl::StrCat("LABEL_", i));
  return absl::OkStatus();
}

// θ of one layer type: rope_parameters (transformers 5: either one object,
// or one per layer type) or the older top-level fields. Only the default
// and "linear" scalings are computed.
absl::StatusOr<double> RopeTheta(const Fields& f, TransformerSpec* s, const std::string& layer_type,
                                 const char* legacy_field, double fallback) {
  const Json* params = nullptr;
  if (f.Has("rope_parameters")) {
    const Json& p = f.at("rope_parameters");
    if (!p.is_object()) return f.Bad("field 'rope_parameters' must be an object");
    params = p.contains(layer_type) ? &p[layer_type] : &p;
  } else if (f.Has("rope_scaling")) {
    params = &f.at("rope_scaling");
  }
  double theta = fallback;
  if (f.Has(legacy_field)) {
    INFER_ASSIGN_OR_RETURN(theta, f.PositiveNumber(legacy_field, fallback));
  }
  if (params == nullptr) return theta;
  if (!params->is_object()) return f.Bad("rope parameters must be an object");
  const Fields p(*params, "");
  INFER_ASSIGN_OR_RETURN(theta, p.PositiveNumber("rope_theta", theta));
  std::string type = "default";
  if (p.Has("rope_type")) {
    INFER_ASSIGN_OR_RETURN(type, p.String("rope_type", type));
  } else if (p.Has("type")) {
    INFER_ASSIGN_OR_RETURN(type, p.String("type", type));
  }
  if (type == "linear") {
    INFER_ASSIGN_OR_RETURN(s->rope_linear_factor, p.PositiveNumber("factor", 1.0));
  } else if (type != "default") {
    return f.Bad(absl::StrCat("rope type '", type, "'; supported: default, linear"));
  }
  return theta;
}

}  // namespace config_detail

namespace {

using namespace config_detail;  // NOLINT: the readers this file shares

// bert, roberta, xlm-roberta, camembert.
absl::Status Bert(const Fields& f, TransformerSpec* s) {
  INFER_RETURN_IF_ERROR(CommonSizes(f, s));
  INFER_ASSIGN_OR_RETURN(const std::string positions,
                         f.String("position_embedding_type", "absolute"));
  if (positions != "absolute") {
    return f.Bad(
        absl::StrCat("field 'position_embedding_type' = '", positions, "'; supported: absolute"));
  }
  s->absolute_positions = true;
  if (s->model_type != "bert") {
    // transformers' RobertaEmbeddings (and XLM-R's, CamemBERT's): padding_idx
    // is config.pad_token_id, whose default in their config classes is 1.
    s->position_padding_id = f.Has("pad_token_id") ? s->pad_token_id : 1;
    s->position_offset = s->position_padding_id + 1;
  }
  INFER_ASSIGN_OR_RETURN(s->type_vocab_size, f.Positive("type_vocab_size", 2));
  s->embed_norm = true;
  INFER_ASSIGN_OR_RETURN(s->norm_eps, f.PositiveNumber("layer_norm_eps", 1e-12));
  INFER_ASSIGN_OR_RETURN(s->activation, Activation(f, "hidden_act", "gelu"));
  INFER_ASSIGN_OR_RETURN(s->tie_word_embeddings, f.Bool("tie_word_embeddings", true));
  return ClassificationLabels(f, s);
}

// BERT's blocks under other names, without token types; its classifier's
// dense layer is followed by ReLU (pre_classifier), not tanh. LayerNorm's ε
// is fixed at 1e-12 in transformers' DistilBERT, as here.
absl::Status DistilBert(const Fields& f, TransformerSpec* s) {
  INFER_RETURN_IF_ERROR(CommonSizes(
      f, s,
      {.hidden = "dim", .layers = "n_layers", .heads = "n_heads", .intermediate = "hidden_dim"}));
  s->absolute_positions = true;
  s->embed_norm = true;
  INFER_ASSIGN_OR_RETURN(s->activation, Activation(f, "activation", "gelu"));
  INFER_ASSIGN_OR_RETURN(s->tie_word_embeddings, f.Bool("tie_word_embeddings", true));
  s->classifier_activation = TransformerSpec::HeadActivation::kRelu;
  return ClassificationLabels(f, s);
}

absl::Status Mpnet(const Fields& f, TransformerSpec* s) {
  INFER_RETURN_IF_ERROR(CommonSizes(f, s));
  s->absolute_positions = true;
  // transformers' MPNetEmbeddings fixes padding_idx at 1, whatever the
  // config's pad_token_id.
  s->position_padding_id = 1;
  s->position_offset = 2;
  s->embed_norm = true;
  INFER_ASSIGN_OR_RETURN(s->relative_buckets, f.Positive("relative_attention_num_buckets", 32));
  // transformers buckets distances into 32 whatever the table's size.
  if (s->relative_buckets < 32) {
    return f.Bad(absl::StrCat("field 'relative_attention_num_buckets' = ", s->relative_buckets,
                              "; MPNet's position buckets need at least 32"));
  }
  INFER_ASSIGN_OR_RETURN(s->norm_eps, f.PositiveNumber("layer_norm_eps", 1e-12));
  INFER_ASSIGN_OR_RETURN(s->activation, Activation(f, "hidden_act", "gelu"));
  // MPNetForSequenceClassification's head is RoBERTa's.
  return ClassificationLabels(f, s);
}

// Per layer: "full_attention" or "sliding_attention", from layer_types when
// the config has it, else from `sliding(i)`.
absl::StatusOr<std::vector<bool>> SlidingLayers(const Fields& f, int64_t layers,
                                                const std::function<bool(int64_t)>& sliding) {
  std::vector<bool> out(layers);
  if (!f.Has("layer_types")) {
    for (int64_t i = 0; i < layers; ++i) out[i] = sliding(i);
    return out;
  }
  const Json& t = f.at("layer_types");
  if (!t.is_array() || static_cast<int64_t>(t.size()) != layers) {
    return f.Bad(absl::StrCat("field 'layer_types' must list ", layers, " layer types"));
  }
  for (int64_t i = 0; i < layers; ++i) {
    if (t[i] == "sliding_attention") {
      out[i] = true;
    } else if (t[i] != "full_attention") {
      return f.Bad("field 'layer_types' holds a type other than full_attention, sliding_attention");
    }
  }
  return out;
}

absl::Status ModernBert(const Fields& f, TransformerSpec* s) {
  INFER_RETURN_IF_ERROR(CommonSizes(f, s));
  s->embed_norm = true;
  s->pre_norm = true;
  s->final_norm = true;
  s->first_attn_norm = false;
  s->gated = true;
  INFER_ASSIGN_OR_RETURN(s->norm_eps, f.PositiveNumber("norm_eps", 1e-5));
  INFER_ASSIGN_OR_RETURN(s->norm_bias, f.Bool("norm_bias", false));
  INFER_ASSIGN_OR_RETURN(const bool attention_bias, f.Bool("attention_bias", false));
  INFER_ASSIGN_OR_RETURN(s->ffn_in_bias, f.Bool("mlp_bias", false));
  s->ffn_out_bias = s->ffn_in_bias;
  s->qkv_bias = s->attn_out_bias = attention_bias;
  INFER_ASSIGN_OR_RETURN(s->activation, Activation(f, "hidden_activation", "gelu"));
  INFER_ASSIGN_OR_RETURN(const int64_t every, f.Positive("global_attn_every_n_layers", 3));
  INFER_ASSIGN_OR_RETURN(const int64_t local, f.Positive("local_attention", 128));
  INFER_ASSIGN_OR_RETURN(
      const std::vector<bool> sliding,
      SlidingLayers(f, s->num_layers, [&](int64_t i) { return i % every != 0; }));
  INFER_ASSIGN_OR_RETURN(const double global_theta,
                         RopeTheta(f, s, "full_attention", "global_rope_theta", 160000.0));
  INFER_ASSIGN_OR_RETURN(const double local_theta,
                         RopeTheta(f, s, "sliding_attention", "local_rope_theta", 10000.0));
  for (int64_t i = 0; i < s->num_layers; ++i) {
    s->window[i] = sliding[i] ? local / 2 : 0;
    s->rope_theta.push_back(sliding[i] ? local_theta : global_theta);
  }
  INFER_RETURN_IF_ERROR(ClassificationLabels(f, s));
  if (s->labels.empty()) return absl::OkStatus();
  // ModernBertForSequenceClassification: pooled (classifier_pooling), then
  // ModernBertPredictionHead (dense, classifier_activation, LayerNorm), then
  // the classifier.
  INFER_ASSIGN_OR_RETURN(const std::string pooling, f.String("classifier_pooling", "cls"));
  if (pooling != "cls" && pooling != "mean") {
    return f.Bad(
        absl::StrCat("field 'classifier_pooling' = '", pooling, "'; supported: cls, mean"));
  }
  if (pooling == "mean") s->classifier_pooling = TransformerSpec::HeadPooling::kMean;
  INFER_ASSIGN_OR_RETURN(const std::string act, f.String("classifier_activation", "gelu"));
  using Head = TransformerSpec::HeadActivation;
  if (act == "gelu") {
    s->classifier_activation = Head::kGelu;
  } else if (act == "tanh") {
    s->classifier_activation = Head::kTanh;
  } else if (act == "relu") {
    s->classifier_activation = Head::kRelu;
  } else {
    return f.Bad(
        absl::StrCat("field 'classifier_activation' = '", act, "'; supported: gelu, tanh, relu"));
  }
  INFER_ASSIGN_OR_RETURN(s->classifier_dense_bias, f.Bool("classifier_bias", false));
  s->classifier_norm = true;
  return absl::OkStatus();
}

// qwen3, qwen2, llama, mistral.
absl::Status Decoder(const Fields& f, TransformerSpec* s) {
  INFER_RETURN_IF_ERROR(CommonSizes(f, s));
  s->norm = NormKind::kRmsNorm;
  s->norm_bias = false;
  s->pre_norm = true;
  s->final_norm = true;
  s->causal = true;
  s->gated = true;
  s->qk_norm = s->model_type == "qwen3";
  INFER_ASSIGN_OR_RETURN(s->norm_eps, f.PositiveNumber("rms_norm_eps", 1e-6));
  INFER_ASSIGN_OR_RETURN(s->activation, Activation(f, "hidden_act", "silu"));
  INFER_ASSIGN_OR_RETURN(const bool attention_bias, f.Bool("attention_bias", false));
  s->qkv_bias = s->model_type == "qwen2" || attention_bias;
  s->attn_out_bias = attention_bias;
  INFER_ASSIGN_OR_RETURN(s->ffn_in_bias, f.Bool("mlp_bias", false));
  s->ffn_out_bias = s->ffn_in_bias;
  // Sliding windows: Mistral's sliding_window applies to every layer;
  // Qwen's only with use_sliding_window, to the layers layer_types marks,
  // else (a config written before layer_types) to those from
  // max_window_layers on, as transformers' Qwen2Config and Qwen3Config
  // derive layer_types.
  int64_t sliding_window = 0;
  INFER_ASSIGN_OR_RETURN(const bool use_sliding, f.Bool("use_sliding_window", false));
  if (f.Has("sliding_window") && (s->model_type == "mistral" || use_sliding)) {
    INFER_ASSIGN_OR_RETURN(sliding_window, f.Positive("sliding_window"));
  }
  const bool qwen = s->model_type == "qwen2" || s->model_type == "qwen3";
  INFER_ASSIGN_OR_RETURN(const int64_t max_window_layers,
                         f.NonNegative("max_window_layers", 28));  // transformers' default
  INFER_ASSIGN_OR_RETURN(const std::vector<bool> sliding,
                         SlidingLayers(f, s->num_layers, [&](int64_t i) {
                           return s->model_type == "mistral" || (qwen && i >= max_window_layers);
                         }));
  INFER_ASSIGN_OR_RETURN(const double theta, RopeTheta(f, s, "full_attention", "rope_theta",
                                                       s->model_type == "qwen3" ? 1e6 : 10000.0));
  for (int64_t i = 0; i < s->num_layers; ++i) {
    // Keys closer than the window: q - k < sliding_window.
    s->window[i] = sliding[i] && sliding_window > 0 ? sliding_window - 1 : 0;
    s->rope_theta.push_back(theta);
  }
  // *ForSequenceClassification (transformers' GenericForSequenceClassification):
  // `score` [labels, hidden], no bias, on the last token that is not padding.
  INFER_RETURN_IF_ERROR(ClassificationLabels(f, s));
  s->classifier_pooling = TransformerSpec::HeadPooling::kLast;
  s->classifier_dense = false;
  s->classifier_skips_pad = f.Has("pad_token_id");
  return absl::OkStatus();
}

using FamilyParser = absl::Status (*)(const Fields&, TransformerSpec*);

const std::map<std::string, FamilyParser>& Families() {
  static const auto* families = new std::map<std::string, FamilyParser>{
      {"bert", Bert},     {"camembert", Bert},       {"distilbert", DistilBert}, {"gte", Gte},
      {"llama", Decoder}, {"mistral", Decoder},      {"modernbert", ModernBert}, {"mpnet", Mpnet},
      {"new", Gte},       {"nomic_bert", NomicBert}, {"qwen2", Decoder},         {"qwen3", Decoder},
      {"roberta", Bert},  {"xlm-roberta", Bert}};
  return *families;
}

}  // namespace

const char* NormKindName(NormKind kind) {
  return kind == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm";
}

const char* ActivationKindName(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kGelu:
      return "gelu";
    case ActivationKind::kGeluTanh:
      return "gelu_tanh";
    case ActivationKind::kSilu:
      return "silu";
  }
  return "?";
}

int64_t TransformerSpec::MaxSequenceLength() const {
  if (absolute_positions) return max_position_embeddings - position_offset;
  if (!rope_theta.empty()) return std::min(max_position_embeddings, kMaxRotaryPositions);
  return max_position_embeddings;
}

bool TransformerSpec::IsBertShaped() const {
  bool windows = false;
  for (int64_t w : window) windows |= w > 0;
  return absolute_positions && rope_theta.empty() && relative_buckets == 0 &&
         norm == NormKind::kLayerNorm && norm_bias && !pre_norm && !final_norm && embed_norm &&
         first_attn_norm && !qk_norm && !causal && !windows &&
         activation == ActivationKind::kGelu && !gated && qkv_bias && attn_out_bias &&
         ffn_in_bias && ffn_out_bias && num_kv_heads == num_heads &&
         head_dim * num_heads == hidden_size;
}

std::string TransformerSpec::Describe() const {
  int64_t windowed = 0;
  for (int64_t w : window) windowed += w > 0;
  std::string s = absl::StrCat(model_type, ": ", num_layers, " layers, hidden ", hidden_size,
                               ", heads ", num_heads);
  if (num_kv_heads != num_heads) absl::StrAppend(&s, " (", num_kv_heads, " KV)");
  absl::StrAppend(&s, " of ", head_dim, ", FFN ", intermediate_size, gated ? " gated " : " ",
                  ActivationKindName(activation), ", ", pre_norm ? "pre-" : "post-",
                  NormKindName(norm), ", ", causal ? "causal" : "bidirectional");
  if (absolute_positions) absl::StrAppend(&s, ", absolute positions");
  if (!rope_theta.empty()) absl::StrAppend(&s, ", rotary positions");
  if (relative_buckets > 0) absl::StrAppend(&s, ", relative position buckets");
  if (windowed > 0) absl::StrAppend(&s, ", ", windowed, " sliding-window layers");
  if (qk_norm) absl::StrAppend(&s, ", q/k norm");
  absl::StrAppend(&s, ", up to ", MaxSequenceLength(), " tokens");
  if (!labels.empty()) absl::StrAppend(&s, "; classification head, ", labels.size(), " labels");
  return s;
}

std::string SupportedModelTypes() {
  std::vector<std::string> names;
  for (const auto& [name, parser] : Families()) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<TransformerSpec> ParseTransformerSpec(const std::string& text,
                                                     const std::string& path) {
  absl::StatusOr<Json> parsed = ParseJson(text, "the file");
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parsed.status().message()));
  }
  const Json& j = *parsed;
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  const Fields f(j, path);
  TransformerSpec s;
  // Old BERT checkpoints predate model_type.
  INFER_ASSIGN_OR_RETURN(s.model_type, f.String("model_type", "bert"));
  auto it = Families().find(s.model_type);
  if (it == Families().end()) {
    return f.Bad(absl::StrCat("model_type '", s.model_type,
                              "' is not supported; supported: ", SupportedModelTypes()));
  }
  INFER_RETURN_IF_ERROR(it->second(f, &s));
  if (s.labels.empty() && NamesSequenceClassifier(f)) {
    // Served as an embedding model, it would answer the wrong thing.
    return f.Bad(absl::StrCat("a sequence classifier (architectures) of model_type '", s.model_type,
                              "' is not supported; its head is read for every other family"));
  }
  if (s.MaxSequenceLength() < 1) {
    return f.Bad(absl::StrCat("max_position_embeddings ", s.max_position_embeddings,
                              " leaves no position past the offset ", s.position_offset));
  }
  if (!s.rope_theta.empty() && s.head_dim % 2 != 0) {
    return f.Bad(absl::StrCat("rotary positions need an even head size; head_dim is ", s.head_dim));
  }
  return s;
}

absl::StatusOr<TransformerSpec> ReadTransformerSpec(const std::string& path) {
  INFER_ASSIGN_OR_RETURN(const std::string text, ReadCheckpointFile(path));
  return ParseTransformerSpec(text, path);
}

}  // namespace infer
