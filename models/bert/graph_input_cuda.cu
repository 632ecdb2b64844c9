#include <climits>

#include "models/bert/graph_input_cuda.cuh"

namespace infer::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per element of the larger of the token and offset ranges.
__global__ void PadPackedBatchKernel(const int32_t* __restrict__ src_ids,
                                     const int32_t* __restrict__ src_positions,
                                     const int32_t* __restrict__ src_types,
                                     const int32_t* __restrict__ src_offsets, int rows, int tokens,
                                     int rows_class, int tokens_class, int32_t* __restrict__ dst) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < tokens_class) {
    const bool real = i < tokens;
    dst[i] = real ? src_ids[i] : 0;
    dst[tokens_class + i] = real ? src_positions[i] : 0;
    dst[2 * tokens_class + rows_class + 1 + i] = real && src_types != nullptr ? src_types[i] : 0;
  }
  if (i <= rows_class) dst[2 * tokens_class + i] = i <= rows ? src_offsets[i] : tokens;
}

}  // namespace

cudaError_t LaunchPadPackedBatch(cudaStream_t stream, const int32_t* src_ids,
                                 const int32_t* src_positions, const int32_t* src_types,
                                 const int32_t* src_offsets, int64_t rows, int64_t tokens,
                                 int64_t rows_class, int64_t tokens_class, int32_t* dst) {
  if (rows < 0 || tokens < 0 || rows > rows_class || tokens > tokens_class ||
      3 * tokens_class + rows_class + 1 > INT_MAX) {
    return cudaErrorInvalidValue;
  }
  const int64_t n = tokens_class > rows_class + 1 ? tokens_class : rows_class + 1;
  PadPackedBatchKernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                         stream>>>(
      src_ids, src_positions, src_types, src_offsets, static_cast<int>(rows),
      static_cast<int>(tokens), static_cast<int>(rows_class), static_cast<int>(tokens_class), dst);
  return cudaGetLastError();
}

}  // namespace infer::cuda
