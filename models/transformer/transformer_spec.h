// TransformerSpec: one description of a transformer encoder (or a decoder
// used as an embedder), built from a Hugging Face config.json, naming the
// standard blocks each family is made of. The encoders
// (models/transformer/encoder.h) implement the blocks once; a family is a
// mapping from its config.json to this description (ParseTransformerSpec)
// and from its checkpoint's tensor names to TransformerWeights
// (models/transformer/transformer_weights.h).
//
// Families (config.json "model_type"):
//   bert                      absolute positions, post-LayerNorm, GELU
//   roberta, xlm-roberta,     as bert, with RoBERTa's position ids (counted
//   camembert                 over the tokens that are not pad_token_id; see
//                             position_padding_id)
//   distilbert                as bert without token types, under its own
//                             config and tensor names
//   mpnet                     as roberta (its padding id fixed at 1), no token
//                             types, plus relative position
//                             buckets added to the attention scores (shared by
//                             every layer)
//   modernbert                rotary positions (a θ per layer type), pre-norm
//                             LayerNorm without biases, GeGLU, no linear biases,
//                             global and sliding-window layers, a final norm
//   qwen3, qwen2, llama,      rotary positions, pre-norm RMSNorm, causal
//   mistral                   attention with grouped KV heads, SwiGLU, a final
//                             norm (qwen3: RMSNorm on each head's q and k;
//                             qwen2: biases on q, k and v)
//   nomic_bert                NomicBERT (Nomic's own modelling code): BERT's
//                             post-LayerNorm blocks with rotary positions in
//                             place of the position table, SwiGLU, biases as
//                             its config says
//   new                       GTE v1.5 and gte-multilingual (Alibaba's own
//                             modelling code): the same with GeGLU and NTK-
//                             scaled rotary positions
//
// Thread-compatible (plain functions and value types).
#ifndef INFER_MODELS_TRANSFORMER_TRANSFORMER_SPEC_H_
#define INFER_MODELS_TRANSFORMER_TRANSFORMER_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace infer {

enum class NormKind { kLayerNorm, kRmsNorm };
// The FFN's activation: GELU (erf form), GELU (tanh approximation), SiLU.
enum class ActivationKind { kGelu, kGeluTanh, kSilu };

const char* NormKindName(NormKind kind);

// Limits a config.json may not pass: 1024 layers, 2^21 positions.
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxPositionEmbeddings = int64_t{1} << 21;
// Rotary families serve up to 2^17 tokens a sequence (the encoders hold a
// cos/sin table for each position: 64 MiB at head size 128).
inline constexpr int64_t kMaxRotaryPositions = int64_t{1} << 17;
// The most labels a sequence-classification head may have.
inline constexpr int64_t kMaxLabels = int64_t{1} << 16;
const char* ActivationKindName(ActivationKind kind);

struct TransformerSpec {
  std::string model_type;  // config.json's, e.g. "xlm-roberta"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads unless grouped-query attention
  int64_t head_dim = 0;      // usually hidden_size / num_heads (Qwen3 names its own)
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t pad_token_id = 0;

  // Embedding: word[id] (+ position[offset + i]) (+ token_type[type]),
  // then a norm when embed_norm.
  bool absolute_positions = false;
  // RoBERTa's position ids, as transformers' create_position_ids_from_input_ids
  // computes them: a token whose id is position_padding_id takes position
  // row position_padding_id; any other, row position_padding_id + k, k
  // counting the tokens of its row up to it (itself included, masked ones
  // too) whose id is not position_padding_id. roberta, xlm-roberta and
  // camembert: pad_token_id (1 when absent, as their config classes);
  // mpnet: 1, fixed by transformers' MPNetEmbeddings whatever pad_token_id
  // says. -1: positions are columns (bert, distilbert) or rotary.
  int64_t position_padding_id = -1;
  // The row of the first counted token: position_padding_id + 1 (0 when
  // -1); packed positions (models/packed_sequences.h) are relative to it.
  int64_t position_offset = 0;
  int64_t type_vocab_size = 0;  // 0: no token-type table
  bool embed_norm = false;

