// BertModel's batches (bert_model.h): Prepare packs the requests' real
// tokens, and the Batch runs the encoder and what follows it on the device
// (SPLADE's head, the per-token outputs), then on the host each request's
// rows through the Dense modules or the classification head, and shapes its
// output (normalisation, Matryoshka width, sparse terms).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "models/bert/bert_model.h"
#include "models/staged_batch.h"
#include "models/transformer/encode_on_device.h"
#include "runtime/status_macros.h"

namespace infer {

// One batch: the packed ids, positions, offsets and types staged, uploaded
// and encoded on the device (StagedRowsBatch does the copies and the split).
class BertModel::Batch final : public StagedRowsBatch {
 public:
  // What a request asks of its embeddings: normalised or not, the width
  // (0: the whole), and whether its tokens' states too.
  struct Shaping {
    bool normalize = false;
    int64_t dimensions = 0;
    bool tokens = false;
  };

  Batch(const BertModel& model, std::vector<int64_t> rows_per_request, PackedLayout layout,
        std::vector<int32_t> host_offsets, int64_t longest, int64_t width, StagingBuffer input,
        std::vector<Shaping> shaping)
      : StagedRowsBatch(model.context_, model.spec_.outputs[0].name, model.device_width(),
                        rows_per_request, std::move(input), layout.bytes()),
        model_(model),
        layout_(layout),
        host_offsets_(std::move(host_offsets)),
        longest_(longest),
        width_(width),
        shaping_(std::move(shaping)) {
    // The device normalises, as it does by default, unless a request in the
    // batch wants its embeddings as they are, or a head follows pooling;
    // then those that want them normalised are, on the host (AdjustOutput).
    device_normalizes_ = model_.normalize() && model_.head().empty();
    for (const Shaping& s : shaping_) {
      device_normalizes_ = device_normalizes_ && s.normalize;
      tokens_ = tokens_ || s.tokens;
    }
    first_row_.push_back(0);
    for (int64_t r : rows_per_request) first_row_.push_back(first_row_.back() + r);
  }

 private:
  absl::Status Run(Stream* stream, const void* input, float* out) override {
    const PackedSequencesView view =
        layout_.View(static_cast<const int32_t*>(input), host_offsets_.data(), longest_, width_);
    const TransformerEncoder& encoder = *model_.encoder_;
    const int64_t rows = layout_.rows, hidden = encoder.spec().hidden_size;
    CachingAllocator* allocator = context().allocator;
    if (layout_.tokens == 0) {  // empty sequences only: zero rows, and no states to give
      return model_.splade_ != nullptr
                 ? model_.splade_->Run(stream, nullptr, host_offsets_.data(), view.offsets, rows, 0,
                                       model_.splade_pooling_, out, nullptr)
                 : encoder.Encode(stream, view, model_.pooling_, device_normalizes_, out);
    }
    // Every token's state: SPLADE's input (scratch), or an output.
    DeviceBuffer states_buffer;
    float* states = nullptr;
    if (model_.splade_ != nullptr) {
      INFER_ASSIGN_OR_RETURN(
          states_buffer, DeviceBuffer::Allocate(allocator, layout_.tokens * hidden * 4, stream));
      states = states_buffer.as<float>();
    } else if (tokens_) {
      INFER_ASSIGN_OR_RETURN(void* p, AllocateSecondOutput(layout_.tokens * hidden * 4, stream));
      states = static_cast<float*>(p);
    }
    if (model_.splade_ != nullptr) {
      INFER_RETURN_IF_ERROR(
          encoder.EncodeWithStates(stream, view, model_.pooling_, false, nullptr, states));
      INFER_ASSIGN_OR_RETURN(
          DeviceBuffer scratch,
          DeviceBuffer::Allocate(allocator, model_.splade_->ScratchBytes(layout_.tokens), stream));
      return model_.splade_->Run(stream, states, host_offsets_.data(), view.offsets, rows,
                                 layout_.tokens, model_.splade_pooling_, out, scratch.get());
    }
    // With Dense modules or a classification head, the pooled rows (the
    // classifier's pooling) as they are: the head runs on
    // the host (AdjustOutput).
    return states != nullptr
               ? encoder.EncodeWithStates(stream, view, model_.pooling_, device_normalizes_, out,
                                          states)
               : encoder.Encode(stream, view, model_.pooling_, device_normalizes_, out);
  }

