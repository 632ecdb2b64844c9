#include "models/bert/bert_cuda_graphs.h"

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "models/bert/graph_input_cuda.cuh"
#include "models/packed_sequences.h"
#include "models/transformer/transformer_cuda_kernels.cuh"
#include "runtime/cuda_device.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

constexpr int64_t kMinTokenClass = 16;

}  // namespace

int64_t GraphClass(int64_t n, int64_t min, int64_t max) {
  if (n > max) return 0;
  int64_t c = 1;
  while (c < n || c < min) c *= 2;
  return std::min(c, max);
}

absl::StatusOr<std::unique_ptr<BertCudaGraphs>> BertCudaGraphs::Create(
    const DeviceContext& context, const EncoderGraphOptions& options, const Shape& shape,
    Forward forward) {
  const int64_t t = options.max_tokens;
  // Kernels index the work buffer (t * work_cols) and the packed input
  // (4 t + 1) with int.
  const int64_t most =
      (int64_t{1} << 31) / std::max<int64_t>(std::max<int64_t>(shape.work_cols, 1) + 2, 5);
  if (t < 1 || shape.work_cols < 1 || t > most) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA graphs for batches of up to ", t, " tokens: must be 1 to ", most));
  }
  std::unique_ptr<BertCudaGraphs> g(new BertCudaGraphs());
  g->forward_ = std::move(forward);
  g->shape_ = shape;
  g->max_tokens_ = t;
  INFER_ASSIGN_OR_RETURN(g->capture_stream_,
                         ComputeStream::Create(context.device, context.allocator));
  Stream* p = g->capture_stream_.get();
  // Rows are at most max_tokens too (Covers), so one bound sizes everything.
  // With token types whatever the model: a graph serves every batch.
  const PackedLayout layout{t, t, /*with_types=*/true};
  const int64_t half = 2;
  struct Want {
    DeviceBuffer* buffer;
    int64_t bytes;
  };
  const Want wants[] = {{&g->input_, static_cast<int64_t>(layout.bytes())},
                        {&g->x_, t * std::max(shape.x_cols, shape.hidden) * half},
                        {&g->ctx_, t * std::max(shape.ctx_cols, shape.hidden) * half},
                        {&g->work_, t * shape.work_cols * half},
                        {&g->output_, t * shape.hidden * static_cast<int64_t>(sizeof(float))}};
  for (const Want& w : wants) {
    INFER_ASSIGN_OR_RETURN(*w.buffer, DeviceBuffer::Allocate(context.allocator, w.bytes, p));
    g->bytes_ += CachingAllocator::BlockBytes(w.bytes);
  }
  if (shape.quant_cols > 0) {
    const int64_t bytes = t * shape.quant_cols + 256;
    INFER_ASSIGN_OR_RETURN(g->quant_, DeviceBuffer::Allocate(context.allocator, bytes, p));
    g->bytes_ += CachingAllocator::BlockBytes(bytes);
  }
  g->bytes_ += g->capture_stream_.workspace_bytes();
  INFER_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&g->last_, cudaEventDisableTiming),
                             "cudaEventCreateWithFlags");
  // One eager pass over empty sequences loads the kernels at load time.
  const PackedSequencesView warm = g->View(1, kMinTokenClass);
  INFER_RETURN_IF_CUDA_ERROR(
      cudaMemsetAsync(g->input_.get(), 0, layout.bytes(), NativeCudaStream(p)), "cudaMemsetAsync");
  INFER_RETURN_IF_ERROR(g->forward_(p, warm,
                                    {g->x_.get(), g->ctx_.get(), g->work_.get(), g->quant_.get()},
                                    Pooling::kMean, true, g->output_.as<float>()));
  INFER_RETURN_IF_ERROR(context.device->SynchronizeStream(p));
  return g;
}

BertCudaGraphs::~BertCudaGraphs() {
  std::lock_guard<std::mutex> lock(mu_);
  if (recorded_) cudaEventSynchronize(last_);
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  if (last_ != nullptr) cudaEventDestroy(last_);
}

bool BertCudaGraphs::Covers(int64_t rows, int64_t tokens) const {
  return tokens >= 1 && tokens <= max_tokens_ && rows >= 1 && rows <= max_tokens_;
}

BertCudaGraphs::Stats BertCudaGraphs::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

