// BatchQueue: the batch-formation policy of one model's queue, with no threads
// and no clock of its own (callers pass `now`), so it is tested
// deterministically.
//
// Design notes and invariants
// - Tasks are kept in arrival order (FIFO). A batch is the longest prefix of
//   the queue whose rows (TaskT::size(), the request's batch dimension) sum
//   to at most max_batch_size. Every task's size is in [1, max_batch_size]
//   (Push refuses others), so a batch always holds at least one task.
// - A batch is ready to launch when it is full — the queue holds at least
//   max_batch_size rows, or the next task would not fit — or when its oldest
//   task has waited max_queue_delay, or when the caller flushes (draining).
// - Bounded: at most max_queue_size tasks wait; Push beyond that fails with
//   UNAVAILABLE at once and the caller keeps the task. Nothing is allocated
//   for a refused task.
// - Later policy (length buckets, VRAM admission, deadlines, priorities)
//   extends PopBatch's readiness test and Push's admission test; callers do
//   not change.
//
// Not thread-safe: the owner (DynamicBatcher) synchronizes.
#ifndef INFER_BATCHING_BATCH_QUEUE_H_
#define INFER_BATCHING_BATCH_QUEUE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace infer {

struct QueueOptions {
  // Most rows (sum of the requests' batch dimensions) in one batch.
  int64_t max_batch_size = 32;
  // Longest time the oldest request waits for batch-mates.
  absl::Duration max_queue_delay = absl::Microseconds(1000);
  // Most requests waiting; beyond it Push is refused with UNAVAILABLE.
  int64_t max_queue_size = 1024;
};

absl::Status ValidateQueueOptions(const QueueOptions& options);

template <typename TaskT>
class BatchQueue {
 public:
  explicit BatchQueue(QueueOptions options) : options_(options) {}

  // Ownership of *task is transferred iff OK. UNAVAILABLE when full;
  // INVALID_ARGUMENT when the task's size is outside [1, max_batch_size].
  absl::Status Push(std::unique_ptr<TaskT>* task, absl::Time now) {
    const int64_t rows = (*task)->size();
    if (rows < 1 || rows > options_.max_batch_size) {
      return absl::InvalidArgumentError(absl::StrCat("request batch size ", rows,
                                                     " is outside [1, ", options_.max_batch_size,
                                                     "] (max_batch_size)"));
    }
    if (static_cast<int64_t>(entries_.size()) >= options_.max_queue_size) {
      return absl::UnavailableError(absl::StrCat("queue is full: ", entries_.size(),
                                                 " requests waiting (max_queue_size ",
                                                 options_.max_queue_size, "); retry later"));
    }
    entries_.push_back(Entry{std::move(*task), now});
    queued_rows_ += rows;
    return absl::OkStatus();
  }

  // Removes and returns the next batch if it is ready at `now` (or if
  // `flush` and the queue is not empty); otherwise returns an empty vector.
  std::vector<std::unique_ptr<TaskT>> PopBatch(absl::Time now, bool flush) {
    std::vector<std::unique_ptr<TaskT>> batch;
    if (entries_.empty()) return batch;
    size_t count = 0;
    int64_t rows = 0;
    while (count < entries_.size() &&
           rows + entries_[count].task->size() <= options_.max_batch_size) {
      rows += entries_[count].task->size();
      ++count;
    }
    const bool full = count < entries_.size() || rows == options_.max_batch_size;
    const bool expired = now - entries_.front().enqueued >= options_.max_queue_delay;
    if (!full && !expired && !flush) return batch;
    batch.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      batch.push_back(std::move(entries_.front().task));
      entries_.pop_front();
    }
    queued_rows_ -= rows;
    return batch;
  }

  // When the oldest task's delay runs out; InfiniteFuture when empty.
  absl::Time NextDeadline() const {
    if (entries_.empty()) return absl::InfiniteFuture();
    return entries_.front().enqueued + options_.max_queue_delay;
  }

  // Removes every task (used when the consumer is gone).
  std::vector<std::unique_ptr<TaskT>> TakeAll() {
    std::vector<std::unique_ptr<TaskT>> all;
    for (Entry& e : entries_) all.push_back(std::move(e.task));
    entries_.clear();
    queued_rows_ = 0;
    return all;
  }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  int64_t queued_rows() const { return queued_rows_; }
  const QueueOptions& options() const { return options_; }

 private:
  struct Entry {
    std::unique_ptr<TaskT> task;
    absl::Time enqueued;
  };

  const QueueOptions options_;
  std::deque<Entry> entries_;
  int64_t queued_rows_ = 0;
};

}  // namespace infer

#endif  // INFER_BATCHING_BATCH_QUEUE_H_
