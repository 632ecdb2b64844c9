#include "models/bert/bert_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "models/bert/precision_check.h"
#include "models/bert/sentence_transformers_files.h"
#include "models/cpu_auto_precision.h"
#include "models/staged_batch.h"
#include "models/text/load_tokenizer.h"
#include "models/transformer/encoder_cpu.h"
#include "models/transformer/load_encoder.h"
#include "models/transformer/precision_gate.h"
#include "runtime/json_parse.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {}  // namespace

absl::StatusOr<std::unique_ptr<BertModel>> BertModel::Create(const BertModelOptions& options,
                                                             const DeviceContext& context) {
  if (context.device == nullptr || context.allocator == nullptr || context.staging == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("bert model '", options.name, "': the device context is incomplete"));
  }
  std::unique_ptr<BertModel> m(new BertModel());
  m->options_ = options;
  m->context_ = context;
  // SPLADE: asked for, or what the folder's modules say unless a pooling
  // is named.
  INFER_ASSIGN_OR_RETURN(const std::optional<SpladePooling> splade,
                         SentenceTransformersSplade(options.checkpoint_dir));
  const bool sparse = options.splade || (splade.has_value() && !options.pooling.has_value());
  m->splade_pooling_ = splade.value_or(SpladePooling());
  EncoderOptions encoder_options;
  encoder_options.precision = options.precision;
  encoder_options.graphs = options.graphs;
  encoder_options.cublaslt_epilogues = options.cublaslt_epilogues;
  encoder_options.batch_invariant = options.batch_invariant;
  encoder_options.masked_lm_head = sparse;
  INFER_ASSIGN_OR_RETURN(m->encoder_,
                         LoadEncoder(options.checkpoint_dir, context, encoder_options));
  INFER_ASSIGN_OR_RETURN(text::FolderTokenizer tokenizer,
                         text::LoadFolderTokenizer(options.checkpoint_dir));
  m->tokenizer_ = std::move(tokenizer.tokenizer);
  // A copy: the encoder may be replaced below (the precision gate).
  const TransformerSpec c = m->encoder_->spec();
  // Every id the tokenizer gives must index the embedding table (which may
  // be larger: tables are often padded).
  if (m->tokenizer_->vocab_size() > c.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(tokenizer.source, " gives ids up to ", m->tokenizer_->vocab_size() - 1,
                     " but config.json says vocab_size ", c.vocab_size));
  }
  std::string length_source;
  if (options.max_sequence_length > 0) {
    m->max_length_ = std::min(options.max_sequence_length, c.MaxSequenceLength());
    length_source = "max_sequence_length";
  } else {
    INFER_ASSIGN_OR_RETURN(std::optional<int64_t> st,
                           SentenceTransformersMaxLength(options.checkpoint_dir));
    length_source = st.has_value()                           ? "sentence_bert_config.json"
                    : tokenizer.model_max_length.has_value() ? "tokenizer_config.json"
                                                             : "config.json";
    m->max_length_ =
        std::min(st.value_or(tokenizer.model_max_length.value_or(c.MaxSequenceLength())),
                 c.MaxSequenceLength());
  }
  if (sparse) {
    m->splade_ = m->encoder_->splade();
    if (m->splade_ == nullptr || !c.labels.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.checkpoint_dir, ": SPLADE needs a masked-LM checkpoint",
                       c.labels.empty() ? "" : ", not a sequence-classification one"));
    }
  }
  if (options.pooling.has_value()) {
    m->pooling_ = *options.pooling;
  } else {
    INFER_ASSIGN_OR_RETURN(m->pooling_, SentenceTransformersPooling(options.checkpoint_dir));
  }
  INFER_ASSIGN_OR_RETURN(
      m->dense_, DenseHead::Load(options.checkpoint_dir, c.hidden_size, options.dense_path));
  // Normalisation: configured, else as the folder's modules.json says.
  std::string normalize_source = "as configured";
  if (options.normalize.has_value()) {
    m->normalize_ = *options.normalize;
  } else {
    INFER_ASSIGN_OR_RETURN(std::optional<bool> listed,
                           SentenceTransformersNormalize(options.checkpoint_dir));
    m->normalize_ = listed.value_or(true);
    normalize_source = !listed.has_value() ? "no modules.json: TEI's default"
                       : *listed           ? "modules.json lists Normalize"
                                           : "modules.json lists no Normalize";
  }
  if (!c.labels.empty()) {
    // A *ForSequenceClassification checkpoint: its head on the first
    // token's state gives the scores, raw logits.
    m->classifier_ = m->encoder_->classifier();
    if (m->classifier_ == nullptr) {
      return absl::InternalError(absl::StrCat(options.checkpoint_dir, ": the encoder holds no ",
                                              "classification head for config.json's ",
                                              c.labels.size(), " labels"));
    }
    if (!m->dense_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.checkpoint_dir, ": a sequence-classification checkpoint with Dense modules (",
          m->dense_.Describe(), ") is not supported"));
    }
    m->pooling_ = ClassifierPooling(c);
  }
  INFER_ASSIGN_OR_RETURN(
      const PrecisionCheck gate,
      CheckPrecision(options, *m->encoder_, context, *m->tokenizer_, m->max_length_, m->pooling_,
                     m->splade_ != nullptr ? &m->splade_pooling_ : nullptr));
  if (gate.use_fp32) {
    encoder_options.precision = Precision::kFp32;
    INFER_ASSIGN_OR_RETURN(m->encoder_,
                           LoadEncoder(options.checkpoint_dir, context, encoder_options));
    if (m->splade_ != nullptr) m->splade_ = m->encoder_->splade();
    if (m->classifier_ != nullptr) m->classifier_ = m->encoder_->classifier();
  }
  INFER_ASSIGN_OR_RETURN(auto prompt,
                         SentenceTransformersPrompt(options.checkpoint_dir, options.prompt_name));
  if (!options.prompt.empty()) {
    if (!options.prompt_name.empty()) {
      return absl::InvalidArgumentError("give a prompt by its name or its text, not both");
    }
    prompt = {options.prompt, options.prompt};
  }
  m->prompt_ = prompt.second;
  m->spec_.name = options.name;
  m->spec_.quality_check = gate.summary;
  if (gate.checked) {
    m->spec_.check_min_cosine = gate.figures.min_cosine;
    m->spec_.check_neighbour_overlap = gate.figures.neighbour_overlap;
    m->spec_.check_spearman = gate.figures.spearman;
  }
  m->spec_.platform = "infer_" + options.backend;
  m->spec_.backend = options.backend;
  std::string task = absl::StrCat(PoolingName(m->pooling_), " pooling",
                                  m->normalize_ ? ", L2-normalised (" : ", not normalised (",
                                  normalize_source, ")");
  if (m->classifier_ != nullptr) {
    task = absl::StrCat(
        c.multi_label ? "multi-label " : "", "sequence classification (",
        absl::StrJoin(c.labels, ", "), ") on ",
        c.classifier_pooling == TransformerSpec::HeadPooling::kMean ? "the mean of the tokens"
        : c.classifier_pooling == TransformerSpec::HeadPooling::kLast
            ? (c.classifier_skips_pad ? "the last token that is not padding" : "the last token")
            : "the first token");
  }
  if (m->splade_ != nullptr) {
    task = absl::StrCat("SPLADE: ", m->splade_pooling_.sum ? "sum" : "max", " of log(1 + ",
                        m->splade_pooling_.log1p_twice ? "log(1 + ReLU))" : "ReLU)", " over ",
                        m->splade_->vocab(), " terms");
  }
  m->spec_.description = absl::StrCat(
      c.Describe(), "; tokenizer ", tokenizer.source, "; ", task, "; texts up to ", m->max_length_,
      " tokens (", length_source, ")",
      options.auto_truncate ? ", longer ones truncated" : ", longer ones refused",
      prompt.first.empty() ? "" : absl::StrCat("; prompt '", prompt.first, "' before each text"),
      m->dense_.empty() ? "" : absl::StrCat("; then ", m->dense_.Describe()), gate.description);
  if (options.precision == Precision::kAuto && context.device->info().kind == DeviceKind::kCpu) {
    // Why auto chose what it did (models/cpu_auto_precision.h).
    m->spec_.precision_reason = absl::StrCat("auto: ", CpuAutoPrecision().reason);
    absl::StrAppend(&m->spec_.description, "; ", m->spec_.precision_reason);
  }
  m->spec_.precision = PrecisionName(m->encoder_->precision());
  m->spec_.implementation = m->encoder_->Implementation();
  m->spec_.batch_invariant = options.batch_invariant;  // refused at load where not offered
  m->spec_.max_sequence_length = m->max_length_;
  m->spec_.auto_truncate = options.auto_truncate;
  m->text_.tokenizer = m->tokenizer_.get();
  m->text_.model = options.name;
  m->text_.max_length = m->max_length_;
  m->text_.prompt = m->prompt_;
  if (m->classifier_ == nullptr) {
    // Any of the folder's prompts, by name, per request.
    INFER_ASSIGN_OR_RETURN(m->text_.prompts, SentenceTransformersPrompts(options.checkpoint_dir));
    for (const auto& [name, text] : m->text_.prompts) m->spec_.prompts.push_back(name);
  }
  m->text_.auto_truncate = options.auto_truncate;
  m->text_.with_types = c.type_vocab_size > 0;
  m->text_.pairs = m->classifier_ != nullptr;
  m->spec_.inputs = TextInputSpecs(m->text_);
  m->spec_.inputs.push_back(
      {"input_ids", DataType::kInt64, {-1, -1}, /*optional=*/true, /*accepts_int32=*/true});
  m->spec_.inputs.push_back(
      {"attention_mask", DataType::kInt64, {-1, -1}, /*optional=*/true, /*accepts_int32=*/true});
  if (c.type_vocab_size > 0) {
    // Segment ids (0 for a single text; 0 then 1 for a pair), as the
    // tokenizer gives them: a model with a token-type table takes them.
    m->spec_.inputs.push_back(
        {"token_type_ids", DataType::kInt64, {-1, -1}, /*optional=*/true, /*accepts_int32=*/true});
  }
  if (m->classifier_ != nullptr) {
    TensorSpec scores{"scores", DataType::kFp32, {-1, m->classifier_->out_features()}};
    scores.labels = c.labels;
    scores.multi_label = c.multi_label;
    m->spec_.outputs = {std::move(scores)};
  } else if (m->splade_ != nullptr) {
    m->spec_.pooling = "splade";
    m->spec_.outputs = {{"sparse_counts", DataType::kInt64, {-1}},
                        {"sparse_indices", DataType::kInt64, {-1}},
                        {"sparse_values", DataType::kFp32, {-1}}};
  } else {
    TensorSpec embedding{"embedding", DataType::kFp32, {-1, m->dense_.out_features()}};
    embedding.normalizable = true;
    m->spec_.pooling = PoolingName(m->pooling_);
    embedding.matryoshka =
        options.matryoshka.value_or(ModelCardDeclaresMatryoshka(options.checkpoint_dir));
    if (embedding.matryoshka) {
      absl::StrAppend(&m->spec_.description, "; Matryoshka: any width up to ", embedding.shape[1]);
    }
    m->spec_.outputs = {std::move(embedding)};
    m->token_outputs_ = m->encoder_->HasTokenStates();
    if (m->token_outputs_) {
      TensorSpec states{"token_embeddings", DataType::kFp32, {-1, c.hidden_size}};
      TensorSpec counts{"token_counts", DataType::kInt64, {-1}};
      states.on_request = counts.on_request = true;
      m->spec_.outputs.push_back(std::move(states));
      m->spec_.outputs.push_back(std::move(counts));
    }
  }
  return m;
}