  void AdjustOutput(size_t index, InferResponse* response) override {
    if (model_.splade_ != nullptr) return Sparse(response);
    if (index >= shaping_.size()) return;
    if (const DenseHead& head = model_.head(); !head.empty()) {
      Head(head, &response->outputs.back());
    }
    Shape(shaping_[index], &response->outputs.back());
    if (shaping_[index].tokens) Tokens(index, response);
  }

  // A request's pooled rows through what follows pooling (the Dense
  // modules, as sentence-transformers orders them: pooling, Dense,
  // Normalize; or the classification head on its pooling), on
  // the host, whatever the device: a matrix-vector product or two per row.
  static void Head(const DenseHead& head, Tensor* output) {
    const int64_t rows = output->shape[0];
    const std::vector<float> y = head.Apply(output->as<float>(), rows);
    output->data.assign(reinterpret_cast<const char*>(y.data()), y.size() * sizeof(float));
    output->shape[1] = head.out_features();
  }

  // Cuts a request's embeddings to its dimensions and normalises them
  // where the device did not, or where cutting undid it:
  // normalise(cut(normalise(v))) is normalise(cut(v)), as
  // sentence-transformers' truncate_dim then Normalize computes it.
  void Shape(const Shaping& s, Tensor* output) const {
    const int64_t rows = output->shape[0], width = output->shape[1];
    const int64_t d = s.dimensions > 0 && s.dimensions < width ? s.dimensions : width;
    const bool normalize = s.normalize && (!device_normalizes_ || d < width);
    if (d == width && !normalize) return;
    float* data = output->mutable_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
      // Row r moves to r * d: never past where it was read.
      float* row = data + r * d;
      std::memmove(row, data + r * width, static_cast<size_t>(d) * sizeof(float));
      if (!normalize) continue;
      double sum = 0;
      for (int64_t c = 0; c < d; ++c) sum += static_cast<double>(row[c]) * row[c];
      // torch.nn.functional.normalize's eps: a zero row stays zero.
      const float scale = static_cast<float>(1.0 / std::max(std::sqrt(sum), 1e-12));
      for (int64_t c = 0; c < d; ++c) row[c] *= scale;
    }
    output->data.resize(static_cast<size_t>(rows * d) * sizeof(float));
    output->shape[1] = d;
  }

  // Request `index`'s tokens' states, from the second output.
  void Tokens(size_t index, InferResponse* response) const {
    const int64_t hidden = model_.encoder_->spec().hidden_size;
    const int64_t r0 = first_row_[index], r1 = first_row_[index + 1];
    const int64_t t0 = host_offsets_[r0], t1 = host_offsets_[r1];
    Tensor states{"token_embeddings", DataType::kFp32, {t1 - t0, hidden}, {}};
    const auto* from = static_cast<const char*>(second_output()) + t0 * hidden * 4;
    states.data.assign(from, static_cast<size_t>((t1 - t0) * hidden * 4));
    Tensor counts{"token_counts", DataType::kInt64, {r1 - r0}, {}};
    counts.data.resize(static_cast<size_t>(r1 - r0) * sizeof(int64_t));
    for (int64_t r = r0; r < r1; ++r) {
      counts.mutable_as<int64_t>()[r - r0] = host_offsets_[r + 1] - host_offsets_[r];
    }
    response->outputs.push_back(std::move(states));
    response->outputs.push_back(std::move(counts));
  }

