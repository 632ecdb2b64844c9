// Model statistics: what the engine counts per model (the meaning of
// KServe/Triton ModelStatistics, plus refusals by reason and the length
// buckets' distributions), and the recorder every part of the engine counts
// through.
//
// Design notes and invariants
// - A client request is counted once, when it is answered, however it was
//   split: its pieces gather their queue and compute times into one
//   RequestAccount, and ModelStatsRecorder::RecordAnswer adds it up.
// - A request refused before it was accepted (never queued) is counted by
//   RecordRefusal; one refused after it was accepted (queue full, expired,
//   cancelled, unfit) notes its reason in its account, and RecordAnswer
//   counts it.
//
// Thread-safe: the recorder and the account each hold a mutex (std::mutex,
// which ThreadSanitizer sees).
#ifndef INFER_ENGINE_MODEL_STATS_H_
#define INFER_ENGINE_MODEL_STATS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/histogram.h"

namespace infer {

// Cumulative count and total duration of one kind of event.
struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(absl::Duration d) {
    ++count;
    // Negative only if the wall clock stepped back; counted as zero.
    ns += static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(d)));
  }
};

// Distributions of one length bucket of a model (the series of the
// Prometheus histograms, see server/metrics.h).
struct LengthBucketStats {
  // The bucket's upper bound in tokens; 0 when the model has one bucket.
  int64_t max_length = 0;
  Histogram request_seconds{LatencyBoundsSeconds()};  // arrival → answer, successful requests
  Histogram queue_seconds{LatencyBoundsSeconds()};    // ModelStats::queue, successful requests
  Histogram compute_seconds{LatencyBoundsSeconds()};  // one execution (all phases), per batch
  Histogram batch_rows{BatchSizeBounds()};            // rows per executed batch
  // Real / computed tokens per batch: below 1 only for a model that pads
  // sequences to the batch's longest (Model::ComputedTokens).
  Histogram padding_efficiency{RatioBounds()};
};

// Per-model statistics, with the meaning of KServe/Triton ModelStatistics.
struct ModelStats {
  uint64_t inference_count = 0;    // batch rows answered successfully
  uint64_t execution_count = 0;    // batches executed
  uint64_t last_inference_ms = 0;  // wall time of the last answer, ms since epoch
  // Per client request, each counted once however it was split (Triton's
  // meaning): end-to-end durations of successes and of failures (refusals
  // included); and, for successful requests, the time queued (arrival until
  // its batch left the queue; for a split request, its longest-waiting
  // piece) and the compute phases of the batches it ran in (summed over its
  // pieces): compute_input (staging the batch's inputs on the host, and
  // waiting for room in the device pipeline), compute_infer (upload, model
  // execution, download), compute_output (splitting the outputs). For a
  // request run in one batch, queue + compute_* = its end-to-end time but for
  // the last step of handing its answer back.
  DurationStat success;
  DurationStat fail;
  DurationStat queue;
  DurationStat compute_input;
  DurationStat compute_infer;
  DurationStat compute_output;
  // Executions by batch size (rows): count and time of each phase.
  struct BatchPhases {
    DurationStat compute_input, compute_infer, compute_output;
  };
  std::map<uint64_t, BatchPhases> batch_stats;
  // Requests answered, by status code (each client request once, however it
  // was split).
  std::map<absl::StatusCode, uint64_t> requests_by_code;
  // One entry per length bucket, in bucket order.
  std::vector<LengthBucketStats> buckets;
  // Tokens of the requests executed (Model::RealTokens), and tokens computed
  // (Model::ComputedTokens: the same for a model that packs sequences, rows ×
  // longest for one that pads): real / computed is the padding efficiency.
  int64_t real_tokens = 0;
  int64_t computed_tokens = 0;
  // Refusals by reason (each client request once), and recovery.
  uint64_t rejected_queue_full = 0;  // UNAVAILABLE
  uint64_t rejected_deadline = 0;    // DEADLINE_EXCEEDED (before or while queued)
  uint64_t rejected_memory = 0;      // RESOURCE_EXHAUSTED at admission
  uint64_t rejected_invalid = 0;     // INVALID_ARGUMENT (malformed)
  uint64_t rejected_over_limit = 0;  // INVALID_ARGUMENT (over a RequestLimits bound)
  uint64_t rejected_shutdown = 0;    // UNAVAILABLE (the server is draining)
  uint64_t cancelled = 0;            // dropped from the queue (CANCELLED)
  uint64_t request_splits = 0;       // requests over max_batch_size, split
  uint64_t oom_batch_splits = 0;     // batches split after running out of memory
};

