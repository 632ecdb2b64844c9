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

// True for the head sizes the kernel handles: 32, 64, 128.
bool PackedAttentionSupports(int64_t head_dim);

}  // namespace infer::cuda

#endif  // INFER_MODELS_PACKED_ATTENTION_CUDA_CUH_
