#include "server/engine.h"

#include <algorithm>
#include <exception>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "batching/dynamic_batcher.h"
#include "runtime/status_macros.h"

namespace infer {

struct Engine::InferTask {
  InferRequest request;
  DoneCallback done;
  absl::Time arrival;
  int64_t rows = 0;
  int64_t size() const { return rows; }
};

struct Engine::ModelEntry {
  std::unique_ptr<Model> model;
  QueueOptions batching;

  mutable std::mutex stats_mu;
  ModelStats stats ABSL_GUARDED_BY(stats_mu);

  // Declared last so it is destroyed (drained and joined) first.
  std::unique_ptr<DynamicBatcher<InferTask>> batcher;
};

namespace {

uint64_t WallMillis() { return static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())); }

// Keeps the requested outputs (all when none were named), in request order.
void SelectOutputs(const std::vector<std::string>& requested, InferResponse* response) {
  if (requested.empty()) return;
  std::vector<Tensor> selected;
  selected.reserve(requested.size());
  for (const std::string& name : requested) {
    for (Tensor& t : response->outputs) {
      if (t.name == name) {
        selected.push_back(std::move(t));
        break;
      }
    }
  }
  response->outputs = std::move(selected);
}

}  // namespace

Engine::Engine(std::unique_ptr<DeviceOwnershipLock> lock, std::unique_ptr<Device> device,
               std::unique_ptr<CachingAllocator> allocator,
               std::unique_ptr<HostStagingPool> staging, std::unique_ptr<DevicePipeline> pipeline,
               Clock* clock)
    : lock_(std::move(lock)),
      device_(std::move(device)),
      allocator_(std::move(allocator)),
      staging_(std::move(staging)),
      pipeline_(std::move(pipeline)),
      clock_(clock != nullptr ? clock : RealClock()) {}

Engine::~Engine() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  const std::string spec = options.device.empty() ? DefaultDeviceSpec() : options.device;
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice(spec));
  std::unique_ptr<DeviceOwnershipLock> lock;
  if (const DeviceInfo& info = device->info(); info.kind == DeviceKind::kCuda) {
    INFER_ASSIGN_OR_RETURN(
        lock, DeviceOwnershipLock::Acquire(
                  info.uuid, absl::StrCat(device->spec(), " (", info.name, ", ", info.uuid, ")"),
                  options.device_lock_dir));
  }
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<CachingAllocator> allocator,
                         CachingAllocator::Create(device.get(), options.memory));
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<HostStagingPool> staging,
                         HostStagingPool::Create(device.get(), options.staging));
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<DevicePipeline> pipeline,
                         DevicePipeline::Create(device.get(), options.pipeline));
  return std::unique_ptr<Engine>(new Engine(std::move(lock), std::move(device),
                                            std::move(allocator), std::move(staging),
                                            std::move(pipeline), options.clock));
}

absl::Status Engine::AddModel(std::unique_ptr<Model> model, const QueueOptions& batching) {
  if (model == nullptr) return absl::InvalidArgumentError("model is null");
  const std::string name = model->spec().name;
  if (name.empty()) return absl::InvalidArgumentError("model has an empty name");
  INFER_RETURN_IF_ERROR(ValidateQueueOptions(batching));
  auto entry = std::make_shared<ModelEntry>();
  entry->model = std::move(model);
  entry->batching = batching;
  BatcherOptions options;
  options.queue = batching;
  options.clock = clock_;
  ModelEntry* raw = entry.get();
  // The batcher is owned by the entry and joined before the entry dies, so
  // `this` and `raw` outlive every call of the process function.
  INFER_ASSIGN_OR_RETURN(entry->batcher,
                         DynamicBatcher<InferTask>::Create(
                             options, [this, raw](std::vector<std::unique_ptr<InferTask>> batch) {
                               ExecuteBatch(raw, std::move(batch));
                             }));
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return absl::UnavailableError("the engine is shutting down");
  if (!models_.emplace(name, std::move(entry)).second) {
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' is already loaded"));
  }
  return absl::OkStatus();
}

std::shared_ptr<Engine::ModelEntry> Engine::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

