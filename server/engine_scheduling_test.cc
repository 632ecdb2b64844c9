#include "server/engine.h"
#include "server/engine_test_util.h"

namespace infer {
namespace {

using namespace ::infer::testing_engine;  // NOLINT: the shared test doubles

TEST(EngineSchedulingTest, ExpiredRequestsAreAnsweredWithoutRunning) {
  auto engine = CpuEngine(/*max_in_flight=*/1);  // the blocker fills the device
  auto model = std::make_unique<ProbeModel>(ProbeModel::Options{absl::Milliseconds(300)});
  ProbeModel* probe = model.get();
  ASSERT_THAT(engine->AddModel(std::move(model), Batching(1, absl::ZeroDuration())), IsOk());
  Results results;
  engine->Submit(Probe("blocker"), results.For("blocker"));
  absl::SleepFor(absl::Milliseconds(50));  // the blocker is running
  InferRequest late = Probe("late");
  late.timeout = absl::Milliseconds(20);
  engine->Submit(std::move(late), results.For("late"));
  InferRequest past = Probe("past");
  past.deadline = absl::Now() - absl::Seconds(1);
  engine->Submit(std::move(past), results.For("past"));
  ASSERT_TRUE(results.WaitFor(3));
  EXPECT_THAT(results.status["blocker"], IsOk());
  EXPECT_THAT(results.status["late"],
              StatusIs(absl::StatusCode::kDeadlineExceeded, "passed its deadline; it was not run"));
  EXPECT_THAT(results.status["past"],
              StatusIs(absl::StatusCode::kDeadlineExceeded, "passed before it arrived"));
  EXPECT_EQ(probe->order(), std::vector<std::string>{"blocker"}) << "expired requests never ran";
  EXPECT_EQ(engine->GetModelStats("probe")->rejected_deadline, 2u);
}

TEST(EngineSchedulingTest, CancelledRequestsLeaveTheQueue) {
  auto engine = CpuEngine(/*max_in_flight=*/1);
  auto model = std::make_unique<ProbeModel>(ProbeModel::Options{absl::Milliseconds(200)});
  ProbeModel* probe = model.get();
  ASSERT_THAT(engine->AddModel(std::move(model), Batching(1, absl::ZeroDuration())), IsOk());
  Results results;
  engine->Submit(Probe("blocker"), results.For("blocker"));
  auto gone = std::make_shared<std::atomic<bool>>(false);
  InferRequest r = Probe("quitter");
  r.is_cancelled = [gone] { return gone->load(); };
  engine->Submit(std::move(r), results.For("quitter"));
  *gone = true;
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_THAT(results.status["quitter"], StatusIs(absl::StatusCode::kCancelled, "cancelled"));
  EXPECT_EQ(probe->order(), std::vector<std::string>{"blocker"});
  EXPECT_EQ(engine->GetModelStats("probe")->cancelled, 1u);
}

TEST(EngineSchedulingTest, HigherPriorityRunsFirst) {
  auto engine = CpuEngine(/*max_in_flight=*/1);
  auto model = std::make_unique<ProbeModel>(ProbeModel::Options{absl::Milliseconds(100)});
  ProbeModel* probe = model.get();
  QueueOptions q = Batching(1, absl::ZeroDuration());
  q.priority_levels = 3;
  q.priority_aging = absl::Seconds(10);
  ASSERT_THAT(engine->AddModel(std::move(model), q), IsOk());
  Results results;
  engine->Submit(Probe("blocker"), results.For("blocker"));
  while (probe->order().empty()) absl::SleepFor(absl::Milliseconds(1));  // blocker runs
  for (auto [id, prio] : {std::pair{"low", 3}, std::pair{"default", 0}, std::pair{"high", 1}}) {
    InferRequest r = Probe(id);
    r.priority = prio;
    engine->Submit(std::move(r), results.For(id));
  }
  InferRequest bad = Probe("bad");
  bad.priority = 4;
  engine->Submit(std::move(bad), results.For("bad"));
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
  for (int d = 0; d < 384; ++d) EXPECT_FLOAT_EQ(a[d], b[d]);
  const ModelStats st = *engine->GetModelStats("embed_pool");
  EXPECT_EQ(st.request_splits, 1u);
  EXPECT_GE(st.execution_count, 4u);  // 4 + 4 + 2 rows, then the single one
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
