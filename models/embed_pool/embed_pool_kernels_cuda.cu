#include "models/embed_pool/embed_pool_kernels_cuda.cuh"

namespace infer::cuda {
namespace {

// One block per row; threads stride over the hidden dimension.
__global__ void GatherKernel(const int64_t* __restrict__ ids, const float* __restrict__ table,
                             int64_t hidden, float* __restrict__ out) {
  const int64_t row = blockIdx.x;
  const float* src = table + ids[row] * hidden;
  float* dst = out + row * hidden;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) dst[d] = src[d];
}

// One block per sequence; threads stride over the output dimension. Each
// thread walks the sequence, so no cross-thread reduction is needed.
__global__ void BiasTanhMeanPoolKernel(const float* __restrict__ y, const float* __restrict__ bias,
                                       const int64_t* __restrict__ ids, int64_t seq, int64_t dim,
                                       int64_t pad_id, float* __restrict__ out) {
  const int64_t b = blockIdx.x;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    float acc = 0.0f;
    int64_t tokens = 0;
    const float bd = bias[d];
    for (int64_t s = 0; s < seq; ++s) {
      if (ids[b * seq + s] == pad_id) continue;
      acc += tanhf(y[(b * seq + s) * dim + d] + bd);
      ++tokens;
    }
    out[b * dim + d] = tokens > 0 ? acc / static_cast<float>(tokens) : 0.0f;
  }
}

}  // namespace

cudaError_t LaunchGather(cudaStream_t stream, const int64_t* ids, int64_t n, const float* table,
                         int64_t hidden, float* out) {
  if (n == 0) return cudaSuccess;
  GatherKernel<<<static_cast<unsigned>(n), 128, 0, stream>>>(ids, table, hidden, out);
  return cudaGetLastError();
}

cudaError_t LaunchBiasTanhMeanPool(cudaStream_t stream, const float* y, const float* bias,
                                   const int64_t* ids, int64_t batch, int64_t seq, int64_t dim,
                                   int64_t pad_id, float* out) {
  if (batch == 0) return cudaSuccess;
  BiasTanhMeanPoolKernel<<<static_cast<unsigned>(batch), 128, 0, stream>>>(y, bias, ids, seq, dim,
                                                                           pad_id, out);
  return cudaGetLastError();
}

}  // namespace infer::cuda
