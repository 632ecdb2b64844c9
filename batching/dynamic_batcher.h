// DynamicBatcher: a bounded queue plus worker threads that form batches with
// BatchQueue's policy and hand each batch to a process function.
//
// Design notes and invariants
// - Workers are the schedulers: each loops "wait until a batch is ready, take
//   it, process it". While every worker is busy, arrivals accumulate, so the
//   next batch is larger (natural back-pressure); with num_workers = 1 one
//   batch runs at a time.
// - Every task accepted by Schedule is passed to `process` exactly once,
//   including at Shutdown, which stops accepting (UNAVAILABLE), flushes what
//   is queued regardless of max_queue_delay, and joins the workers.
// - `process` runs without the lock held and may take as long as it needs.
// - At most num_workers batches are processed at once. With
//   run_on_caller, a Schedule that finds a batch ready at once (e.g.
//   max_queue_delay 0) while fewer than num_workers are being processed
//   processes it on the calling thread instead of waking a worker: one
//   thread hand-off less per batch, for processing cheap enough to run on
//   the caller's thread (the engine uses it for models without device
//   work), and then takes what arrived meanwhile (a few batches at most)
//   before it returns. A Schedule that finds every slot busy wakes no one:
//   the thread that frees a slot takes or wakes for what waits.
//
// Thread-safe. (std::mutex rather than absl::Mutex: Debian's Abseil is not
// built with ThreadSanitizer, which then cannot see absl::Mutex at all.)
#ifndef INFER_BATCHING_DYNAMIC_BATCHER_H_
#define INFER_BATCHING_DYNAMIC_BATCHER_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "batching/batch_queue.h"
#include "batching/clock.h"

namespace infer {

struct BatcherOptions {
  QueueOptions queue;
  // Threads forming and processing batches (batches in flight at once).
  int num_workers = 1;
  // Time source; nullptr means RealClock(). Borrowed: must outlive the batcher.
  Clock* clock = nullptr;
  // Device-memory admission; nullptr: none. Borrowed: must outlive the batcher.
  MemoryGate* memory = nullptr;
  // Process a batch that is ready at Schedule on the calling thread when a
  // worker is free (see the design notes).
  bool run_on_caller = false;
  // Whether the device can take another batch now; empty: always. Batches
  // are formed only then, so requests wait (and batch up, expire, or are
  // cancelled) in the queue rather than in a full pipeline. Call Notify()
  // when it may have turned true.
  std::function<bool()> can_launch;
};

template <typename TaskT>
class DynamicBatcher {
 public:
  using Batch = typename BatchQueue<TaskT>::Batch;
  // Receives each batch to execute, and the tasks removed without execution
  // (expired, cancelled, unfit), which it must answer.
  using ProcessFn = std::function<void(Batch)>;

  static absl::StatusOr<std::unique_ptr<DynamicBatcher>> Create(const BatcherOptions& options,
                                                                ProcessFn process) {
    if (absl::Status s = ValidateQueueOptions(options.queue); !s.ok()) return s;
    if (options.num_workers < 1) {
      return absl::InvalidArgumentError("num_workers must be >= 1");
    }
    if (!process) return absl::InvalidArgumentError("process function is empty");
    return std::unique_ptr<DynamicBatcher>(new DynamicBatcher(options, std::move(process)));
  }

  // run_on_caller: the most batches one Schedule call processes (its own
  // and those that arrived while it ran) before a worker takes over.
  static constexpr int kCallerBatches = 8;

