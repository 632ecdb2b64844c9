// BatchQueue: the batching policy of one model — length buckets, bounded
// queues, batch formation under row, token and memory limits, deadlines,
// cancellation and priorities — with no threads and no clock of its own
// (callers pass `now`), so it is tested deterministically.
//
// Design notes and invariants
// - Buckets: each task goes to the smallest length bucket that holds its
//   sequence length (TaskT::length()); a batch never mixes buckets, so no
//   short sequence is padded to a long one's bucket. Without buckets there
//   is one bucket for every length.
// - Bounded: at most max_queue_size tasks wait in each bucket; Push beyond
//   that fails with UNAVAILABLE at once and the caller keeps the task.
// - Order inside a bucket: by urgency, then arrival. Urgency is the task's
//   priority level (1 is the most urgent), except that a task that has waited
//   priority_aging counts as level 0 (above all). A batch takes tasks in that
//   order while the rows (TaskT::size()) stay within max_batch_size, the
//   tokens the model computes (MemoryGate::ComputedTokens: the real tokens
//   for a model that packs sequences, rows × the longest length for one that
//   pads) within max_batch_tokens, and the estimated peak device memory of
//   the batch (MemoryGate::PeakBytes) within what the gate has available.
// - A bucket is ready when its batch is full (by rows, tokens or memory: a
//   task that would be next does not fit) or its oldest task has waited
//   max_queue_delay, or when the caller flushes (draining).
// - Across buckets: among the ready buckets, the one whose first task is the
//   most urgent (then oldest) goes first. Starvation bound: once a task has
//   waited max(max_queue_delay, priority_aging) its bucket is ready and the
//   task is at level 0, so it goes in the next batch except for level-0 tasks
//   that arrived before it — at most the tasks queued ahead of it, which are
//   bounded by max_queue_size per bucket. No bucket and no priority level
//   starves.
// - Memory: a batch launches only if the gate reserves its estimated peak
//   (TryReserve); the owner releases it when the batch is done. A task whose
//   peak alone exceeds what the gate can ever give is handed back as
//   "unfit" (the caller answers RESOURCE_EXHAUSTED) rather than waiting
//   forever.
// - Deadlines and cancellation: tasks past their deadline or cancelled are
//   removed when a batch is formed and handed back separately, never
//   computed.
// - Every task pushed leaves exactly once: in a batch, or as expired,
//   cancelled or unfit, or through TakeAll.
//
// Not thread-safe: the owner (DynamicBatcher) synchronizes.
#ifndef INFER_BATCHING_BATCH_QUEUE_H_
#define INFER_BATCHING_BATCH_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "batching/batch_shape.h"

