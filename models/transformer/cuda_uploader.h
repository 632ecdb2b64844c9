// CudaUploader: uploads a model's host weights to the device for the CUDA
// encoder (encoder_cuda.cc, encoder_cuda_general.cc), on one copy stream,
// keeping the host-side FP16 conversions alive until the caller has
// synchronised that stream. An empty vector gives an empty DeviceBuffer (a
// null pointer: "absent"). Counts the allocator blocks it takes.
//
// Only built with CUDA (INFER_WITH_CUDA). Thread-compatible.
#ifndef INFER_MODELS_TRANSFORMER_CUDA_UPLOADER_H_
#define INFER_MODELS_TRANSFORMER_CUDA_UPLOADER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "models/fp8_quantize_cuda.cuh"
#include "models/half.h"
#include "runtime/caching_allocator.h"
#include "runtime/device_context.h"
#include "runtime/status_macros.h"

namespace infer {

class CudaUploader {
 public:
  CudaUploader(const DeviceContext& context, Stream* stream) : context_(context), stream_(stream) {}

  absl::StatusOr<DeviceBuffer> Half(const std::vector<float>& v) {
    if (v.empty()) return DeviceBuffer();
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToHalf(v[i]);
    halves_.push_back(std::move(h));
    return Copy(halves_.back().data(), halves_.back().size() * sizeof(uint16_t));
  }
  // `v` must stay alive until the stream is synchronised.
  absl::StatusOr<DeviceBuffer> Float(const std::vector<float>& v) {
    if (v.empty()) return DeviceBuffer();
    return Copy(v.data(), v.size() * sizeof(float));
  }
  // A copy of `v` kept here until the stream is synchronised.
  absl::StatusOr<DeviceBuffer> FloatCopy(std::vector<float> v) {
    floats_.push_back(std::move(v));
    return Float(floats_.back());
  }
  // A [rows, cols] weight as E4M3 codes with one FP32 scale per row
  // (models/fp8_quantize_cuda.cuh: QuantizeRowsFp8Host).
  absl::Status Fp8Rows(const std::vector<float>& w, int64_t rows, int64_t cols, DeviceBuffer* codes,
                       DeviceBuffer* scales) {
    std::vector<uint8_t> q;
    std::vector<float> s;
    cuda::QuantizeRowsFp8Host(w, rows, cols, &q, &s);
    bytes_vectors_.push_back(std::move(q));
    INFER_ASSIGN_OR_RETURN(*codes,
                           Copy(bytes_vectors_.back().data(), bytes_vectors_.back().size()));
    INFER_ASSIGN_OR_RETURN(*scales, FloatCopy(std::move(s)));
    return absl::OkStatus();
  }
  int64_t bytes() const { return bytes_; }

 private:
  absl::StatusOr<DeviceBuffer> Copy(const void* host, size_t bytes) {
    INFER_ASSIGN_OR_RETURN(DeviceBuffer b,
                           DeviceBuffer::Allocate(context_.allocator, bytes, stream_));
    INFER_RETURN_IF_ERROR(context_.device->CopyToDevice(b.get(), host, bytes, stream_));
    bytes_ += CachingAllocator::BlockBytes(static_cast<int64_t>(bytes));
    return b;
  }

  const DeviceContext& context_;
  Stream* const stream_;
  std::vector<std::vector<uint16_t>> halves_;
  std::vector<std::vector<float>> floats_;
  std::vector<std::vector<uint8_t>> bytes_vectors_;
  int64_t bytes_ = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_CUDA_UPLOADER_H_