PackedSequencesView BertCudaGraphs::View(int64_t rows, int64_t tokens) const {
  const PackedLayout layout{rows, tokens, /*with_types=*/true};
  // Every sequence fits in `tokens`; the attention grid is sized from it.
  return layout.View(input_.as<int32_t>(), /*host_offsets=*/nullptr,
                     std::min(tokens, shape_.max_positions), shape_.max_positions);
}

absl::Status BertCudaGraphs::Capture(const Key& key) {
  const auto [rows, tokens, pooling, normalize] = key;
  Stream* p = capture_stream_.get();
  cudaStream_t s = NativeCudaStream(p);
  INFER_RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
                             "cudaStreamBeginCapture");
  const absl::Status enqueued =
      forward_(p, View(rows, tokens), {x_.get(), ctx_.get(), work_.get(), quant_.get()}, pooling,
               normalize, output_.as<float>());
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);  // always leave capture mode
  cudaGraphExec_t exec = nullptr;
  cudaError_t made = ended;
  if (enqueued.ok() && ended == cudaSuccess) made = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (enqueued.ok() && made == cudaSuccess) {
    graphs_.emplace(key, exec);
    ++stats_.captured;
    return absl::OkStatus();
  }
  // A lost device fails everything from here on: say so. Anything else
  // (an operation capture does not support) leaves this class eager.
  absl::Status why = !enqueued.ok() ? enqueued : CudaStatus(made, "CUDA graph capture");
  if (IsDeviceLost(why)) return why;
  cudaGetLastError();  // clear a non-sticky capture error
  failed_.insert(key);
  ++stats_.capture_failures;
  return absl::OkStatus();
}

absl::Status BertCudaGraphs::Run(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                                 bool normalize, float* out, float* states) {
  const int64_t rows = GraphClass(batch.rows, 1, max_tokens_);
  const int64_t tokens = GraphClass(batch.tokens, kMinTokenClass, max_tokens_);
  if (!Covers(batch.rows, batch.tokens)) {
    return absl::InvalidArgumentError(absl::StrCat("a batch of ", batch.rows, " rows and ",
                                                   batch.tokens, " tokens is not a graph's"));
  }
  const Key key{rows, tokens, pooling, normalize};
  cudaStream_t s = NativeCudaStream(stream);
  std::lock_guard<std::mutex> lock(mu_);
  if (recorded_)
    INFER_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(s, last_, 0), "cudaStreamWaitEvent");
  const PackedSequencesView padded = View(rows, tokens);
  INFER_RETURN_IF_CUDA_ERROR(
      cuda::LaunchPadPackedBatch(s, batch.ids, batch.positions, batch.types, batch.offsets,
                                 batch.rows, batch.tokens, rows, tokens, input_.as<int32_t>()),
      "graph input kernel");
  auto it = graphs_.find(key);
  const bool first = it == graphs_.end();
  if (first) {  // eager over the padded shape: the class's first batch, or one that failed capture
    INFER_RETURN_IF_ERROR(forward_(stream, padded,
                                   {x_.get(), ctx_.get(), work_.get(), quant_.get()}, pooling,
                                   normalize, output_.as<float>()));
    ++stats_.eager;
  } else {
    INFER_RETURN_IF_CUDA_ERROR(cudaGraphLaunch(it->second, s), "cudaGraphLaunch");
    ++stats_.replays;
  }
  if (out != nullptr) {
    INFER_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(out, output_.get(), batch.rows * shape_.hidden * sizeof(float),
                        cudaMemcpyDeviceToDevice, s),
        "cudaMemcpyAsync (graph output)");
  }
  if (states != nullptr) {
    const void* from = shape_.states_in_ctx ? ctx_.get() : x_.get();
    INFER_RETURN_IF_CUDA_ERROR(cuda::LaunchHalfToFloat(s, static_cast<const __half*>(from),
                                                       batch.tokens * shape_.hidden, states),
                               "states kernel (graph)");
  }
  INFER_RETURN_IF_CUDA_ERROR(cudaEventRecord(last_, s), "cudaEventRecord");
  recorded_ = true;
  if (first && failed_.count(key) == 0) INFER_RETURN_IF_ERROR(Capture(key));
  return absl::OkStatus();
}

}  // namespace infer
