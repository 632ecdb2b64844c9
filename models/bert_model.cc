#include "models/bert_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

const Tensor* FindInput(const InferRequest& r, const std::string& name) {
  for (const Tensor& t : r.inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Tensor Int64Tensor(const std::string& name, int64_t rows, int64_t cols,
                   const std::vector<int64_t>& values) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kInt64;
  t.shape = {rows, cols};
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BertModel>> BertModel::Create(const BertModelOptions& options,
                                                             const DeviceContext& context) {
  if (context.device == nullptr || context.device->info().kind != DeviceKind::kCpu) {
    return absl::FailedPreconditionError(
        absl::StrCat("bert model '", options.name,
                     "': only the CPU implementation exists so far; serve it "
                     "with --device cpu"));
  }
  std::unique_ptr<BertModel> m(new BertModel());
  m->options_ = options;
  INFER_ASSIGN_OR_RETURN(m->encoder_, BertEncoderCpu::Load(options.checkpoint_dir));
  INFER_ASSIGN_OR_RETURN(
      m->tokenizer_, WordPieceTokenizer::FromVocabFile(options.checkpoint_dir + "/vocab.txt", {}));
  const BertConfig& c = m->encoder_->config();
  if (m->tokenizer_->vocab_size() != c.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.checkpoint_dir, ": vocab.txt has ", m->tokenizer_->vocab_size(),
                     " tokens but config.json says vocab_size ", c.vocab_size));
  }
  m->max_length_ = options.max_sequence_length > 0
                       ? std::min(options.max_sequence_length, c.max_position_embeddings)
                       : c.max_position_embeddings;
  m->spec_.name = options.name;
  m->spec_.platform = "infer_bert";
  m->spec_.inputs = {{"text", DataType::kBytes, {-1}, /*optional=*/true},
                     {"input_ids", DataType::kInt64, {-1, -1}, /*optional=*/true},
                     {"attention_mask", DataType::kInt64, {-1, -1}, /*optional=*/true}};
  m->spec_.outputs = {{"embedding", DataType::kFp32, {-1, c.hidden_size}}};
  return m;
}

