#include "bench/loadgen/sweep.h"

namespace infer::loadgen {

bool SweepJudge::Passes(const LoadResult& r) const {
  const double p99_ms = static_cast<double>(r.ok_latency.Percentile(99)) / 1e6;
  return r.sent > 0 && r.ok > 0 && p99_ms <= p99_target_ms_ &&
         static_cast<double>(r.sent - r.ok) <= max_error_fraction_ * static_cast<double>(r.sent);
}

bool SweepJudge::Add(const LoadResult& r) {
  const int index = steps_++;
  if (Passes(r)) {
    best_ = index;
    return true;
  }
  return best_ < 0;
}

}  // namespace infer::loadgen
