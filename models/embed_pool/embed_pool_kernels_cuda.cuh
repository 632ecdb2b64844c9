// Launchers for the embed_pool CUDA kernels. Plain CUDA types only, so this
// header is safe for both nvcc and the host compiler.
#ifndef INFER_MODELS_EMBED_POOL_EMBED_POOL_KERNELS_CUDA_CUH_
#define INFER_MODELS_EMBED_POOL_EMBED_POOL_KERNELS_CUDA_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace infer::cuda {

cudaError_t LaunchGather(cudaStream_t stream, const int64_t* ids, int64_t n, const float* table,
                         int64_t hidden, float* out);

cudaError_t LaunchBiasTanhMeanPool(cudaStream_t stream, const float* y, const float* bias,
                                   const int64_t* ids, int64_t batch, int64_t seq, int64_t dim,
                                   int64_t pad_id, float* out);

}  // namespace infer::cuda

#endif  // INFER_MODELS_EMBED_POOL_EMBED_POOL_KERNELS_CUDA_CUH_