  ~DynamicBatcher() { Shutdown(); }
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Ownership of *task is transferred iff OK; otherwise the caller still owns
  // it (to answer it). UNAVAILABLE when the queue is full or shutting down.
  absl::Status Schedule(std::unique_ptr<TaskT>* task) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::UnavailableError("the server is shutting down");
    }
    const absl::Time now = clock_->Now();
    absl::Status s = queue_.Push(task, now);
    if (!s.ok()) return s;
    if (run_on_caller_) {
      // Every slot busy: the thread that frees one looks at the queue then,
      // so waking a worker now would be a wasted switch.
      if (active_ >= num_workers_) return absl::OkStatus();
      if (RunOnCaller(lock, now)) return absl::OkStatus();
    }
    cv_.notify_one();  // one worker is enough: it wakes another if more is ready
    return absl::OkStatus();
  }

  // Stops accepting, processes everything queued, joins the workers.
  // Idempotent; not to be called concurrently with itself.
  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    for (std::thread& t : workers_) {
      if (t.joinable()) t.join();
    }
    // And the batches callers are processing (run_on_caller).
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return active_ == 0; });
  }

  // Wakes the workers to look again (e.g. device memory was released).
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

  size_t queue_size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

  // Requests waiting in each length bucket, in bucket order.
  std::vector<int64_t> bucket_depths() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int64_t> depths(queue_.num_buckets());
    for (size_t b = 0; b < depths.size(); ++b) {
      depths[b] = static_cast<int64_t>(queue_.bucket_size(b));
    }
    return depths;
  }

 private:
  DynamicBatcher(const BatcherOptions& options, ProcessFn process)
      : clock_(options.clock != nullptr ? options.clock : RealClock()),
        process_(std::move(process)),
        can_launch_(options.can_launch),
        run_on_caller_(options.run_on_caller),
        num_workers_(options.num_workers),
        queue_(options.queue, options.memory) {
    workers_.reserve(options.num_workers);
    for (int i = 0; i < options.num_workers; ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
  }

  // Processes `batch` without the lock, counted in active_. Then, with
  // hand_off, wakes a worker for what waits (RunOnCaller looks itself).
  void ProcessLocked(std::unique_lock<std::mutex>& lock, Batch batch, bool hand_off = true) {
    ++active_;
    // More may be ready for another idle worker, if a slot is left for it.
    if (!queue_.empty() && active_ < num_workers_) cv_.notify_one();
    lock.unlock();
    process_(std::move(batch));
    lock.lock();
    --active_;
    if (stopping_) {
      cv_.notify_all();  // Shutdown may be waiting for the last batch
    } else if (hand_off && !queue_.empty()) {
      cv_.notify_one();  // the slot freed: a worker looks at what waits
    }
  }

  // run_on_caller: processes the batch ready now on the calling thread,
  // then what arrived meanwhile, up to kCallerBatches batches; false when
  // nothing was ready. Taking the next batch here, rather than waking a
  // worker for it, saves a thread switch per batch under load; the bound
  // gives the caller back after a while, a worker taking over.
  bool RunOnCaller(std::unique_lock<std::mutex>& lock, absl::Time now) {
    for (int n = 0; n < kCallerBatches; ++n) {
      Batch batch = queue_.PopBatch(now, false, !can_launch_ || can_launch_());
      if (batch.empty()) return n > 0;
      ProcessLocked(lock, std::move(batch), /*hand_off=*/false);
      // Nothing arrived meanwhile (the usual case): no clock read and no
      // PopBatch over an empty queue.
      if (stopping_ || queue_.empty()) return true;
      now = clock_->Now();
    }
    if (!queue_.empty()) cv_.notify_one();  // a worker takes over
    return true;
  }

  void WorkerLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (stopping_ && queue_.empty()) break;
      if (active_ >= num_workers_) {  // the callers hold every slot
        cv_.wait(lock);
        continue;
      }
      const absl::Time now = clock_->Now();
      Batch batch = queue_.PopBatch(now, stopping_, !can_launch_ || can_launch_());
      if (!batch.empty()) {
        ProcessLocked(lock, std::move(batch));
        continue;
      }
      const absl::Time deadline = queue_.NextDeadline(now);
      if (deadline == absl::InfiniteFuture()) {
        cv_.wait(lock);
      } else {
        cv_.wait_for(lock, absl::ToChronoNanoseconds(deadline - now));
      }
    }
  }

  // Constant after construction.
  Clock* const clock_;
  const ProcessFn process_;
  const std::function<bool()> can_launch_;
  const bool run_on_caller_;
  const int num_workers_;
  std::vector<std::thread> workers_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  BatchQueue<TaskT> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int active_ ABSL_GUARDED_BY(mu_) = 0;  // batches being processed
};

}  // namespace infer

#endif  // INFER_BATCHING_DYNAMIC_BATCHER_H_
