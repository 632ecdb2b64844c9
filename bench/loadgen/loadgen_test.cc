#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "bench/loadgen/latency_histogram.h"
#include "bench/loadgen/pacer.h"
#include "bench/loadgen/prometheus_text.h"
#include "bench/loadgen/runner.h"
#include "bench/loadgen/server_figures.h"
#include "bench/loadgen/sweep.h"
#include "bench/loadgen/workload.h"

namespace infer::loadgen {
namespace {

TEST(LatencyHistogramTest, EveryValueIsKeptToWithinATenthOfAPercent) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % (int64_t{1} << 39));
    const int idx = LatencyHistogram::Index(v);
    const int64_t hi = LatencyHistogram::HighestEquivalent(idx);
    ASSERT_GE(hi, v);
    ASSERT_LE(hi - v, std::max<int64_t>(0, v / 1024)) << v;
    if (idx > 0) ASSERT_LT(LatencyHistogram::HighestEquivalent(idx - 1), v) << v;
  }
  // Exact below 2048 ns.
  for (int64_t v = 0; v < 2048; ++v)
    ASSERT_EQ(LatencyHistogram::HighestEquivalent(LatencyHistogram::Index(v)), v);
}

TEST(LatencyHistogramTest, PercentilesOfKnownData) {
  LatencyHistogram h;
  // 1..10000 µs, each once: p50 = 5000 µs, p99 = 9900 µs, p99.9 = 9990 µs.
  for (int64_t us = 1; us <= 10000; ++us) h.Record(us * 1000);
  EXPECT_EQ(h.count(), 10000u);
  const auto near = [](int64_t got, int64_t want) {
    return got >= want && got - want <= want / 1024 + 1;
  };
  EXPECT_TRUE(near(h.Percentile(50), 5'000'000)) << h.Percentile(50);
  EXPECT_TRUE(near(h.Percentile(90), 9'000'000)) << h.Percentile(90);
  EXPECT_TRUE(near(h.Percentile(99), 9'900'000)) << h.Percentile(99);
  EXPECT_TRUE(near(h.Percentile(99.9), 9'990'000)) << h.Percentile(99.9);
  EXPECT_EQ(h.Percentile(100), 10'000'000);
  EXPECT_EQ(h.max(), 10'000'000);
  EXPECT_EQ(h.min(), 1000);
  EXPECT_DOUBLE_EQ(h.mean(), 5'000'500.0);
}

