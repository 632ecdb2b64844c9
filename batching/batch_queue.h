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
//   most urgent (then oldest) goes first.
// - Memory: a batch leaves only with its estimated peak reserved through the
//   gate, in the same PopBatch (MemoryReservation, memory_gate.h): the batch
//   carries the reservation and its holder returns it when the batch is
//   done. A task whose peak alone exceeds what the gate can ever give is
//   handed back as "unfit" (the caller answers RESOURCE_EXHAUSTED) rather
//   than waiting forever. A bucket whose first task does not fit the memory
//   available now waits (it launches nothing smaller past it), and other
//   buckets go on launching, except as the starvation bound below says.
// - Starvation bound: B = max(max_queue_delay, priority_aging). A task that
//   has waited B is at level 0 and its bucket is ready, so it goes in the
//   next batch that its bucket's memory allows, except for level-0 tasks
//   that arrived before it. Memory is what could still hold it back for
//   ever: short sequences of other buckets (or other models on the same
//   budget) can keep taking the memory it waits for. So once the first task
//   of a bucket has waited B for memory ("starving"), the oldest such task
//   holds the queue: no batch launches until its memory is free, except a
//   batch whose first task arrived before it; and its bytes are claimed
//   through the gate (MemoryGate::Claim) so that other queues on the same
//   budget leave them free too. A task therefore waits at most B, plus
//   the batches in flight when it began to starve, plus one batch for each
//   task that arrived before it. No bucket and no priority level starves,
//   under memory pressure included.
//   These are the only side effects of PopBatch outside the queue: the
//   reservation of the batch it forms, and the claim.
// - Deadlines and cancellation: tasks past their deadline or cancelled are
//   handed back separately by PopBatch, never computed: expired ones from a
//   deadline heap as their deadline passes, cancelled ones when a batch is
//   planned over them or when a bounded sweep (kSweepPerPop tasks a call,
//   round the queue) reaches them.
// - Cost per call is independent of the number of tasks waiting (the tasks
//   a batch could take, the buckets, the priority levels, a log factor):
//   see bucket_fifo.h for how the order is kept without sorting.
// - Every task pushed leaves exactly once: in a batch, or as expired,
//   cancelled or unfit, or through TakeAll.
//
// Not thread-safe: the owner (DynamicBatcher) synchronizes.
#ifndef INFER_BATCHING_BATCH_QUEUE_H_
#define INFER_BATCHING_BATCH_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "batching/batch_shape.h"
#include "batching/bucket_fifo.h"
#include "batching/memory_gate.h"

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
  // The level of requests that name none; 0: the lowest (priority_levels).
  int default_priority_level = 0;
  // Deadline of requests that set no timeout (from arrival); zero: none.
  absl::Duration default_timeout = absl::ZeroDuration();
};

absl::Status ValidateQueueOptions(const QueueOptions& options);

// The length bucket of a sequence of `length` tokens: the smallest whose
// bound holds it; 0 without buckets; -1 when it is longer than the last.
int LengthBucket(const QueueOptions& options, int64_t length);

// A task's BatchShape::state_tokens: its state_tokens(), where TaskT has one.
template <typename TaskT>
int64_t StateTokensOf(const TaskT& task) {
  if constexpr (requires { task.state_tokens(); }) {
    return task.state_tokens();
  } else {
    return 0;
  }
}

// TaskT provides: int64_t size() (rows), int64_t length() (its longest
// sequence, which chooses the bucket), int64_t tokens() (its real tokens),
// int priority() (1..levels), absl::Time deadline(), bool cancelled(); and
// optionally int64_t state_tokens() (BatchShape::state_tokens; 0 without).
template <typename TaskT>
class BatchQueue {
 public:
  struct Batch {
    std::vector<std::unique_ptr<TaskT>> tasks;  // to execute
    size_t bucket = 0;
    int64_t rows = 0;
    int64_t length = 0;           // longest sequence in the batch
    int64_t tokens = 0;           // real tokens of its tasks
    int64_t state_tokens = 0;     // BatchShape::state_tokens of its tasks
    int64_t computed_tokens = 0;  // what the model computes (ComputedTokens)
    // The batch's estimated peak, reserved through the gate (empty without
    // one): the batch's holder owns it and returns it when the batch is done.
    MemoryReservation memory;
    BatchShape shape() const { return {rows, tokens, length, state_tokens}; }
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
      : options_(std::move(options)), gate_(gate) {
    const size_t n = std::max<size_t>(1, options_.length_buckets.size());
    buckets_.reserve(n);
    for (size_t b = 0; b < n; ++b) buckets_.emplace_back(options_.priority_levels);
  }
  ~BatchQueue() { SetClaim(0, absl::InfinitePast()); }
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

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
    Fifo& bucket = buckets_[b];
    if (static_cast<int64_t>(bucket.live()) >= options_.max_queue_size) {
      return absl::UnavailableError(absl::StrCat(
          "queue is full: ", bucket.live(), " requests waiting",
          options_.length_buckets.empty()
              ? std::string()
              : absl::StrCat(" for sequences up to ", options_.length_buckets[b], " tokens"),
          " (max_queue_size ", options_.max_queue_size, "); retry later"));
    }
    // Arrival times never go back, so a FIFO stays sorted by them.
    last_enqueued_ = std::max(last_enqueued_, now);
    const uint64_t seq = next_seq_++;
    const absl::Time deadline = t.deadline();
    const int level = t.priority();
    const typename Fifo::Handle handle = bucket.Push(std::move(*task), level, last_enqueued_, seq);
    ++size_;
    if (deadline != absl::InfiniteFuture()) {
      if (deadlines_.size() > 2 * size_ + 64) RebuildDeadlines();
      deadlines_.push_back(DeadlineEntry{deadline, seq, handle, static_cast<uint32_t>(b), level});
      std::push_heap(deadlines_.begin(), deadlines_.end(), Later);
    }
    return absl::OkStatus();
  }

