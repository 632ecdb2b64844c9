// Test doubles and helpers shared by the engine's tests (engine_test.cc,
// engine_scheduling_test.cc, engine_limits_stats_test.cc): a probe model
// that records its batches, the same behind the fault-injecting wrapper
// (Flaky), request builders and a CPU engine. Test-only.
#ifndef INFER_ENGINE_ENGINE_TEST_UTIL_H_
#define INFER_ENGINE_ENGINE_TEST_UTIL_H_

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "models/embed_pool/embed_pool.h"
#include "models/identity/identity.h"
#include "runtime/status_macros.h"
#include "tests/testing/faulty_model.h"
#include "tests/testing/notification.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"

namespace infer {
namespace testing_engine {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

inline InferRequest Ids(const std::string& model, std::vector<int64_t> ids, int64_t rows = 1) {
  InferRequest r;
  r.model_name = model;
  r.inputs.push_back(testing::Int64Matrix("input_ids", ids, rows));
  return r;
}

// A host-only model for scheduling tests: answers each request with its
// batch size ("rows", and "unused" too when asked), and can be told to be
// slow, to run out of memory above a row count, and to declare a memory
// model. Records the order in which requests
// (by id) ran, and the most memory its batches held at once.
class ProbeModel final : public Model {
 public:
  struct Options {
    absl::Duration compute_time = absl::ZeroDuration();
    int64_t oom_above_rows = 0;  // 0: never
    int64_t bytes_per_row = 0;   // PeakBytes; 0: no memory model
    std::string name = "probe";
    // When set, every Compute waits for it (after compute_time): a batch
    // that holds the device until the test lets it go.
    const testing::Notification* release = nullptr;
    // A second output, "unused", with the same values (for output selection).
    bool unused_output = false;
  };
  explicit ProbeModel(Options o) : o_(o) {
    spec_.name = o_.name;
    spec_.inputs = {{"input_ids", DataType::kInt64, {-1, -1}}};
    spec_.outputs = {{"rows", DataType::kInt64, {-1}}};
    if (o_.unused_output) spec_.outputs.push_back({"unused", DataType::kInt64, {-1}});
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
      if (model->o_.release != nullptr) model->o_.release->WaitForNotification();
      return absl::OkStatus();
    }
    absl::Status Download(Stream*) override { return absl::OkStatus(); }
    absl::Status Finish(absl::Span<InferResponse* const> responses) override {
      INFER_RETURN_IF_ERROR(testing::AnswerInt64Scalars("rows", rows, responses));
      if (!model->o_.unused_output) return absl::OkStatus();
      return testing::AnswerInt64Scalars("unused", rows, responses);
    }
  };

  const Options o_;
  ModelSpec spec_;
  mutable std::mutex mu_;
  std::vector<std::string> order_;
  std::atomic<int64_t> held_{0};
  std::atomic<int64_t> max_held_{0};
};

// The "flaky" model: a probe answering "rows" and "unused", behind the
// fault-injecting wrapper (tests/testing/faulty_model.h), whose first
// `failures` batches fail.
inline std::unique_ptr<testing::FaultyModel> Flaky(int failures) {
  ProbeModel::Options probe;
  probe.name = "flaky";
  probe.unused_output = true;
  testing::FaultyModelOptions faults;
  faults.fail_first_batches = failures;
  return std::make_unique<testing::FaultyModel>(std::make_unique<ProbeModel>(probe), faults);
}

inline InferRequest Probe(const std::string& id, int64_t rows = 1, int64_t len = 3) {
  InferRequest r = testing::IdsRequest("probe", rows, len);
  r.id = id;
  return r;
}

// `clock`: the engine's time (borrowed); null: real time.
inline std::unique_ptr<Engine> CpuEngine(int max_in_flight = 3, Clock* clock = nullptr) {
  EngineOptions o;
  o.device = "cpu";
  o.clock = clock;
  o.pipeline.max_in_flight = max_in_flight;
  auto engine = Engine::Create(o);
  EXPECT_TRUE(engine.ok());
  return *std::move(engine);
}

inline QueueOptions Batching(int64_t max_batch, absl::Duration delay, int64_t max_queue = 1024) {
  QueueOptions q;
  q.max_batch_size = max_batch;
  q.max_queue_delay = delay;
  q.max_queue_size = max_queue;
  return q;
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

// Adds a probe model (`batching`) whose batches hold the device until
// `release` is notified, and submits "blocker" to it; returns the probe once
// the blocker's batch runs, so that what is submitted next waits behind it
// (null, with a test failure, if the model cannot be added).
inline ProbeModel* AddProbeAndHoldTheDevice(Engine& engine, const QueueOptions& batching,
                                            const testing::Notification* release,
                                            Results& results) {
  ProbeModel::Options o;
  o.release = release;
  auto model = std::make_unique<ProbeModel>(o);
  ProbeModel* probe = model.get();
  if (absl::Status s = engine.AddModel(std::move(model), batching); !s.ok()) {
    ADD_FAILURE() << "AddModel: " << s;
    return nullptr;
  }
  engine.Submit(Probe("blocker"), results.For("blocker"));
  while (probe->order().empty()) absl::SleepFor(absl::Milliseconds(1));
  return probe;
}

}  // namespace testing_engine
}  // namespace infer

#endif  // INFER_ENGINE_ENGINE_TEST_UTIL_H_
