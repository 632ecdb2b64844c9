#include "engine/request_limits.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"

namespace infer {

absl::Status CheckTokenLimits(const RequestLimits& limits, const std::string& model, int64_t rows,
                              int64_t tokens) {
  if (tokens > limits.max_input_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input has ", tokens, " tokens per sequence, over the limit of ", limits.max_input_length,
        " of model '", model, "' (request_limits.max_input_length)"));
  }
  if (rows > 0 && tokens > limits.max_request_tokens / rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("request has ", rows, " sequences of ", tokens, " tokens = ", rows * tokens,
                     " tokens, over the limit of ", limits.max_request_tokens, " of model '", model,
                     "' (request_limits.max_request_tokens)"));
  }
  return absl::OkStatus();
}

absl::Status CheckLengthLimits(const RequestLimits& limits, const QueueOptions& q,
                               const std::string& model, int64_t rows, int64_t tokens) {
  INFER_RETURN_IF_ERROR(CheckTokenLimits(limits, model, rows, tokens));
  if (!q.length_buckets.empty() && tokens > q.length_buckets.back()) {
    return absl::InvalidArgumentError(absl::StrCat("input has ", tokens, " tokens; model '", model,
                                                   "' allows ", q.length_buckets.back(),
                                                   " (its longest length bucket)"));
  }
  return absl::OkStatus();
}

absl::Status CheckDeclaredLimits(const RequestLimits& limits, const std::string& model,
                                 absl::Span<const DeclaredInput> inputs, int64_t text_bytes,
                                 int64_t sequence_length) {
  // The batch dimension: the largest first dimension (an input shared by
  // the request's rows, TensorSpec::shared, declares 1).
  int64_t rows = -1;
  for (const DeclaredInput& t : inputs) {
    if (!t.shape.empty()) rows = std::max(rows, t.shape[0]);
    int64_t elements = 1;
    bool malformed = false;
    for (int64_t d : t.shape) {
      if (d < 0) {
        malformed = true;  // the decoder or the spec checks name it
        break;
      }
      elements = d != 0 && elements > limits.max_tensor_elements / d
                     ? limits.max_tensor_elements + 1  // saturate: over the limit
                     : elements * d;
    }
    if (malformed) continue;
    if (elements > limits.max_tensor_elements) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", Quote(t.name), " has shape ", ShapeToString(t.shape), ", over the limit of ",
          limits.max_tensor_elements, " elements per tensor of model '", model,
          "' (request_limits.max_tensor_elements)"));
    }
    if (!t.shape.empty() && t.shape[0] > limits.max_client_batch_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", Quote(t.name), " has batch dimension ", t.shape[0], ", over the limit of ",
          limits.max_client_batch_size, " per request of model '", model,
          "' (request_limits.max_client_batch_size)"));
    }
  }
  if (text_bytes > limits.max_text_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request has ", text_bytes, " bytes of text (BYTES inputs), over the limit of ",
        limits.max_text_bytes, " of model '", model, "' (request_limits.max_text_bytes)"));
  }
  if (sequence_length > 0) {
    INFER_RETURN_IF_ERROR(
        CheckTokenLimits(limits, model, std::max<int64_t>(rows, 1), sequence_length));
  }
  return absl::OkStatus();
}

absl::Status ValidateRequestLimits(const RequestLimits& limits) {
  for (const auto& [field, value] :
       {std::pair{"max_client_batch_size", limits.max_client_batch_size},
        std::pair{"max_input_length", limits.max_input_length},
        std::pair{"max_request_tokens", limits.max_request_tokens},
        std::pair{"max_tensor_elements", limits.max_tensor_elements},
        std::pair{"max_text_bytes", limits.max_text_bytes}}) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("request_limits.", field, " must be >= 1, got ", value));
    }
  }
  return absl::OkStatus();
}

}  // namespace infer
