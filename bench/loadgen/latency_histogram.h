// LatencyHistogram: a high-dynamic-range histogram of latencies in
// nanoseconds, after HdrHistogram's log-linear layout: 2048 linear
// sub-buckets below 2048 ns, then 1024 sub-buckets per power of two, so every
// recorded value is known to within 1/1024 (0.1%) of itself from 1 ns to
// 2^40 ns (~18 min); larger values are clamped there (and counted). Memory is
// fixed (~260 KiB); recording is O(1). Percentiles report the highest value
// equivalent to the bucket holding the rank (as HdrHistogram does), so they
// never understate a latency.
//
// Not thread-safe: callers synchronize (infer-bench records under its run's
// lock); Merge combines histograms kept apart.
#ifndef INFER_BENCH_LOADGEN_LATENCY_HISTOGRAM_H_
#define INFER_BENCH_LOADGEN_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace infer::loadgen {

class LatencyHistogram {
 public:
  static constexpr int64_t kMaxTrackable = int64_t{1} << 40;  // ns

  LatencyHistogram();

  // Records one latency (negative values count as 0).
  void Record(int64_t ns);
  void Merge(const LatencyHistogram& other);
  void Reset();

  uint64_t count() const { return count_; }
  int64_t min() const { return count_ > 0 ? min_ : 0; }
  int64_t max() const { return max_; }  // exact (before clamping)
  double mean() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  uint64_t clamped() const { return clamped_; }  // values above kMaxTrackable

  // The value at percentile p (0 < p <= 100): the smallest recorded bucket
  // whose cumulative count reaches ceil(p/100 × count), reported as the
  // bucket's highest equivalent value (capped at max()). 0 when empty.
  int64_t Percentile(double p) const;

  // Bucket layout, exposed for tests.
  static int Index(int64_t ns);
  static int64_t HighestEquivalent(int index);

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t clamped_ = 0;
  int64_t min_ = INT64_MAX;
  int64_t max_ = 0;
  double sum_ = 0.0;
};

}  // namespace infer::loadgen

#endif  // INFER_BENCH_LOADGEN_LATENCY_HISTOGRAM_H_
