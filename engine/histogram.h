// Histogram: counts of observations over fixed upper bounds, the shape a
// Prometheus histogram has, so the engine's statistics can be exported as-is
// and the same quantile estimate `histogram_quantile` computes can be taken
// from them in-process (for the log summary) or from two snapshots' delta.
//
// Thread-compatible: the owner locks (the engine keeps them under each
// model's statistics lock).
#ifndef INFER_ENGINE_HISTOGRAM_H_
#define INFER_ENGINE_HISTOGRAM_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace infer {

// Upper bounds for latencies in seconds: 1, 1.5, 2, 3, 5, 7.5 per decade from
// 10 µs to 100 s, so the p99 of a sub-millisecond model and of a multi-second
// one both fall between bounds at most 1.67× apart.
absl::Span<const double> LatencyBoundsSeconds();
// Upper bounds for batch sizes in rows: powers of two to 4096.
absl::Span<const double> BatchSizeBounds();
// Upper bounds for a ratio in [0, 1] (padding efficiency): 0.05 steps.
absl::Span<const double> RatioBounds();

class Histogram {
 public:
  // `bounds` ascending and alive for the histogram's life (the functions
  // above return static arrays).
  explicit Histogram(absl::Span<const double> bounds)
      : bounds_(bounds), counts_(bounds.size() + 1, 0) {}

  void Observe(double value);

  absl::Span<const double> bounds() const { return bounds_; }
  // counts()[i]: observations in (bounds[i-1], bounds[i]]; the last entry
  // counts those above every bound (Prometheus' +Inf bucket, de-cumulated).
  const std::vector<uint64_t>& counts() const { return counts_; }
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

  // Adds another histogram's observations (same bounds; else no-op).
  void Add(const Histogram& other);

  // This histogram less an earlier snapshot of it: the observations between.
  Histogram Since(const Histogram& earlier) const;

  // The q-quantile (0 < q < 1) as Prometheus' histogram_quantile estimates
  // it: linear interpolation inside the bucket that holds the rank; the
  // highest finite bound when the rank falls in the +Inf bucket; 0 when
  // empty.
  double Quantile(double q) const;

 private:
  absl::Span<const double> bounds_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0.0;
};

}  // namespace infer

#endif  // INFER_ENGINE_HISTOGRAM_H_