TEST(LatencyHistogramTest, ATailOfOneInAThousandIsSeenAtP999NotP99) {
  LatencyHistogram h;
  for (int i = 0; i < 999; ++i) h.Record(1'000'000);  // 1 ms
  h.Record(2'000'000'000);                            // one 2 s stall
  EXPECT_LE(h.Percentile(99), 1'001'000);
  EXPECT_LE(h.Percentile(99.9), 1'001'000) << "rank 999 of 1000 is still 1 ms";
  EXPECT_EQ(h.Percentile(100), 2'000'000'000);
  h.Record(2'000'000'000);  // two in 1001: p99.9 now reaches the stall
  EXPECT_GE(h.Percentile(99.9), 2'000'000'000);
}

TEST(LatencyHistogramTest, MergeAndClamp) {
  LatencyHistogram a, b;
  a.Record(10);
  b.Record(20);
  b.Record(int64_t{1} << 50);  // beyond the range: clamped, counted, max exact
  a.Merge(b);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_EQ(a.clamped(), 1u);
  EXPECT_EQ(a.max(), int64_t{1} << 50);
  EXPECT_EQ(a.Percentile(50), 20);
  EXPECT_EQ(LatencyHistogram().Percentile(99), 0);
}

TEST(ArrivalScheduleTest, ConstantRateIsEvenlySpacedWithoutDrift) {
  auto s = ArrivalSchedule::Create(1000, Arrivals::kConstant, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->Next(), absl::ZeroDuration());
  EXPECT_EQ(s->Next(), absl::Milliseconds(1));
  absl::Duration last;
  for (int i = 2; i <= 1'000'000; ++i) last = s->Next();
  EXPECT_EQ(last, absl::Seconds(1000)) << "the millionth arrival is exactly 1000 s in";
  EXPECT_FALSE(ArrivalSchedule::Create(0, Arrivals::kConstant, 1).ok());
  EXPECT_FALSE(ArrivalSchedule::Create(-5, Arrivals::kPoisson, 1).ok());
}

TEST(ArrivalScheduleTest, PoissonHasTheRateAndExponentialGaps) {
  auto s = ArrivalSchedule::Create(500, Arrivals::kPoisson, 42);
  ASSERT_TRUE(s.ok());
  constexpr int kN = 200000;
  std::vector<double> gaps;
  absl::Duration prev = s->Next();
  for (int i = 0; i < kN; ++i) {
    const absl::Duration at = s->Next();
    gaps.push_back(absl::ToDoubleSeconds(at - prev));
    prev = at;
  }
  const double mean = absl::ToDoubleSeconds(prev) / kN;
  EXPECT_NEAR(mean, 1.0 / 500, 0.02 / 500);
  // Exponential: the share of gaps longer than the mean is e^-1.
  const double longer = std::count_if(gaps.begin(), gaps.end(), [&](double g) { return g > mean; });
  EXPECT_NEAR(longer / kN, std::exp(-1.0), 0.01);
  // Same seed, same schedule.
  auto a = ArrivalSchedule::Create(500, Arrivals::kPoisson, 7);
  auto b = ArrivalSchedule::Create(500, Arrivals::kPoisson, 7);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a->Next(), b->Next());
}

// A clock that only moves when someone sleeps on it, or when the test says.
class FakePaceClock final : public PaceClock {
 public:
  explicit FakePaceClock(absl::Time t) : now_(t) {}
  absl::Time Now() override { return now_; }
  void SleepUntil(absl::Time t) override { now_ = std::max(now_, t); }
  void Advance(absl::Duration d) { now_ += d; }

 private:
  absl::Time now_;
};

TEST(OpenLoopTest, SendsAtTheIntendedTimesAndStopsAtTheEnd) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FakePaceClock clock(t0);
  auto s = ArrivalSchedule::Create(100, Arrivals::kConstant, 1);  // every 10 ms
  std::vector<absl::Time> intended, actual;
  const OpenLoopResult r = RunOpenLoop(
      *s, clock, t0, t0 + absl::Seconds(1), [] {},
      [&](absl::Time when) {
        intended.push_back(when);
        actual.push_back(clock.Now());
      },
      [] { return false; });
  ASSERT_EQ(r.issued, 100);
  ASSERT_EQ(intended.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(intended[i], t0 + absl::Milliseconds(10 * i));
    EXPECT_EQ(actual[i], intended[i]) << "sent when intended";
  }
  EXPECT_EQ(r.late, 0);
  EXPECT_EQ(r.max_lag, absl::ZeroDuration());
}

TEST(OpenLoopTest, AStalledSenderCatchesUpWithoutSkippingAndKeepsIntendedTimes) {
  // The 11th send blocks for 500 ms (no room: the server stalls). The sends
  // meant for that half second go out at once afterwards, each still
  // carrying its own intended time: latency measured from it includes the
  // stall. None is skipped.
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FakePaceClock clock(t0);
  auto s = ArrivalSchedule::Create(100, Arrivals::kConstant, 1);
  int calls = 0;
  std::vector<absl::Time> intended, actual;
  const OpenLoopResult r = RunOpenLoop(
      *s, clock, t0, t0 + absl::Seconds(1),
      [&] {
        if (++calls == 11) clock.Advance(absl::Milliseconds(500));
      },
      [&](absl::Time when) {
        intended.push_back(when);
        actual.push_back(clock.Now());
      },
      [] { return false; });
  ASSERT_EQ(r.issued, 100) << "no arrival is skipped";
  EXPECT_EQ(intended[10], t0 + absl::Milliseconds(100));
  EXPECT_EQ(actual[10], t0 + absl::Milliseconds(600));
  // Those meant for (100, 600) ms went out at 600 ms, late by up to 500 ms.
  for (int i = 11; i < 60; ++i) EXPECT_EQ(actual[i], t0 + absl::Milliseconds(600)) << i;
  EXPECT_EQ(actual[60], intended[60]) << "back on schedule";
  EXPECT_EQ(r.max_lag, absl::Milliseconds(500));
  EXPECT_EQ(r.late, 50);  // meant for 100 ms .. 590 ms; the one for 600 ms is on time
}

TEST(OpenLoopTest, AStallPastTheEndStillSendsEveryArrivalMeantForTheWindow) {
  // The server stalls for 2 s from the 91st send on, past the window's end
  // (1 s). The ten arrivals meant for 900..990 ms are its worst victims: they
  // must still go out (late) and be measured, not be dropped because the
  // clock has passed the end.
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FakePaceClock clock(t0);
  auto s = ArrivalSchedule::Create(100, Arrivals::kConstant, 1);
  int calls = 0;
  std::vector<absl::Time> intended;
  const OpenLoopResult r = RunOpenLoop(
      *s, clock, t0, t0 + absl::Seconds(1),
      [&] {
        if (++calls == 91) clock.Advance(absl::Seconds(2));
      },
      [&](absl::Time when) { intended.push_back(when); }, [] { return false; });
  ASSERT_EQ(r.issued, 100);
  EXPECT_EQ(intended.back(), t0 + absl::Milliseconds(990));
  EXPECT_EQ(r.max_lag, absl::Seconds(2));
}

TEST(OpenLoopTest, StopEndsEarly) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  FakePaceClock clock(t0);
  auto s = ArrivalSchedule::Create(100, Arrivals::kConstant, 1);
  int sent = 0;
  const OpenLoopResult r = RunOpenLoop(
      *s, clock, t0, t0 + absl::Seconds(10), [] {}, [&](absl::Time) { ++sent; },
      [&] { return sent >= 5; });
  EXPECT_EQ(r.issued, 5);
}

TEST(LengthMixTest, ParsesTheThreeForms) {
  std::mt19937_64 rng(1);
  auto fixed = LengthMix::Parse("128");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->Sample(rng), 128);
  auto range = LengthMix::Parse("16-32");
  ASSERT_TRUE(range.ok());
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = range->Sample(rng);
    ASSERT_GE(v, 16);
    ASSERT_LE(v, 32);
  }
  auto mix = LengthMix::Parse("16:0.7,128:0.2,512:0.1");
  ASSERT_TRUE(mix.ok());
  std::map<int64_t, int> seen;
  for (int i = 0; i < 100000; ++i) ++seen[mix->Sample(rng)];
  EXPECT_NEAR(seen[16] / 1e5, 0.7, 0.01);
  EXPECT_NEAR(seen[128] / 1e5, 0.2, 0.01);
  EXPECT_NEAR(seen[512] / 1e5, 0.1, 0.01);
  EXPECT_EQ(mix->max_length(), 512);
  EXPECT_EQ(mix->Values(), (std::vector<int64_t>{16, 128, 512}));
  EXPECT_EQ(range->Values(), (std::vector<int64_t>{16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
                                                   28, 29, 30, 31, 32}));
  EXPECT_EQ(fixed->Values(), (std::vector<int64_t>{128}));
  for (const char* bad : {"", "abc", "0", "32-16", "16:0", "16:x", "16:0.5,", "1-2-3"}) {
    EXPECT_FALSE(LengthMix::Parse(bad).ok()) << bad;
  }
}

