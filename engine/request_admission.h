// Request admission: the one pass every request makes before it is queued,
// from every front end and the in-process API alike, on its RequestSource
// (engine/request_source.h). Each check is made once, in this order, and the
// first that fails refuses the request:
//
//   1. the request limits on what the source declares (shapes, text bytes),
//      before anything proportional to them is allocated; then the source
//      decodes the request;
//   2. the model's spec (names, types, shapes), then Model::Preprocess
//      (tokenisation);
//   3. sequence length and token limits, and the longest length class;
//   4. the model's own request checks (Model::ValidateRequest);
//   5. priority level and deadline;
//   6. device memory: the request's largest batch must fit with nothing
//      else in flight.
//
// The result classifies the request for the batcher: rows, sequence length
// (its length class), real tokens, priority level and deadline. Refusals
// carry the exact status (INVALID_ARGUMENT naming the limit,
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED) and the reason the statistics
// count them under. Thread-safe (no state of its own; Preprocess is
// thread-safe by the Model contract).
#ifndef INFER_ENGINE_REQUEST_ADMISSION_H_
#define INFER_ENGINE_REQUEST_ADMISSION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "batching/batch_queue.h"
#include "batching/batch_shape.h"
#include "engine/memory_admission.h"
#include "engine/model_stats.h"
#include "engine/request_limits.h"
#include "engine/request_source.h"
#include "models/model.h"

namespace infer {

// What the batcher needs to know of an admitted request.
struct AdmittedRequest {
  int64_t rows = 0;
  int64_t seq_length = 0;    // Model::SequenceLength: chooses the length bucket
  int64_t real_tokens = 0;   // Model::RealTokens
  int64_t state_tokens = 0;  // Model::StateTokens
  int level = 1;             // priority level, 1 the most urgent
  int bucket = 0;            // length bucket
  absl::Time due = absl::InfiniteFuture();
  BatchShape shape() const { return {rows, real_tokens, seq_length, state_tokens}; }
};

// The policy a request of one model is admitted under. Borrowed: everything
// outlives the call.
struct AdmissionPolicy {
  const Model* model = nullptr;
  const QueueOptions* batching = nullptr;
  const RequestLimits* limits = nullptr;
  const MemoryAdmission* memory = nullptr;
};

// Steps 1-6 above on the request `source` gives, arrived at `arrival`,
// decoded into *request (preprocessed in place). OK: *admitted is filled.
// Otherwise the refusal, and *reason says how to count it. The source's
// model_name is not looked at: the policy is its model's.
absl::Status AdmitRequest(const AdmissionPolicy& policy, absl::Time arrival, RequestSource& source,
                          InferRequest* request, AdmittedRequest* admitted, RefusalReason* reason);

// The device memory a request's largest batch needs (a request over
// max_batch_size is split: max_batch_size rows, at most all of its real
// tokens), and the RESOURCE_EXHAUSTED a request that cannot fit is refused
// with.
absl::Status CheckFitsMemory(const AdmissionPolicy& policy, const AdmittedRequest& request);

}  // namespace infer

#endif  // INFER_ENGINE_REQUEST_ADMISSION_H_