// Why a request was answered without running.
enum class RefusalReason {
  kQueueFull,  // UNAVAILABLE: its queue was full
  kDeadline,   // DEADLINE_EXCEEDED before or while queued
  kMemory,     // RESOURCE_EXHAUSTED: it cannot fit the device memory alone
  kInvalid,    // INVALID_ARGUMENT: malformed
  kOverLimit,  // INVALID_ARGUMENT: over a RequestLimits bound
  kShutdown,   // UNAVAILABLE: draining, or the device is lost
  kCancelled,  // the client cancelled it while queued
};

// The phases of one executed batch (see ModelStats for their meaning):
// compute_input = start − dequeued, compute_infer = downloaded − start,
// compute_output = end − downloaded; queue = dequeued − arrival.
struct BatchTiming {
  absl::Time dequeued;    // the batch was taken from the queue
  absl::Time start;       // the batch reached the device
  absl::Time downloaded;  // its outputs are back on the host
  absl::Time end;         // split into responses
};

// What one accepted client request adds to its model's statistics, gathered
// from its pieces (one, or several when it was split) and recorded once, when
// the request is answered.
struct RequestAccount {
  std::mutex mu;
  // Longest wait of a piece: arrival until its batch was taken from the queue.
  absl::Duration queue ABSL_GUARDED_BY(mu);
  // The phases of the batches its pieces ran in, summed over the pieces.
  absl::Duration compute_input ABSL_GUARDED_BY(mu);
  absl::Duration compute_infer ABSL_GUARDED_BY(mu);
  absl::Duration compute_output ABSL_GUARDED_BY(mu);
  // Why it was answered without running (the first piece refused), if so.
  bool refused ABSL_GUARDED_BY(mu) = false;
  RefusalReason refusal ABSL_GUARDED_BY(mu) = RefusalReason::kInvalid;
  // Set when a piece fails: its sibling pieces still queued are dropped (the
  // request's answer is that failure whatever they return).
  std::atomic<bool> failed{false};

  void Refused(RefusalReason reason) {
    std::lock_guard<std::mutex> lock(mu);
    if (refused) return;
    refused = true;
    refusal = reason;
  }
};

// A piece that arrived at `arrival` ran in a batch with this timing: its
// request's queue time is its longest-waiting piece's, and the batch's
// phases add to its compute times.
void AddBatchShare(RequestAccount& account, absl::Time arrival, const BatchTiming& timing);

// One model's statistics and the events that change them.
class ModelStatsRecorder {
 public:
  // `bucket_bounds`: the model's length buckets (empty: one bucket).
  explicit ModelStatsRecorder(const std::vector<int64_t>& bucket_bounds);

  // A request refused before it was accepted: failed after `spent`, under
  // `reason`, by code.
  void RecordRefusal(const absl::Status& status, RefusalReason reason, absl::Duration spent);
  // A request's answer at `now`: by code; a failure's duration and refusal
  // reason; a success's end-to-end time and the queue and compute times its
  // account gathered.
  void RecordAnswer(RequestAccount& account, absl::Time arrival, absl::Time now, int bucket,
                    const absl::Status& status);
  // A batch left the queue: its rows, and real / computed tokens.
  void RecordBatchFormed(size_t bucket, int64_t rows, int64_t real_tokens, int64_t computed_tokens);
  // A batch of `rows` ran successfully (each of its requests then adds its
  // share to its account: AddBatchShare).
  void RecordBatchDone(int64_t rows, int bucket, const BatchTiming& timing);
  void RecordRequestSplit();
  void RecordOomSplit();

  ModelStats Snapshot() const;

 private:
  mutable std::mutex mu_;
  ModelStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer

#endif  // INFER_ENGINE_MODEL_STATS_H_