namespace infer {

struct QueueOptions {
  // Most rows (sum of the requests' batch dimensions) in one batch.
  int64_t max_batch_size = 32;
  // Most tokens computed in one batch (MemoryGate::ComputedTokens; rows ×
  // longest sequence without a gate); 0: no limit.
  int64_t max_batch_tokens = 0;
  // Longest time the oldest request of a bucket waits for batch-mates.
  absl::Duration max_queue_delay = absl::Microseconds(1000);
  // Most requests waiting per bucket; beyond it Push is refused (UNAVAILABLE).
  int64_t max_queue_size = 1024;
  // Ascending upper bounds of the length buckets (e.g. 16,32,...,512); the
  // last is the longest sequence accepted. Empty: one bucket, any length.
  std::vector<int64_t> length_buckets;
  // Priority levels: requests carry 1 (most urgent) .. priority_levels.
  int priority_levels = 1;
  // A request that has waited this long counts as more urgent than any
  // level (the starvation bound for low priorities).
  absl::Duration priority_aging = absl::Milliseconds(100);
  // The level of requests that name none; 0 means the lowest
  // (priority_levels).
  int default_priority_level = 0;
  // Deadline of requests that set no timeout (counted from arrival); zero:
  // none.
  absl::Duration default_timeout = absl::ZeroDuration();
};

absl::Status ValidateQueueOptions(const QueueOptions& options);

// The length bucket of a sequence of `length` tokens: the smallest whose
// bound holds it; 0 without buckets; -1 when it is longer than the last.
int LengthBucket(const QueueOptions& options, int64_t length);

// What the queue asks about a batch's cost: the device memory it needs and
// the tokens it computes. Implementations are owned by the caller and
// outlive the queue.
class MemoryGate {
 public:
  virtual ~MemoryGate() = default;
  // Estimated peak device bytes of a batch of this shape.
  virtual int64_t PeakBytes(const BatchShape& shape) const = 0;
  // Tokens the model computes for a batch of this shape (what
  // max_batch_tokens limits): by default rows × length, as for a model that
  // pads every sequence to the longest.
  virtual int64_t ComputedTokens(const BatchShape& shape) const { return shape.padded_tokens(); }
  // Bytes a new batch could use now, and at most (with nothing in flight).
  virtual int64_t AvailableBytes() const = 0;
  virtual int64_t CapacityBytes() const = 0;
  // Reserves `bytes` for a batch about to launch; false if they are not
  // available (any more).
  virtual bool TryReserve(int64_t bytes) = 0;
};

// TaskT provides: int64_t size() (rows), int64_t length() (its longest
// sequence, which chooses the bucket), int64_t tokens() (its real tokens),
// int priority() (1..levels), absl::Time deadline(), bool cancelled().
template <typename TaskT>
class BatchQueue {
 public:
  struct Batch {
    std::vector<std::unique_ptr<TaskT>> tasks;  // to execute
    size_t bucket = 0;
    int64_t rows = 0;
    int64_t length = 0;           // longest sequence in the batch
    int64_t tokens = 0;           // real tokens of its tasks
    int64_t computed_tokens = 0;  // what the model computes (ComputedTokens)
    int64_t peak_bytes = 0;       // reserved through the gate (0 without one)
    BatchShape shape() const { return {rows, tokens, length}; }
    // Removed without execution, to be answered by the caller.
    std::vector<std::unique_ptr<TaskT>> expired;
    std::vector<std::unique_ptr<TaskT>> cancelled;
    std::vector<std::unique_ptr<TaskT>> unfit;  // can never fit the memory
    bool empty() const {
      return tasks.empty() && expired.empty() && cancelled.empty() && unfit.empty();
    }
  };

  // `gate` may be null (no memory limit); borrowed.
  explicit BatchQueue(QueueOptions options, MemoryGate* gate = nullptr)
      : options_(std::move(options)),
        gate_(gate),
        buckets_(std::max<size_t>(1, options_.length_buckets.size())) {}

  // The bucket for a sequence of `length` tokens, or -1 when it is longer
  // than the last bucket.
  int BucketFor(int64_t length) const { return LengthBucket(options_, length); }

  // Ownership of *task is transferred iff OK. UNAVAILABLE when its bucket is
  // full; INVALID_ARGUMENT when its size, length or priority is outside the
  // limits (the engine checks these first, with the model's wording).
  absl::Status Push(std::unique_ptr<TaskT>* task, absl::Time now) {
    const TaskT& t = **task;
    if (t.size() < 1 || t.size() > options_.max_batch_size) {
      return absl::InvalidArgumentError(absl::StrCat("request batch size ", t.size(),
                                                     " is outside [1, ", options_.max_batch_size,
                                                     "] (max_batch_size)"));
    }
    const int b = BucketFor(t.length());
    if (b < 0) {
      return absl::InvalidArgumentError(absl::StrCat("sequence of ", t.length(),
                                                     " tokens is longer than the last bucket (",
                                                     options_.length_buckets.back(), ")"));
    }
    if (t.priority() < 1 || t.priority() > options_.priority_levels) {
      return absl::InvalidArgumentError(absl::StrCat("priority ", t.priority(), " is outside [1, ",
                                                     options_.priority_levels, "]"));
    }
    Bucket& bucket = buckets_[b];
    if (static_cast<int64_t>(bucket.entries.size()) >= options_.max_queue_size) {
      return absl::UnavailableError(absl::StrCat(
          "queue is full: ", bucket.entries.size(), " requests waiting",
          options_.length_buckets.empty()
              ? std::string()
              : absl::StrCat(" for sequences up to ", options_.length_buckets[b], " tokens"),
          " (max_queue_size ", options_.max_queue_size, "); retry later"));
    }
    bucket.entries.push_back(Entry{std::move(*task), now, next_seq_++});
    ++size_;
    return absl::OkStatus();
  }

