// CUDA implementation of EmbedPoolKernels (host side; kernels in the .cu).
#include "models/embed_pool/embed_pool_kernels_cuda.cuh"

#include "models/embed_pool/embed_pool_kernels.h"
#include "runtime/cuda_device.h"

namespace infer {
namespace {

class CudaEmbedPoolKernels final : public EmbedPoolKernels {
 public:
  absl::Status Gather(Stream* stream, const int64_t* ids, int64_t n, const float* table,
                      int64_t hidden, float* out) override {
    return CudaStatus(cuda::LaunchGather(NativeCudaStream(stream), ids, n, table, hidden, out),
                      "embed_pool gather kernel");
  }
  absl::Status BiasTanhMeanPool(Stream* stream, const float* y, const float* bias,
                                const int64_t* ids, int64_t batch, int64_t seq, int64_t dim,
                                int64_t pad_id, float* out) override {
    return CudaStatus(cuda::LaunchBiasTanhMeanPool(NativeCudaStream(stream), y, bias, ids, batch,
                                                   seq, dim, pad_id, out),
                      "embed_pool pooling kernel");
  }
};

}  // namespace

std::unique_ptr<EmbedPoolKernels> CreateCudaEmbedPoolKernels() {
  return std::make_unique<CudaEmbedPoolKernels>();
}

}  // namespace infer
