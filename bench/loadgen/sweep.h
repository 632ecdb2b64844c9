// The verdict of a load sweep against a p99 target: which steps pass, when
// the sweep stops, and which load is the answer.
#ifndef INFER_BENCH_LOADGEN_SWEEP_H_
#define INFER_BENCH_LOADGEN_SWEEP_H_

#include "bench/loadgen/runner.h"

namespace infer::loadgen {

// A step passes when it sent something, its p99 (OK answers) is at or under
// the target and its errors are at most `max_error_fraction` of what it sent.
// Steps come in increasing load. The sweep stops at the first failing step
// that follows a passing one: past that knee more load only queues more (a
// noisy step there ends the sweep early, so the answer errs low, never
// high). Failing steps before any pass do not stop it (a warming server).
// The answer is the last passing step. Not thread-safe.
class SweepJudge {
 public:
  SweepJudge(double p99_target_ms, double max_error_fraction)
      : p99_target_ms_(p99_target_ms), max_error_fraction_(max_error_fraction) {}
  bool Passes(const LoadResult& r) const;
  // Records the next step; false when the sweep should stop here.
  bool Add(const LoadResult& r);
  // Index of the answer among the steps added, or -1 when none passed.
  int best() const { return best_; }

 private:
  const double p99_target_ms_;
  const double max_error_fraction_;
  int steps_ = 0;
  int best_ = -1;
};

}  // namespace infer::loadgen

#endif  // INFER_BENCH_LOADGEN_SWEEP_H_
