// The families whose reference is their authors' own modelling code, which
// transformers runs only as "remote code" from the model's hub repository:
// NomicBERT (nomic-embed-text-v1 and v1.5; the code in nomic-ai/contrastors,
// src/contrastors/models/huggingface/modeling_hf_nomic_bert.py) and GTE's
// "new" architecture (gte-base-en-v1.5, gte-large-en-v1.5,
// gte-multilingual-base and -reranker-base; Alibaba-NLP/new-impl,
// modeling.py). Each maps to blocks the description already has; what the
// code allows beyond the published checkpoints and the description cannot
// compute exactly is refused, naming the field.
//
// Their fixtures are made by an independent NumPy transcription of that
// code (models/tools/make_remote_code_fixtures.py), not by transformers.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "models/transformer/config_fields.h"
#include "runtime/status_macros.h"

namespace infer::config_detail {
namespace {

absl::Status Refuse(const Fields& f, const std::string& field, const std::string& why) {
  return f.Bad(absl::StrCat("field '", field, "': ", why));
}

}  // namespace

// NomicBERT: GPT-2's config names (n_embd, n_layer, n_head, n_inner,
// n_positions, layer_norm_epsilon, activation_function).
// - Embeddings: word + token type (type_vocab_size, default 2; type 0 when
//   none is given), no position table, then a LayerNorm (emb_ln).
// - Blocks: post-LayerNorm, x = norm1(x + attn(x)), x = norm2(x + mlp(x)).
// - Rotary positions on the whole head (rotary_emb_fraction 1), halves
//   rotated (not interleaved), θ = rotary_emb_base (default 10000).
// - MLP: swiglu is fc2(fc11(x) · silu(fc12(x))) and geglu the same with the
//   erf GELU, the hidden width n_inner (default 8 · n_embd / 3) rounded up
//   to a multiple of 256; any GELU name is the ungated fc2(gelu(fc1(x)))
//   with the erf form (the code passes F.gelu whatever the name).
// - Biases: qkv_proj_bias on Wqkv and out_proj, mlp_fc1_bias on the MLP's
//   input layers, mlp_fc2_bias on fc2 (each default true).
// - vocab_size rounded up to pad_vocab_size_multiple, as the model's table.
// - rotary_scaling_factor turns on dynamic NTK scaling past
//   max_trained_positions, where the code rescales θ from the batch's padded
//   length and keeps the tables of the longest batch seen: not a function
//   of one sequence. With it, sequences are served up to
//   max_trained_positions, where no scaling happens; without it, up to
//   n_positions, as the code computes them.
//
// transformers 5's own NomicBertConfig (BERT's field names, no n_embd) is
// the same model with every linear bias off, always gated (hidden_act,
// default silu), θ from rope_parameters; its save_pretrained writes the
// tensors under the names above.
absl::Status NomicBertTransformers(const Fields& f, TransformerSpec* s) {
  INFER_RETURN_IF_ERROR(CommonSizes(f, s));
  INFER_ASSIGN_OR_RETURN(s->activation, Activation(f, "hidden_act", "silu"));
  s->gated = true;
  INFER_ASSIGN_OR_RETURN(s->type_vocab_size, f.NonNegative("type_vocab_size", 2));
  s->embed_norm = true;
  INFER_ASSIGN_OR_RETURN(s->norm_eps, f.PositiveNumber("layer_norm_eps", 1e-12));
  INFER_ASSIGN_OR_RETURN(const double theta,
                         RopeTheta(f, s, "full_attention", "rope_theta", 1000.0));
  s->rope_theta.assign(s->num_layers, theta);
  s->qkv_bias = s->attn_out_bias = s->ffn_in_bias = s->ffn_out_bias = false;
  INFER_RETURN_IF_ERROR(ClassificationLabels(f, s));
  if (!s->labels.empty()) {
    return f.Bad("a NomicBERT sequence classifier is not supported (its head is not BERT's)");
  }
  return absl::OkStatus();
}

absl::Status NomicBert(const Fields& f, TransformerSpec* s) {
  if (!f.Has("n_embd") && f.Has("hidden_size")) return NomicBertTransformers(f, s);
  INFER_ASSIGN_OR_RETURN(const std::string act, f.String("activation_function", "gelu"));
  s->gated = act == "swiglu" || act == "geglu";
  if (act == "swiglu") {
    s->activation = ActivationKind::kSilu;
  } else if (act == "geglu" || act == "gelu" || act == "gelu_new" || act == "gelu_fast" ||
             act == "gelu_pytorch_tanh") {
    s->activation = ActivationKind::kGelu;
  } else {
    return Refuse(f, "activation_function",
                  absl::StrCat("'", act,
                               "'; supported: swiglu, geglu, gelu, gelu_new, gelu_fast, "
                               "gelu_pytorch_tanh (glu's sigmoid gate is not)"));
  }
  INFER_ASSIGN_OR_RETURN(const int64_t hidden, f.Positive("n_embd"));
  INFER_RETURN_IF_ERROR(
      CommonSizes(f, s,
                  {.hidden = "n_embd",
                   .layers = "n_layer",
                   .heads = "n_head",
                   .kv_heads = "num_heads_kv",
                   .intermediate = "n_inner",
                   .positions = "n_positions",
                   .intermediate_fallback = s->gated ? 8 * hidden / 3 : 4 * hidden}));
  if (s->num_kv_heads != s->num_heads) {
    return Refuse(f, "num_heads_kv", "differs from n_head; the code splits Wqkv into equal thirds");
  }
  if (s->gated) s->intermediate_size = (s->intermediate_size + 255) / 256 * 256;
  INFER_ASSIGN_OR_RETURN(const int64_t multiple, f.Positive("pad_vocab_size_multiple", 1));
  s->vocab_size = (s->vocab_size + multiple - 1) / multiple * multiple;
  INFER_ASSIGN_OR_RETURN(s->type_vocab_size, f.NonNegative("type_vocab_size", 2));
  s->embed_norm = true;
  INFER_ASSIGN_OR_RETURN(s->norm_eps, f.PositiveNumber("layer_norm_epsilon", 1e-5));
  INFER_ASSIGN_OR_RETURN(const int64_t moe, f.NonNegative("moe_every_n_layers", 0));
  if (moe > 0) {
    return Refuse(f, "moe_every_n_layers",
                  "mixture-of-experts layers (nomic-embed-text-v2-moe) are not supported");
  }
  INFER_ASSIGN_OR_RETURN(const bool prenorm, f.Bool("prenorm", false));
  if (prenorm) return Refuse(f, "prenorm", "true; only the post-norm blocks are supported");
  if (!f.Has("rotary_emb_fraction") || !f.at("rotary_emb_fraction").is_number() ||
      f.at("rotary_emb_fraction").get<double>() != 1.0) {
    return Refuse(f, "rotary_emb_fraction",
                  "must be 1 (rotary positions on the whole head); a learned position table or a "
                  "partial rotation is not supported");
  }
  INFER_ASSIGN_OR_RETURN(const bool interleaved, f.Bool("rotary_emb_interleaved", false));
  if (interleaved) return Refuse(f, "rotary_emb_interleaved", "true; only rotated halves are");
  if (f.Has("rotary_emb_scale_base")) {
    return Refuse(f, "rotary_emb_scale_base", "set; xPos scaling is not supported");
  }
  const bool scaled =
      f.Has("rotary_scaling_factor") && !(f.at("rotary_scaling_factor").is_number() &&
                                          f.at("rotary_scaling_factor").get<double>() == 0);
  if (scaled) {
    INFER_ASSIGN_OR_RETURN(const int64_t trained, f.Positive("max_trained_positions", 2048));
    s->max_position_embeddings = std::min(s->max_position_embeddings, trained);
  }
  INFER_ASSIGN_OR_RETURN(const double theta, f.PositiveNumber("rotary_emb_base", 10000.0));
  s->rope_theta.assign(s->num_layers, theta);
  INFER_ASSIGN_OR_RETURN(s->qkv_bias, f.Bool("qkv_proj_bias", true));
  s->attn_out_bias = s->qkv_bias;
  INFER_ASSIGN_OR_RETURN(s->ffn_in_bias, f.Bool("mlp_fc1_bias", true));
  INFER_ASSIGN_OR_RETURN(s->ffn_out_bias, f.Bool("mlp_fc2_bias", true));
  INFER_RETURN_IF_ERROR(ClassificationLabels(f, s));
  if (!s->labels.empty()) {
    return f.Bad("a NomicBERT sequence classifier is not supported (its head is not BERT's)");
  }
  return absl::OkStatus();
}

// GTE "new": BERT's config names.
// - Embeddings: word + token type when type_vocab_size > 0 (default 1),
//   then a LayerNorm; position_embedding_type must be "rope".
// - Blocks: post-LayerNorm (attn_ln, mlp_ln); layer_norm_type must be
//   layer_norm.
// - Rotary positions on the whole head, halves rotated, θ = rope_theta
//   (default 10000). rope_scaling {type: ntk, factor: f} is fixed NTK
//   scaling, applied at every length: inverse frequencies of θ · f divided
//   by f^(2 / head_dim) (mixed_b is not supported). Otherwise θ and any
//   linear scaling as the other families read them (transformers 5's own
//   GteConfig, model_type gte, writes rope_parameters).
// - GeGLU (or another hidden_act): down(act(gate) · up), up_gate_proj
//   holding up's rows then gate's, without a bias; biases on qkv_proj,
//   o_proj and down_proj.
// - logn_attention_scale is refused.
// - A sequence classifier (NewForSequenceClassification) is BERT's head
//   (pooler.dense, tanh, classifier).
absl::Status Gte(const Fields& f, TransformerSpec* s) {
  INFER_RETURN_IF_ERROR(CommonSizes(f, s));
  INFER_ASSIGN_OR_RETURN(const std::string positions, f.String("position_embedding_type", "rope"));
  if (positions != "rope") {
    return Refuse(f, "position_embedding_type", absl::StrCat("'", positions, "'; supported: rope"));
  }
  INFER_ASSIGN_OR_RETURN(const std::string norm, f.String("layer_norm_type", "layer_norm"));
  if (norm != "layer_norm") {
    return Refuse(f, "layer_norm_type", absl::StrCat("'", norm, "'; supported: layer_norm"));
  }
  INFER_ASSIGN_OR_RETURN(const bool logn, f.Bool("logn_attention_scale", false));
  if (logn) return Refuse(f, "logn_attention_scale", "true; not supported");
  INFER_ASSIGN_OR_RETURN(s->type_vocab_size, f.NonNegative("type_vocab_size", 1));
  s->embed_norm = true;
  INFER_ASSIGN_OR_RETURN(s->norm_eps, f.PositiveNumber("layer_norm_eps", 1e-12));
  INFER_ASSIGN_OR_RETURN(s->activation, Activation(f, "hidden_act", "gelu"));
  s->gated = true;
  s->ffn_in_bias = false;
  const bool ntk = f.Has("rope_scaling") && f.at("rope_scaling").is_object() &&
                   f.at("rope_scaling").contains("type") && f.at("rope_scaling")["type"] == "ntk";
  if (!ntk) {
    // rope_theta, or transformers 5's rope_parameters (GteConfig): the
    // default or linear scaling.
    INFER_ASSIGN_OR_RETURN(const double theta,
                           RopeTheta(f, s, "full_attention", "rope_theta", 10000.0));
    s->rope_theta.assign(s->num_layers, theta);
    return ClassificationLabels(f, s);
  }
  INFER_ASSIGN_OR_RETURN(double theta, f.PositiveNumber("rope_theta", 10000.0));
  {
    const Fields r(f.at("rope_scaling"), "");
    if (r.Has("mixed_b")) {
      return Refuse(f, "rope_scaling", "type 'ntk' with mixed_b; supported: ntk without mixed_b");
    }
    if (!r.Has("factor") || !r.at("factor").is_number() || !(r.at("factor").get<double>() > 0)) {
      return Refuse(f, "rope_scaling", "its factor must be a positive number");
    }
    const double factor = r.at("factor").get<double>();
    theta *= factor;
    s->rope_linear_factor = std::pow(factor, 2.0 / static_cast<double>(s->head_dim));
  }
  s->rope_theta.assign(s->num_layers, theta);
  return ClassificationLabels(f, s);
}

}  // namespace infer::config_detail
