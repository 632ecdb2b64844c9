#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "models/bert/bert_gen.h"
#include "models/bert/bert_model.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/float_tolerance.h"

namespace infer {
namespace {

using namespace ::infer::testing_engine;  // NOLINT: the shared test doubles

// Time is the engine's clock, moved by the test: a request's timeout runs
// out while a batch holds the device, without waiting for it.
TEST(EngineSchedulingTest, ExpiredRequestsAreAnsweredWithoutRunning) {
  testing::FakeClock clock(absl::FromUnixSeconds(1'000'000));
  auto engine = CpuEngine(/*max_in_flight=*/1, &clock);  // the blocker fills the device
  testing::Notification release;
  Results results;
  ProbeModel* probe =
      AddProbeAndHoldTheDevice(*engine, Batching(1, absl::ZeroDuration()), &release, results);
  ASSERT_NE(probe, nullptr);
  InferRequest late = Probe("late");
  late.timeout = absl::Milliseconds(20);
  engine->Submit(std::move(late), results.For("late"));
  InferRequest in_time = Probe("in_time");
  in_time.timeout = absl::Milliseconds(40);
  engine->Submit(std::move(in_time), results.For("in_time"));
  clock.Advance(absl::Milliseconds(30));  // past late's timeout, within in_time's
  InferRequest past = Probe("past");
  past.deadline = clock.Now() - absl::Seconds(1);
  engine->Submit(std::move(past), results.For("past"));
  release.Notify();
  ASSERT_TRUE(results.WaitFor(4));
  EXPECT_THAT(results.status["blocker"], IsOk());
  EXPECT_THAT(results.status["late"],
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       "request waited 30000 us in the queue of model 'probe' and passed its "
                       "deadline; it was not run"));
  EXPECT_THAT(results.status["in_time"], IsOk());
  EXPECT_THAT(results.status["past"],
              StatusIs(absl::StatusCode::kDeadlineExceeded, "passed before it arrived"));
  EXPECT_EQ(probe->order(), (std::vector<std::string>{"blocker", "in_time"}))
      << "expired requests never ran";
  EXPECT_EQ(engine->GetModelStats("probe")->rejected_deadline, 2u);
}

TEST(EngineSchedulingTest, CancelledRequestsLeaveTheQueue) {
  auto engine = CpuEngine(/*max_in_flight=*/1);
  testing::Notification release;  // the blocker holds the device until then
  Results results;
  ProbeModel* probe =
      AddProbeAndHoldTheDevice(*engine, Batching(1, absl::ZeroDuration()), &release, results);
  ASSERT_NE(probe, nullptr);
  auto gone = std::make_shared<std::atomic<bool>>(false);
  InferRequest r = Probe("quitter");
  r.is_cancelled = [gone] { return gone->load(); };
  engine->Submit(std::move(r), results.For("quitter"));
  *gone = true;
  release.Notify();
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_THAT(results.status["quitter"], StatusIs(absl::StatusCode::kCancelled, "cancelled"));
  EXPECT_EQ(probe->order(), std::vector<std::string>{"blocker"});
  EXPECT_EQ(engine->GetModelStats("probe")->cancelled, 1u);
}

TEST(EngineSchedulingTest, HigherPriorityRunsFirst) {
  auto engine = CpuEngine(/*max_in_flight=*/1);
  testing::Notification release;  // the blocker holds the device until all are queued
  QueueOptions q = Batching(1, absl::ZeroDuration());
  q.priority_levels = 3;
  q.priority_aging = absl::Seconds(10);
  Results results;
  ProbeModel* probe = AddProbeAndHoldTheDevice(*engine, q, &release, results);
  ASSERT_NE(probe, nullptr);
  for (auto [id, prio] : {std::pair{"low", 3}, std::pair{"default", 0}, std::pair{"high", 1}}) {
    InferRequest r = Probe(id);
    r.priority = prio;
    engine->Submit(std::move(r), results.For(id));
  }
  InferRequest bad = Probe("bad");
  bad.priority = 4;
  engine->Submit(std::move(bad), results.For("bad"));
  release.Notify();
  ASSERT_TRUE(results.WaitFor(5));
  EXPECT_THAT(results.status["bad"],
              StatusIs(absl::StatusCode::kInvalidArgument, "priority 4 is outside [1, 3]"));
  // The default level is the lowest: "default" and "low" keep arrival order.
  EXPECT_EQ(probe->order(), (std::vector<std::string>{"blocker", "high", "low", "default"}));
}

TEST(EngineSchedulingTest, LargeClientBatchesAreSplitAndAnsweredOnce) {
  auto engine = CpuEngine();
  auto model = EmbedPoolModel::Create(EmbedPoolOptions{}, engine->context());
  ASSERT_THAT(engine->AddModel(*std::move(model), Batching(4, absl::ZeroDuration())), IsOk());
  std::vector<int64_t> ids;
  for (int i = 0; i < 10 * 3; ++i) ids.push_back(100 + i);
  auto whole = engine->Infer(Ids("embed_pool", ids, 10));
  ASSERT_THAT(whole, IsOk());
  ASSERT_EQ(whole->outputs[0].shape, (std::vector<int64_t>{10, 384}));
  // Row 7 equals the same sequence sent alone.
  auto alone = engine->Infer(Ids("embed_pool", {121, 122, 123}));
  ASSERT_THAT(alone, IsOk());
  const float* a = whole->outputs[0].as<float>() + 7 * 384;
  const float* b = alone->outputs[0].as<float>();
  // Equal but for the order of the GEMM's sums: oneDNN picks its kernel by
  // the row count (4 rows here, 1 alone), and on some CPUs (AVX2) that
  // changes the last bits. The bound is derived in float_tolerance.h; the
  // bit-for-bit claim is the batch-invariant mode's (the next test).
  const double tol = testing::EmbedPoolReorderTolerance(EmbedPoolOptions{}, {121, 122, 123});
  for (int d = 0; d < 384; ++d) EXPECT_NEAR(a[d], b[d], tol) << d;
  const ModelStats st = *engine->GetModelStats("embed_pool");
  EXPECT_EQ(st.request_splits, 1u);
  EXPECT_GE(st.execution_count, 4u);  // 4 + 4 + 2 rows, then the single one
}

// The same split in batch-invariant mode (a BERT encoder on the CPU): each
// piece of the split request is batched with different rows than the
// sequence alone, and its embedding is the same to the bit.
TEST(EngineSchedulingTest, SplitRowsInBatchInvariantModeEqualTheRowAloneBitForBit) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/engine_invariant_", getpid());
  BertGenOptions gen;
  gen.config = *BertPreset("tiny");
  ASSERT_THAT(GenerateBertCheckpoint(dir, gen), IsOk());
  auto engine = CpuEngine();
  BertModelOptions o;
  o.name = "bert";
  o.checkpoint_dir = dir;
  o.precision = Precision::kFp32;
  o.batch_invariant = true;
  auto model = BertModel::Create(o, engine->context());
  ASSERT_THAT(model, IsOk());
  ASSERT_THAT(engine->AddModel(*std::move(model), Batching(4, absl::ZeroDuration())), IsOk());
  // Ten rows of different lengths (a mask marks each one's tokens).
  std::vector<int64_t> ids, mask;
  for (int r = 0; r < 10; ++r) {
    for (int c = 0; c < 12; ++c) {
      ids.push_back(c <= r + 1 ? 5 + (r * 7 + c * 3) % 90 : 0);
      mask.push_back(c <= r + 1 ? 1 : 0);
    }
  }
  InferRequest whole = Ids("bert", ids, 10);
  whole.inputs.push_back(testing::Int64Matrix("attention_mask", mask, 10));
  auto all = engine->Infer(std::move(whole));
  ASSERT_THAT(all, IsOk());
  const int64_t h = gen.config.hidden_size;
  ASSERT_EQ(all->outputs[0].shape, (std::vector<int64_t>{10, h}));
  EXPECT_EQ(engine->GetModelStats("bert")->request_splits, 1u);
  for (int r : {0, 5, 7, 9}) {
    const std::vector<int64_t> row(ids.begin() + r * 12, ids.begin() + r * 12 + r + 2);
    auto alone = engine->Infer(Ids("bert", row));
    ASSERT_THAT(alone, IsOk());
    EXPECT_EQ(std::memcmp(all->outputs[0].as<float>() + r * h, alone->outputs[0].as<float>(),
                          h * sizeof(float)),
              0)
        << "row " << r;
  }
  std::filesystem::remove_all(dir);
}

