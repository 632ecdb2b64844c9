// Fused multi-head self-attention over PACKED variable-length sequences (the
// BERT encoder's attention, see models/packed_sequences.h), on tensor cores:
// FP16 inputs, FP32 accumulation, an online softmax over key tiles, so no
// [len, len] score matrix is ever materialised. Plain CUDA types only, so the
// host compiler can include this header.
//
// Contract of LaunchPackedAttention:
//  - qkv: [tokens, 3 * hidden] FP16, hidden = heads * head_dim, one row per
//    token in packed order; each row is query | key | value, BEFORE their bias.
//  - bias: FP32 [3 * hidden] in device memory, in the same order. The query
//    bias is added in FP32 and the sum rounded once to FP16 (the tensor
//    cores' input precision). Keys and values are used as given, and their
//    biases applied exactly: the key bias only adds q·b_k to every score of a
//    query row, which the softmax cancels, so it is skipped; the value bias
//    is added in FP32 to the normalised output (the weights sum to 1).
//  - offsets: int32 [rows + 1] in device memory: sequence r owns tokens
//    offsets[r] .. offsets[r + 1] - 1. Rows may be empty, trailing empty rows
//    included (CUDA-graph capture pads with them). Never read on the host.
//  - max_len: at least every sequence's length; it sizes the grid (blocks past
//    a sequence's end exit at once). Query tokens past max_len are not written.
//  - ctx: [tokens, hidden] FP16: for every sequence, head and query token,
//    softmax(q·k^T * scale) over the sequence's own keys, times v. No mask: a
//    sequence attends to exactly its own tokens. Every token of every
//    sequence is written; nothing else is touched. scale may have either
//    sign; 0 gives equal weights.
//  - qkv, bias and ctx must be 16-byte aligned (cudaMalloc gives 256), and ctx
//    must not overlap qkv or bias (they are read through the read-only cache).
//
// Enqueues one kernel on `stream`: never allocates, never synchronises, never
// reads device memory on the host, so it may be captured into a CUDA graph.
// The first launch of each head size on a device sets the kernel's dynamic
// shared memory limit (cudaFuncSetAttribute, not a stream operation).
// Returns cudaErrorInvalidValue for an unsupported head_dim, negative sizes,
// heads < 1, a misaligned pointer, or a grid out of range (rows or heads over
// 65535); cudaSuccess without launching when rows == 0 or max_len == 0;
// otherwise cudaGetLastError() after the launch. Thread-safe (each call only
// enqueues work; the per-device attribute flag is atomic).
#ifndef INFER_MODELS_PACKED_ATTENTION_CUDA_CUH_
#define INFER_MODELS_PACKED_ATTENTION_CUDA_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace infer::cuda {

// qkv: [tokens, 3*hidden] FP16, rows = tokens in packed order; each row is query|key|value
//      (hidden = heads*head_dim each), BEFORE their bias; bias: FP32 [3*hidden] (device).
// offsets: int32 [rows+1] on the device: sequence r owns tokens offsets[r] .. offsets[r+1]-1.
//      Rows may be empty (offsets[r+1]==offsets[r]); trailing empty rows are allowed (CUDA-graph
//      capture pads with them).
// max_len: >= every sequence's length (the grid is sized from it; blocks past a sequence's end
//      exit at once).
// ctx: [tokens, hidden] FP16 output: for each sequence, head and query token, softmax(q·k^T*scale)
//      over the sequence's own keys, times v. No mask: a sequence attends to exactly its own
//      tokens.
cudaError_t LaunchPackedAttention(cudaStream_t stream, const __half* qkv, const float* bias,
                                  const int32_t* offsets, int64_t rows, int64_t max_len,
                                  int64_t heads, int64_t head_dim, float scale, __half* ctx);

// The general attention's masks and bias, by index within the sequence.
struct AttentionMask {
  bool causal = false;  // keys k <= q only
  int window = 0;       // > 0: keys with |k - q| <= window only
  // Not null: FP32 [heads, 2 * relative_span - 1] in device memory, the bias
  // of key k for query q at [head][k - q + relative_span - 1], added to the
  // scaled score (MPNet). relative_span >= max_len.
  const float* relative_bias = nullptr;
  int relative_span = 0;
};

// LaunchPackedAttention generalised: grouped KV heads and AttentionMask.
//  - qkv rows are query | key | value of widths heads · head_dim, kv_heads ·
//    head_dim, kv_heads · head_dim; bias likewise. Query head h uses key and
//    value head h / (heads / kv_heads); heads % kv_heads must be 0.
//  - ctx: [tokens, heads · head_dim].
//  - With no mask and no bias this is the plain kernel; otherwise a variant
//    that masks per score and visits only the key tiles the masks leave a
//    block. Every query keeps at least itself, so no row is empty.
// Everything else (alignment, biases, capture, errors) as LaunchPackedAttention;
// also cudaErrorInvalidValue for a negative window or a relative span below
// max_len.
cudaError_t LaunchPackedAttentionMasked(cudaStream_t stream, const __half* qkv, const float* bias,
                                        const int32_t* offsets, int64_t rows, int64_t max_len,
                                        int64_t heads, int64_t kv_heads, int64_t head_dim,
                                        float scale, const AttentionMask& mask, __half* ctx);

// True for the head sizes the kernel handles: 32, 64, 128.
bool PackedAttentionSupports(int64_t head_dim);

}  // namespace infer::cuda

#endif  // INFER_MODELS_PACKED_ATTENTION_CUDA_CUH_