absl::Status Engine::NotFound(const std::string& name) const {
  std::vector<std::string> names = ModelNames();
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "'; loaded models: ",
                                          names.empty() ? "(none)" : absl::StrJoin(names, ", ")));
}

void Engine::Submit(InferRequest request, DoneCallback done) {
  const absl::Time arrival = clock_->Now();
  std::shared_ptr<ModelEntry> entry = Find(request.model_name);
  if (entry == nullptr) {
    done(NotFound(request.model_name));
    return;
  }
  auto fail = [&](absl::Status status) {
    {
      std::lock_guard<std::mutex> lock(entry->stats_mu);
      entry->stats.fail.Add(clock_->Now() - arrival);
    }
    done(std::move(status));
  };
  absl::Status status = ValidateRequestAgainstSpec(entry->model->spec(), request);
  if (status.ok()) status = entry->model->ValidateRequest(request);
  const int64_t rows = RequestBatchSize(request);
  if (status.ok() && rows > entry->batching.max_batch_size) {
    status = absl::InvalidArgumentError(
        absl::StrCat("request batch size ", rows, " exceeds max_batch_size ",
                     entry->batching.max_batch_size, " of model '", request.model_name, "'"));
  }
  if (!status.ok()) {
    fail(std::move(status));
    return;
  }
  auto task = std::make_unique<InferTask>();
  task->request = std::move(request);
  task->done = std::move(done);
  task->arrival = arrival;
  task->rows = rows;
  status = entry->batcher->Schedule(&task);
  if (!status.ok()) {
    done = std::move(task->done);  // still ours: the batcher refused it
    fail(std::move(status));
  }
}

absl::StatusOr<InferResponse> Engine::Infer(InferRequest request) {
  std::promise<absl::StatusOr<InferResponse>> promise;
  std::future<absl::StatusOr<InferResponse>> result = promise.get_future();
  Submit(std::move(request),
         [&promise](absl::StatusOr<InferResponse> r) { promise.set_value(std::move(r)); });
  return result.get();
}

namespace {

// A model must not take the process down: an exception fails only its batch.
template <typename Fn>
auto Guarded(Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("exception: ", e.what()));
  }
}

}  // namespace

// A prepared batch travelling through the device pipeline.
class Engine::BatchJob final : public PipelineJob {
 public:
  BatchJob(Engine* engine, ModelEntry* entry, std::vector<std::unique_ptr<InferTask>> tasks,
           std::unique_ptr<ModelBatch> batch)
      : engine_(engine), entry_(entry), tasks_(std::move(tasks)), batch_(std::move(batch)) {}

  absl::Status Upload(Stream* stream) override {
    start_ = engine_->clock_->Now();  // the batch reaches the device
    return Guarded([&] { return batch_->Upload(stream); });
  }
  absl::Status Compute(Stream* stream) override {
    return Guarded([&] { return batch_->Compute(stream); });
  }
  absl::Status Download(Stream* stream) override {
    return Guarded([&] { return batch_->Download(stream); });
  }
  void Complete(absl::Status status) override {
    std::vector<InferResponse> responses(tasks_.size());
    if (status.ok()) {
      std::vector<InferResponse*> ptrs;
      for (InferResponse& r : responses) ptrs.push_back(&r);
      status = Guarded([&] { return batch_->Finish(ptrs); });
    }
    batch_.reset();  // the device work is done: release its buffers now
    if (start_ == absl::InfinitePast()) start_ = engine_->clock_->Now();
    engine_->FinishBatch(entry_, tasks_, responses, std::move(status), start_,
                         engine_->clock_->Now());
  }

 private:
  Engine* const engine_;     // outlives the pipeline's jobs (Shutdown drains)
  ModelEntry* const entry_;  // entries live as long as the engine
  std::vector<std::unique_ptr<InferTask>> tasks_;
  std::unique_ptr<ModelBatch> batch_;
  absl::Time start_ = absl::InfinitePast();
};