  // Forms the next batch if one is ready at `now` (with `flush`: any
  // non-empty bucket counts as ready) and `launch` allows it (false while
  // the device has no room for another batch: tasks then keep waiting, and
  // keep expiring), and collects tasks that expired, were cancelled or can
  // never fit. The result is empty when nothing is to be done yet.
  Batch PopBatch(absl::Time now, bool flush, bool launch = true) {
    Batch out;
    for (Bucket& bucket : buckets_) RemoveDead(bucket, now, &out);
    if (!launch) return out;
    // The most urgent ready bucket.
    int best = -1;
    std::pair<int, uint64_t> best_key{0, 0};
    Plan best_plan;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      Bucket& bucket = buckets_[b];
      if (bucket.entries.empty()) continue;
      SortByUrgency(bucket, now);
      Plan plan = PlanBatch(bucket);
      // A first task that alone can never fit the memory goes back to the
      // caller (answered RESOURCE_EXHAUSTED) instead of blocking the bucket.
      while (plan.count == 0 && gate_ != nullptr && !bucket.entries.empty() &&
             plan.first_peak > gate_->CapacityBytes()) {
        out.unfit.push_back(std::move(bucket.entries.front().task));
        bucket.entries.pop_front();
        --size_;
        plan = PlanBatch(bucket);
      }
      // Nothing fits the memory available now: wait for batches in flight.
      if (bucket.entries.empty() || plan.count == 0) continue;
      // Without priorities the bucket is in arrival order already.
      const Entry& oldest =
          options_.priority_levels <= 1
              ? bucket.entries.front()
              : *std::min_element(bucket.entries.begin(), bucket.entries.end(),
                                  [](const Entry& x, const Entry& y) { return x.seq < y.seq; });
      const bool expired = now - oldest.enqueued >= options_.max_queue_delay;
      if (!(plan.full || expired || flush)) continue;
      const std::pair<int, uint64_t> key{Urgency(bucket.entries.front(), now),
                                         bucket.entries.front().seq};
      if (best < 0 || key < best_key) {
        best = static_cast<int>(b);
        best_key = key;
        best_plan = plan;
      }
    }
    if (best < 0) return out;
    Bucket& bucket = buckets_[best];
    const Plan& plan = best_plan;  // the bucket has not changed since
    if (gate_ != nullptr && !gate_->TryReserve(plan.peak)) return out;
    out.bucket = static_cast<size_t>(best);
    out.rows = plan.shape.rows;
    out.length = plan.shape.length;
    out.tokens = plan.shape.tokens;
    out.computed_tokens = Computed(plan.shape);
    out.peak_bytes = gate_ != nullptr ? plan.peak : 0;
    for (size_t i = 0; i < plan.count; ++i) {
      out.tasks.push_back(std::move(bucket.entries.front().task));
      bucket.entries.pop_front();
    }
    size_ -= plan.count;
    return out;
  }

  // The earliest time after `now` at which something may change without a
  // Push: a bucket's delay running out, a deadline passing, or aging.
  // InfiniteFuture when nothing is pending. (A bucket that is ready but
  // waits for memory changes only when memory is released; the owner is
  // notified of that separately.)
  absl::Time NextDeadline(absl::Time now) const {
    absl::Time next = absl::InfiniteFuture();
    auto consider = [&](absl::Time t) {
      if (t > now) next = std::min(next, t);
    };
    for (const Bucket& bucket : buckets_) {
      for (const Entry& e : bucket.entries) {
        consider(e.enqueued + options_.max_queue_delay);
        consider(e.task->deadline());
        if (options_.priority_levels > 1) consider(e.enqueued + options_.priority_aging);
      }
    }
    return next;
  }

