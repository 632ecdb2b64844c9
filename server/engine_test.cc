#include "server/engine.h"

#include <atomic>
#include <thread>

#include "models/embed_pool.h"
#include "tests/testing/notification.h"
#include "tests/testing/status_matchers.h"

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
    for (const InferRequest* r : requests) batch->rows.push_back(RequestBatchSize(*r));
    return std::unique_ptr<ModelBatch>(std::move(batch));
  }
  void ThrowNext() { throw_next_ = true; }

 private:
  struct Batch final : ModelBatch {
    bool fail = false;
    std::vector<int64_t> rows;
    absl::Status Upload(Stream*) override { return absl::OkStatus(); }
    absl::Status Compute(Stream*) override {
      return fail ? absl::InternalError("simulated kernel failure") : absl::OkStatus();
    }
    absl::Status Download(Stream*) override { return absl::OkStatus(); }
    absl::Status Finish(absl::Span<InferResponse* const> responses) override {
      for (size_t i = 0; i < responses.size(); ++i) {
        for (const char* name : {"rows", "unused"}) {
          Tensor t;
          t.name = name;
          t.dtype = DataType::kInt64;
          t.shape = {1};
          t.data.assign(reinterpret_cast<const char*>(&rows[i]), sizeof(int64_t));
          responses[i]->outputs.push_back(std::move(t));
        }
      }
      return absl::OkStatus();
    }
  };

  ModelSpec spec_;
  int failures_;
  std::atomic<bool> throw_next_{false};
};

std::unique_ptr<Engine> CpuEngine() {
  auto engine = Engine::Create({.device = "cpu"});
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
  for (const auto& [size, d] : stats.batch_compute_infer) {
    EXPECT_LE(size, 16u);
    executions += d.count;
  }
  EXPECT_EQ(executions, stats.execution_count);
  // Every batch went through the device pipeline and the caching allocator.
  EXPECT_EQ(engine->pipeline()->stats().completed, stats.execution_count);
  EXPECT_GT(engine->allocator()->stats().peak_allocated_bytes, 0);
  EXPECT_GT(engine->staging()->stats().reuses, 0u) << "staging buffers are reused";
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

}  // namespace
}  // namespace infer
