// Launchers for the BERT encoder's fused CUDA kernels (FP16 storage, FP32
// arithmetic), over packed tokens (models/packed_sequences.h). Plain CUDA types only, so the host
// compiler can include this. Every launcher enqueues on `stream` and returns cudaGetLastError().
#ifndef INFER_MODELS_BERT_CUDA_KERNELS_CUH_
#define INFER_MODELS_BERT_CUDA_KERNELS_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace infer::cuda {

// Largest hidden size the LayerNorm kernels handle (one row in shared memory).
inline constexpr int kMaxLayerNormHidden = 8192;

// x[r] = LayerNorm(word[ids[r]] + position[positions[r]] + token_type[0]) for
// the `tokens` rows; gamma/beta FP32 [hidden].
cudaError_t LaunchEmbedLayerNorm(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                                 const __half* word, const __half* position,
                                 const __half* token_type, const float* gamma, const float* beta,
                                 float eps, int64_t tokens, int64_t hidden, __half* x);

// x[r] = LayerNorm(x[r] + y[r] + bias) in place, for `tokens` rows.
cudaError_t LaunchBiasResidualLayerNorm(cudaStream_t stream, __half* x, const __half* y,
                                        const float* bias, const float* gamma, const float* beta,
                                        float eps, int64_t tokens, int64_t hidden);

// y = GELU(y + bias) in place (erf form), y [tokens, width], bias [width].
cudaError_t LaunchBiasGelu(cudaStream_t stream, __half* y, const float* bias, int64_t tokens,
                           int64_t width);

// For each packed sequence r (tokens offsets[r] .. offsets[r + 1] - 1 of x,
// offsets on the device): out[r] = the mean of its tokens' rows, or its
// first token's row when `cls`; zeros for an empty sequence; L2-normalised
// if `normalize`. x FP16 [tokens, hidden], out FP32 [rows, hidden].
cudaError_t LaunchPackedPool(cudaStream_t stream, const __half* x, const int32_t* offsets,
                             int64_t rows, int64_t hidden, bool cls, bool normalize, float* out);

}  // namespace infer::cuda

#endif  // INFER_MODELS_BERT_CUDA_KERNELS_CUH_
