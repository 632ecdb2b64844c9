// Request limits: the per-model bounds on one request, and the checks that
// apply them. Every check is a pure function of the limits and what the
// request declares, so they run before decoding (nothing proportional to a
// declared size is allocated first), on every request alike. Thread-safe (pure functions).
#ifndef INFER_ENGINE_REQUEST_LIMITS_H_
#define INFER_ENGINE_REQUEST_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "batching/batch_queue.h"
#include "models/model.h"

namespace infer {

// Per-model bounds on one request, checked when it arrives and before any
// work or allocation proportional to the checked size. Over a limit:
// INVALID_ARGUMENT naming the limit. Field names follow the config.pbtxt
// `request_limits` block (TEI's names where TEI has the same limit).
struct RequestLimits {
  // Batch dimension (rows) of one request. Requests over the model's
  // max_batch_size but within this are split across executions.
  int64_t max_client_batch_size = 1024;
  // Tokens per sequence. The model's own limit (e.g. its position
  // embeddings) and its longest length bucket apply as well.
  int64_t max_input_length = 8192;
  // Rows × sequence length of one request.
  int64_t max_request_tokens = 262144;
  // Elements of any one input tensor (product of its shape).
  int64_t max_tensor_elements = int64_t{1} << 24;
  // Bytes of all BYTES (text) inputs of one request together.
  int64_t max_text_bytes = int64_t{4} << 20;
};

// INVALID_ARGUMENT naming the field when a limit is not positive.
absl::Status ValidateRequestLimits(const RequestLimits& limits);

// The limits that need only the declared shapes: elements per tensor and the
// batch dimension of each input; `text_bytes` (the BYTES payload, 4-byte
// length prefixes included) against max_text_bytes; and, when
// `sequence_length` > 0 (Model::DeclaredSequenceLength), tokens per sequence
// and per request (rows × length, rows the largest first dimension
// declared). INVALID_ARGUMENT naming the limit. An input with a negative
// dimension is skipped (the decoder names it). Admission runs this on what a
// request source declares, before it decodes the request
// (engine/request_source.h), so nothing proportional to a declared size is
// allocated first; the token limits apply again once text is tokenized.
absl::Status CheckDeclaredLimits(const RequestLimits& limits, const std::string& model,
                                 absl::Span<const DeclaredInput> inputs, int64_t text_bytes,
                                 int64_t sequence_length);

// Tokens per sequence (max_input_length) and per request (rows × tokens,
// max_request_tokens). INVALID_ARGUMENT naming the limit and `model`.
absl::Status CheckTokenLimits(const RequestLimits& limits, const std::string& model, int64_t rows,
                              int64_t tokens);

// Once the request is in the form the model executes (text tokenized): the
// token limits, and the longest length bucket of `batching`.
absl::Status CheckLengthLimits(const RequestLimits& limits, const QueueOptions& batching,
                               const std::string& model, int64_t rows, int64_t tokens);

}  // namespace infer

#endif  // INFER_ENGINE_REQUEST_LIMITS_H_