TEST(RequestPoolTest, BuildsIdsAndTextOfTheAskedLength) {
  RequestPool ids("m", RequestFormat{}, 3);
  const inference::ModelInferRequest& r = ids.Get(5);
  EXPECT_EQ(&r, &ids.Get(5)) << "built once";
  ASSERT_EQ(r.inputs_size(), 1);
  EXPECT_EQ(r.inputs(0).name(), "input_ids");
  EXPECT_EQ(r.inputs(0).shape(0), 3);
  EXPECT_EQ(r.inputs(0).shape(1), 5);
  ASSERT_EQ(r.raw_input_contents(0).size(), 3u * 5 * 8);
  const auto* v = reinterpret_cast<const int64_t*>(r.raw_input_contents(0).data());
  EXPECT_EQ(v[0], 101);
  EXPECT_EQ(v[4], 102);
  EXPECT_GE(v[2], 1000);
  EXPECT_LT(v[2], 2000);
  RequestPool text("m", RequestFormat{.kind = InputKind::kText}, 2);
  const inference::ModelInferRequest& t = text.Get(6);
  EXPECT_EQ(t.inputs(0).datatype(), "BYTES");
  ASSERT_EQ(t.inputs(0).contents().bytes_contents_size(), 2);
  EXPECT_EQ(t.inputs(0).contents().bytes_contents(0), "hello hello hello hello");
}

