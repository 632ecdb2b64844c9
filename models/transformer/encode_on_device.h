// Host-side entry points for the encoders: for load-time checks (the FP8
// quality gate, models/transformer/precision_gate.h), tests, tools and
// benchmarks, not the serving path (which packs and checks its requests in
// the served model).
//
// CheckAndPackHost checks a [batch, seq] id matrix against a model and packs
// it by its mask (token types [batch, seq], or empty: none): INVALID_ARGUMENT
// for mismatched sizes, a type past the token-type table, a width past the
// longest sequence the model takes, an id past the vocabulary, or a mask
// value other than 0 or 1. The CPU encoder's host entry points use it too.
//
// MaskTrailingPadTokens: what a decoder's classification head reads, as
// transformers picks it (below); the served model, the CPU encoder's
// Classify and the gate apply it alike.
//
// EncodeOnDevice: any TransformerEncoder on any device. Checks and packs as
// above, stages the batch in device memory from the context's allocator,
// encodes on a compute stream of its own and returns [batch, hidden] FP32
// embeddings, pooled by `pooling`, L2-normalised when `normalize`. Blocks
// until done.
//
// SparseOnDevice: the same for a SPLADE model (an encoder with splade()):
// every real token's last hidden state, then the head, giving [batch, vocab]
// FP32 with zeros for the absent terms, as the served model computes them.
// FAILED_PRECONDITION for an encoder without a masked-LM head.
//
// Thread-safety: pure functions; EncodeOnDevice and SparseOnDevice as the
// encoder's Encode (each call has its own stream).
#ifndef INFER_MODELS_TRANSFORMER_ENCODE_ON_DEVICE_H_
#define INFER_MODELS_TRANSFORMER_ENCODE_ON_DEVICE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/packed_sequences.h"
#include "models/transformer/encoder.h"
#include "runtime/device_context.h"

namespace infer {

absl::StatusOr<PackedSequences> CheckAndPackHost(const TransformerSpec& spec,
                                                 absl::Span<const int64_t> ids,
                                                 absl::Span<const int64_t> types,
                                                 absl::Span<const int64_t> mask, int64_t batch,
                                                 int64_t seq);

// For a head that reads the last token whose id is not the pad id
// (TransformerSpec::classifier_skips_pad): each of the `batch` rows of
// `ids` [batch, seq] has its real tokens after its last non-pad one marked
// padding in `mask` (the same shape; empty: every token real, then filled
// in), keeping at least its first real token, as transformers picks the
// token. A decoder is causal, so the state of the token read is what it was
// with them. Returns whether it changed anything; does nothing for any
// other spec.
bool MaskTrailingPadTokens(const TransformerSpec& spec, const int64_t* ids, int64_t batch,
                           int64_t seq, std::vector<int64_t>* mask);

struct SpladePooling;  // models/transformer/splade_head.h

absl::StatusOr<std::vector<float>> EncodeOnDevice(const TransformerEncoder& encoder,
                                                  const DeviceContext& context,
                                                  absl::Span<const int64_t> ids,
                                                  absl::Span<const int64_t> mask,
                                                  absl::Span<const int64_t> types, int64_t batch,
                                                  int64_t seq, Pooling pooling, bool normalize);

absl::StatusOr<std::vector<float>> SparseOnDevice(const TransformerEncoder& encoder,
                                                  const DeviceContext& context,
                                                  absl::Span<const int64_t> ids,
                                                  absl::Span<const int64_t> mask,
                                                  absl::Span<const int64_t> types, int64_t batch,
                                                  int64_t seq, const SpladePooling& pooling);

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_ENCODE_ON_DEVICE_H_