  // Forms the next batch if one is ready at `now` (with `flush`: any
  // non-empty bucket counts as ready) and `launch` allows it (false while
  // the device has no room for another batch: tasks then keep waiting, and
  // keep expiring), and collects tasks that expired, were cancelled or can
  // never fit. The result is empty when nothing is to be done yet.
  //
  // Cost: independent of how many tasks wait. Deadlines come off a heap;
  // cancellations are found by a sweep of at most kSweepPerPop tasks per
  // call (and wherever a batch is planned), so a cancelled task deep in a
  // queue of n leaves within n / kSweepPerPop calls; a batch is planned by
  // walking only the tasks it could take.
  Batch PopBatch(absl::Time now, bool flush, bool launch = true) {
    Batch out;
    ExpireDue(now, &out);
    SweepCancelled(&out);
    if (launch) TakeReadyBatch(now, flush, &out);
    // The one place tombstones are popped (and compacted): outside PopBatch
    // every FIFO's front is live.
    for (Fifo& bucket : buckets_) bucket.Trim();
    return out;
  }

  // The earliest time after `now` at which something may change without a
  // Push: a bucket's delay running out, a deadline passing, or aging.
  // InfiniteFuture when nothing is pending. (A bucket that is ready but
  // waits for memory changes only when memory is released; the owner is
  // notified of that separately.) Cost: O(buckets × levels × log n).
  absl::Time NextDeadline(absl::Time now) const {
    absl::Time next = absl::InfiniteFuture();
    auto consider = [&](absl::Time t) {
      if (t > now) next = std::min(next, t);
    };
    for (const Fifo& bucket : buckets_) {
      if (bucket.empty()) continue;
      consider(bucket.Oldest()->enqueued + options_.max_queue_delay);
      if (options_.priority_levels <= 1) continue;
      for (int l = 1; l <= bucket.levels(); ++l) {  // the next task to age
        const size_t i = bucket.PeekAgedEnd(l, now, options_.priority_aging);
        if (i < bucket.fifo(l).size()) {
          consider(bucket.fifo(l)[i].enqueued + options_.priority_aging);
        }
      }
    }
    // The top may belong to a task that has left: an early wake, no more.
    if (!deadlines_.empty()) consider(deadlines_.front().deadline);
    return next;
  }

