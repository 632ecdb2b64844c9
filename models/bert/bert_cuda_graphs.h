// BertCudaGraphs: CUDA Graphs for the CUDA BERT encoder's small batches.
//
// A forward pass is about eight kernel launches per layer. For a small batch
// each kernel runs for a few microseconds, so launching costs as much as
// computing. Captured once per shape class into a CUDA graph and replayed,
// the pass costs one launch.
//
// Shape classes. A graph fixes every GEMM's row count, every grid and every
// pointer. A batch of `rows` sequences and `tokens` real tokens runs in the
// graph of (GraphClass(rows, 1, max), GraphClass(tokens, 16, max)): the next
// power of two of each, capped at max_tokens (options). The batch is copied
// into the graph's own packed input, padded with trailing empty sequences
// and with tokens that belong to no sequence (models/bert/graph_input_cuda.cuh);
// the graph's pooled output is copied out (and, when asked, the real
// tokens' last hidden states, converted to FP32). Per batch that is one kernel, one
// graph launch and one copy. Padding at most doubles the GEMM work, at shapes
// where launching cost more than that.
//
// Memory. All graphs share one set of buffers for the largest class (packed
// input, the three activation buffers, pooled output) and one capture stream
// with its own GEMM workspace: a graph's GEMM nodes use the workspace of the
// stream they were captured on. All of these come from the caching allocator
// at creation. Bytes() is their total; the model counts it with its weights,
// so the engine keeps it out of batch memory. The instantiated graphs' own
// driver memory (kernel parameters, a few KiB each) is outside the allocator:
// the budget's headroom covers it.
//
// Ordering. Replays share the buffers, so each one waits on the GPU for the
// previous one's event (cudaStreamWaitEvent, no host wait) and any stream may
// replay. Capture runs on the private stream, never on a stream others
// enqueue on: an event recorded there by another thread would break the
// capture. The first batch of a class runs eagerly on the caller's stream,
// over the padded shape, so every kernel and cuBLAS algorithm is loaded
// before capture; that class is then captured and later batches replay it.
// A class whose capture fails runs eagerly from then on (stats()).
//
// Only built with CUDA (INFER_WITH_CUDA). Thread-safe: Run holds a mutex
// while it enqueues, and never waits for the GPU.
#ifndef INFER_MODELS_BERT_BERT_CUDA_GRAPHS_H_
#define INFER_MODELS_BERT_BERT_CUDA_GRAPHS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include "absl/status/statusor.h"
#include "models/transformer/encoder.h"
#include "runtime/compute_stream.h"

namespace infer {

// The class a count of `n` falls in: the smallest power of two that is at
// least n and at least `min`, capped at `max`. 0 when n > max.
int64_t GraphClass(int64_t n, int64_t min, int64_t max);

class BertCudaGraphs {
 public:
  // The activation buffers a forward pass writes ([tokens, max(hidden,
  // x_cols)] FP16 x,
  // [tokens, max(hidden, ctx_cols)] FP16 ctx, [tokens, work_cols] FP16 work,
  // and for FP8 linears tokens * quant_cols + 256 bytes of quantized
  // activations; null without).
  struct Scratch {
    void* x = nullptr;
    void* ctx = nullptr;
    void* work = nullptr;
    void* quant = nullptr;
  };
  // Enqueues the forward pass of `batch` on `stream` with `scratch`, writing
  // [batch.rows, hidden] FP32 to `out`; only stream operations, so it can be
  // captured.
  using Forward = std::function<absl::Status(Stream* stream, const PackedSequencesView& batch,
                                             const Scratch& scratch, Pooling pooling,
                                             bool normalize, float* out)>;
  struct Shape {
    int64_t hidden = 0;
    int64_t x_cols = 0;         // FP16 columns of the x buffer; 0: hidden
    int64_t work_cols = 0;      // columns of the work buffer
    int64_t ctx_cols = 0;       // columns of the ctx buffer; 0: hidden
    int64_t quant_cols = 0;     // bytes per token of the quant buffer; 0: none
    int64_t max_positions = 0;  // the model's longest sequence
    // Where a pass leaves the last hidden states, [tokens, hidden] FP16 at
    // the buffer's start: ctx (true) or x.
    bool states_in_ctx = false;
  };
  struct Stats {
    int64_t captured = 0;          // graphs instantiated
    int64_t replays = 0;           // batches run by a graph launch
    int64_t eager = 0;             // batches of a class not (yet) captured
    int64_t capture_failures = 0;  // classes left eager because capture failed
  };

  // Allocates the buffers and the capture stream, and runs one eager pass on
  // it (loading the kernels). RESOURCE_EXHAUSTED when they do not fit the
  // budget; INVALID_ARGUMENT for max_tokens < 1 or over what the kernels
  // index. `forward` must outlive this object.
  static absl::StatusOr<std::unique_ptr<BertCudaGraphs>> Create(const DeviceContext& context,
                                                                const EncoderGraphOptions& options,
                                                                const Shape& shape,
                                                                Forward forward);
  // Waits for the last replay before the buffers go back to the allocator.
  ~BertCudaGraphs();
  BertCudaGraphs(const BertCudaGraphs&) = delete;
  BertCudaGraphs& operator=(const BertCudaGraphs&) = delete;

  // Whether Run takes a batch of this shape (tokens in 1..max_tokens, rows
  // at most max_tokens).
  bool Covers(int64_t rows, int64_t tokens) const;
  // Bytes held from the allocator, by block.
  int64_t Bytes() const { return bytes_; }
  int64_t max_tokens() const { return max_tokens_; }
  Stats stats() const;

  // Enqueues `batch` (device memory, Covers its shape) on `stream`: copy in,
  // replay (or the eager pass and capture, for a class's first batch), copy
  // the [batch.rows, hidden] FP32 result to `out` (null: not wanted) and,
  // when `states` is not null, the batch's real tokens' last hidden states
  // to it, [batch.tokens, hidden] FP32 (the padded input keeps the real
  // tokens first, in order). Both copies are enqueued before the event the
  // next replay waits on. Errors are CUDA's (CudaStatus: a sticky one is
  // DeviceLostError).
  absl::Status Run(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                   bool normalize, float* out, float* states = nullptr);

 private:
  using Key = std::tuple<int64_t, int64_t, Pooling, bool>;  // rows, tokens classes
  BertCudaGraphs() = default;
  // The graph buffers seen as a batch of `rows` x `tokens` classes.
  PackedSequencesView View(int64_t rows, int64_t tokens) const;
  // Captures the pass for `key` on the private stream; a failure is counted
  // and remembered, not returned, unless the device is lost.
  absl::Status Capture(const Key& key);

  Forward forward_;
  Shape shape_;
  int64_t max_tokens_ = 0;
  ComputeStream capture_stream_;
  DeviceBuffer input_, x_, ctx_, work_, output_;  // the largest class's
  DeviceBuffer quant_;                            // empty without FP8
  int64_t bytes_ = 0;

  mutable std::mutex mu_;
  std::map<Key, cudaGraphExec_t> graphs_;
  std::set<Key> failed_;
  cudaEvent_t last_ = nullptr;  // recorded after every batch that used the buffers
  bool recorded_ = false;
  Stats stats_;
};

}  // namespace infer

#endif  // INFER_MODELS_BERT_BERT_CUDA_GRAPHS_H_
