#include "engine/engine.h"

#include <algorithm>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/lifecycle.h"
#include "engine/serial_worker.h"
#include "engine/served_model.h"
#include "runtime/compute_stream.h"
#include "runtime/device_lock.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"

namespace infer {

Engine::Engine(std::unique_ptr<DeviceOwnershipLock> lock, std::unique_ptr<Device> device,
               std::unique_ptr<CachingAllocator> allocator,
               std::unique_ptr<HostStagingPool> staging, std::unique_ptr<DevicePipeline> pipeline,
               Clock* clock, std::function<void(const absl::Status&)> on_device_lost)
    : lock_(std::move(lock)),
      device_(std::move(device)),
      allocator_(std::move(allocator)),
      staging_(std::move(staging)),
      pipeline_(std::move(pipeline)),
      lifecycle_(std::make_unique<EngineLifecycle>(std::move(on_device_lost))),
      clock_(clock != nullptr ? clock : RealClock()) {}

Engine::~Engine() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  const std::string spec = options.device.empty() ? DefaultDeviceSpec() : options.device;
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<Device> device,
                         options.create_device ? options.create_device(spec, options.device_options)
                                               : CreateDevice(spec, options.device_options));
  if (device == nullptr) return absl::InternalError("create_device returned no device");
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
  PipelineOptions pipeline_options = options.pipeline;
  pipeline_options.allocator = allocator.get();
  // On the CPU copies are memcpy on the cores that compute: one thread runs
  // a batch's three stages, two hand-offs less.
  if (device->info().kind == DeviceKind::kCpu) pipeline_options.fuse_stages = true;
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<DevicePipeline> pipeline,
                         DevicePipeline::Create(device.get(), pipeline_options));
  if (!(options.memory_headroom_fraction >= 0.0 && options.memory_headroom_fraction < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory headroom fraction must be in [0, 1), got ", options.memory_headroom_fraction));
  }
  const int64_t budget = allocator->budget_bytes();
  std::unique_ptr<Engine> engine(
      new Engine(std::move(lock), std::move(device), std::move(allocator), std::move(staging),
                 std::move(pipeline), options.clock, options.on_device_lost));
  engine->admission_ = std::make_unique<MemoryAdmission>(
      budget, static_cast<int64_t>(static_cast<double>(budget) * options.memory_headroom_fraction));
  engine->retry_worker_ = std::make_unique<SerialWorker>();
  INFER_ASSIGN_OR_RETURN(ComputeStream retry_stream,
                         ComputeStream::Create(engine->device_.get(), engine->allocator_.get()));
  engine->retry_stream_ = std::make_unique<ComputeStream>(std::move(retry_stream));
  // The compute streams' GEMM workspaces are held for good: not for batches.
  engine->admission_->AddWorkspaces(engine->pipeline_->workspace_bytes() +
                                    engine->retry_stream_->workspace_bytes());
  Engine* raw = engine.get();  // the pipeline is drained before the engine goes
  engine->pipeline_->set_on_room([raw] { raw->NotifyBatchers(); });
  return engine;
}

absl::Status Engine::AddModel(std::unique_ptr<Model> model, const QueueOptions& batching,
                              const RequestLimits& limits) {
  if (model == nullptr) return absl::InvalidArgumentError("model is null");
  const std::string name = model->spec().name;
  if (name.empty()) return absl::InvalidArgumentError("model has an empty name");
  INFER_RETURN_IF_ERROR(ValidateQueueOptions(batching));
  INFER_RETURN_IF_ERROR(ValidateRequestLimits(limits));
  ServingContext context;
  context.clock = clock_;
  context.device = device_.get();
  context.memory = admission_.get();
  context.pipeline = pipeline_.get();
  context.retry_worker = retry_worker_.get();
  context.retry_stream = retry_stream_.get();
  context.lifecycle = lifecycle_.get();
  context.notify_batchers = [this] { NotifyBatchers(); };
  INFER_ASSIGN_OR_RETURN(std::shared_ptr<ServedModel> served,
                         ServedModel::Create(std::move(model), batching, limits, context));
  std::lock_guard<std::mutex> lock(mu_);
  if (lifecycle_->ShuttingDown()) return absl::UnavailableError("the engine is shutting down");
  const int64_t weights = served->model().WeightBytes();
  if (aliases_.count(name) != 0 || !models_.emplace(name, std::move(served)).second) {
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' is already loaded"));
  }
  admission_->AddWeights(weights);
  return absl::OkStatus();
}

std::shared_ptr<ServedModel> Engine::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    auto alias = aliases_.find(name);
    if (alias != aliases_.end()) it = models_.find(alias->second);
  }
  return it == models_.end() ? nullptr : it->second;
}

