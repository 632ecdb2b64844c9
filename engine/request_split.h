// Splitting a request whose batch is larger than a model's max_batch_size
// into pieces that fit, and joining the pieces' responses back into one.
// Thread-compatible (plain functions).
#ifndef INFER_ENGINE_REQUEST_SPLIT_H_
#define INFER_ENGINE_REQUEST_SPLIT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"

namespace infer {

// Consecutive pieces of at most `max_rows` rows (the first dimension of
// every input). Each piece keeps the request's other fields. The request
// must have passed ValidateRequestAgainstSpec.
absl::StatusOr<std::vector<InferRequest>> SplitRequest(const InferRequest& request,
                                                       int64_t max_rows);

// Concatenates the pieces' outputs along the first dimension, in order.
// INTERNAL when the pieces do not line up (a model bug).
absl::StatusOr<InferResponse> JoinResponses(std::vector<InferResponse> parts);

}  // namespace infer

#endif  // INFER_ENGINE_REQUEST_SPLIT_H_