TEST(RequestPoolTest, NamesTypesAndExtraInputsFollowTheFormat) {
  RequestFormat f;
  f.input_name = "ids";
  f.ids_datatype = "INT32";
  f.mask_input = "attention_mask";
  f.type_ids_input = "token_type_ids";
  ASSERT_TRUE(ValidateRequestFormat(f).ok());
  RequestPool pool("m", f, 2);
  const inference::ModelInferRequest& r = pool.Get(4);
  ASSERT_EQ(r.inputs_size(), 3);
  ASSERT_EQ(r.raw_input_contents_size(), 3);
  const char* names[] = {"ids", "attention_mask", "token_type_ids"};
  const int32_t firsts[] = {101, 1, 0};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.inputs(i).name(), names[i]);
    EXPECT_EQ(r.inputs(i).datatype(), "INT32");
    EXPECT_EQ(r.inputs(i).shape(0), 2);
    EXPECT_EQ(r.inputs(i).shape(1), 4);
    ASSERT_EQ(r.raw_input_contents(i).size(), 2u * 4 * sizeof(int32_t));
    const auto* v = reinterpret_cast<const int32_t*>(r.raw_input_contents(i).data());
    EXPECT_EQ(v[4], firsts[i]) << names[i] << ": row 1, token 0";
  }
  EXPECT_EQ(reinterpret_cast<const int32_t*>(r.raw_input_contents(0).data())[3], 102);
  EXPECT_EQ(f.MaxRequestBytes(2, 4), 3 * 2 * 4 * 4);

  RequestFormat text{.kind = InputKind::kText, .text_column = true};
  RequestPool texts("m", text, 3);
  const inference::ModelInferRequest& t = texts.Get(5);
  EXPECT_EQ(t.inputs(0).name(), "text");
  ASSERT_EQ(t.inputs(0).shape_size(), 2);
  EXPECT_EQ(t.inputs(0).shape(1), 1);

  EXPECT_FALSE(ValidateRequestFormat({.ids_datatype = "FP32"}).ok());
  EXPECT_FALSE(ValidateRequestFormat({.kind = InputKind::kText, .mask_input = "m"}).ok());
  EXPECT_FALSE(ValidateRequestFormat({.text_column = true}).ok());
  EXPECT_FALSE(ValidateRequestFormat({.mask_input = "input_ids"}).ok());
}

TEST(RunLoadTest, RequestsTooLargeToKeepAreRefusedBeforeConnecting) {
  LoadOptions o;
  o.address = "127.0.0.1:1";  // nothing listens: the check must come first
  o.model = "m";
  o.concurrency = 1;
  o.batch = 65536;
  o.lengths = "4096";
  absl::StatusOr<LoadResult> r = RunLoad(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("over 1 GiB"), std::string::npos) << r.status();
}

