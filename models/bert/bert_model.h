// bert: a transformer sentence encoder served from a Hugging Face checkpoint
// folder (config.json, model.safetensors, tokenizer.json or vocab.txt), e.g.
// all-MiniLM-L6-v2, or any family models/transformer/transformer_spec.h lists
// (multilingual-e5 as XLM-R, all-mpnet-base-v2, gte-modernbert,
// Qwen3-Embedding) on the CPU and on CUDA.
//
// Inputs (send either text, or token ids):
//   text            BYTES [-1]       one sentence per element (UTF-8)
//   input_ids       INT64 [-1, -1]   (batch, sequence) token ids
//   attention_mask  INT64 [-1, -1]   optional with input_ids: 1 real, 0 padding
//   token_type_ids  INT64 [-1, -1]   optional with input_ids: segment ids, each
//                                    below config.json's type_vocab_size
//                                    (declared by families with a token-type
//                                    table: BERT, RoBERTa, XLM-R); absent: 0
// Output:
//   embedding       FP32  [-1, width]   pooled over real tokens, through the
//                                       folder's Dense modules if any
//                                       (models/transformer/dense_head.h;
//                                       width: the last one's out_features,
//                                       else hidden), L2-normalised where
//                                       modules.json lists Normalize (or
//                                       as configured, or as
//                                       InferRequest::normalize says), cut to
//                                       InferRequest::dimensions where the
//                                       model is Matryoshka-trained, then
//                                       normalised again
//
// A sequence-classification checkpoint (config.json's architectures names a
// *ForSequenceClassification: a cross-encoder reranker or a classifier)
// answers scores instead, and takes pairs of texts too
// (models/bert/text_inputs.h):
//   text_pair       BYTES [-1]       optional with text: text[i] pairs with it
//   query           BYTES [1]        one text for the whole request, with
//   documents       BYTES [-1]       each: the pairs (query, documents[i])
// Output:
//   scores          FP32  [-1, labels]  the head's raw logits on the first
//                                       token's state (ModernBERT's: the
//                                       mean, where its config says), as
//                                       transformers' model(...).logits; the output's
//                                       TensorSpec::labels are id2label's
//
// An embedding model also gives, to a request that names them
// (TensorSpec::on_request; on the CPU and on CUDA, where they are computed in
// FP16 and handed out in FP32), each token's last hidden state, as
// TEI's /embed_all and ColBERT-style late interaction use them:
//   token_embeddings FP32 [-1, hidden]  every real token of every text, in
//                                       order, special tokens included
//   token_counts     INT64 [-1]         how many of them each text has
//
// A SPLADE checkpoint (a sentence-transformers SparseEncoder folder: an
// MLMTransformer over a *ForMaskedLM checkpoint, then SpladePooling; or the
// pooling parameter "splade"; on the CPU and on CUDA) answers a sparse vector over the
// vocabulary per text, its non-zero terms only (models/transformer/splade_head.h):
//   sparse_counts    INT64 [-1]         how many terms each text has
//   sparse_indices   INT64 [-1]         their token ids, ascending per text,
//                                       text after text
//   sparse_values    FP32  [-1]         their weights, in the same order
//
// Text is tokenised when the request arrives (Preprocess), so length classes
// see real token counts, by the folder's tokenizer.json, else its vocab.txt
// (models/text/load_tokenizer.h), exactly as Hugging Face's tokenizer does.
// A text may have as many tokens as sentence-transformers lets it:
// sentence_bert_config.json's max_seq_length, else tokenizer_config.json's
// model_max_length, else the position table (or the configured
// max_sequence_length, up to the position table). A longer text is refused
// (INVALID_ARGUMENT naming both lengths) unless the model is configured with
// auto_truncate, which cuts it to that length as sentence-transformers does
// (right side, special tokens kept; a request may ask for it, or against it,
// with InferRequest::truncate). A prompt from the folder's
// config_sentence_transformers.json (the request's prompt_name, else the
// model's prompt_name parameter, else its default_prompt_name) is prepended
// to every text, as sentence-transformers' encode(prompt_name=...) does, and
// counts in the length. A batch is packed
// (models/packed_sequences.h): only the tokens the attention masks mark real are staged, uploaded
// and computed, so the memory model, max_batch_tokens and the statistics count real tokens
// (ComputedTokens). The encoder runs on the context's device: FP32 or BF16 with oneDNN on the CPU,
// FP16 with cuBLAS and fused kernels on CUDA (models/transformer/encoder.h), in the configured
// precision. The packed input, activations and output all come from the context's caching
// allocator, and PeakBytes counts them block by block.
//
// Thread-safety: see Model.
#ifndef INFER_MODELS_BERT_BERT_MODEL_H_
#define INFER_MODELS_BERT_BERT_MODEL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "models/bert/text_inputs.h"
#include "models/model.h"
#include "models/text/tokenizer.h"
#include "models/transformer/dense_head.h"
#include "models/transformer/encoder.h"
#include "models/transformer/splade_head.h"
#include "runtime/device_context.h"

