#include "engine/histogram.h"

#include <gtest/gtest.h>

#include <random>

namespace infer {
namespace {

TEST(HistogramTest, LatencyBoundsSpanTenMicrosecondsToAHundredSeconds) {
  const absl::Span<const double> b = LatencyBoundsSeconds();
  ASSERT_EQ(b.size(), 43u);
  EXPECT_EQ(b.front(), 1e-5);
  EXPECT_EQ(b[1], 1.5e-5);
  EXPECT_EQ(b[6], 1e-4);
  EXPECT_EQ(b.back(), 100.0);
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_GT(b[i], b[i - 1]);
    EXPECT_LE(b[i] / b[i - 1], 5.0 / 3.0 + 1e-9) << "neighbouring bounds at most 1.67x apart";
  }
  EXPECT_EQ(RatioBounds().size(), 20u);
  EXPECT_EQ(RatioBounds()[0], 0.05);
  EXPECT_EQ(RatioBounds().back(), 1.0);
}

TEST(HistogramTest, ObservationsLandInTheirLessOrEqualBucket) {
  static constexpr double kBounds[] = {1, 2, 4};
  Histogram h(kBounds);
  for (double v : {0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 9.0}) h.Observe(v);
  EXPECT_EQ(h.counts(), (std::vector<uint64_t>{2, 2, 2, 1}));
  EXPECT_EQ(h.count(), 7u);
  EXPECT_DOUBLE_EQ(h.sum(), 21.0);
}

TEST(HistogramTest, QuantileInterpolatesLikePrometheus) {
  static constexpr double kBounds[] = {1, 2, 4};
  Histogram h(kBounds);
  // 10 in (0,1], 10 in (1,2], 0 in (2,4].
  for (int i = 0; i < 10; ++i) h.Observe(0.5);
  for (int i = 0; i < 10; ++i) h.Observe(1.5);
  // histogram_quantile(0.5): rank 10 is the end of the first bucket.
  EXPECT_DOUBLE_EQ(h.Quantile(0.5), 1.0);
  // rank 15: halfway through (1, 2].
  EXPECT_DOUBLE_EQ(h.Quantile(0.75), 1.5);
  EXPECT_DOUBLE_EQ(h.Quantile(0.25), 0.5);
  // Ranks in the +Inf bucket report the highest finite bound.
  h.Observe(100);
  EXPECT_DOUBLE_EQ(h.Quantile(0.999), 4.0);
  EXPECT_EQ(Histogram(kBounds).Quantile(0.5), 0.0) << "empty";
}

TEST(HistogramTest, QuantilesOfKnownDataAreWithinOneBucket) {
  Histogram h(LatencyBoundsSeconds());
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(std::log(2e-3), 0.8);  // ~2 ms median
  std::vector<double> values(20000);
  for (double& v : values) {
    v = dist(rng);
    h.Observe(v);
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99}) {
    const double exact = values[static_cast<size_t>(q * values.size())];
    const double est = h.Quantile(q);
    EXPECT_GT(est, exact / 1.67) << q;
    EXPECT_LT(est, exact * 1.67) << q;
  }
}

TEST(HistogramTest, SinceIsTheDeltaBetweenSnapshots) {
  static constexpr double kBounds[] = {1, 2};
  Histogram h(kBounds);
  h.Observe(0.5);
  const Histogram earlier = h;
  h.Observe(1.5);
  h.Observe(5);
  const Histogram d = h.Since(earlier);
  EXPECT_EQ(d.counts(), (std::vector<uint64_t>{0, 1, 1}));
  EXPECT_EQ(d.count(), 2u);
  EXPECT_DOUBLE_EQ(d.sum(), 6.5);
}

}  // namespace
}  // namespace infer