TEST(PrometheusTextTest, LabelValuesAreUnescaped) {
  auto s = ParsePrometheusText(
      "# HELP m h\n# TYPE m gauge\nm{a=\"x\\\"y\",b=\"line\\nnext\",c=\"back\\\\slash\"} 2\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].labels.at("a"), "x\"y");
  EXPECT_EQ((*s)[0].labels.at("b"), "line\nnext");
  EXPECT_EQ((*s)[0].labels.at("c"), "back\\slash");
  EXPECT_EQ((*s)[0].value, 2.0);
}

TEST(PrometheusTextTest, StrictNeedsHelpAndTypeLenientReadsAnyWellFormedText) {
  // Valid 0.0.4 text without HELP/TYPE, with a timestamp and a trailing
  // comma: the strict reader (for our own exposition) refuses the missing
  // TYPE, the lenient one (for other servers) reads it.
  const std::string text = "up 1 1700000000000\nreqs{a=\"x\",b=\"y\",} 5\n";
  EXPECT_FALSE(ParsePrometheusText(text).ok());
  auto s = ParsePrometheusText(text, {.strict = false});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].name, "up");
  EXPECT_EQ((*s)[0].value, 1.0) << "the timestamp is not the value";
  EXPECT_EQ((*s)[1].labels.at("b"), "y");
  EXPECT_EQ((*s)[1].value, 5.0);
  // Malformed in either mode.
  for (const char* bad :
       {"m{a=\"1\"b=\"2\"} 1\n", "m 1 2 3\n", "m 1 x\n", "m{a=\"1} 2\n", "m\n", "m{a=\"1\"}2\n"}) {
    EXPECT_FALSE(ParsePrometheusText(bad, {.strict = false}).ok()) << bad;
  }
}

// Scrapes as two servers would expose them, before and after a run.
std::vector<Sample> Parse(const std::string& text) {
  auto s = ParsePrometheusText(text, {.strict = false});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::vector<Sample>{};
}

TEST(ServerFiguresTest, InferServerSeries) {
  const std::vector<Sample> before = Parse(
      "infer_batch_size_sum{model=\"m\",length_bucket=\"16\"} 10\n"
      "infer_batch_size_count{model=\"m\",length_bucket=\"16\"} 10\n"
      "infer_request_duration_seconds_bucket{model=\"m\",le=\"0.01\"} 0\n"
      "infer_request_duration_seconds_bucket{model=\"m\",le=\"0.02\"} 0\n"
      "infer_request_duration_seconds_bucket{model=\"m\",le=\"+Inf\"} 0\n"
      "infer_rejections_total{model=\"m\",reason=\"queue_full\"} 3\n");
  const std::vector<Sample> after = Parse(
      "infer_batch_size_sum{model=\"m\",length_bucket=\"16\"} 90\n"
      "infer_batch_size_count{model=\"m\",length_bucket=\"16\"} 30\n"
      "infer_request_duration_seconds_bucket{model=\"m\",le=\"0.01\"} 50\n"
      "infer_request_duration_seconds_bucket{model=\"m\",le=\"0.02\"} 100\n"
      "infer_request_duration_seconds_bucket{model=\"m\",le=\"+Inf\"} 100\n"
      "infer_rejections_total{model=\"m\",reason=\"queue_full\"} 7\n"
      "infer_queue_depth{model=\"m\",length_bucket=\"16\"} 2\n"
      "infer_device_memory_budget_bytes{device=\"cpu\"} 1000\n"
      "infer_device_memory_allocated_bytes{device=\"cpu\"} 250\n");
  const ServerFigures f = Summarize(before, after, "m", 5);
  EXPECT_EQ(f.kind, ServerKind::kInferServer);
  EXPECT_DOUBLE_EQ(f.batch_rows_mean, 4.0) << "80 rows in 20 batches, in the window only";
  EXPECT_NEAR(f.server_p50_ms, 10.0, 1e-9);
  EXPECT_NEAR(f.server_p99_ms, 19.8, 1e-9);
  EXPECT_EQ(f.rejections.at("queue_full"), 4.0);
  EXPECT_EQ(f.queue_depth_after, 2.0);
  EXPECT_EQ(f.queue_depth_peak, 5.0);
  EXPECT_EQ(f.memory_limit_bytes, 1000.0);
  EXPECT_EQ(f.memory_used_after, 250.0);
}