  // A sequence-classification head: config.json's architectures names a
  // *ForSequenceClassification model (a cross-encoder reranker or a
  // classifier). Its labels in id order (id2label, else
  // LABEL_0..LABEL_{num_labels-1}); empty: no head.
  //   logits = W_out · norm(act(W_dense · x + b_dense)) + b_out
  // where x is the first token's final state (classifier_pooling kFirst),
  // the mean of the sequence's (kMean: ModernBERT's classifier_pooling
  // "mean"), or the last token's (kLast: the decoders'); act is tanh (BERT,
  // RoBERTa, XLM-R, MPNet, GTE), ReLU (DistilBERT's pre_classifier) or erf
  // GELU (ModernBERT's classifier_activation); norm is none, or
  // (classifier_norm: ModernBERT) a LayerNorm of norm_eps, with β where
  // norm_bias; b_dense is absent where !classifier_dense_bias (ModernBERT's
  // classifier_bias false). The decoders' head is W_out alone, without b_out
  // (!classifier_dense: transformers' `score`), and reads the last token
  // whose id is not pad_token_id (classifier_skips_pad, where the config
  // names one), as transformers picks it.
  std::vector<std::string> labels;
  // config.json's problem_type "multi_label_classification": each label's
  // score is independent (a sigmoid each, as transformers' pipeline gives
  // them), not one softmax over the labels.
  bool multi_label = false;
  enum class HeadActivation { kTanh, kRelu, kGelu };
  HeadActivation classifier_activation = HeadActivation::kTanh;
  enum class HeadPooling { kFirst, kMean, kLast };
  HeadPooling classifier_pooling = HeadPooling::kFirst;
  bool classifier_dense = true;
  bool classifier_dense_bias = true;
  bool classifier_norm = false;
  bool classifier_skips_pad = false;
  // A masked-LM head's decoder is the word embeddings (config.json's
  // tie_word_embeddings, default true) unless the checkpoint holds its own.
  bool tie_word_embeddings = true;

  // Rotary positions (rotate-half form) on q and k, θ per layer; empty:
  // none. rope_linear_factor divides the positions ("linear" scaling; GTE's
  // fixed NTK scaling by f is θ · f with positions divided by f^(2/head_dim)).
  std::vector<double> rope_theta;
  double rope_linear_factor = 1.0;

  // MPNet's relative position buckets: a [buckets, heads] table added to the
  // scores of every layer; 0: none. Distances fall in 32 buckets up to 128
  // positions apart, as transformers computes them whatever the table's size.
  int64_t relative_buckets = 0;

  NormKind norm = NormKind::kLayerNorm;
  double norm_eps = 1e-12;
  bool norm_bias = true;    // LayerNorm's β (RMSNorm never has one)
  bool pre_norm = false;    // x + f(norm(x)); else norm(x + f(x))
  bool final_norm = false;  // a norm after the last layer (pre-norm families)
  // Layer 0 has no attention norm (ModernBERT: the embedding norm serves).
  bool first_attn_norm = true;
  bool qk_norm = false;  // RMSNorm over each head's q and k (Qwen3)

  bool causal = false;
  // Per layer: 0 attends to every key (that causality allows); w > 0 to keys
  // at most w positions away.
  std::vector<int64_t> window;

  ActivationKind activation = ActivationKind::kGelu;
  // act(x·W1a) ⊙ (x·W1b): ffn_in has 2 × intermediate rows, the activated
  // half first (GeGLU, SwiGLU).
  bool gated = false;
  bool qkv_bias = true;
  bool attn_out_bias = true;
  bool ffn_in_bias = true;
  bool ffn_out_bias = true;

  // Tokens one sequence may have: what the position table (absolute
  // positions past the offset) or max_position_embeddings allows, at most
  // kMaxRotaryPositions with rotary positions.
  int64_t MaxSequenceLength() const;
  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }
  // BERT's shape: absolute positions, post-LayerNorm with biases, ungated
  // erf GELU, full bidirectional multi-head attention, no relative
  // positions, biases everywhere, with or without token types. The CUDA
  // encoder's tuned path computes these.
  bool IsBertShaped() const;
  // One line for logs: family, sizes and blocks.
  std::string Describe() const;
};

// The model_type values ParseTransformerSpec accepts, comma-separated.
std::string SupportedModelTypes();

// Maps a config.json to its description, checking every field it reads:
// INVALID_ARGUMENT naming the file and field; for a model_type not listed
// above, INVALID_ARGUMENT naming it and the supported ones.
absl::StatusOr<TransformerSpec> ParseTransformerSpec(const std::string& text,
                                                     const std::string& path);
absl::StatusOr<TransformerSpec> ReadTransformerSpec(const std::string& path);

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_TRANSFORMER_SPEC_H_
