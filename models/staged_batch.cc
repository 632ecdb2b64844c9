#include "models/staged_batch.h"

#include <cstring>
#include <utility>

#include "runtime/status_macros.h"

namespace infer {

StagedRowsBatch::StagedRowsBatch(const DeviceContext& context, std::string output, int64_t width,
                                 std::vector<int64_t> rows_per_request, StagingBuffer input,
                                 size_t input_bytes)
    : context_(context),
      output_(std::move(output)),
      width_(width),
      rows_per_request_(std::move(rows_per_request)),
      input_(std::move(input)),
      input_bytes_(input_bytes) {
  for (int64_t r : rows_per_request_) rows_ += r;
}

int64_t StagedRowsBatch::InputAndOutputBytes(int64_t input_bytes, int64_t rows, int64_t width) {
  return CachingAllocator::BlockBytes(input_bytes) +
         CachingAllocator::BlockBytes(rows * width * static_cast<int64_t>(sizeof(float)));
}

absl::Status StagedRowsBatch::Upload(Stream* stream) {
  if (rows_ == 0 || input_bytes_ == 0) return absl::OkStatus();
  INFER_ASSIGN_OR_RETURN(d_input_,
                         DeviceBuffer::Allocate(context_.allocator, input_bytes_, stream));
  return context_.device->CopyToDevice(d_input_.get(), input_.data(), input_bytes_, stream);
}

absl::Status StagedRowsBatch::Compute(Stream* stream) {
  if (rows_ == 0 || input_bytes_ == 0) return absl::OkStatus();
  INFER_ASSIGN_OR_RETURN(d_out_,
                         DeviceBuffer::Allocate(context_.allocator, output_bytes(), stream));
  // d_input_ was allocated on the upload stream: tell the allocator this
  // stream reads it too, so it is not reused before this work is done.
  INFER_RETURN_IF_ERROR(context_.allocator->RecordStream(d_input_.get(), stream));
  return Run(stream, d_input_.get(), d_out_.as<float>());
}

absl::Status StagedRowsBatch::Download(Stream* stream) {
  INFER_ASSIGN_OR_RETURN(out_, context_.staging->Acquire(output_bytes()));
  if (d_out_.get() == nullptr) {  // empty batch: zero rows or zero-length sequences
    std::memset(out_.data(), 0, output_bytes());
    return absl::OkStatus();
  }
  INFER_RETURN_IF_ERROR(context_.allocator->RecordStream(d_out_.get(), stream));  // as above
  INFER_RETURN_IF_ERROR(
      context_.device->CopyToHost(out_.data(), d_out_.get(), output_bytes(), stream));
  if (d_second_.get() == nullptr) return absl::OkStatus();
  INFER_ASSIGN_OR_RETURN(second_, context_.staging->Acquire(second_bytes_));
  INFER_RETURN_IF_ERROR(context_.allocator->RecordStream(d_second_.get(), stream));
  return context_.device->CopyToHost(second_.data(), d_second_.get(), second_bytes_, stream);
}

absl::StatusOr<void*> StagedRowsBatch::AllocateSecondOutput(size_t bytes, Stream* stream) {
  INFER_ASSIGN_OR_RETURN(d_second_, DeviceBuffer::Allocate(context_.allocator, bytes, stream));
  second_bytes_ = bytes;
  return d_second_.get();
}

absl::Status StagedRowsBatch::Finish(absl::Span<InferResponse* const> responses) {
  AppendFp32Rows(output_, out_.as<float>(), width_, rows_per_request_, responses);
  for (size_t i = 0; i < responses.size(); ++i) AdjustOutput(i, responses[i]);
  return absl::OkStatus();
}

}  // namespace infer