TEST(ServerFiguresTest, TritonSeries) {
  // Triton's counter names, as its /metrics shows them.
  const std::vector<Sample> before = Parse(
      "nv_inference_request_success{model=\"m\",version=\"1\"} 100\n"
      "nv_inference_count{model=\"m\",version=\"1\"} 100\n"
      "nv_inference_exec_count{model=\"m\",version=\"1\"} 100\n"
      "nv_inference_request_duration_us{model=\"m\",version=\"1\"} 100000\n"
      "nv_inference_queue_duration_us{model=\"m\",version=\"1\"} 10000\n");
  const std::vector<Sample> after = Parse(
      "nv_inference_request_success{model=\"m\",version=\"1\"} 300\n"
      "nv_inference_count{model=\"m\",version=\"1\"} 900\n"
      "nv_inference_exec_count{model=\"m\",version=\"1\"} 200\n"
      "nv_inference_request_duration_us{model=\"m\",version=\"1\"} 700000\n"
      "nv_inference_queue_duration_us{model=\"m\",version=\"1\"} 210000\n"
      "nv_inference_pending_request_count{model=\"m\",version=\"1\"} 3\n"
      "nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-1\"} 8e10\n"
      "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 2e10\n");
  const ServerFigures f = Summarize(before, after, "m", 0);
  EXPECT_EQ(f.kind, ServerKind::kTriton);
  EXPECT_DOUBLE_EQ(f.batch_rows_mean, 8.0) << "800 inferences in 100 executions";
  EXPECT_DOUBLE_EQ(f.request_mean_ms, 3.0) << "mean: 600 ms over 200 requests";
  EXPECT_DOUBLE_EQ(f.queue_mean_ms, 1.0);
  EXPECT_EQ(f.queue_depth_after, 3.0);
  EXPECT_EQ(f.memory_used_after / f.memory_limit_bytes, 0.25);
  EXPECT_EQ(Summarize({}, Parse("go_goroutines 7\n"), "m", 0).kind, ServerKind::kUnknown);
}

LoadResult StepResult(int64_t sent, int64_t ok, int64_t p99_ms) {
  LoadResult r;
  r.sent = sent;
  r.ok = ok;
  for (int64_t i = 0; i < ok; ++i) r.ok_latency.Record((i < ok * 98 / 100 ? 1 : p99_ms) * 1000000);
  return r;
}

TEST(SweepJudgeTest, TheAnswerIsTheLastPassBeforeTheKnee) {
  SweepJudge judge(/*p99_target_ms=*/50, /*max_error_fraction=*/0.01);
  EXPECT_TRUE(judge.Passes(StepResult(1000, 1000, 40)));
  EXPECT_FALSE(judge.Passes(StepResult(1000, 1000, 60))) << "p99 over the target";
  EXPECT_FALSE(judge.Passes(StepResult(1000, 980, 10))) << "2% errors";
  EXPECT_FALSE(judge.Passes(StepResult(0, 0, 0))) << "nothing sent";
  // A failing first step (warming) does not stop the sweep ...
  EXPECT_TRUE(judge.Add(StepResult(1000, 1000, 80)));
  EXPECT_EQ(judge.best(), -1);
  EXPECT_TRUE(judge.Add(StepResult(1000, 1000, 30)));
  EXPECT_TRUE(judge.Add(StepResult(1000, 1000, 45)));
  EXPECT_EQ(judge.best(), 2);
  // ... a failing step after a pass does.
  EXPECT_FALSE(judge.Add(StepResult(1000, 1000, 70)));
  EXPECT_EQ(judge.best(), 2);
}

}  // namespace
}  // namespace infer::loadgen
