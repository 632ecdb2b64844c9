#include "models/embed_pool/embed_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/seeded_random.h"
#include "models/staged_batch.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

absl::Status CheckOptions(const EmbedPoolOptions& o) {
  auto positive = [](int64_t v, const char* field) -> absl::Status {
    if (v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("embed_pool: ", field, " must be >= 1, got ", v));
    }
    return absl::OkStatus();
  };
  INFER_RETURN_IF_ERROR(positive(o.vocab_size, "vocab_size"));
  INFER_RETURN_IF_ERROR(positive(o.hidden_size, "hidden_size"));
  INFER_RETURN_IF_ERROR(positive(o.embedding_size, "embedding_size"));
  INFER_RETURN_IF_ERROR(positive(o.max_sequence_length, "max_sequence_length"));
  // Keep every weight tensor under 2^31 elements (BLAS int arguments).
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (o.vocab_size > kMax / o.hidden_size || o.hidden_size > kMax / o.embedding_size ||
      o.max_sequence_length > (1 << 20)) {
    return absl::InvalidArgumentError("embed_pool: sizes too large");
  }
  if (o.pad_id < 0 || o.pad_id >= o.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("embed_pool: pad_id ", o.pad_id, " is outside [0, ", o.vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceBuffer> Upload(const DeviceContext& ctx, Stream* stream,
                                    const std::vector<float>& host) {
  Device* device = ctx.device;
  INFER_ASSIGN_OR_RETURN(
      DeviceBuffer buffer,
      DeviceBuffer::Allocate(ctx.allocator, host.size() * sizeof(float), stream));
  INFER_RETURN_IF_ERROR(
      device->CopyToDevice(buffer.get(), host.data(), host.size() * sizeof(float), stream));
  return buffer;
}

}  // namespace

EmbedPoolModel::HostWeights EmbedPoolModel::GenerateWeights(const EmbedPoolOptions& o) {
  HostWeights w;
  uint64_t state = o.seed;
  w.table.resize(o.vocab_size * o.hidden_size);
  w.dense.resize(o.hidden_size * o.embedding_size);
  w.bias.resize(o.embedding_size);
  FillUniform(w.table, state, 1.0f);
  FillUniform(w.dense, state, 1.0f / std::sqrt(static_cast<float>(o.hidden_size)));
  FillUniform(w.bias, state, 0.1f);
  return w;
}

EmbedPoolModel::EmbedPoolModel(const EmbedPoolOptions& options, const DeviceContext& context)
    : options_(options), context_(context) {
  spec_.name = options.name;
  spec_.platform = "infer_embed_pool";
  spec_.backend = "embed_pool";
  spec_.precision = "fp32";
  spec_.inputs = {{"input_ids",
                   DataType::kInt64,
                   {-1, -1},
                   /*optional=*/false,
                   /*accepts_int32=*/true}};
  spec_.outputs = {{"embedding", DataType::kFp32, {-1, options.embedding_size}}};
}

absl::StatusOr<std::unique_ptr<EmbedPoolModel>> EmbedPoolModel::Create(
    const EmbedPoolOptions& options, const DeviceContext& context) {
  INFER_RETURN_IF_ERROR(CheckOptions(options));
  if (context.device == nullptr || context.allocator == nullptr || context.staging == nullptr) {
    return absl::InvalidArgumentError("embed_pool: the device context is incomplete");
  }
  Device* device = context.device;
  std::unique_ptr<EmbedPoolModel> model(new EmbedPoolModel(options, context));
  model->kernels_ = CreateEmbedPoolKernels(*device);
  // The weights are uploaded once, on a stream of their own.
  INFER_ASSIGN_OR_RETURN(model->weights_stream_, device->CreateStream(StreamKind::kCopy));
  const HostWeights w = GenerateWeights(options);
  Stream* stream = model->weights_stream_.get();
  INFER_ASSIGN_OR_RETURN(model->table_, Upload(context, stream, w.table));
  INFER_ASSIGN_OR_RETURN(model->dense_, Upload(context, stream, w.dense));
  INFER_ASSIGN_OR_RETURN(model->bias_, Upload(context, stream, w.bias));
  // The host vectors die with this scope: wait for the copies.
  INFER_RETURN_IF_ERROR(device->SynchronizeStream(stream));
  return model;
}

// Device memory of one batch, block by block as the allocator hands it out:
// token ids, embeddings x, dense output y (x and y are freed after the
// kernels, but count at the peak), pooled output.
int64_t EmbedPoolModel::PeakBytes(const BatchShape& shape) const {
  const int64_t rows = shape.rows, tokens = shape.padded_tokens();
  if (tokens == 0) return 0;
  const int64_t f = sizeof(float);
  return StagedRowsBatch::InputAndOutputBytes(tokens * static_cast<int64_t>(sizeof(int64_t)), rows,
                                              options_.embedding_size) +
         CachingAllocator::BlockBytes(tokens * options_.hidden_size * f) +
         CachingAllocator::BlockBytes(tokens * options_.embedding_size * f);
}

int64_t EmbedPoolModel::WeightBytes() const {
  return CachingAllocator::BlockBytes(static_cast<int64_t>(table_.size())) +
         CachingAllocator::BlockBytes(static_cast<int64_t>(dense_.size())) +
         CachingAllocator::BlockBytes(static_cast<int64_t>(bias_.size()));
}

absl::Status EmbedPoolModel::ValidateRequest(const InferRequest& request) const {
  const Tensor& ids = request.inputs.front();  // the only input (spec-checked)
  if (ids.shape[1] > options_.max_sequence_length) {
    return absl::InvalidArgumentError(absl::StrCat("input 'input_ids' has ", ids.shape[1],
                                                   " tokens; model '", spec_.name, "' allows ",
                                                   options_.max_sequence_length));
  }
  const int64_t n = ids.shape[0] * ids.shape[1];
  const int64_t* v = ids.as<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] < 0 || v[i] >= options_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("input 'input_ids' holds token id ", v[i], " at flat index ", i, "; model '",
                       spec_.name, "' accepts ids in [0, ", options_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

// One batch: ids [rows, seq] (padded with pad_id) staged, uploaded, embedded
// and pooled on the device (StagedRowsBatch does the copies and the split).
class EmbedPoolModel::Batch final : public StagedRowsBatch {
 public:
  Batch(const EmbedPoolModel& model, std::vector<int64_t> rows_per_request, int64_t seq,
        StagingBuffer ids, size_t ids_bytes)
      : StagedRowsBatch(model.context_, "embedding", model.options_.embedding_size,
                        std::move(rows_per_request), std::move(ids), ids_bytes),
        model_(model),
        seq_(seq) {}

 private:
  absl::Status Run(Stream* stream, const void* input, float* out) override {
    const EmbedPoolOptions& o = model_.options_;
    const int64_t hidden = o.hidden_size, dim = o.embedding_size, tokens = rows() * seq_;
    const auto* ids = static_cast<const int64_t*>(input);
    CachingAllocator* allocator = context().allocator;
    INFER_ASSIGN_OR_RETURN(
        DeviceBuffer x, DeviceBuffer::Allocate(allocator, tokens * hidden * sizeof(float), stream));
    INFER_ASSIGN_OR_RETURN(DeviceBuffer y,
                           DeviceBuffer::Allocate(allocator, tokens * dim * sizeof(float), stream));
    INFER_RETURN_IF_ERROR(model_.kernels_->Gather(stream, ids, tokens, model_.table_.as<float>(),
                                                  hidden, x.as<float>()));
    GemmArgs g;
    g.m = tokens;
    g.n = dim;
    g.k = hidden;
    g.a = x.as<float>();
    g.lda = hidden;
    g.b = model_.dense_.as<float>();
    g.ldb = dim;
    g.c = y.as<float>();
    g.ldc = dim;
    INFER_RETURN_IF_ERROR(context().device->Sgemm(stream, g));
    // x and y are freed here, while the kernels may still run: safe, because
    // a block freed on its allocation stream is only reused by later work on
    // that same stream.
    return model_.kernels_->BiasTanhMeanPool(stream, y.as<float>(), model_.bias_.as<float>(), ids,
                                             rows(), seq_, dim, o.pad_id, out);
  }

  const EmbedPoolModel& model_;
  const int64_t seq_;
};

absl::StatusOr<std::unique_ptr<ModelBatch>> EmbedPoolModel::Prepare(
    absl::Span<const InferRequest* const> requests) {
  // Pack the requests into one [rows, seq] batch, padded with pad_id.
  std::vector<int64_t> rows_per_request;
  int64_t rows = 0, seq = 0;
  for (const InferRequest* r : requests) {
    const Tensor& t = r->inputs.front();
    rows_per_request.push_back(t.shape[0]);
    rows += t.shape[0];
    seq = std::max(seq, t.shape[1]);
  }
  INFER_ASSIGN_OR_RETURN(StagingBuffer ids,
                         context_.staging->Acquire(rows * seq * sizeof(int64_t)));
  int64_t* packed = ids.as<int64_t>();
  std::fill(packed, packed + rows * seq, options_.pad_id);
  int64_t row = 0;
  for (const InferRequest* r : requests) {
    const Tensor& t = r->inputs.front();
    const int64_t* src = t.as<int64_t>();
    for (int64_t b = 0; b < t.shape[0]; ++b, ++row) {
      std::memcpy(packed + row * seq, src + b * t.shape[1], t.shape[1] * sizeof(int64_t));
    }
  }
  return std::unique_ptr<ModelBatch>(new Batch(*this, std::move(rows_per_request), seq,
                                               std::move(ids), rows * seq * sizeof(int64_t)));
}

}  // namespace infer
