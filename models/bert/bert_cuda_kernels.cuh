// Launchers for the BERT encoder's fused CUDA kernels (FP16 storage, FP32
// arithmetic), over packed tokens (models/packed_sequences.h). Plain CUDA
// types only, so the host compiler can include this. Designs in
// bert_cuda_layer_norm.cu and bert_cuda_gelu_pool.cu.
//
// Every launcher: enqueues its kernel on `stream` alone and returns
// cudaGetLastError() after the launch; never allocates, copies or
// synchronises, so it can be captured into a CUDA graph. Zero-size input
// (a size argument of 0) returns cudaSuccess without launching and without
// touching any pointer; a negative size, or one no launch can cover,
// returns cudaErrorInvalidValue without launching. Any pointer alignment
// works (FP16 and FP32 elements at their natural alignment): 16-byte aligned
// pointers and row sizes that are multiples of 8 take the 16-byte access
// paths, anything else a scalar one with the same arithmetic.
#ifndef INFER_MODELS_BERT_BERT_CUDA_KERNELS_CUH_
#define INFER_MODELS_BERT_BERT_CUDA_KERNELS_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace infer::cuda {

// Largest hidden size the LayerNorm launchers are guaranteed to handle, and
// the largest the register-resident paths take (hidden % 8 == 0). Larger
// hidden sizes up to 12256 go to the scalar kernel (the row in 48 KiB of
// shared memory); above that, cudaErrorInvalidValue.
inline constexpr int kMaxLayerNormHidden = 8192;

// LayerNorm of a row: with row in FP32, mean = sum(row) / hidden,
// var = sum((row - mean)^2) / hidden (two passes), the output is
// (row - mean) * rsqrt(var + eps) * gamma + beta rounded to FP16.

// x[r] = LayerNorm(word[ids[r]] + position[positions[r]] + token_type[t])
// for the `tokens` rows, t = types[r] (0 for every row when types is null),
// the three FP16 embedding rows summed in FP32 in that order; gamma/beta
// FP32 [hidden]. x must not overlap the inputs.
cudaError_t LaunchEmbedLayerNorm(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                                 const int32_t* types, const __half* word, const __half* position,
                                 const __half* token_type, const float* gamma, const float* beta,
                                 float eps, int64_t tokens, int64_t hidden, __half* x);

// x[r] = LayerNorm(x[r] + y[r] + bias) in place, for `tokens` rows: x, y
// FP16 [tokens, hidden] (not overlapping), x + y + bias summed in FP32 in
// that order; bias/gamma/beta FP32 [hidden].
cudaError_t LaunchBiasResidualLayerNorm(cudaStream_t stream, __half* x, const __half* y,
                                        const float* bias, const float* gamma, const float* beta,
                                        float eps, int64_t tokens, int64_t hidden);

// y = GELU(y + bias) in place, exact erf form 0.5 v (1 + erf(v / sqrt 2)) with
// v = y + bias in FP32, rounded to FP16; y [tokens, width], bias FP32 [width].
cudaError_t LaunchBiasGelu(cudaStream_t stream, __half* y, const float* bias, int64_t tokens,
                           int64_t width);

// For each packed sequence r (tokens offsets[r] .. offsets[r + 1] - 1 of x,
// offsets on the device): out[r] = the mean of its tokens' rows, or its
// first token's row when `cls`; zeros for an empty sequence; L2-normalised
// if `normalize`. x FP16 [tokens, hidden], out FP32 [rows, hidden].
cudaError_t LaunchPackedPool(cudaStream_t stream, const __half* x, const int32_t* offsets,
                             int64_t rows, int64_t hidden, bool cls, bool normalize, float* out);

}  // namespace infer::cuda

#endif  // INFER_MODELS_BERT_BERT_CUDA_KERNELS_CUH_
