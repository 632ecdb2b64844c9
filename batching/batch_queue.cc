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
  if (options.max_batch_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_tokens must not be negative, got ", options.max_batch_tokens));
  }
  for (size_t i = 0; i < options.length_buckets.size(); ++i) {
    if (options.length_buckets[i] < 1 ||
        (i > 0 && options.length_buckets[i] <= options.length_buckets[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("length buckets must be positive and ascending, got [",
                       absl::StrJoin(options.length_buckets, ","), "]"));
    }
  }
  if (options.priority_levels < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority_levels must be >= 1, got ", options.priority_levels));
  }
  if (options.priority_aging <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("priority_aging must be positive");
  }
  if (options.default_priority_level < 0 ||
      options.default_priority_level > options.priority_levels) {
    return absl::InvalidArgumentError(
        absl::StrCat("default_priority_level must be in [1, ", options.priority_levels,
                     "] (or 0 for the lowest), got ", options.default_priority_level));
  }
  if (options.default_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("default_timeout must not be negative");
  }
  if (options.max_queue_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queue_size must be >= 1, got ", options.max_queue_size));
  }
  return absl::OkStatus();
}

int LengthBucket(const QueueOptions& options, int64_t length) {
  if (options.length_buckets.empty()) return 0;
  for (size_t i = 0; i < options.length_buckets.size(); ++i) {
    if (length <= options.length_buckets[i]) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace infer
