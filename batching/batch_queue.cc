#include "batching/batch_queue.h"

namespace infer {

absl::Status ValidateQueueOptions(const QueueOptions& options) {
  if (options.max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size must be >= 1, got ", options.max_batch_size));
  }
  if (options.max_queue_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_queue_delay must not be negative");
  }
  if (options.max_queue_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queue_size must be >= 1, got ", options.max_queue_size));
  }
  return absl::OkStatus();
}

}  // namespace infer