  // Removes every task (used when the consumer is gone).
  std::vector<std::unique_ptr<TaskT>> TakeAll() {
    SetClaim(0, absl::InfinitePast());
    std::vector<std::unique_ptr<TaskT>> all;
    for (Fifo& bucket : buckets_) bucket.TakeAll(&all);
    deadlines_.clear();
    size_ = 0;
    return all;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t bucket_size(size_t b) const { return buckets_[b].live(); }
  size_t num_buckets() const { return buckets_.size(); }
  const QueueOptions& options() const { return options_; }

  // Tasks examined per PopBatch for cancellation: each costs a look at the
  // task (a likely cache miss in a deep queue), so few.
  static constexpr size_t kSweepPerPop = 16;

 private:
  using Fifo = BucketFifo<TaskT>;
  using Entry = typename Fifo::Entry;

  struct Plan {
    size_t count = 0;  // tasks from the front, in urgency order
    BatchShape shape;
    int64_t peak = 0;
    Entry* first = nullptr;  // the first task in urgency order
    int first_level = 0;
    int first_urgency = 0;
    uint64_t first_seq = 0;
    int64_t first_peak = 0;  // the first task alone
    bool full = false;       // a next task exists and does not fit
  };

  struct DeadlineEntry {
    absl::Time deadline;
    uint64_t seq;
    typename Fifo::Handle handle;
    uint32_t bucket;
    int level;
  };
  // Heap order: the earliest deadline on top.
  static bool Later(const DeadlineEntry& x, const DeadlineEntry& y) {
    return x.deadline != y.deadline ? x.deadline > y.deadline : x.seq > y.seq;
  }

  // PopBatch's batch: the most urgent ready bucket's, if its memory can be
  // reserved and no starving task holds the queue (see the design notes);
  // and the unfit tasks met on the way.
  void TakeReadyBatch(absl::Time now, bool flush, Batch* out) {
    int best = -1;
    std::pair<int, uint64_t> best_key{0, 0};
    Plan best_plan;
    // The oldest first task that waits for memory past the starvation bound.
    const Entry* starving = nullptr;
    int64_t starving_peak = 0;
    const absl::Duration bound = std::max(options_.max_queue_delay, options_.priority_aging);
    for (size_t b = 0; b < buckets_.size(); ++b) {
      Fifo& bucket = buckets_[b];
      if (bucket.empty()) continue;
      Plan plan = PlanBatch(bucket, now, out);
      // A first task that alone can never fit the memory goes back to the
      // caller (answered RESOURCE_EXHAUSTED) instead of blocking the bucket.
      while (plan.count == 0 && gate_ != nullptr && plan.first != nullptr &&
             plan.first_peak > gate_->CapacityBytes()) {
        out->unfit.push_back(bucket.Take(plan.first_level, plan.first));
        --size_;
        plan = PlanBatch(bucket, now, out);
      }
      if (bucket.empty()) continue;
      if (plan.count == 0) {  // its first task waits for memory in flight
        if (plan.first != nullptr && now - plan.first->enqueued >= bound &&
            (starving == nullptr || plan.first->seq < starving->seq)) {
          starving = plan.first;
          starving_peak = plan.first_peak;
        }
        continue;
      }
      const bool expired = now - bucket.Oldest()->enqueued >= options_.max_queue_delay;
      if (!(plan.full || expired || flush)) continue;
      const std::pair<int, uint64_t> key{plan.first_urgency, plan.first_seq};
      if (best < 0 || key < best_key) {
        best = static_cast<int>(b);
        best_key = key;
        best_plan = plan;
      }
    }
    SetClaim(starving != nullptr ? starving_peak : 0,
             starving != nullptr ? starving->enqueued : absl::InfinitePast());
    // A starving task holds the queue, except for batches led by a task
    // that arrived before it (only a starving bucket waits for memory here,
    // so such a batch is of a task aged as long or longer).
    if (starving != nullptr && (best < 0 || best_plan.first_seq > starving->seq)) return;
    if (best < 0) return;
    Fifo& bucket = buckets_[best];
    const Plan& plan = best_plan;  // the bucket has not changed since
    std::optional<MemoryReservation> memory = MemoryReservation::TryTake(gate_, plan.peak);
    if (!memory.has_value()) return;  // taken meanwhile by another model's batch
    out->memory = *std::move(memory);
    out->bucket = static_cast<size_t>(best);
    out->rows = plan.shape.rows;
    out->length = plan.shape.length;
    out->tokens = plan.shape.tokens;
    out->state_tokens = plan.shape.state_tokens;
    out->computed_tokens = Computed(plan.shape);
    // The same walk as the plan's (nothing was pushed or trimmed since).
    typename Fifo::Cursor cursor(&bucket, now, options_.priority_aging);
    Entry* e = nullptr;
    int level = 0, urgency = 0;
    for (size_t i = 0; i < plan.count && cursor.Next(&e, &level, &urgency); ++i) {
      out->tasks.push_back(bucket.Take(level, e));
    }
    size_ -= plan.count;
  }

  // The claim on the gate's memory for a starving task (0: none), passed on
  // only when it changes.
  void SetClaim(int64_t bytes, absl::Time since) {
    if (gate_ == nullptr || (bytes == claim_bytes_ && (bytes == 0 || since == claim_since_))) {
      return;
    }
    claim_bytes_ = bytes;
    claim_since_ = since;
    gate_->Claim(bytes, since);
  }

  // Takes the live task of `e` as cancelled or expired (a cancellation wins).
  void RemoveDead(Fifo& bucket, int level, Entry* e, Batch* out) {
    const bool cancelled = e->task->cancelled();
    auto task = bucket.Take(level, e);
    --size_;
    (cancelled ? out->cancelled : out->expired).push_back(std::move(task));
  }

  // Every task whose deadline has passed, off the heap; stale entries (tasks
  // that have left) are dropped as they surface.
  void ExpireDue(absl::Time now, Batch* out) {
    while (!deadlines_.empty()) {
      const DeadlineEntry top = deadlines_.front();
      Entry* e = buckets_[top.bucket].Find(top.level, top.seq, top.handle);
      if (e != nullptr && top.deadline > now) break;
      std::pop_heap(deadlines_.begin(), deadlines_.end(), Later);
      deadlines_.pop_back();
      if (e != nullptr) RemoveDead(buckets_[top.bucket], top.level, e, out);
    }
  }

  // The heap again from the tasks still waiting: once stale entries make up
  // more than half of it, so each costs O(1) amortised.
  void RebuildDeadlines() {
    deadlines_.clear();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      for (int l = 1; l <= buckets_[b].levels(); ++l) {
        const auto& fifo = buckets_[b].fifo(l);
        for (size_t i = 0; i < fifo.size(); ++i) {
          const Entry& e = fifo[i];
          if (e.task == nullptr || e.task->deadline() == absl::InfiniteFuture()) continue;
          deadlines_.push_back(DeadlineEntry{e.task->deadline(), e.seq, buckets_[b].handle(l, i),
                                             static_cast<uint32_t>(b), l});
        }
      }
    }
    std::make_heap(deadlines_.begin(), deadlines_.end(), Later);
  }

