#include "engine/engine.h"

#include "engine/engine_test_util.h"

namespace infer {
namespace {

using namespace ::infer::testing_engine;  // NOLINT: the shared test doubles

TEST(EngineTest, UnknownModelIsNotFound) {
  auto engine = CpuEngine();
  EXPECT_THAT(engine->Infer(Ids("nope", {1})),
              StatusIs(absl::StatusCode::kNotFound, "unknown model 'nope'; loaded models: (none)"));
}

TEST(EngineTest, AddModelRejectsDuplicatesAndBadOptions) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(Flaky(0), Batching(4, absl::ZeroDuration())), IsOk());
  EXPECT_THAT(engine->AddModel(Flaky(0), Batching(4, absl::ZeroDuration())),
              StatusIs(absl::StatusCode::kAlreadyExists, "model 'flaky' is already loaded"));
  auto other = Flaky(0);
  EXPECT_THAT(engine->AddModel(std::move(other), Batching(0, absl::ZeroDuration())),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_batch_size must be >= 1"));
}

TEST(EngineTest, AnAliasIsAnotherNameOfOneModel) {
  auto engine = CpuEngine();
  EmbedPoolOptions o;
  o.vocab_size = 100;
  ASSERT_THAT(engine->AddModel(*EmbedPoolModel::Create(o, engine->context()),
                               Batching(4, absl::ZeroDuration())),
              IsOk());
  EXPECT_THAT(engine->AddAlias("org/embed_pool", "nope"),
              StatusIs(absl::StatusCode::kNotFound, "no model 'nope'"));
  ASSERT_THAT(engine->AddAlias("org/embed_pool", "embed_pool"), IsOk());
  EXPECT_THAT(engine->AddAlias("org/embed_pool", "embed_pool"),
              StatusIs(absl::StatusCode::kAlreadyExists, "is taken"));
  EXPECT_THAT(engine->AddAlias("embed_pool", "embed_pool"),
              StatusIs(absl::StatusCode::kAlreadyExists, "is taken"));
  // Served and counted as the model itself; listed under its own name only.
  EXPECT_THAT(engine->Infer(Ids("org/embed_pool", {1, 2})), IsOk());
  EXPECT_EQ((*engine->GetModelStats("embed_pool")).success.count, 1u);
  EXPECT_EQ(*engine->GetModelSpec("org/embed_pool"), *engine->GetModelSpec("embed_pool"));
  EXPECT_EQ(engine->ModelNames(), std::vector<std::string>{"embed_pool"});
  // A model cannot take an alias's name.
  o.name = "org/embed_pool";
  EXPECT_THAT(engine->AddModel(*EmbedPoolModel::Create(o, engine->context()),
                               Batching(4, absl::ZeroDuration())),
              StatusIs(absl::StatusCode::kAlreadyExists, "is already loaded"));
}

TEST(EngineTest, InvalidRequestsAreRefusedBeforeQueueing) {
  auto engine = CpuEngine();
  EmbedPoolOptions o;
  o.vocab_size = 100;
  auto model = EmbedPoolModel::Create(o, engine->context());
  ASSERT_THAT(engine->AddModel(*std::move(model), Batching(4, absl::ZeroDuration())), IsOk());
  EXPECT_THAT(engine->Infer(Ids("embed_pool", {1, 2, 100})),
              StatusIs(absl::StatusCode::kInvalidArgument, "accepts ids in [0, 100)"));
  InferRequest wrong = Ids("embed_pool", {1});
  wrong.requested_outputs = {"logits"};
  EXPECT_THAT(engine->Infer(std::move(wrong)),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown output 'logits'"));
  const ModelStats stats = *engine->GetModelStats("embed_pool");
  EXPECT_EQ(stats.fail.count, 2u);
  EXPECT_EQ(stats.rejected_invalid, 2u);
  EXPECT_EQ(stats.execution_count, 0u);
}

TEST(EngineTest, ConcurrentRequestsAreBatchedAndEachAnsweredOnce) {
  auto engine = CpuEngine();
  auto model = EmbedPoolModel::Create(EmbedPoolOptions{}, engine->context());
  ASSERT_THAT(engine->AddModel(*std::move(model), Batching(16, absl::Milliseconds(20))), IsOk());
  constexpr int kRequests = 128;
  std::atomic<int> answered{0}, ok{0};
  ::infer::testing::Notification all;
  for (int i = 0; i < kRequests; ++i) {
    engine->Submit(Ids("embed_pool", {101, 1000 + i, 102}), [&](absl::StatusOr<InferResponse> r) {
      if (r.ok() && r->outputs.size() == 1 && r->outputs[0].shape == std::vector<int64_t>{1, 384}) {
        ++ok;
      }
      if (++answered == kRequests) all.Notify();
    });
  }
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(ok.load(), kRequests);
  const ModelStats stats = *engine->GetModelStats("embed_pool");
  EXPECT_EQ(stats.inference_count, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(stats.success.count, static_cast<uint64_t>(kRequests));
  EXPECT_LT(stats.execution_count, static_cast<uint64_t>(kRequests / 2));
  uint64_t executions = 0;
  for (const auto& [size, d] : stats.batch_stats) {
    EXPECT_LE(size, 16u);
    executions += d.compute_infer.count;
  }
  EXPECT_EQ(executions, stats.execution_count);
  // Every batch went through the device pipeline and the caching allocator.
  // (The pipeline counts a batch as it frees its slot, just before the
  // answers go out; counts are checked after the answers, so no wait is
  // needed, but a loop costs nothing when it is not.)
  for (int i = 0; i < 1000 && engine->pipeline()->stats().completed < stats.execution_count; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(engine->pipeline()->stats().completed, stats.execution_count);
  EXPECT_GT(engine->allocator()->stats().peak_allocated_bytes, 0);
  const StagingPoolStats staging = engine->staging()->stats();
  EXPECT_GT(staging.arena_hits, 0u) << "staging buffers come from the pinned arena";
  EXPECT_EQ(staging.host_allocs, 1u) << "nothing pinned after start";
}

TEST(EngineTest, ModelFailureIsInternalAndServingContinues) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(Flaky(1), Batching(4, absl::ZeroDuration())), IsOk());
  EXPECT_THAT(
      engine->Infer(Ids("flaky", {1, 2})),
      StatusIs(absl::StatusCode::kInternal, "model 'flaky' failed: injected compute fault"));
  auto r = engine->Infer(Ids("flaky", {1, 2, 3, 4}, 2));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(*r->outputs[0].as<int64_t>(), 2);
}

TEST(EngineTest, ModelExceptionIsInternalAndServingContinues) {
  auto engine = CpuEngine();
  auto model = Flaky(0);
  testing::FaultyModel* flaky = model.get();
  ASSERT_THAT(engine->AddModel(std::move(model), Batching(4, absl::ZeroDuration())), IsOk());
  flaky->ThrowNextPrepare();  // no request is in flight: the engine's worker is idle
  EXPECT_THAT(engine->Infer(Ids("flaky", {1})),
              StatusIs(absl::StatusCode::kInternal, "exception: injected exception in prepare"));
  EXPECT_THAT(engine->Infer(Ids("flaky", {1})), IsOk());
}

TEST(EngineTest, ALostDeviceTurnsNotReadyAnswersUnavailableAndIsReportedOnce) {
  EngineOptions o;
  o.device = "cpu";
  std::atomic<int> reported{0};
  std::string reason;
  o.on_device_lost = [&](const absl::Status& s) {
    ++reported;
    reason = std::string(s.message());
  };
  auto engine = Engine::Create(o);
  ASSERT_THAT(engine, IsOk());
  auto model = Flaky(0);
  testing::FaultyModel* flaky = model.get();
  ASSERT_THAT((*engine)->AddModel(std::move(model), Batching(1, absl::ZeroDuration())), IsOk());
  ASSERT_THAT((*engine)->Infer(Ids("flaky", {1})), IsOk());
  flaky->LoseDevice();
  // Requests already accepted: each answered once, UNAVAILABLE (another
  // replica can serve them), whether its batch ran or not.
  std::atomic<int> answered{0}, unavailable{0};
  for (int i = 0; i < 8; ++i) {
    (*engine)->Submit(Ids("flaky", {1, 2}), [&](absl::StatusOr<InferResponse> r) {
      ++answered;
      if (r.status().code() == absl::StatusCode::kUnavailable &&
          absl::StrContains(r.status().message(), "the device is lost")) {
        ++unavailable;
      }
    });
  }
  for (int i = 0; i < 2000 && answered.load() < 8; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(answered.load(), 8);
  EXPECT_EQ(unavailable.load(), 8);
  EXPECT_FALSE((*engine)->Ready());
  EXPECT_EQ(reported.load(), 1);
  EXPECT_THAT(reason, ::testing::HasSubstr("injected loss of the device"));
  const Engine::DeviceHealth health = (*engine)->GetDeviceHealth();
  EXPECT_TRUE(health.lost);
  EXPECT_GE(health.errors, 1u);
  // New requests are refused at the door, naming why.
  EXPECT_THAT((*engine)->Infer(Ids("flaky", {1})),
              StatusIs(absl::StatusCode::kUnavailable, "the device is lost"));
  (*engine)->Shutdown();
  EXPECT_EQ(reported.load(), 1);
}

TEST(EngineTest, ReturnsOnlyRequestedOutputsInRequestOrder) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(Flaky(0), Batching(4, absl::ZeroDuration())), IsOk());
  InferRequest r = Ids("flaky", {1});
  r.id = "req-7";
  r.requested_outputs = {"unused"};
  auto out = engine->Infer(std::move(r));
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->id, "req-7");
  ASSERT_EQ(out->outputs.size(), 1u);
  EXPECT_EQ(out->outputs[0].name, "unused");
  out = engine->Infer(Ids("flaky", {1}));
  ASSERT_EQ(out->outputs.size(), 2u);
}

