// TransformerWeights: a transformer checkpoint's weights in host memory
// (FP32) in one layout for every family (models/transformer/transformer_spec.h),
// read from a Hugging Face folder (config.json, model.safetensors) by the
// family's tensor names.
//
// Layout: Linear weights are [out, in] as Hugging Face stores them. Q, K and
// V are one linear layer (the rows of q, then k, then v); a gated FFN's
// input layer holds the activated half's rows first, then the other half's
// (Llama's gate_proj then up_proj; ModernBERT's Wi as stored; NomicBERT's
// fc12 then fc11; GTE's up_gate_proj with its halves swapped). An absent
// bias or norm β is an empty vector.
//
// Thread-compatible (value types).
#ifndef INFER_MODELS_TRANSFORMER_TRANSFORMER_WEIGHTS_H_
#define INFER_MODELS_TRANSFORMER_TRANSFORMER_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/transformer/dense_head.h"
#include "models/transformer/transformer_spec.h"

namespace infer {

struct TransformerWeights {
  struct Linear {
    std::vector<float> w;  // [out, in]
    std::vector<float> b;  // [out], or empty
    int64_t out = 0, in = 0;
  };
  struct Norm {
    std::vector<float> gamma;  // empty: no norm here
    std::vector<float> beta;   // empty: none (RMSNorm, or a LayerNorm without β)
    bool present() const { return !gamma.empty(); }
  };
  struct Layer {
    Linear qkv;       // [q_width + 2 * kv_width, hidden]
    Linear attn_out;  // [hidden, q_width]
    Linear ffn_in;    // [intermediate (× 2 when gated), hidden]
    Linear ffn_out;   // [hidden, intermediate]
    // Post-norm: after each residual add; pre-norm: before each block
    // (attn_norm absent in ModernBERT's layer 0).
    Norm attn_norm, ffn_norm;
    Norm q_norm, k_norm;  // [head_dim] (qk_norm)
  };
  TransformerSpec spec;
  std::vector<float> word;           // [vocab, hidden]
  std::vector<float> position;       // [max_position_embeddings, hidden], or empty
  std::vector<float> token_type;     // [type_vocab_size, hidden], or empty
  std::vector<float> relative_bias;  // [relative_buckets, heads], or empty
  Norm embed_norm, final_norm;
  std::vector<Layer> layers;
  // The classification head when spec.labels is not empty (else empty):
  // [hidden, hidden] then [labels, hidden], with biases (BERT's
  // bert.pooler.dense and classifier; RoBERTa's, XLM-R's and MPNet's
  // classifier.dense and classifier.out_proj; DistilBERT's pre_classifier
  // and classifier; GTE's pooler.dense and classifier; ModernBERT's
  // head.dense, biased per classifier_bias, and classifier), and between
  // them ModernBERT's head.norm (spec.classifier_norm); the decoders' `score`
  // alone (classifier_out, no bias; classifier_dense empty).
  Linear classifier_dense, classifier_out;
  Norm classifier_norm;
  // The masked-language-model head, when asked for at load (else empty):
  // transform = Norm(act(dense · x + b)), then logits = decoder · transform
  // + b over the vocabulary. BERT's cls.predictions (its decoder tied to the
  // word embeddings unless config.json's tie_word_embeddings is false and
  // the checkpoint holds cls.predictions.decoder.weight); RoBERTa's, XLM-R's
  // and CamemBERT's lm_head (dense, layer_norm, decoder); DistilBERT's
  // vocab_transform, vocab_layer_norm and vocab_projector (tied likewise).
  struct MaskedLm {
    Linear dense;    // [hidden, hidden]
    Norm norm;       // LayerNorm [hidden]
    Linear decoder;  // [vocab, hidden], with a bias
    bool present() const { return !decoder.w.empty(); }
  };
  MaskedLm masked_lm;

  int64_t ParameterCount() const;
};

// Derived tables both encoders use, computed once at load as transformers
// computes them (FP32).
// Rotary inverse frequencies for θ: inv_freq[i] = 1 / θ^(2i / head_dim)
// / rope_linear_factor, for i < head_dim / 2; the angle of position p is
// p · inv_freq[i].
std::vector<float> RopeInverseFrequencies(const TransformerSpec& spec, double theta);
// MPNet's relative bias by distance: [heads, 2 P - 1] with P =
// max_position_embeddings, the bias of key k for query q at [head][k - q +
// P - 1] (w.relative_bias looked up by transformers' bucket of k - q).
// Empty when the model has none.
std::vector<float> RelativeBiasByDistance(const TransformerWeights& w);
// The classification head (classifier_dense, spec.classifier_activation,
// classifier_norm where present, then classifier_out), copied into host
// layers that both encoders hand to the caller
// (TransformerEncoder::classifier); empty when spec.labels is.
DenseHead ClassificationHead(const TransformerWeights& w);

// Reads `dir`/config.json and `dir`/model.safetensors (or, when the folder has
// none, the shards `dir`/model.safetensors.index.json lists). Tensor names may carry
// the prefix the family's task heads add ("bert.", "roberta.", "distilbert.",
// "mpnet.", "model.", "new.", "gte."). INVALID_ARGUMENT naming the file and tensor when one
// is missing or has the wrong shape, or the model_type is not supported.
// `masked_lm_head` also reads the masked-LM head (SPLADE's logits):
// INVALID_ARGUMENT for a family without one here (all but bert, roberta,
// xlm-roberta, camembert and distilbert) or a checkpoint that lacks it.
absl::StatusOr<TransformerWeights> LoadTransformerWeights(const std::string& dir,
                                                          bool masked_lm_head = false);

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_TRANSFORMER_WEIGHTS_H_
