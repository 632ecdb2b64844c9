#include "server/engine.h"

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/embed_pool.h"
#include "models/identity.h"
#include "tests/testing/notification.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

InferRequest Ids(const std::string& model, std::vector<int64_t> ids, int64_t rows = 1) {
  InferRequest r;
  r.model_name = model;
  Tensor t;
  t.name = "input_ids";
  t.dtype = DataType::kInt64;
  t.shape = {rows, static_cast<int64_t>(ids.size()) / rows};
  t.data.assign(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int64_t));
  r.inputs.push_back(std::move(t));
  return r;
}

// A host-only model that fails its first `failures` batches, then answers
// each request with its batch size (twice, as "rows" and "unused").
class FlakyModel final : public Model {
 public:
  explicit FlakyModel(int failures) : failures_(failures) {
    spec_.name = "flaky";
    spec_.inputs = {{"input_ids", DataType::kInt64, {-1, -1}}};
    spec_.outputs = {{"rows", DataType::kInt64, {-1}}, {"unused", DataType::kInt64, {-1}}};
  }
  const ModelSpec& spec() const override { return spec_; }
  absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const> requests) override {
    if (throw_next_.exchange(false)) throw std::runtime_error("simulated exception");
    auto batch = std::make_unique<Batch>();
    batch->fail = failures_-- > 0;
    batch->lost = &lost_;
    for (const InferRequest* r : requests) batch->rows.push_back(RequestBatchSize(*r));
    return std::unique_ptr<ModelBatch>(std::move(batch));
  }
  void ThrowNext() { throw_next_ = true; }
  // From now on every Compute fails as on a GPU after a sticky error.
  void LoseDevice() { lost_ = true; }

 private:
  struct Batch final : ModelBatch {
    bool fail = false;
    const std::atomic<bool>* lost = nullptr;
    std::vector<int64_t> rows;
    absl::Status Upload(Stream*) override { return absl::OkStatus(); }
    absl::Status Compute(Stream*) override {
      if (*lost) return DeviceLostError("simulated cudaErrorIllegalAddress");
      return fail ? absl::InternalError("simulated kernel failure") : absl::OkStatus();
    }
    absl::Status Download(Stream*) override { return absl::OkStatus(); }
    absl::Status Finish(absl::Span<InferResponse* const> responses) override {
      for (size_t i = 0; i < responses.size(); ++i) {
        for (const char* name : {"rows", "unused"}) {
          responses[i]->outputs.push_back(testing::Int64Scalar(name, rows[i]));
        }
      }
      return absl::OkStatus();
    }
  };

  ModelSpec spec_;
  int failures_;
  std::atomic<bool> throw_next_{false};
  std::atomic<bool> lost_{false};
};

// A host-only model for scheduling tests: answers each request with its
// batch size, and can be told to be slow, to run out of memory above a row
// count, and to declare a memory model. Records the order in which requests
// (by id) ran, and the most memory its batches held at once.
class ProbeModel final : public Model {
 public:
  struct Options {
    absl::Duration compute_time = absl::ZeroDuration();
    int64_t oom_above_rows = 0;  // 0: never
    int64_t bytes_per_row = 0;   // PeakBytes; 0: no memory model
  };
  explicit ProbeModel(Options o) : o_(o) {
    spec_.name = "probe";
    spec_.inputs = {{"input_ids", DataType::kInt64, {-1, -1}}};
    spec_.outputs = {{"rows", DataType::kInt64, {-1}}};
  }
  const ModelSpec& spec() const override { return spec_; }
  int64_t PeakBytes(const BatchShape& shape) const override {
    return shape.rows * o_.bytes_per_row;
  }
  absl::StatusOr<std::unique_ptr<ModelBatch>> Prepare(
      absl::Span<const InferRequest* const> requests) override {
    auto batch = std::make_unique<Batch>(this);
    for (const InferRequest* r : requests) {
      batch->rows.push_back(RequestBatchSize(*r));
      std::lock_guard<std::mutex> lock(mu_);
      order_.push_back(r->id);
    }
    return std::unique_ptr<ModelBatch>(std::move(batch));
  }
  std::vector<std::string> order() const {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }
  int64_t max_held_bytes() const { return max_held_; }