void Engine::ExecuteBatch(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>> batch) {
  std::vector<const InferRequest*> requests;
  requests.reserve(batch.size());
  for (const auto& task : batch) requests.push_back(&task->request);
  const absl::Time start = clock_->Now();
  absl::StatusOr<std::unique_ptr<ModelBatch>> prepared =
      Guarded([&]() -> absl::StatusOr<std::unique_ptr<ModelBatch>> {
        return entry->model->Prepare(requests);
      });
  if (!prepared.ok()) {
    std::vector<InferResponse> none(batch.size());
    FinishBatch(entry, batch, none, prepared.status(), start, clock_->Now());
    return;
  }
  std::unique_ptr<PipelineJob> job =
      std::make_unique<BatchJob>(this, entry, std::move(batch), *std::move(prepared));
  if (absl::Status s = pipeline_->Submit(&job); !s.ok()) {
    job->Complete(std::move(s));  // refused (shutting down): still ours to answer
  }
}

void Engine::FinishBatch(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>>& tasks,
                         std::vector<InferResponse>& responses, absl::Status status,
                         absl::Time start, absl::Time end) {
  int64_t rows = 0;
  for (const auto& task : tasks) rows += task->rows;
  if (!status.ok()) {
    // Running out of the memory budget keeps its code (RESOURCE_EXHAUSTED:
    // the batch needed more than the budget allows); anything else is the
    // model's failure (INTERNAL). Either way the engine keeps serving.
    const absl::StatusCode code = status.code() == absl::StatusCode::kResourceExhausted
                                      ? absl::StatusCode::kResourceExhausted
                                      : absl::StatusCode::kInternal;
    status = absl::Status(
        code, absl::StrCat("model '", entry->model->spec().name, "' failed: ", status.message()));
  }
  {
    std::lock_guard<std::mutex> lock(entry->stats_mu);
    ModelStats& s = entry->stats;
    if (status.ok()) {
      ++s.execution_count;
      s.batch_compute_infer[static_cast<uint64_t>(rows)].Add(end - start);
      s.inference_count += static_cast<uint64_t>(rows);
      s.last_inference_ms = WallMillis();
    }
    for (const auto& task : tasks) {
      s.queue.Add(start - task->arrival);
      if (status.ok()) {
        s.compute_infer.Add(end - start);
        s.success.Add(end - task->arrival);
      } else {
        s.fail.Add(end - task->arrival);
      }
    }
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    InferTask& task = *tasks[i];
    if (!status.ok()) {
      task.done(status);
      continue;
    }
    InferResponse& r = responses[i];
    r.model_name = task.request.model_name;
    r.id = task.request.id;
    SelectOutputs(task.request.requested_outputs, &r);
    task.done(std::move(r));
  }
}

absl::StatusOr<const ModelSpec*> Engine::GetModelSpec(const std::string& name) const {
  std::shared_ptr<ModelEntry> entry = Find(name);
  if (entry == nullptr) return NotFound(name);
  return &entry->model->spec();  // models are never removed while the engine lives
}

absl::StatusOr<ModelStats> Engine::GetModelStats(const std::string& name) const {
  std::shared_ptr<ModelEntry> entry = Find(name);
  if (entry == nullptr) return NotFound(name);
  std::lock_guard<std::mutex> lock(entry->stats_mu);
  return entry->stats;
}

absl::StatusOr<QueueOptions> Engine::GetBatchingOptions(const std::string& name) const {
  std::shared_ptr<ModelEntry> entry = Find(name);
  if (entry == nullptr) return NotFound(name);
  return entry->batching;
}

std::vector<std::string> Engine::ModelNames() const {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, entry] : models_) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool Engine::ModelReady(const std::string& name) const { return Ready() && Find(name) != nullptr; }

bool Engine::Ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !shutting_down_;
}

void Engine::Shutdown() {
  std::vector<std::shared_ptr<ModelEntry>> entries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
    for (const auto& [name, entry] : models_) entries.push_back(entry);
  }
  // Batchers first (their last batches go into the pipeline), then the
  // pipeline (which answers them).
  for (const auto& entry : entries) entry->batcher->Shutdown();
  pipeline_->Shutdown();
}

}  // namespace infer