  // The request's [rows, vocab] SPLADE vectors as their non-zero terms.
  static void Sparse(InferResponse* response) {
    const Tensor dense = std::move(response->outputs.back());
    response->outputs.pop_back();
    const int64_t rows = dense.shape[0], vocab = dense.shape[1];
    const float* v = dense.as<float>();
    std::vector<int64_t> counts(rows, 0), indices;
    std::vector<float> values;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < vocab; ++j) {
        if (v[r * vocab + j] > 0) {
          indices.push_back(j);
          values.push_back(v[r * vocab + j]);
          ++counts[r];
        }
      }
    }
    auto tensor = [](const char* name, DataType dtype, const void* data, size_t n, size_t size) {
      Tensor t{name, dtype, {static_cast<int64_t>(n)}, {}};
      t.data.assign(static_cast<const char*>(data), n * size);
      return t;
    };
    response->outputs.push_back(
        tensor("sparse_counts", DataType::kInt64, counts.data(), counts.size(), 8));
    response->outputs.push_back(
        tensor("sparse_indices", DataType::kInt64, indices.data(), indices.size(), 8));
    response->outputs.push_back(
        tensor("sparse_values", DataType::kFp32, values.data(), values.size(), 4));
  }

  const BertModel& model_;
  const PackedLayout layout_;
  const std::vector<int32_t> host_offsets_;
  const int64_t longest_, width_;
  const std::vector<Shaping> shaping_;
  std::vector<int64_t> first_row_;  // request i's rows begin at first_row_[i]
  bool device_normalizes_ = true;
  bool tokens_ = false;  // a request wants its tokens' states
};

absl::StatusOr<std::unique_ptr<ModelBatch>> BertModel::Prepare(
    absl::Span<const InferRequest* const> requests) {
  std::vector<int64_t> rows_per_request;
  std::vector<Batch::Shaping> shaping;
  PackedLayout layout;
  layout.with_types = with_types();
  // A decoder's classifier reads each sequence's last token that is not
  // padding: its requests' masks, with the tokens after it cleared.
  std::vector<std::vector<int64_t>> masks(requests.size());
  auto mask_of = [&](size_t i) -> const int64_t* {
    if (!masks[i].empty()) return masks[i].data();
    const Tensor* mask = FindInput(*requests[i], "attention_mask");
    return mask != nullptr ? mask->as<int64_t>() : nullptr;
  };
  if (classifier_ != nullptr && encoder_->spec().classifier_skips_pad) {
    for (size_t i = 0; i < requests.size(); ++i) {
      const Tensor* ids = FindInput(*requests[i], "input_ids");
      if (const int64_t* mask = mask_of(i); mask != nullptr) {
        masks[i].assign(mask, mask + ids->shape[0] * ids->shape[1]);
      }
      if (!MaskTrailingPadTokens(encoder_->spec(), ids->as<int64_t>(), ids->shape[0], ids->shape[1],
                                 &masks[i])) {
        masks[i].clear();
      }
    }
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const InferRequest* r = requests[i];
    const bool tokens = WantsTokenOutputs(*r);
    shaping.push_back({r->normalize.value_or(normalize()), r->dimensions, tokens});
    const Tensor* ids = FindInput(*r, "input_ids");
    rows_per_request.push_back(ids->shape[0]);
    layout.rows += ids->shape[0];
    layout.tokens += CountRealTokens(mask_of(i), ids->shape[0] * ids->shape[1]);
  }
  INFER_ASSIGN_OR_RETURN(StagingBuffer input, context_.staging->Acquire(layout.bytes()));
  auto* buffer = input.as<int32_t>();
  int64_t row = 0, token = 0, longest = 0, width = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Tensor* ids = FindInput(*requests[i], "input_ids");
    const Tensor* types = FindInput(*requests[i], "token_type_ids");
    AppendPackedRows(ids->as<int64_t>(), mask_of(i),
                     types != nullptr ? types->as<int64_t>() : nullptr, ids->shape[0],
                     ids->shape[1], layout, buffer, &row, &token, &longest, &width,
                     encoder_->spec().position_padding_id);
  }
  std::vector<int32_t> host_offsets(buffer + layout.offsets(),
                                    buffer + layout.offsets() + layout.rows + 1);
  return std::unique_ptr<ModelBatch>(new Batch(*this, std::move(rows_per_request), layout,
                                               std::move(host_offsets), longest, width,
                                               std::move(input), std::move(shaping)));
}

}  // namespace infer