namespace infer {

struct BertModelOptions {
  std::string name = "minilm";
  std::string backend = "bert";  // the registry name it is served under
  std::string checkpoint_dir;    // config.json, model.safetensors, tokenizer.json or vocab.txt
  // L2-normalise the pooled embedding (a request may say otherwise:
  // InferRequest::normalize). Unset: as sentence-transformers does, whether
  // the folder's modules.json lists Normalize; true for a folder without
  // modules.json (TEI's default).
  std::optional<bool> normalize;
  // Mean over real tokens, the first ([CLS]) or the last token's state.
  // Unset: what the checkpoint's sentence-transformers 1_Pooling/config.json
  // says, else mean.
  std::optional<Pooling> pooling;
  // SPLADE over the masked-LM head (TEI's --pooling splade), with the
  // folder's SpladePooling settings if any. Also chosen, with pooling unset,
  // by a folder whose modules.json lists SpladePooling.
  bool splade = false;
  // 0: sentence-transformers' limit (see above); else this, up to the
  // position table.
  int64_t max_sequence_length = 0;
  // Texts longer than the limit are cut to it instead of refused (the
  // server sets it for folders without a config.pbtxt unless
  // --auto-truncate=false; a config.pbtxt's own parameter, default false).
  bool auto_truncate = false;
  // The sentence-transformers prompt (config_sentence_transformers.json's
  // prompts) prepended to every text; empty: its default_prompt_name's, if
  // any. A request may name another of them (InferRequest::prompt_name).
  std::string prompt_name;
  // A text prepended to every text instead (TEI's --default-prompt); not
  // with prompt_name.
  std::string prompt;
  // The Dense module's folder instead of the one modules.json lists (TEI's
  // --dense-path; DenseHead::Load).
  std::string dense_path;
  // The embeddings may be cut to any width (InferRequest::dimensions): the
  // model was trained for it (Matryoshka). Unset: what the model card says
  // (ModelCardDeclaresMatryoshka).
  std::optional<bool> matryoshka;
  // fp32, bf16, fp16, int8 or auto (models/precision.h), resolved for the device.
  Precision precision = Precision::kAuto;
  // CUDA Graphs for small batches on a GPU (models/bert/bert_cuda_graphs.h).
  EncoderGraphOptions graphs;
  // The FFN's bias + GELU in cuBLASLt's GEMM epilogue on a GPU
  // (EncoderOptions::cublaslt_epilogues; the parameter cuda_fused_epilogues).
  bool cublaslt_epilogues = false;
  // Each embedding bit-identical whatever it is batched with (CPU only;
  // models/transformer/encoder_cpu.h).
  bool batch_invariant = false;
  // A reduced precision on the CPU (bf16, int8) must pass the quality gate
  // against the model's FP32 (models/transformer/precision_gate.h): one the
  // options name is refused at load if it fails, one `auto` chose falls back
  // to FP32. false: serve it unchecked (the description says so).
  bool precision_gate = true;
};

class BertModel final : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<BertModel>> Create(const BertModelOptions& options,
                                                           const DeviceContext& context);

  const ModelSpec& spec() const override { return spec_; }
  absl::Status Preprocess(InferRequest* request) const override;
  absl::Status ValidateRequest(const InferRequest& request) const override;
  int64_t RealTokens(const InferRequest& request) const override;
  // Its real tokens when it asks for the per-token outputs, else 0.
  int64_t StateTokens(const InferRequest& request) const override;
  int64_t PeakBytes(const BatchShape& shape) const override;
  int64_t ComputedTokens(const BatchShape& shape) const override { return shape.tokens; }
  int64_t WeightBytes() const override {
    return encoder_->WeightBytes() + encoder_->ResidentBytes();
  }
  const TransformerEncoder& encoder() const { return *encoder_; }
  const Tokenizer* tokenizer() const override { return tokenizer_.get(); }
  absl::StatusOr<std::string> PromptText(const std::string& prompt_name) const override;
  absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const> requests) override;

 private:
  class Batch;
  BertModel() = default;
  // Whether batches carry token types: the model has a token-type table.
  bool with_types() const { return encoder_->spec().type_vocab_size > 0; }
  // What follows pooling: the classification head, else the folder's Dense
  // modules (empty when neither).
  const DenseHead& head() const { return classifier_ != nullptr ? *classifier_ : dense_; }
  // Embeddings are L2-normalised as configured; scores and SPLADE never.
  bool normalize() const { return classifier_ == nullptr && splade_ == nullptr && normalize_; }
  // The width of the batch's output rows: the vocabulary for SPLADE, else
  // what follows pooling gives.
  int64_t output_width() const;
  // The width of the rows the device writes: the vocabulary for SPLADE,
  // else the hidden size (pooled; any head after pooling runs on the host,
  // after the download).
  int64_t device_width() const;
  // Whether the model declares the per-token outputs (token_embeddings).
  bool token_outputs() const { return token_outputs_; }
  // Whether `request` names one of them (and the model declares them).
  bool WantsTokenOutputs(const InferRequest& request) const;

  BertModelOptions options_;
  DeviceContext context_;
  ModelSpec spec_;
  std::unique_ptr<TransformerEncoder> encoder_;
  // The folder's tokenizer.json or vocab.txt, behind the Tokenizer interface.
  std::unique_ptr<Tokenizer> tokenizer_;
  int64_t max_length_ = 0;  // tokens a sequence may have, the special ones included
  std::string prompt_;      // prepended to every text
  Pooling pooling_ = Pooling::kMean;
  bool normalize_ = true;  // BertModelOptions::normalize, resolved
  DenseHead dense_;        // modules.json's Dense modules after pooling (on the host)
  // The encoder's sequence-classification head (on the host), or null: the
  // model then answers scores instead of embeddings.
  const DenseHead* classifier_ = nullptr;
  // The encoder's SPLADE head, or null: the model then answers sparse
  // vectors pooled as splade_pooling_ says.
  const SpladeHead* splade_ = nullptr;
  SpladePooling splade_pooling_;
  bool token_outputs_ = false;
  TextInputPolicy text_;  // how Preprocess tokenises text
};

}  // namespace infer

#endif  // INFER_MODELS_BERT_BERT_MODEL_H_
