#include "engine/request_admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/guarded.h"

namespace infer {

absl::Status CheckFitsMemory(const AdmissionPolicy& policy, const AdmittedRequest& r) {
  const int64_t chunk_rows = std::min(r.rows, policy.batching->max_batch_size);
  const int64_t chunk_tokens = std::min(r.real_tokens, chunk_rows * r.seq_length);
  const int64_t peak = policy.model->PeakBytes(
      {chunk_rows, chunk_tokens, r.seq_length, std::min(r.state_tokens, chunk_tokens)});
  if (peak <= policy.memory->Capacity()) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("request needs ", peak, " bytes of device memory (", chunk_rows,
                   " sequences of ", r.seq_length, " tokens); model '", policy.model->spec().name,
                   "' may use ", policy.memory->Describe()));
}

absl::Status AdmitRequest(const AdmissionPolicy& policy, absl::Time arrival, RequestSource& source,
                          InferRequest* request, AdmittedRequest* admitted, RefusalReason* reason) {
  const Model& model = *policy.model;
  const QueueOptions& q = *policy.batching;
  const std::string& name = model.spec().name;
  auto refuse = [reason](absl::Status status, RefusalReason why) {
    *reason = why;
    return status;
  };
  // 1. The declared limits, then decoding.
  absl::Status status;
  {
    DeclaredRequest declared;
    status = Guarded([&] { return source.Declare(model.spec(), &declared); });
    if (!status.ok()) return refuse(std::move(status), RefusalReason::kInvalid);
    status = CheckDeclaredLimits(*policy.limits, name, declared.inputs, declared.text_bytes,
                                 model.DeclaredSequenceLength(declared.inputs));
    if (!status.ok()) return refuse(std::move(status), RefusalReason::kOverLimit);
  }
  status = Guarded([&] { return source.Decode(model.spec(), request); });
  if (!status.ok()) return refuse(std::move(status), RefusalReason::kInvalid);
  request->model_name = name;
  // 2. The spec (INT32 ids widened first), then tokenisation.
  status = WidenInt32Inputs(model.spec(), request);
  if (status.ok()) status = ValidateRequestAgainstSpec(model.spec(), *request);
  if (status.ok()) status = Guarded([&] { return model.Preprocess(request); });
  if (!status.ok()) return refuse(std::move(status), RefusalReason::kInvalid);
  // 3. Lengths and the length class.
  AdmittedRequest r;
  r.rows = RequestBatchSize(*request);
  r.seq_length = model.SequenceLength(*request);
  status = CheckLengthLimits(*policy.limits, q, name, r.rows, r.seq_length);
  if (!status.ok()) return refuse(std::move(status), RefusalReason::kOverLimit);
  // 4. The model's own checks.
  status = model.ValidateRequest(*request);
  if (!status.ok()) return refuse(std::move(status), RefusalReason::kInvalid);
  r.real_tokens = model.RealTokens(*request);
  r.state_tokens = model.StateTokens(*request);
  r.bucket = std::max(0, LengthBucket(q, r.seq_length));
  // 5. Priority and deadline.
  const int64_t levels = q.priority_levels;
  const int64_t level = request->priority != 0          ? request->priority
                        : q.default_priority_level != 0 ? q.default_priority_level
                                                        : levels;
  if (level < 1 || level > levels) {
    return refuse(absl::InvalidArgumentError(absl::StrCat(
                      "priority ", request->priority, " is outside [1, ", levels, "] for model '",
                      name, "' (1 is the most urgent; 0 means the default)")),
                  RefusalReason::kInvalid);
  }
  r.level = static_cast<int>(level);
  const absl::Duration timeout =
      request->timeout > absl::ZeroDuration() ? request->timeout : q.default_timeout;
  r.due = request->deadline;
  if (timeout > absl::ZeroDuration()) r.due = std::min(r.due, arrival + timeout);
  if (r.due <= arrival) {
    return refuse(absl::DeadlineExceededError("the request's deadline passed before it arrived"),
                  RefusalReason::kDeadline);
  }
  // 6. Device memory.
  status = CheckFitsMemory(policy, r);
  if (!status.ok()) return refuse(std::move(status), RefusalReason::kMemory);
  *admitted = r;
  return absl::OkStatus();
}

}  // namespace infer
