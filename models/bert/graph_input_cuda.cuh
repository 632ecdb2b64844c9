// The input of a captured CUDA graph of the BERT encoder (models/bert/bert_cuda_graphs.h):
// a packed batch (models/packed_sequences.h) copied into the graph's own,
// larger, packed buffer, padded to the graph's shape. Plain CUDA types only,
// so the host compiler can include this header.
//
// Contract of LaunchPadPackedBatch:
//  - src_ids, src_positions: int32 [tokens]; src_types: int32 [tokens] or
//    null (all type 0); src_offsets: int32 [rows + 1], offsets[rows] ==
//    tokens; all in device memory, never read on the host.
//  - dst: int32 [3 * tokens_class + rows_class + 1] in device memory, laid
//    out as PackedLayout{rows_class, tokens_class, /*with_types=*/true}
//    (ids, positions, offsets, types).
//  - Writes ids, positions and types of tokens 0..tokens-1 from the source
//    (types 0 when src_types is null) and 0 (a valid id, position and type
//    of every model) for tokens..tokens_class-1, offsets 0..rows from the
//    source and `tokens` for rows+1..rows_class.
//    So the padded batch holds the same sequences, then rows_class - rows
//    empty ones, and the padding tokens belong to no sequence: row-wise
//    kernels compute them on their own rows, attention and pooling never
//    read them.
// Requires tokens <= tokens_class and rows <= rows_class. Enqueues one kernel
// on `stream`; returns cudaErrorInvalidValue on bad sizes, else
// cudaGetLastError() after the launch.
#ifndef INFER_MODELS_BERT_GRAPH_INPUT_CUDA_CUH_
#define INFER_MODELS_BERT_GRAPH_INPUT_CUDA_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace infer::cuda {

cudaError_t LaunchPadPackedBatch(cudaStream_t stream, const int32_t* src_ids,
                                 const int32_t* src_positions, const int32_t* src_types,
                                 const int32_t* src_offsets, int64_t rows, int64_t tokens,
                                 int64_t rows_class, int64_t tokens_class, int32_t* dst);

}  // namespace infer::cuda

#endif  // INFER_MODELS_BERT_GRAPH_INPUT_CUDA_CUH_