 private:
  struct Batch final : ModelBatch {
    explicit Batch(ProbeModel* m) : model(m) {}
    ~Batch() override { model->held_ -= held; }
    ProbeModel* model;
    std::vector<int64_t> rows;
    int64_t held = 0;
    absl::Status Upload(Stream*) override {
      int64_t total = 0;
      for (int64_t r : rows) total += r;
      held = total * model->o_.bytes_per_row;
      const int64_t now = model->held_ += held;
      int64_t prev = model->max_held_.load();
      while (now > prev && !model->max_held_.compare_exchange_weak(prev, now)) {
      }
      if (model->o_.oom_above_rows > 0 && total > model->o_.oom_above_rows) {
        return absl::ResourceExhaustedError("simulated out of memory");
      }
      return absl::OkStatus();
    }
    absl::Status Compute(Stream*) override {
      absl::SleepFor(model->o_.compute_time);
      return absl::OkStatus();
    }
    absl::Status Download(Stream*) override { return absl::OkStatus(); }
    absl::Status Finish(absl::Span<InferResponse* const> responses) override {
      for (size_t i = 0; i < responses.size(); ++i) {
        responses[i]->outputs.push_back(testing::Int64Scalar("rows", rows[i]));
      }
      return absl::OkStatus();
    }
  };

  const Options o_;
  ModelSpec spec_;
  mutable std::mutex mu_;
  std::vector<std::string> order_;
  std::atomic<int64_t> held_{0};
  std::atomic<int64_t> max_held_{0};
};

InferRequest Probe(const std::string& id, int64_t rows = 1, int64_t len = 3) {
  InferRequest r;
  r.model_name = "probe";
  r.id = id;
  Tensor t;
  t.name = "input_ids";
  t.dtype = DataType::kInt64;
  t.shape = {rows, len};
  t.data.assign(rows * len * sizeof(int64_t), '\0');
  r.inputs.push_back(std::move(t));
  return r;
}

std::unique_ptr<Engine> CpuEngine(int max_in_flight = 3) {
  EngineOptions o;
  o.device = "cpu";
  o.pipeline.max_in_flight = max_in_flight;
  auto engine = Engine::Create(o);
  EXPECT_TRUE(engine.ok());
  return *std::move(engine);
}

QueueOptions Batching(int64_t max_batch, absl::Duration delay, int64_t max_queue = 1024) {
  QueueOptions q;
  q.max_batch_size = max_batch;
  q.max_queue_delay = delay;
  q.max_queue_size = max_queue;
  return q;
}

TEST(EngineTest, UnknownModelIsNotFound) {
  auto engine = CpuEngine();
  EXPECT_THAT(engine->Infer(Ids("nope", {1})),
              StatusIs(absl::StatusCode::kNotFound, "unknown model 'nope'; loaded models: (none)"));
}

TEST(EngineTest, AddModelRejectsDuplicatesAndBadOptions) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(std::make_unique<FlakyModel>(0), Batching(4, absl::ZeroDuration())),
              IsOk());
  EXPECT_THAT(engine->AddModel(std::make_unique<FlakyModel>(0), Batching(4, absl::ZeroDuration())),
              StatusIs(absl::StatusCode::kAlreadyExists, "model 'flaky' is already loaded"));
  auto other = std::make_unique<FlakyModel>(0);
  EXPECT_THAT(engine->AddModel(std::move(other), Batching(0, absl::ZeroDuration())),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_batch_size must be >= 1"));
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
  ASSERT_THAT(engine->AddModel(std::make_unique<FlakyModel>(1), Batching(4, absl::ZeroDuration())),
              IsOk());
  EXPECT_THAT(
      engine->Infer(Ids("flaky", {1, 2})),
      StatusIs(absl::StatusCode::kInternal, "model 'flaky' failed: simulated kernel failure"));
  auto r = engine->Infer(Ids("flaky", {1, 2, 3, 4}, 2));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(*r->outputs[0].as<int64_t>(), 2);
}

