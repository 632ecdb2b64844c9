// EncodeOnDevice: host-side convenience for any TransformerEncoder on any
// device (the CPU encoder has its own, TransformerEncoderCpu::Encode): for
// load-time checks (the FP8 quality gate, models/transformer/precision_gate.h),
// tests and tools, not the serving path.
//
// Packs a right-padded [batch, seq] id matrix by its mask (token types
// [batch, seq], or empty: all 0), stages it in device memory from the
// context's allocator, encodes on a compute stream of its own and returns
// [batch, hidden] FP32 embeddings, pooled by `pooling`, L2-normalised when
// `normalize`. INVALID_ARGUMENT for mismatched sizes, an id past the
// vocabulary, a type past the token-type table, a mask value other than 0
// or 1, or a sequence longer than the model takes. Blocks until done.
//
// Thread-safety: as the encoder's Encode (each call has its own stream).
#ifndef INFER_MODELS_TRANSFORMER_ENCODE_ON_DEVICE_H_
#define INFER_MODELS_TRANSFORMER_ENCODE_ON_DEVICE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/transformer/encoder.h"
#include "runtime/device_context.h"

namespace infer {

absl::StatusOr<std::vector<float>> EncodeOnDevice(const TransformerEncoder& encoder,
                                                  const DeviceContext& context,
                                                  absl::Span<const int64_t> ids,
                                                  absl::Span<const int64_t> mask,
                                                  absl::Span<const int64_t> types, int64_t batch,
                                                  int64_t seq, Pooling pooling, bool normalize);

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_ENCODE_ON_DEVICE_H_
