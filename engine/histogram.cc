#include "engine/histogram.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"

namespace infer {

absl::Span<const double> LatencyBoundsSeconds() {
  // 1, 1.5, 2, 3, 5, 7.5 × 10^k for k = -5..1, then 100: 43 bounds. Parsed
  // from decimal text so each is the double nearest its decimal value (and
  // prints back as written).
  static const auto* bounds = [] {
    auto* b = new std::vector<double>();
    for (int k = -5; k <= 1; ++k) {
      for (const char* step : {"1", "1.5", "2", "3", "5", "7.5"}) {
        b->push_back(std::strtod(absl::StrCat(step, "e", k).c_str(), nullptr));
      }
    }
    b->push_back(100.0);
    return b;
  }();
  return *bounds;
}

absl::Span<const double> BatchSizeBounds() {
  static constexpr double kBounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  return kBounds;
}

absl::Span<const double> RatioBounds() {
  static const auto* bounds = [] {
    auto* b = new std::vector<double>();
    for (int i = 1; i <= 20; ++i) {
      b->push_back(std::strtod(
          absl::StrCat(i * 5 / 100, ".", absl::Dec(i * 5 % 100, absl::kZeroPad2)).c_str(),
          nullptr));
    }
    return b;
  }();
  return *bounds;
}

void Histogram::Observe(double value) {
  // Every series here is non-negative (durations, sizes, ratios); a
  // negative duration (the wall clock stepped back) counts as zero, so the
  // sum never decreases — Prometheus would read that as a counter reset.
  value = std::max(value, 0.0);
  // The first bound >= value: Prometheus buckets are "less or equal".
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[i];
  ++count_;
  sum_ += value;
}

void Histogram::Add(const Histogram& other) {
  if (other.counts_.size() != counts_.size()) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
}

Histogram Histogram::Since(const Histogram& earlier) const {
  Histogram out(bounds_);
  if (earlier.counts_.size() != counts_.size()) return *this;
  for (size_t i = 0; i < counts_.size(); ++i) {
    out.counts_[i] = counts_[i] >= earlier.counts_[i] ? counts_[i] - earlier.counts_[i] : 0;
  }
  out.count_ = count_ >= earlier.count_ ? count_ - earlier.count_ : 0;
  out.sum_ = sum_ - earlier.sum_;
  return out;
}

double Histogram::Quantile(double q) const {
  if (count_ == 0 || bounds_.empty()) return 0.0;
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * static_cast<double>(count_);
  uint64_t below = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    const uint64_t in = counts_[i];
    if (static_cast<double>(below + in) >= rank && in > 0) {
      if (i == bounds_.size()) return bounds_.back();  // the +Inf bucket
      const double lower = i == 0 ? 0.0 : bounds_[i - 1];
      const double upper = bounds_[i];
      return lower +
             (upper - lower) * (rank - static_cast<double>(below)) / static_cast<double>(in);
    }
    below += in;
  }
  return bounds_.back();
}

}  // namespace infer