TEST(EngineTest, ModelExceptionIsInternalAndServingContinues) {
  auto engine = CpuEngine();
  auto model = std::make_unique<FlakyModel>(0);
  FlakyModel* flaky = model.get();
  ASSERT_THAT(engine->AddModel(std::move(model), Batching(4, absl::ZeroDuration())), IsOk());
  flaky->ThrowNext();  // no request is in flight: the engine's worker is idle
  EXPECT_THAT(engine->Infer(Ids("flaky", {1})),
              StatusIs(absl::StatusCode::kInternal, "exception: simulated exception"));
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
  auto model = std::make_unique<FlakyModel>(0);
  FlakyModel* flaky = model.get();
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
  EXPECT_THAT(reason, ::testing::HasSubstr("simulated cudaErrorIllegalAddress"));
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
  ASSERT_THAT(engine->AddModel(std::make_unique<FlakyModel>(0), Batching(4, absl::ZeroDuration())),
              IsOk());
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
  ProbeModel::Options slow;
  slow.compute_time = absl::Seconds(2);
  ASSERT_THAT(
      engine->AddModel(std::make_unique<ProbeModel>(slow), Batching(1, absl::ZeroDuration())),
      IsOk());
  ASSERT_THAT(
      engine->AddModel(std::make_unique<IdentityModel>("echo"), Batching(4, absl::ZeroDuration())),
      IsOk());
  std::promise<absl::Time> probe_done;
  engine->Submit(Probe("slow"), [&](absl::StatusOr<InferResponse> r) {
    EXPECT_THAT(r, IsOk());
    probe_done.set_value(absl::Now());
  });
  absl::SleepFor(absl::Milliseconds(200));  // the probe holds the only pipeline slot
  InferRequest echo = Probe("echo");
  echo.model_name = "echo";
  auto answer = engine->Infer(std::move(echo));
  const absl::Time echoed = absl::Now();
  ASSERT_THAT(answer, IsOk());
  EXPECT_EQ(answer->outputs.at(0).name, "output_ids");
  EXPECT_LT(echoed, probe_done.get_future().get()) << "answered after the pipeline's batch";
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

// Collects results of asynchronous submits.
struct Results {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, absl::Status> status;
  Engine::DoneCallback For(const std::string& id) {
    return [this, id](absl::StatusOr<InferResponse> r) {
      std::lock_guard<std::mutex> lock(mu);
      status[id] = r.status();
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return status.size() >= n; });
  }
};

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

TEST(EngineLimitsTest, EachLimitIsEnforcedWithItsNameAndServingContinues) {
  auto engine = CpuEngine();
  RequestLimits limits;
  limits.max_client_batch_size = 4;
  limits.max_input_length = 10;
  limits.max_request_tokens = 24;
  limits.max_tensor_elements = 40;
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration()), limits),
              IsOk());
  EXPECT_THAT(engine->Infer(Probe("rows", 5, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "batch dimension 5, over the limit of 4 per request of model 'probe' "
                       "(request_limits.max_client_batch_size)"));
  EXPECT_THAT(engine->Infer(Probe("long", 1, 11)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input has 11 tokens per sequence, over the limit of 10 of model 'probe' "
                       "(request_limits.max_input_length)"));
  EXPECT_THAT(engine->Infer(Probe("tokens", 3, 9)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "request has 3 sequences of 9 tokens = 27 tokens, over the limit of 24"));
  // A declared shape far beyond the data is refused on the shape alone,
  // without overflow, before the spec checks look at the bytes.
  InferRequest huge = Probe("huge", 1, 3);
  huge.inputs[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_THAT(engine->Infer(std::move(huge)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "over the limit of 40 elements per tensor of model 'probe' "
                       "(request_limits.max_tensor_elements)"));
  // Within every limit; a request over max_batch_size (2) is still split.
  EXPECT_THAT(engine->Infer(Probe("ok", 4, 6)), IsOk());
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.rejected_over_limit, 4u);
  EXPECT_EQ(st.rejected_invalid, 0u);
  EXPECT_EQ(st.request_splits, 1u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kInvalidArgument), 4u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kOk), 1u) << "a split request counts once";
}

TEST(EngineLimitsTest, TextBytesAreLimitedBeforeTokenization) {
  auto engine = CpuEngine();
  RequestLimits limits;
  limits.max_text_bytes = 64;
  EmbedPoolOptions o;
  ASSERT_THAT(engine->AddModel(*EmbedPoolModel::Create(o, engine->context()),
                               Batching(8, absl::ZeroDuration()), limits),
              IsOk());
  InferRequest r;
  r.model_name = "embed_pool";
  Tensor text;
  text.name = "text";
  text.dtype = DataType::kBytes;
  text.shape = {2};
  AppendBytesElement(std::string(40, 'a'), &text.data);
  AppendBytesElement(std::string(40, 'b'), &text.data);
  r.inputs.push_back(std::move(text));
  EXPECT_THAT(engine->Infer(std::move(r)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "request has 88 bytes of text (BYTES inputs), over the limit of 64 of "
                       "model 'embed_pool' (request_limits.max_text_bytes)"));
}

TEST(EngineLimitsTest, NonPositiveLimitsAreRefused) {
  auto engine = CpuEngine();
  RequestLimits limits;
  limits.max_request_tokens = 0;
  EXPECT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration()), limits),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "request_limits.max_request_tokens must be >= 1, got 0"));
}