int64_t BertModel::output_width() const {
  return splade_ != nullptr ? splade_->vocab() : head().out_features();
}

int64_t BertModel::device_width() const {
  return splade_ != nullptr ? splade_->vocab() : encoder_->spec().hidden_size;
}

absl::StatusOr<std::string> BertModel::PromptText(const std::string& prompt_name) const {
  if (prompt_name.empty()) return text_.prompt;
  auto it = text_.prompts.find(prompt_name);
  if (it == text_.prompts.end()) return Model::PromptText(prompt_name);
  return it->second;
}

absl::Status BertModel::Preprocess(InferRequest* request) const {
  return TokenizeTextInputs(text_, request);
}

absl::Status BertModel::ValidateRequest(const InferRequest& request) const {
  const Tensor* ids = FindInput(request, "input_ids");
  if (ids == nullptr) {
    return absl::InvalidArgumentError("'attention_mask' and 'token_type_ids' need 'input_ids'");
  }
  if (ids->shape[1] > max_length_) {
    return absl::InvalidArgumentError(absl::StrCat("input 'input_ids' has ", ids->shape[1],
                                                   " tokens; model '", spec_.name, "' allows ",
                                                   max_length_));
  }
  const int64_t vocab = encoder_->spec().vocab_size;
  const int64_t n = ids->shape[0] * ids->shape[1];
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = ids->as<int64_t>()[i];
    if (v < 0 || v >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("input 'input_ids' holds token id ", v,
                                                     " at flat index ", i, "; model '", spec_.name,
                                                     "' accepts ids in [0, ", vocab, ")"));
    }
  }
  if (const Tensor* mask = FindInput(request, "attention_mask"); mask != nullptr) {
    if (mask->shape != ids->shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("input 'attention_mask' has shape ", ShapeToString(mask->shape),
                       "; it must match 'input_ids' ", ShapeToString(ids->shape)));
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = mask->as<int64_t>()[i];
      if (v != 0 && v != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input 'attention_mask' holds ", v, " at flat index ", i, "; it must be 0 or 1"));
      }
    }
  }
  // Declared only where the model has a token-type table (Create).
  if (const Tensor* types = FindInput(request, "token_type_ids"); types != nullptr) {
    if (types->shape != ids->shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("input 'token_type_ids' has shape ", ShapeToString(types->shape),
                       "; it must match 'input_ids' ", ShapeToString(ids->shape)));
    }
    const int64_t type_vocab = encoder_->spec().type_vocab_size;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = types->as<int64_t>()[i];
      if (v < 0 || v >= type_vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat("input 'token_type_ids' holds ", v, " at flat index ", i, "; model '",
                         spec_.name, "' accepts types in [0, ", type_vocab, ")"));
      }
    }
  }
  return absl::OkStatus();
}

