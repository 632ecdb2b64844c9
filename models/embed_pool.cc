#include "models/embed_pool.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

// splitmix64: a tiny, well-mixed generator, identical on every platform.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [-scale, scale).
void Fill(std::vector<float>& v, uint64_t& state, float scale) {
  for (float& x : v) {
    const double u = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
    x = static_cast<float>((2.0 * u - 1.0) * scale);
  }
}

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
  INFER_ASSIGN_OR_RETURN(DeviceBuffer buffer,
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
  Fill(w.table, state, 1.0f);
  Fill(w.dense, state, 1.0f / std::sqrt(static_cast<float>(o.hidden_size)));
  Fill(w.bias, state, 0.1f);
  return w;
}

EmbedPoolModel::EmbedPoolModel(const EmbedPoolOptions& options, const DeviceContext& context)
    : options_(options), device_(context.device), allocator_(context.allocator) {
  spec_.name = options.name;
  spec_.platform = "infer_embed_pool";
  spec_.inputs = {{"input_ids", DataType::kInt64, {-1, -1}}};
  spec_.outputs = {{"embedding", DataType::kFp32, {-1, options.embedding_size}}};
}

absl::StatusOr<std::unique_ptr<EmbedPoolModel>> EmbedPoolModel::Create(
    const EmbedPoolOptions& options, const DeviceContext& context) {
  INFER_RETURN_IF_ERROR(CheckOptions(options));
  if (context.device == nullptr || context.allocator == nullptr) {
    return absl::InvalidArgumentError("embed_pool: the device context is incomplete");
  }
  Device* device = context.device;
  std::unique_ptr<EmbedPoolModel> model(new EmbedPoolModel(options, context));
  model->kernels_ = CreateEmbedPoolKernels(*device);
  INFER_ASSIGN_OR_RETURN(model->stream_, device->CreateStream());
  const HostWeights w = GenerateWeights(options);
  Stream* stream = model->stream_.get();
  INFER_ASSIGN_OR_RETURN(model->table_, Upload(context, stream, w.table));
  INFER_ASSIGN_OR_RETURN(model->dense_, Upload(context, stream, w.dense));
  INFER_ASSIGN_OR_RETURN(model->bias_, Upload(context, stream, w.bias));
  // The host vectors die with this scope: wait for the copies.
  INFER_RETURN_IF_ERROR(device->SynchronizeStream(stream));
  return model;
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

absl::Status EmbedPoolModel::Execute(absl::Span<const InferRequest* const> requests,
                                     absl::Span<InferResponse* const> responses) {
  const int64_t hidden = options_.hidden_size;
  const int64_t dim = options_.embedding_size;
  // Pack the requests into one [rows, seq] batch, padded with pad_id.
  int64_t rows = 0, seq = 0;
  for (const InferRequest* r : requests) {
    rows += r->inputs.front().shape[0];
    seq = std::max(seq, r->inputs.front().shape[1]);
  }
  std::vector<float> pooled(rows * dim);
  if (rows > 0 && seq > 0) {
    std::vector<int64_t> ids(rows * seq, options_.pad_id);
    int64_t row = 0;
    for (const InferRequest* r : requests) {
      const Tensor& t = r->inputs.front();
      const int64_t* src = t.as<int64_t>();
      for (int64_t b = 0; b < t.shape[0]; ++b, ++row) {
        std::memcpy(&ids[row * seq], src + b * t.shape[1], t.shape[1] * sizeof(int64_t));
      }
    }
    const int64_t tokens = rows * seq;
    INFER_ASSIGN_OR_RETURN(DeviceBuffer d_ids,
                           DeviceBuffer::Allocate(allocator_, tokens * sizeof(int64_t), stream_.get()));
    INFER_ASSIGN_OR_RETURN(DeviceBuffer d_x,
                           DeviceBuffer::Allocate(allocator_, tokens * hidden * sizeof(float), stream_.get()));
    INFER_ASSIGN_OR_RETURN(DeviceBuffer d_y,
                           DeviceBuffer::Allocate(allocator_, tokens * dim * sizeof(float), stream_.get()));
    INFER_ASSIGN_OR_RETURN(DeviceBuffer d_out,
                           DeviceBuffer::Allocate(allocator_, rows * dim * sizeof(float), stream_.get()));
    Stream* s = stream_.get();
    INFER_RETURN_IF_ERROR(
        device_->CopyToDevice(d_ids.get(), ids.data(), tokens * sizeof(int64_t), s));
    INFER_RETURN_IF_ERROR(kernels_->Gather(s, d_ids.as<int64_t>(), tokens, table_.as<float>(),
                                           hidden, d_x.as<float>()));
    GemmArgs g;
    g.m = tokens;
    g.n = dim;
    g.k = hidden;
    g.a = d_x.as<float>();
    g.lda = hidden;
    g.b = dense_.as<float>();
    g.ldb = dim;
    g.c = d_y.as<float>();
    g.ldc = dim;
    INFER_RETURN_IF_ERROR(device_->Sgemm(s, g));
    INFER_RETURN_IF_ERROR(kernels_->BiasTanhMeanPool(s, d_y.as<float>(), bias_.as<float>(),
                                                     d_ids.as<int64_t>(), rows, seq, dim,
                                                     options_.pad_id, d_out.as<float>()));
    INFER_RETURN_IF_ERROR(
        device_->CopyToHost(pooled.data(), d_out.get(), rows * dim * sizeof(float), s));
    // The device buffers and `ids` die with this scope: wait for the stream.
    INFER_RETURN_IF_ERROR(device_->SynchronizeStream(s));
  }
  // Split the pooled rows back into one response per request.
  int64_t row = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const int64_t b = requests[i]->inputs.front().shape[0];
    Tensor out;
    out.name = "embedding";
    out.dtype = DataType::kFp32;
    out.shape = {b, dim};
    out.data.assign(reinterpret_cast<const char*>(pooled.data() + row * dim),
                    b * dim * sizeof(float));
    row += b;
    responses[i]->outputs.push_back(std::move(out));
  }
  return absl::OkStatus();
}

}  // namespace infer
