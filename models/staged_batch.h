// StagedRowsBatch: the ModelBatch shape both built-in models share. Prepare
// packs the requests into one host staging buffer; Upload copies it to the
// device whole; the model's Run computes one [rows, width] FP32 output on the
// device; Download copies it into staging memory; Finish splits it into one
// output tensor per request, which AdjustOutput may then rewrite (or replace,
// or add others to). A subclass supplies Run, and AdjustOutput where a
// request's output differs from its rows of the batch's. Run may also
// write a second device output (AllocateSecondOutput, e.g. per-token
// states), downloaded with the first for AdjustOutput to read.
//
// Memory: the uploaded input and the output come from the context's caching
// allocator, so a model's PeakBytes counts them (InputAndOutputBytes).
// Thread-safety: see ModelBatch (each stage is called once, in order).
#ifndef INFER_MODELS_STAGED_BATCH_H_
#define INFER_MODELS_STAGED_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"
#include "runtime/device_context.h"

namespace infer {

class StagedRowsBatch : public ModelBatch {
 public:
  // `input` holds the packed batch (`input_bytes` of it are uploaded; none
  // when `rows` is 0); the output is `output` [rows, width] FP32.
  StagedRowsBatch(const DeviceContext& context, std::string output, int64_t width,
                  std::vector<int64_t> rows_per_request, StagingBuffer input, size_t input_bytes);

  absl::Status Upload(Stream* stream) final;
  absl::Status Compute(Stream* stream) final;
  absl::Status Download(Stream* stream) final;
  absl::Status Finish(absl::Span<InferResponse* const> responses) final;

  // Allocator blocks of the uploaded input and of the output.
  static int64_t InputAndOutputBytes(int64_t input_bytes, int64_t rows, int64_t width);

 protected:
  // Enqueues the model's computation on `stream`: reads the device copy of
  // the staging buffer, writes [rows(), width] FP32 to `out`. Not called for
  // an empty batch.
  virtual absl::Status Run(Stream* stream, const void* input, float* out) = 0;
  // Rewrites request `index`'s outputs, on the host, in Finish: its
  // [rows, width] of the batch's is response->outputs.back(). By default it
  // is left as it is.
  virtual void AdjustOutput(size_t /*index*/, InferResponse* /*response*/) {}
  // For Run, at most once: `bytes` of device memory from the context's
  // allocator on `stream`, downloaded after Run; second_output() is its
  // host copy in AdjustOutput.
  absl::StatusOr<void*> AllocateSecondOutput(size_t bytes, Stream* stream);
  const void* second_output() const { return second_.data(); }

  int64_t rows() const { return rows_; }
  const DeviceContext& context() const { return context_; }

 private:
  size_t output_bytes() const { return rows_ * width_ * sizeof(float); }

  const DeviceContext context_;
  const std::string output_;
  const int64_t width_;
  const std::vector<int64_t> rows_per_request_;
  int64_t rows_ = 0;
  StagingBuffer input_;
  const size_t input_bytes_;
  StagingBuffer out_, second_;
  DeviceBuffer d_input_, d_out_, d_second_;
  size_t second_bytes_ = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_STAGED_BATCH_H_
