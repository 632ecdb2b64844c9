#include "bench/loadgen/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace infer::loadgen {
namespace {

constexpr int kSubBits = 11;  // 2048 sub-buckets in the first bucket
constexpr int64_t kSub = int64_t{1} << kSubBits;
constexpr int64_t kHalf = kSub / 2;          // 1024 per later power of two
constexpr int kBuckets = 40 - kSubBits + 1;  // exponents 0..29 above the first

}  // namespace

LatencyHistogram::LatencyHistogram()
    : counts_(static_cast<size_t>(kSub + (kBuckets - 1) * kHalf + 1), 0) {}

int LatencyHistogram::Index(int64_t ns) {
  ns = std::clamp<int64_t>(ns, 0, kMaxTrackable - 1);
  if (ns < kSub) return static_cast<int>(ns);
  const int msb = 63 - __builtin_clzll(static_cast<unsigned long long>(ns));
  const int shift = msb - (kSubBits - 1);  // >= 1
  const int64_t sub = ns >> shift;         // in [kHalf, kSub)
  return static_cast<int>(shift * kHalf + sub);
}

int64_t LatencyHistogram::HighestEquivalent(int index) {
  if (index < kSub) return index;
  const int shift = static_cast<int>((index - kHalf) / kHalf);
  const int64_t sub = index - shift * kHalf;
  return ((sub + 1) << shift) - 1;
}

void LatencyHistogram::Record(int64_t ns) {
  if (ns < 0) ns = 0;
  if (ns >= kMaxTrackable) ++clamped_;
  ++counts_[static_cast<size_t>(Index(ns))];
  ++count_;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
  sum_ += static_cast<double>(ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  clamped_ += other.clamped_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

void LatencyHistogram::Reset() { *this = LatencyHistogram(); }

int64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  // The tiny slack keeps 99.9% of 1000 at rank 999 despite 99.9 / 100 being
  // stored as 0.99900000000000011.
  const double wanted =
      std::ceil(std::clamp(p, 0.0, 100.0) * static_cast<double>(count_) / 100.0 - 1e-9);
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(wanted));
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(HighestEquivalent(static_cast<int>(i)), max_);
  }
  return max_;
}

}  // namespace infer::loadgen