  // Examines up to kSweepPerPop waiting tasks, resuming where the last call
  // stopped and going round every FIFO, and takes those cancelled.
  void SweepCancelled(Batch* out) {
    const int levels = options_.priority_levels;
    const size_t fifos = buckets_.size() * static_cast<size_t>(levels);
    size_t budget = kSweepPerPop;
    for (size_t visited = 0; budget > 0 && size_ > 0 && visited <= fifos; ++visited) {
      Fifo& bucket = buckets_[sweep_bucket_];
      const size_t n = bucket.fifo(sweep_level_).size();
      size_t& i = bucket.sweep_position(sweep_level_);
      for (; i < n && budget > 0; ++i, --budget) {
        Entry& e = bucket.at(sweep_level_, i);
        if (e.task != nullptr && e.task->cancelled()) RemoveDead(bucket, sweep_level_, &e, out);
      }
      if (i < n) return;
      i = 0;  // this FIFO is done: the next one, from where it stopped
      if (++sweep_level_ > levels) {
        sweep_level_ = 1;
        sweep_bucket_ = (sweep_bucket_ + 1) % buckets_.size();
      }
    }
  }

  // The longest run of the bucket, in urgency order, within the row, token
  // and memory limits. Cancelled tasks met on the way leave (into `out`);
  // expired ones have already left (ExpireDue, at the same `now`).
  Plan PlanBatch(Fifo& bucket, absl::Time now, Batch* out) {
    Plan p;
    const int64_t available =
        gate_ != nullptr ? gate_->AvailableBytes() : std::numeric_limits<int64_t>::max();
    typename Fifo::Cursor cursor(&bucket, now, options_.priority_aging);
    Entry* e = nullptr;
    int level = 0, urgency = 0;
    while (cursor.Next(&e, &level, &urgency)) {
      const TaskT& t = *e->task;
      if (t.cancelled()) {
        RemoveDead(bucket, level, e, out);
        continue;
      }
      const BatchShape shape{p.shape.rows + t.size(), p.shape.tokens + t.tokens(),
                             std::max(p.shape.length, t.length()),
                             p.shape.state_tokens + StateTokensOf(t)};
      const int64_t peak = gate_ != nullptr ? gate_->PeakBytes(shape) : 0;
      if (p.first == nullptr) {
        p.first = e;
        p.first_level = level;
        p.first_urgency = urgency;
        p.first_seq = e->seq;
        p.first_peak = peak;
      }
      const bool fits = shape.rows <= options_.max_batch_size &&
                        (options_.max_batch_tokens == 0 || p.count == 0 ||
                         Computed(shape) <= options_.max_batch_tokens) &&
                        peak <= available;
      if (!fits) {
        p.full = true;
        break;
      }
      ++p.count;
      p.shape = shape;
      p.peak = peak;
    }
    if (p.shape.rows == options_.max_batch_size) p.full = true;
    return p;
  }

  int64_t Computed(const BatchShape& shape) const {
    return gate_ != nullptr ? gate_->ComputedTokens(shape) : shape.padded_tokens();
  }

  const QueueOptions options_;
  MemoryGate* const gate_;
  std::vector<Fifo> buckets_;
  // Tasks with a deadline, earliest on top; entries of tasks that have left
  // stay until they surface or the heap is rebuilt.
  std::vector<DeadlineEntry> deadlines_;
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
  absl::Time last_enqueued_ = absl::InfinitePast();
  // Where the cancellation sweep resumes.
  size_t sweep_bucket_ = 0;
  int sweep_level_ = 1;
  // The claim last passed to the gate (SetClaim).
  int64_t claim_bytes_ = 0;
  absl::Time claim_since_ = absl::InfinitePast();
};

}  // namespace infer

#endif  // INFER_BATCHING_BATCH_QUEUE_H_