  // Removes every task (used when the consumer is gone).
  std::vector<std::unique_ptr<TaskT>> TakeAll() {
    std::vector<std::unique_ptr<TaskT>> all;
    for (Bucket& bucket : buckets_) {
      for (Entry& e : bucket.entries) all.push_back(std::move(e.task));
      bucket.entries.clear();
    }
    size_ = 0;
    return all;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t bucket_size(size_t b) const { return buckets_[b].entries.size(); }
  size_t num_buckets() const { return buckets_.size(); }
  const QueueOptions& options() const { return options_; }

 private:
  struct Entry {
    std::unique_ptr<TaskT> task;
    absl::Time enqueued;
    uint64_t seq;  // arrival order
  };
  struct Bucket {
    std::deque<Entry> entries;
  };
  struct Plan {
    size_t count = 0;  // tasks from the front of the sorted bucket
    BatchShape shape;
    int64_t peak = 0;
    int64_t first_peak = 0;  // the first task alone
    bool full = false;       // a next task exists and does not fit
  };

  int Urgency(const Entry& e, absl::Time now) const {
    if (options_.priority_levels > 1 && now - e.enqueued >= options_.priority_aging) return 0;
    return e.task->priority();
  }

  void SortByUrgency(Bucket& bucket, absl::Time now) const {
    if (options_.priority_levels <= 1) return;  // arrival order already
    std::stable_sort(bucket.entries.begin(), bucket.entries.end(),
                     [&](const Entry& x, const Entry& y) {
                       const int ux = Urgency(x, now), uy = Urgency(y, now);
                       return ux != uy ? ux < uy : x.seq < y.seq;
                     });
  }

  // The longest prefix of the (sorted) bucket within the row, token and
  // memory limits.
  Plan PlanBatch(const Bucket& bucket) const {
    Plan p;
    const int64_t available =
        gate_ != nullptr ? gate_->AvailableBytes() : std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < bucket.entries.size(); ++i) {
      const TaskT& t = *bucket.entries[i].task;
      const BatchShape shape{p.shape.rows + t.size(), p.shape.tokens + t.tokens(),
                             std::max(p.shape.length, t.length())};
      const int64_t peak = gate_ != nullptr ? gate_->PeakBytes(shape) : 0;
      if (i == 0) p.first_peak = peak;
      const bool fits = shape.rows <= options_.max_batch_size &&
                        (options_.max_batch_tokens == 0 || i == 0 ||
                         Computed(shape) <= options_.max_batch_tokens) &&
                        peak <= available;
      if (!fits) {
        p.full = true;
        break;
      }
      p.count = i + 1;
      p.shape = shape;
      p.peak = peak;
    }
    if (p.shape.rows == options_.max_batch_size) p.full = true;
    return p;
  }

  int64_t Computed(const BatchShape& shape) const {
    return gate_ != nullptr ? gate_->ComputedTokens(shape) : shape.padded_tokens();
  }

  void RemoveDead(Bucket& bucket, absl::Time now, Batch* out) {
    for (auto it = bucket.entries.begin(); it != bucket.entries.end();) {
      TaskT& t = *it->task;
      if (t.cancelled()) {
        out->cancelled.push_back(std::move(it->task));
      } else if (t.deadline() <= now) {
        out->expired.push_back(std::move(it->task));
      } else {
        ++it;
        continue;
      }
      it = bucket.entries.erase(it);
      --size_;
    }
  }

  const QueueOptions options_;
  MemoryGate* const gate_;
  std::vector<Bucket> buckets_;
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace infer

#endif  // INFER_BATCHING_BATCH_QUEUE_H_