TEST(EngineSchedulingTest, BatchesNeverHoldMoreMemoryThanAdmitted) {
  EngineOptions o;
  o.device = "cpu";
  o.memory.budget_bytes = 100 << 20;
  o.memory_headroom_fraction = 0.5;  // 50 MiB for batches
  auto engine = *Engine::Create(o);
  ProbeModel::Options po;
  po.compute_time = absl::Milliseconds(5);
  po.bytes_per_row = 8 << 20;  // 8 MiB per row: at most 6 rows in flight
  auto model = std::make_unique<ProbeModel>(po);
  ProbeModel* probe = model.get();
  ASSERT_THAT(engine->AddModel(std::move(model), Batching(8, absl::Milliseconds(1))), IsOk());
  EXPECT_EQ(engine->ActivationCapacityBytes(), 50 << 20);
  Results results;
  for (int i = 0; i < 60; ++i) {
    const std::string id = std::to_string(i);
    engine->Submit(Probe(id, 1 + i % 3), results.For(id));
  }
  InferRequest too_big = Probe("too_big", 7);  // 56 MiB even alone
  engine->Submit(std::move(too_big), results.For("too_big"));
  ASSERT_TRUE(results.WaitFor(61));
  for (int i = 0; i < 60; ++i) EXPECT_THAT(results.status[std::to_string(i)], IsOk()) << i;
  EXPECT_THAT(results.status["too_big"],
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "request needs 58720256 bytes of device memory (7 sequences"));
  EXPECT_LE(probe->max_held_bytes(), 50 << 20) << "admission let batches exceed the budget";
  EXPECT_GT(probe->max_held_bytes(), 8 << 20) << "batches did run side by side";
}