absl::Status Engine::AddAlias(const std::string& alias, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (models_.find(name) == models_.end()) {
    return absl::NotFoundError(absl::StrCat("no model ", Quote(name), " to name ", Quote(alias)));
  }
  if (models_.find(alias) != models_.end() || !aliases_.emplace(alias, name).second) {
    return absl::AlreadyExistsError(absl::StrCat("the name ", Quote(alias), " is taken"));
  }
  return absl::OkStatus();
}

absl::Status Engine::NotFound(const std::string& name) const {
  std::vector<std::string> names = ModelNames();
  return absl::NotFoundError(absl::StrCat("unknown model ", Quote(name), "; loaded models: ",
                                          names.empty() ? "(none)" : absl::StrJoin(names, ", ")));
}

void Engine::Submit(RequestSource& source, DoneCallback done) {
  const absl::Time arrival = clock_->Now();
  std::shared_ptr<ServedModel> served = Find(source.model_name());
  if (served == nullptr) {
    done(NotFound(source.model_name()));
    return;
  }
  // Served models live as long as the engine: no reference is kept.
  served->Submit(source, arrival, std::move(done));
}

void Engine::Submit(InferRequest request, DoneCallback done) {
  InferRequestSource source(std::move(request));
  Submit(source, std::move(done));
}

absl::Status Engine::CountRefusal(const std::string& name, const absl::Status& refusal,
                                  RefusalReason reason) {
  std::shared_ptr<ServedModel> served = Find(name);
  if (served == nullptr) return NotFound(name);
  served->CountRefusal(refusal, reason);
  return absl::OkStatus();
}

absl::StatusOr<InferResponse> Engine::Infer(InferRequest request) {
  std::promise<absl::StatusOr<InferResponse>> promise;
  std::future<absl::StatusOr<InferResponse>> result = promise.get_future();
  Submit(std::move(request),
         [&promise](absl::StatusOr<InferResponse> r) { promise.set_value(std::move(r)); });
  return result.get();
}

absl::StatusOr<const ModelSpec*> Engine::GetModelSpec(const std::string& name) const {
  std::shared_ptr<ServedModel> served = Find(name);
  if (served == nullptr) return NotFound(name);
  return &served->model().spec();  // models are never removed while the engine lives
}

absl::StatusOr<const Model*> Engine::GetModel(const std::string& name) const {
  std::shared_ptr<ServedModel> served = Find(name);
  if (served == nullptr) return NotFound(name);
  return &served->model();  // models are never removed while the engine lives
}

int64_t Engine::ActivationCapacityBytes() const { return admission_->Capacity(); }

absl::StatusOr<ModelStats> Engine::GetModelStats(const std::string& name) const {
  std::shared_ptr<ServedModel> served = Find(name);
  if (served == nullptr) return NotFound(name);
  return served->Stats();
}

absl::StatusOr<QueueOptions> Engine::GetBatchingOptions(const std::string& name) const {
  std::shared_ptr<ServedModel> served = Find(name);
  if (served == nullptr) return NotFound(name);
  return served->batching();
}

absl::StatusOr<RequestLimits> Engine::GetRequestLimits(const std::string& name) const {
  std::shared_ptr<ServedModel> served = Find(name);
  if (served == nullptr) return NotFound(name);
  return served->limits();
}

absl::StatusOr<std::vector<int64_t>> Engine::GetQueueDepths(const std::string& name) const {
  std::shared_ptr<ServedModel> served = Find(name);
  if (served == nullptr) return NotFound(name);
  return served->QueueDepths();
}

Engine::MemoryAdmissionStats Engine::GetMemoryAdmissionStats() const { return admission_->Stats(); }

std::vector<std::string> Engine::ModelNames() const {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, served] : models_) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool Engine::ModelReady(const std::string& name) const { return Ready() && Find(name) != nullptr; }

bool Engine::Ready() const { return lifecycle_->Ready(); }

bool Engine::Accepting() const { return lifecycle_->Accepting(); }

void Engine::BeginDrain() { lifecycle_->BeginDrain(); }

Engine::DeviceHealth Engine::GetDeviceHealth() const { return lifecycle_->Health(); }

void Engine::NotifyBatchers() {
  std::vector<std::shared_ptr<ServedModel>> models;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, served] : models_) models.push_back(served);
  }
  for (const auto& served : models) served->Notify();
}

void Engine::Shutdown() {
  std::vector<std::shared_ptr<ServedModel>> models;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lifecycle_->BeginShutdown();
    for (const auto& [name, served] : models_) models.push_back(served);
  }
  // Batchers first (their last batches go into the pipeline), then the
  // pipeline (which answers them).
  for (const auto& served : models) served->Shutdown();
  pipeline_->Shutdown();
  if (retry_worker_) retry_worker_->Shutdown();  // after the pipeline: its last batches may retry
}

}  // namespace infer
