// Launchers for the BERT encoder's fused CUDA kernels (FP16 storage, FP32
// arithmetic). Plain CUDA types only, so the host compiler can include this.
// Every launcher enqueues on `stream` and returns cudaGetLastError().
#ifndef INFER_MODELS_BERT_CUDA_KERNELS_CUH_
#define INFER_MODELS_BERT_CUDA_KERNELS_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace infer::cuda {

// Largest head dimension the attention kernel handles (BERT-family: 32-128).
inline constexpr int kMaxAttentionHeadDim = 128;
// Largest hidden size the LayerNorm kernels handle (one row in shared memory).
inline constexpr int kMaxLayerNormHidden = 8192;

// Lays a packed batch (ids, positions [tokens], offsets [rows + 1]; see
// models/packed_sequences.h) out as [rows, seq] rows with each sequence's
// tokens first: padded_ids and padded_positions (0 in the padding) and mask
// (1 for the sequence's tokens). `seq` is at least the longest sequence.
cudaError_t LaunchUnpack(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                         const int32_t* offsets, int64_t rows, int64_t seq, int64_t* padded_ids,
                         int32_t* padded_positions, int64_t* mask);

// x[r] = LayerNorm(word[ids[r]] + position[positions[r]] + token_type[0]) for
// the `tokens` rows; gamma/beta FP32 [hidden].
cudaError_t LaunchEmbedLayerNorm(cudaStream_t stream, const int64_t* ids, const int32_t* positions,
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

// Multi-head self-attention from a fused projection qkv [batch*seq, 3*hidden]
// (query | key | value, before their bias; bias FP32 [3*hidden]): for every
// sequence, head and query position, softmax(q·k^T * scale) over the keys
// with mask 1, times v, written to ctx [batch*seq, hidden]. Streams over the
// keys in tiles with an online softmax: no [seq, seq] score matrix is
// materialised. A query whose keys are all masked gets zeros.
cudaError_t LaunchAttention(cudaStream_t stream, const __half* qkv, const float* bias,
                            const int64_t* mask, int64_t batch, int64_t seq, int64_t heads,
                            int64_t head_dim, float scale, __half* ctx);

// out[b] = mean of x[b, s] over s with mask[b, s] = 1 (zeros when none), or
// x[b, 0] when `cls` (zeros when mask[b, 0] is 0); L2-normalised if
// `normalize`; out FP32 [batch, hidden].
cudaError_t LaunchPool(cudaStream_t stream, const __half* x, const int64_t* mask, int64_t batch,
                       int64_t seq, int64_t hidden, bool cls, bool normalize, float* out);

}  // namespace infer::cuda

#endif  // INFER_MODELS_BERT_CUDA_KERNELS_CUH_