// Two models on one memory budget: a stream of small batches of one keeps
// most of the memory taken, so a request of the other that needs most of
// it would never find it free at once. Once it has waited past its queue's
// starvation bound it claims its bytes (MemoryAdmission), the small batches
// stop launching as it waits, and it runs while the stream still flows.
TEST(EngineSchedulingTest, AModelNeedingMostOfTheMemoryIsNotStarvedByAnother) {
  EngineOptions o;
  o.device = "cpu";
  o.memory.budget_bytes = 100 << 20;
  o.memory_headroom_fraction = 0.5;  // 50 MiB for batches
  o.pipeline.max_in_flight = 3;
  auto engine = *Engine::Create(o);
  ProbeModel::Options small;
  small.name = "small";
  small.compute_time = absl::Milliseconds(20);
  small.bytes_per_row = 8 << 20;  // batches of 2 rows: 16 MiB, three in flight hold 48
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(small),
                               Batching(2, absl::ZeroDuration(), 4096)),
              IsOk());
  ProbeModel::Options large = small;
  large.name = "large";
  large.bytes_per_row = 40 << 20;  // 40 MiB: more than ever stays free
  QueueOptions q = Batching(1, absl::ZeroDuration());
  q.priority_aging = absl::Milliseconds(100);  // the starvation bound
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(large), q), IsOk());

  std::atomic<bool> streaming{true};
  std::atomic<int> small_answered{0};
  std::thread stream([&] {  // 200 rows/s offered, 100 rows/s served: a backlog
    for (int i = 0; i < 600 && streaming; ++i) {
      InferRequest r = Probe("s" + std::to_string(i));
      r.model_name = "small";
      engine->Submit(std::move(r), [&](absl::StatusOr<InferResponse> result) {
        EXPECT_THAT(result, IsOk());
        ++small_answered;
      });
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  absl::SleepFor(absl::Milliseconds(200));  // the small batches fill the memory
  InferRequest big = Probe("big");
  big.model_name = "large";
  const absl::Time sent = absl::Now();
  absl::StatusOr<InferResponse> answer = engine->Infer(std::move(big));
  const absl::Duration waited = absl::Now() - sent;
  const int answered_before = small_answered;
  const bool stream_still_flowing = streaming && answered_before < 600;
  streaming = false;
  stream.join();
  EXPECT_THAT(answer, IsOk());
  // Without the claim it waits until the small backlog drains: all 600
  // small requests answered, 6 s. With it, the bound (100 ms) and the
  // batches in flight (3 × 20 ms): 30 to 40 small requests answered before
  // it on an idle machine, up to about 125 (1.2 s) beside two busy loops,
  // and a 4.1 s wait once beside other tests (some 400 at the 100 a second
  // served). Counted in requests rather than seconds, with room for that.
  EXPECT_TRUE(stream_still_flowing) << "the large request waited " << waited;
  EXPECT_LT(answered_before, 500) << "the large request waited " << waited;
  engine->Shutdown();
}

TEST(EngineSchedulingTest, OutOfMemoryBatchesAreSplitAndRetried) {
  auto engine = CpuEngine();
  ProbeModel::Options po;
  po.oom_above_rows = 2;  // any batch of more than 2 rows "runs out of memory"
  auto model = std::make_unique<ProbeModel>(po);
  // The four single rows fill a batch of 4 at once (a split is certain);
  // "wide" then waits alone for the long delay.
  ASSERT_THAT(engine->AddModel(std::move(model), Batching(4, absl::Milliseconds(500))), IsOk());
  Results results;
  for (int i = 0; i < 4; ++i)
    engine->Submit(Probe(std::to_string(i)), results.For(std::to_string(i)));
  engine->Submit(Probe("wide", 3), results.For("wide"));
  ASSERT_TRUE(results.WaitFor(5));
  for (int i = 0; i < 4; ++i) EXPECT_THAT(results.status[std::to_string(i)], IsOk()) << i;
  EXPECT_THAT(results.status["wide"],
              StatusIs(absl::StatusCode::kResourceExhausted, "simulated out of memory"))
      << "a request that fails alone keeps the error";
  EXPECT_GE(engine->GetModelStats("probe")->oom_batch_splits, 1u);
}

TEST(EngineSchedulingTest, SequencesLongerThanTheLastBucketAreRefused) {
  auto engine = CpuEngine();
  QueueOptions q = Batching(4, absl::ZeroDuration());
  q.length_buckets = {8, 16};
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}), q), IsOk());
  EXPECT_THAT(engine->Infer(Probe("x", 1, 17)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input has 17 tokens; model 'probe' allows 16 (its longest length bucket)"));
  EXPECT_THAT(engine->Infer(Probe("y", 1, 16)), IsOk());
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.real_tokens, 16);
  EXPECT_EQ(st.computed_tokens, 16);
}

}  // namespace
}  // namespace infer