bool BertModel::WantsTokenOutputs(const InferRequest& request) const {
  return token_outputs_ &&
         std::any_of(request.requested_outputs.begin(), request.requested_outputs.end(),
                     [](const std::string& name) {
                       return name == "token_embeddings" || name == "token_counts";
                     });
}

int64_t BertModel::StateTokens(const InferRequest& request) const {
  return WantsTokenOutputs(request) ? RealTokens(request) : 0;
}

int64_t BertModel::RealTokens(const InferRequest& request) const {
  const Tensor* ids = FindInput(request, "input_ids");
  const Tensor* mask = FindInput(request, "attention_mask");
  const int64_t n = ids->shape[0] * ids->shape[1];
  return CountRealTokens(mask != nullptr ? mask->as<int64_t>() : nullptr, n);
}

int64_t BertModel::PeakBytes(const BatchShape& shape) const {
  if (shape.rows == 0) return 0;
  // The packed ids, positions, offsets and types, the device's output, and
  // the encoder's scratch. The head after pooling (Dense modules or a
  // classifier) runs on the host after the download, out of this memory.
  const PackedLayout layout{shape.rows, shape.tokens, with_types()};
  const int64_t io = StagedRowsBatch::InputAndOutputBytes(static_cast<int64_t>(layout.bytes()),
                                                          shape.rows, device_width());
  // Every token's state: SPLADE's head input, or the per-token outputs
  // (kept for the whole batch when any of its requests asks for them).
  const int64_t states =
      splade_ != nullptr || (token_outputs_ && shape.state_tokens > 0)
          ? CachingAllocator::BlockBytes(shape.tokens * encoder_->spec().hidden_size * 4)
          : 0;
  if (splade_ != nullptr) {
    // The encoder's scratch is returned before the head takes its chunk of
    // vocabulary-wide logits.
    return io + states +
           std::max(encoder_->PeakBytes(shape),
                    CachingAllocator::BlockBytes(splade_->ScratchBytes(shape.tokens)));
  }
  return io + states + encoder_->PeakBytes(shape);
}

}  // namespace infer
