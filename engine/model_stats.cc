#include "engine/model_stats.h"

#include "absl/time/clock.h"

namespace infer {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

uint64_t WallMillis() { return static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())); }

uint64_t ModelStats::*Counter(RefusalReason reason) {
  switch (reason) {
    case RefusalReason::kQueueFull:
      return &ModelStats::rejected_queue_full;
    case RefusalReason::kDeadline:
      return &ModelStats::rejected_deadline;
    case RefusalReason::kMemory:
      return &ModelStats::rejected_memory;
    case RefusalReason::kInvalid:
      return &ModelStats::rejected_invalid;
    case RefusalReason::kOverLimit:
      return &ModelStats::rejected_over_limit;
    case RefusalReason::kShutdown:
      return &ModelStats::rejected_shutdown;
    case RefusalReason::kCancelled:
      return &ModelStats::cancelled;
  }
  return &ModelStats::rejected_invalid;
}

}  // namespace

void AddBatchShare(RequestAccount& account, absl::Time arrival, const BatchTiming& t) {
  std::lock_guard<std::mutex> lock(account.mu);
  account.queue = std::max(account.queue, t.dequeued - arrival);
  account.compute_input += t.start - t.dequeued;
  account.compute_infer += t.downloaded - t.start;
  account.compute_output += t.end - t.downloaded;
}

ModelStatsRecorder::ModelStatsRecorder(const std::vector<int64_t>& bucket_bounds) {
  if (bucket_bounds.empty()) {
    stats_.buckets.emplace_back();
  } else {
    for (int64_t b : bucket_bounds) stats_.buckets.emplace_back().max_length = b;
  }
}

void ModelStatsRecorder::RecordRefusal(const absl::Status& status, RefusalReason reason,
                                       absl::Duration spent) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.fail.Add(spent);
  ++(stats_.*Counter(reason));
  ++stats_.requests_by_code[status.code()];
}

void ModelStatsRecorder::RecordAnswer(RequestAccount& account, absl::Time arrival, absl::Time now,
                                      int bucket, const absl::Status& status) {
  std::lock_guard<std::mutex> account_lock(account.mu);
  std::lock_guard<std::mutex> lock(mu_);
  ModelStats& s = stats_;
  ++s.requests_by_code[status.code()];
  if (!status.ok()) {
    s.fail.Add(now - arrival);
    if (account.refused) ++(s.*Counter(account.refusal));
    return;
  }
  s.success.Add(now - arrival);
  s.queue.Add(account.queue);
  s.compute_input.Add(account.compute_input);
  s.compute_infer.Add(account.compute_infer);
  s.compute_output.Add(account.compute_output);
  LengthBucketStats& b = s.buckets[bucket];
  b.request_seconds.Observe(Seconds(now - arrival));
  b.queue_seconds.Observe(Seconds(account.queue));
}

void ModelStatsRecorder::RecordBatchFormed(size_t bucket, int64_t rows, int64_t real_tokens,
                                           int64_t computed_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.real_tokens += real_tokens;
  stats_.computed_tokens += computed_tokens;
  LengthBucketStats& b = stats_.buckets[bucket];
  b.batch_rows.Observe(static_cast<double>(rows));
  b.padding_efficiency.Observe(computed_tokens > 0 ? static_cast<double>(real_tokens) /
                                                         static_cast<double>(computed_tokens)
                                                   : 1.0);
}

void ModelStatsRecorder::RecordBatchDone(int64_t rows, int bucket, const BatchTiming& t) {
  std::lock_guard<std::mutex> lock(mu_);
  ModelStats& s = stats_;
  ++s.execution_count;
  ModelStats::BatchPhases& phases = s.batch_stats[static_cast<uint64_t>(rows)];
  phases.compute_input.Add(t.start - t.dequeued);
  phases.compute_infer.Add(t.downloaded - t.start);
  phases.compute_output.Add(t.end - t.downloaded);
  s.inference_count += static_cast<uint64_t>(rows);
  s.last_inference_ms = WallMillis();
  s.buckets[bucket].compute_seconds.Observe(Seconds(t.end - t.dequeued));
}

void ModelStatsRecorder::RecordRequestSplit() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.request_splits;
}

void ModelStatsRecorder::RecordOomSplit() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.oom_batch_splits;
}

ModelStats ModelStatsRecorder::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace infer