absl::Status BertModel::Preprocess(InferRequest* request) const {
  const Tensor* text = FindInput(*request, "text");
  if (text == nullptr) {
    if (FindInput(*request, "input_ids") == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model '", spec_.name, "' needs input 'text' (BYTES) or 'input_ids' (INT64)"));
    }
    return absl::OkStatus();
  }
  if (FindInput(*request, "input_ids") != nullptr ||
      FindInput(*request, "attention_mask") != nullptr) {
    return absl::InvalidArgumentError(
        "send either 'text' or 'input_ids' (with an optional 'attention_mask'), not both");
  }
  std::vector<std::vector<int64_t>> rows;
  int64_t seq = 0;
  INFER_ASSIGN_OR_RETURN(const std::vector<absl::string_view> sentences,
                         BytesElements(*text, text->shape[0], "input 'text'"));
  for (size_t i = 0; i < sentences.size(); ++i) {
    absl::StatusOr<std::vector<int64_t>> ids = tokenizer_->Encode(sentences[i]);
    if (!ids.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input 'text' element ", i, ": ", ids.status().message()));
    }
    if (static_cast<int64_t>(ids->size()) > max_length_) {
      return absl::InvalidArgumentError(absl::StrCat("input 'text' element ", i, " has ",
                                                     ids->size(), " tokens; model '", spec_.name,
                                                     "' allows ", max_length_));
    }
    seq = std::max<int64_t>(seq, ids->size());
    rows.push_back(*std::move(ids));
  }
  std::vector<int64_t> ids, mask;
  for (const auto& row : rows) {
    for (int64_t s = 0; s < seq; ++s) {
      const bool real = s < static_cast<int64_t>(row.size());
      ids.push_back(real ? row[s] : tokenizer_->pad_id());
      mask.push_back(real ? 1 : 0);
    }
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  request->inputs.clear();
  request->inputs.push_back(Int64Tensor("input_ids", n, seq, ids));
  request->inputs.push_back(Int64Tensor("attention_mask", n, seq, mask));
  return absl::OkStatus();
}

absl::Status BertModel::ValidateRequest(const InferRequest& request) const {
  const Tensor* ids = FindInput(request, "input_ids");
  if (ids == nullptr) {
    return absl::InvalidArgumentError("'attention_mask' needs 'input_ids'");
  }
  if (ids->shape[1] > max_length_) {
    return absl::InvalidArgumentError(absl::StrCat("input 'input_ids' has ", ids->shape[1],
                                                   " tokens; model '", spec_.name, "' allows ",
                                                   max_length_));
  }
  const int64_t vocab = encoder_->config().vocab_size;
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
  return absl::OkStatus();
}

int64_t BertModel::PeakBytes(int64_t rows, int64_t length) const {
  const BertConfig& c = encoder_->config();
  const int64_t tokens = rows * length;
  // x, q, k, v, context, scratch ([tokens, hidden] each), the FFN
  // intermediate, one head's scores, ids and mask, the pooled output.
  return (tokens * (6 * c.hidden_size + c.intermediate_size) + length * length +
          rows * c.hidden_size) *
             static_cast<int64_t>(sizeof(float)) +
         2 * tokens * static_cast<int64_t>(sizeof(int64_t));
}

// One batch: ids and mask packed [rows, seq]; the encoder runs in Compute
// (on the CPU, in the pipeline's compute thread).
class BertModel::Batch final : public ModelBatch {
 public:
  Batch(const BertModel& model, std::vector<int64_t> rows_per_request, int64_t seq,
        std::vector<int64_t> ids, std::vector<int64_t> mask)
      : model_(model),
        rows_per_request_(std::move(rows_per_request)),
        seq_(seq),
        ids_(std::move(ids)),
        mask_(std::move(mask)) {}

  absl::Status Upload(Stream*) override { return absl::OkStatus(); }
  absl::Status Compute(Stream*) override {
    const int64_t rows = seq_ == 0 ? 0 : static_cast<int64_t>(ids_.size()) / seq_;
    if (rows == 0) return absl::OkStatus();
    INFER_ASSIGN_OR_RETURN(
        out_, model_.encoder_->Encode(ids_, mask_, rows, seq_, model_.options_.normalize));
    return absl::OkStatus();
  }
  absl::Status Download(Stream*) override { return absl::OkStatus(); }
  absl::Status Finish(absl::Span<InferResponse* const> responses) override {
    AppendFp32Rows("embedding", out_.data(), model_.encoder_->config().hidden_size,
                   rows_per_request_, responses);
    return absl::OkStatus();
  }

 private:
  const BertModel& model_;
  const std::vector<int64_t> rows_per_request_;
  const int64_t seq_;
  const std::vector<int64_t> ids_, mask_;
  std::vector<float> out_;
};

absl::StatusOr<std::unique_ptr<ModelBatch>> BertModel::Prepare(
    absl::Span<const InferRequest* const> requests) {
  std::vector<int64_t> rows_per_request;
  int64_t seq = 0;
  for (const InferRequest* r : requests) {
    const Tensor* ids = FindInput(*r, "input_ids");
    rows_per_request.push_back(ids->shape[0]);
    seq = std::max(seq, ids->shape[1]);
  }
  std::vector<int64_t> ids, mask;
  for (const InferRequest* r : requests) {
    const Tensor* t = FindInput(*r, "input_ids");
    const Tensor* m = FindInput(*r, "attention_mask");
    for (int64_t b = 0; b < t->shape[0]; ++b) {
      for (int64_t s = 0; s < seq; ++s) {
        const bool in = s < t->shape[1];
        ids.push_back(in ? t->as<int64_t>()[b * t->shape[1] + s] : tokenizer_->pad_id());
        mask.push_back(!in ? 0 : m != nullptr ? m->as<int64_t>()[b * t->shape[1] + s] : 1);
      }
    }
  }
  return std::unique_ptr<ModelBatch>(
      new Batch(*this, std::move(rows_per_request), seq, std::move(ids), std::move(mask)));
}

}  // namespace infer