TEST(EngineStatsTest, HistogramsPerLengthBucketCountEveryRequestAndBatch) {
  auto engine = CpuEngine();
  QueueOptions q = Batching(8, absl::Milliseconds(50));
  q.length_buckets = {4, 16};
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}), q), IsOk());
  Results results;
  for (int i = 0; i < 6; ++i)
    engine->Submit(Probe(absl::StrCat("s", i), 1, 3), results.For(absl::StrCat("s", i)));
  for (int i = 0; i < 3; ++i)
    engine->Submit(Probe(absl::StrCat("l", i), 2, 12), results.For(absl::StrCat("l", i)));
  ASSERT_TRUE(results.WaitFor(9));
  const ModelStats st = *engine->GetModelStats("probe");
  ASSERT_EQ(st.buckets.size(), 2u);
  EXPECT_EQ(st.buckets[0].max_length, 4);
  EXPECT_EQ(st.buckets[1].max_length, 16);
  EXPECT_EQ(st.buckets[0].request_seconds.count(), 6u);
  EXPECT_EQ(st.buckets[1].request_seconds.count(), 3u);
  EXPECT_EQ(st.buckets[0].queue_seconds.count(), 6u);
  EXPECT_EQ(st.buckets[1].queue_seconds.count(), 3u);
  // Rows per batch add up to the rows sent; one compute observation a batch.
  EXPECT_DOUBLE_EQ(st.buckets[0].batch_rows.sum(), 6.0);
  EXPECT_DOUBLE_EQ(st.buckets[1].batch_rows.sum(), 6.0);
  EXPECT_EQ(st.buckets[0].compute_seconds.count() + st.buckets[1].compute_seconds.count(),
            st.execution_count);
  // Every sequence of a bucket has the same length here: no padding.
  EXPECT_DOUBLE_EQ(st.buckets[0].padding_efficiency.Quantile(0.5) > 0.95, true);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kOk), 9u);
  uint64_t phases = 0;
  for (const auto& [size, p] : st.batch_stats) phases += p.compute_input.count;
  EXPECT_EQ(phases, st.execution_count);
  EXPECT_EQ(st.compute_output.count, 9u);
  EXPECT_EQ(*engine->GetQueueDepths("probe"), (std::vector<int64_t>{0, 0}));
}

TEST(EngineStatsTest, ASplitRequestIsCountedOnceWithItsPiecesSummed) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration())),
              IsOk());
  ASSERT_THAT(engine->Infer(Probe("whole", 5, 3)), IsOk());  // pieces of 2, 2 and 1 rows
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.request_splits, 1u);
  EXPECT_EQ(st.inference_count, 5u) << "rows";
  EXPECT_GE(st.execution_count, 3u);
  for (const DurationStat* d :
       {&st.success, &st.queue, &st.compute_input, &st.compute_infer, &st.compute_output}) {
    EXPECT_EQ(d->count, 1u) << "one client request";
  }
  EXPECT_EQ(st.fail.count, 0u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kOk), 1u);
  EXPECT_EQ(st.buckets[0].request_seconds.count(), 1u);
  EXPECT_EQ(st.buckets[0].queue_seconds.count(), 1u);
  EXPECT_EQ(st.buckets[0].compute_seconds.count(), st.execution_count);
}

TEST(EngineStatsTest, QueueAndComputePhasesAddUpToAtMostTheRequestTime) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(
                                   ProbeModel::Options{.compute_time = absl::Milliseconds(2)}),
                               Batching(4, absl::Milliseconds(1))),
              IsOk());
  Results results;
  for (int i = 0; i < 12; ++i) {
    engine->Submit(Probe(absl::StrCat(i)), results.For(absl::StrCat(i)));
  }
  ASSERT_TRUE(results.WaitFor(12));
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.success.count, 12u);
  EXPECT_EQ(st.queue.count, 12u);
  // The phases follow one another (queue, then input, infer, output): they
  // never overlap, so they sum to no more than the end-to-end time.
  EXPECT_LE(st.queue.ns + st.compute_input.ns + st.compute_infer.ns + st.compute_output.ns,
            st.success.ns);
  EXPECT_GE(st.compute_infer.ns, 12u * 2'000'000u) << "each request's batch computed >= 2 ms";
}