// A model without device work runs inline on its batcher's thread: it is
// answered while another model's batch holds the whole pipeline.
TEST(EngineTest, AModelWithoutDeviceWorkDoesNotWaitForThePipeline) {
  auto engine = CpuEngine(/*max_in_flight=*/1);
  testing::Notification release;
  ProbeModel::Options held;
  held.release = &release;
  auto probe_model = std::make_unique<ProbeModel>(held);
  ProbeModel* probe = probe_model.get();
  ASSERT_THAT(engine->AddModel(std::move(probe_model), Batching(1, absl::ZeroDuration())), IsOk());
  ASSERT_THAT(
      engine->AddModel(std::make_unique<IdentityModel>("echo"), Batching(4, absl::ZeroDuration())),
      IsOk());
  std::promise<void> probe_done;
  engine->Submit(Probe("held"), [&](absl::StatusOr<InferResponse> r) {
    EXPECT_THAT(r, IsOk());
    probe_done.set_value();
  });
  // The probe's batch holds the only pipeline slot until it is released.
  while (probe->order().empty()) absl::SleepFor(absl::Milliseconds(1));
  InferRequest echo = Probe("echo");
  echo.model_name = "echo";
  auto answer = engine->Infer(std::move(echo));
  ASSERT_THAT(answer, IsOk());
  EXPECT_EQ(answer->outputs.at(0).name, "output_ids");
  std::future<void> done = probe_done.get_future();
  EXPECT_EQ(done.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "answered only after the pipeline's batch";
  release.Notify();
  done.get();
}

TEST(EngineTest, ShutdownAnswersQueuedRequestsAndRefusesNewOnes) {
  auto engine = CpuEngine();
  auto model = EmbedPoolModel::Create(EmbedPoolOptions{}, engine->context());
  // A long delay: requests sit in the queue until shutdown flushes them.
  ASSERT_THAT(engine->AddModel(*std::move(model), Batching(64, absl::Seconds(30))), IsOk());
  std::atomic<int> ok{0};
  for (int i = 0; i < 10; ++i) {
    engine->Submit(Ids("embed_pool", {5, 6}), [&](absl::StatusOr<InferResponse> r) {
      if (r.ok()) ++ok;
    });
  }
  const absl::Time start = absl::Now();
  engine->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "drain must not wait for the delay";
  EXPECT_EQ(ok.load(), 10);
  EXPECT_FALSE(engine->Ready());
  EXPECT_THAT(engine->Infer(Ids("embed_pool", {5})),
              StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
}

// A drain's grace period: probes say not ready while requests are still
// taken and answered, so load balancers move traffic away first.
TEST(EngineTest, ADrainTurnsNotReadyButKeepsServingUntilShutdown) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(Flaky(0), Batching(4, absl::ZeroDuration())), IsOk());
  ASSERT_TRUE(engine->Ready());
  engine->BeginDrain();
  engine->BeginDrain();  // idempotent
  EXPECT_FALSE(engine->Ready());
  EXPECT_FALSE(engine->ModelReady("flaky"));
  EXPECT_TRUE(engine->Accepting());
  EXPECT_THAT(engine->Infer(Ids("flaky", {1})), IsOk());
  engine->Shutdown();
  EXPECT_FALSE(engine->Accepting());
  EXPECT_THAT(engine->Infer(Ids("flaky", {1})),
              StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
}

}  // namespace
}  // namespace infer