TEST(EngineStatsTest, FailedRequestsCountOnlyAsFailures) {
  auto engine = CpuEngine();
  ASSERT_THAT(engine->AddModel(std::make_unique<FlakyModel>(1), Batching(4, absl::ZeroDuration())),
              IsOk());
  EXPECT_THAT(engine->Infer(Ids("flaky", {1, 2})),
              StatusIs(absl::StatusCode::kInternal, "simulated kernel failure"));
  ASSERT_THAT(engine->Infer(Ids("flaky", {1, 2})), IsOk());
  const ModelStats st = *engine->GetModelStats("flaky");
  EXPECT_EQ(st.fail.count, 1u);
  EXPECT_EQ(st.success.count, 1u);
  // Triton's meaning: queue and compute times are those of successes.
  for (const DurationStat* d :
       {&st.queue, &st.compute_input, &st.compute_infer, &st.compute_output}) {
    EXPECT_EQ(d->count, 1u);
  }
  EXPECT_EQ(st.execution_count, 1u);
  EXPECT_EQ(st.buckets[0].queue_seconds.count(), 1u);
}

TEST(EngineStatsTest, ASplitRequestWithARefusedPieceIsRefusedOnceAndItsOtherPiecesDropped) {
  auto engine = CpuEngine(/*max_in_flight=*/1);
  auto model = std::make_unique<ProbeModel>(ProbeModel::Options{absl::Milliseconds(300)});
  ProbeModel* probe = model.get();
  // One queued request at most: of the split request's three pieces, the
  // first is queued behind the running blocker and the other two refused.
  ASSERT_THAT(engine->AddModel(std::move(model), Batching(2, absl::ZeroDuration(), 1)), IsOk());
  Results results;
  engine->Submit(Probe("blocker"), results.For("blocker"));
  while (probe->order().empty()) absl::SleepFor(absl::Milliseconds(1));  // blocker runs
  engine->Submit(Probe("split", 5), results.For("split"));
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_THAT(results.status["blocker"], IsOk());
  EXPECT_THAT(results.status["split"], StatusIs(absl::StatusCode::kUnavailable, "full"));
  EXPECT_EQ(probe->order(), std::vector<std::string>{"blocker"})
      << "the queued piece of a refused request is not run";
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.rejected_queue_full, 1u) << "one client request, refused once";
  EXPECT_EQ(st.cancelled, 0u);
  EXPECT_EQ(st.fail.count, 1u);
  EXPECT_EQ(st.requests_by_code.at(absl::StatusCode::kUnavailable), 1u);
  EXPECT_EQ(st.success.count, 1u);
}

TEST(EngineLimitsTest, TokenLimitsApplyToTheDeclaredShapeBeforeDecoding) {
  auto engine = CpuEngine();
  RequestLimits limits;
  limits.max_input_length = 10;
  limits.max_request_tokens = 24;
  ASSERT_THAT(engine->AddModel(std::make_unique<ProbeModel>(ProbeModel::Options{}),
                               Batching(2, absl::ZeroDuration()), limits),
              IsOk());
  // Shapes only, no contents: what a front end checks before decoding.
  const std::vector<int64_t> long_seq = {1, 11}, many = {3, 9}, fine = {2, 10}, bad = {-1, 99};
  EXPECT_THAT(engine->CheckDeclared("probe", {{"input_ids", long_seq}}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input has 11 tokens per sequence, over the limit of 10 of model 'probe' "
                       "(request_limits.max_input_length)"));
  EXPECT_THAT(engine->CheckDeclared("probe", {{"input_ids", many}}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "request has 3 sequences of 9 tokens = 27 tokens, over the limit of 24 of "
                       "model 'probe' (request_limits.max_request_tokens)"));
  EXPECT_THAT(engine->CheckDeclared("probe", {{"input_ids", fine}}, 0), IsOk());
  // A negative dimension is the decoder's to name; the other inputs are
  // still checked.
  EXPECT_THAT(engine->CheckDeclared("probe", {{"input_ids", bad}, {"other", long_seq}}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_input_length"));
  const ModelStats st = *engine->GetModelStats("probe");
  EXPECT_EQ(st.rejected_over_limit, 3u);
  EXPECT_EQ(st.fail.count, 3u);
  engine->RecordRefused("probe", absl::InvalidArgumentError("undecodable"));
  engine->RecordRefused("unknown", absl::InvalidArgumentError("undecodable"));
  const ModelStats after = *engine->GetModelStats("probe");
  EXPECT_EQ(after.rejected_invalid, 1u);
  EXPECT_EQ(after.fail.count, 4u);
  EXPECT_EQ(after.requests_by_code.at(absl::StatusCode::kInvalidArgument), 4u);
}

}  // namespace
}  // namespace infer
