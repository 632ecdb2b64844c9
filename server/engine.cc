#include "server/engine.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "batching/dynamic_batcher.h"
#include "runtime/quote.h"
#include "runtime/status_macros.h"
#include "server/engine_internal.h"
#include "server/request_admission.h"
#include "server/request_split.h"
#include "server/serial_worker.h"

namespace infer {

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
  std::unique_ptr<Engine> engine(new Engine(std::move(lock), std::move(device),
                                            std::move(allocator), std::move(staging),
                                            std::move(pipeline), options.clock));
  engine->admission_ = std::make_unique<MemoryAdmission>(
      budget, static_cast<int64_t>(static_cast<double>(budget) * options.memory_headroom_fraction));
  engine->retry_worker_ = std::make_unique<SerialWorker>();
  INFER_ASSIGN_OR_RETURN(engine->retry_stream_,
                         ComputeStream::Create(engine->device_.get(), engine->allocator_.get()));
  // The compute streams' GEMM workspaces are held for good: not for batches.
  engine->admission_->AddWorkspaces(engine->pipeline_->workspace_bytes() +
                                    engine->retry_stream_.workspace_bytes());
  engine->on_device_lost_ = options.on_device_lost;
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
  auto entry = std::make_shared<ModelEntry>(std::move(model), batching, limits);
  // Released memory may let any model's waiting batch launch.
  entry->gate = std::make_unique<ModelMemoryGate>(entry->model.get(), admission_.get(),
                                                  [this] { NotifyBatchers(); });
  BatcherOptions options;
  options.queue = batching;
  options.clock = clock_;
  options.memory = entry->gate.get();
  if (entry->model->UsesDevice()) {
    options.can_launch = [this] { return pipeline_->HasRoom(); };
  } else {
    // Runs inline (ExecuteBatch): no pipeline room needed, and a batch
    // ready at once runs on the submitting thread (no hand-off at all).
    options.run_on_caller = true;
  }
  ModelEntry* raw = entry.get();
  // The batcher is owned by the entry and joined before the entry dies, so
  // `this` and `raw` outlive every call of the process function.
  INFER_ASSIGN_OR_RETURN(entry->batcher,
                         DynamicBatcher<InferTask>::Create(
                             options, [this, raw](DynamicBatcher<InferTask>::Batch batch) {
                               ExecuteBatch(raw, std::move(batch));
                             }));
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return absl::UnavailableError("the engine is shutting down");
  ModelEntry* added = entry.get();
  if (!models_.emplace(name, std::move(entry)).second) {
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' is already loaded"));
  }
  admission_->AddWeights(added->model->WeightBytes());
  return absl::OkStatus();
}

std::shared_ptr<Engine::ModelEntry> Engine::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

absl::Status Engine::NotFound(const std::string& name) const {
  std::vector<std::string> names = ModelNames();
  return absl::NotFoundError(absl::StrCat("unknown model ", Quote(name), "; loaded models: ",
                                          names.empty() ? "(none)" : absl::StrJoin(names, ", ")));
}

void Engine::Submit(InferRequest request, DoneCallback done) {
  const absl::Time arrival = clock_->Now();
  std::shared_ptr<ModelEntry> entry = Find(request.model_name);
  if (entry == nullptr) {
    done(NotFound(request.model_name));
    return;
  }
  // Refused before it is queued: counted under `reason` and answered.
  auto refuse = [&](absl::Status status, RefusalReason reason) {
    entry->stats.RecordRefusal(status, reason, clock_->Now() - arrival);
    done(std::move(status));
  };
  if (!Accepting()) {
    const absl::Status lost = DeviceLostStatus();
    return refuse(absl::UnavailableError(
                      lost.ok() ? "the server is shutting down and accepts no new requests"
                                : absl::StrCat("the device is lost (", lost.message(),
                                               "); the server accepts no new requests and is "
                                               "restarting")),
                  RefusalReason::kShutdown);
  }
  auto task = std::make_unique<InferTask>();
  RefusalReason reason = RefusalReason::kInvalid;
  const AdmissionPolicy policy{entry->model.get(), &entry->batching, &entry->limits,
                               admission_.get()};
  if (absl::Status s = AdmitRequest(policy, arrival, &request, &task->admitted, &reason); !s.ok()) {
    return refuse(std::move(s), reason);
  }
  task->arrival = arrival;
  task->request = std::move(request);
  // Accepted: from here every answer, however the request is split, passes
  // through this once, and the request is counted once in the statistics.
  ModelEntry* raw = entry.get();  // entries live as long as the engine
  task->account = std::make_shared<RequestAccount>();
  task->done = [this, raw, arrival, bucket = task->admitted.bucket, account = task->account,
                tokens = task->admitted.real_tokens,
                done = std::move(done)](absl::StatusOr<InferResponse> r) {
    raw->stats.RecordAnswer(*account, arrival, clock_->Now(), bucket, r.status());
    if (r.ok()) r->real_tokens = tokens;
    done(std::move(r));
  };
  if (task->admitted.rows <= entry->batching.max_batch_size) {
    Schedule(raw, std::move(task));
  } else {
    SubmitSplit(raw, std::move(task));
  }
}

void Engine::SubmitSplit(ModelEntry* entry, std::unique_ptr<InferTask> task) {
  // Larger than max_batch_size: split, run the pieces as separate requests,
  // answer once with the pieces joined in order.
  absl::StatusOr<std::vector<InferRequest>> pieces =
      SplitRequest(task->request, entry->batching.max_batch_size);
  if (!pieces.ok()) {
    task->done(pieces.status());
    return;
  }
  entry->stats.RecordRequestSplit();
  struct Join {
    std::mutex mu;
    std::vector<InferResponse> parts;
    size_t remaining;
    absl::Status error;
    DoneCallback done;
  };
  auto join = std::make_shared<Join>();
  join->parts.resize(pieces->size());
  join->remaining = pieces->size();
  join->done = std::move(task->done);
  for (size_t i = 0; i < pieces->size(); ++i) {
    auto piece = std::make_unique<InferTask>();
    piece->arrival = task->arrival;
    piece->admitted = task->admitted;
    piece->admitted.rows = RequestBatchSize((*pieces)[i]);
    piece->admitted.real_tokens = entry->model->RealTokens((*pieces)[i]);
    piece->account = task->account;
    piece->request = std::move((*pieces)[i]);
    piece->done = [join, i, account = task->account](absl::StatusOr<InferResponse> r) {
      if (!r.ok()) account->failed.store(true, std::memory_order_relaxed);
      std::unique_lock<std::mutex> lock(join->mu);
      if (r.ok()) {
        join->parts[i] = *std::move(r);
      } else if (join->error.ok()) {
        join->error = r.status();
      }
      if (--join->remaining > 0) return;
      lock.unlock();
      if (!join->error.ok()) {
        join->done(join->error);
      } else {
        join->done(JoinResponses(std::move(join->parts)));
      }
    };
    Schedule(entry, std::move(piece));
  }
}

void Engine::Schedule(ModelEntry* entry, std::unique_ptr<InferTask> task) {
  absl::Status status = entry->batcher->Schedule(&task);
  if (status.ok()) return;
  // Still ours: the batcher refused it.
  if (status.code() == absl::StatusCode::kUnavailable) {
    task->account->Refused(Accepting() ? RefusalReason::kQueueFull : RefusalReason::kShutdown);
  }
  task->done(std::move(status));
}

absl::StatusOr<InferResponse> Engine::Infer(InferRequest request) {
  std::promise<absl::StatusOr<InferResponse>> promise;
  std::future<absl::StatusOr<InferResponse>> result = promise.get_future();
  Submit(std::move(request),
         [&promise](absl::StatusOr<InferResponse> r) { promise.set_value(std::move(r)); });
  return result.get();
}

absl::StatusOr<const ModelSpec*> Engine::GetModelSpec(const std::string& name) const {
  std::shared_ptr<ModelEntry> entry = Find(name);
  if (entry == nullptr) return NotFound(name);
  return &entry->model->spec();  // models are never removed while the engine lives
}

int64_t Engine::ActivationCapacityBytes() const { return admission_->Capacity(); }

absl::StatusOr<ModelStats> Engine::GetModelStats(const std::string& name) const {
  std::shared_ptr<ModelEntry> entry = Find(name);
  if (entry == nullptr) return NotFound(name);
  return entry->stats.Snapshot();
}

absl::StatusOr<QueueOptions> Engine::GetBatchingOptions(const std::string& name) const {
  std::shared_ptr<ModelEntry> entry = Find(name);
  if (entry == nullptr) return NotFound(name);
  return entry->batching;
}

absl::Status Engine::CheckDeclared(const std::string& model, absl::Span<const DeclaredInput> inputs,
                                   int64_t text_bytes) {
  const absl::Time arrival = clock_->Now();
  std::shared_ptr<ModelEntry> entry = Find(model);
  if (entry == nullptr) return absl::OkStatus();
  absl::Status status = CheckDeclaredLimits(entry->limits, model, inputs, text_bytes,
                                            entry->model->DeclaredSequenceLength(inputs));
  if (!status.ok()) {
    entry->stats.RecordRefusal(status, RefusalReason::kOverLimit, clock_->Now() - arrival);
  }
  return status;
}

void Engine::RecordRefused(const std::string& model, const absl::Status& status) {
  std::shared_ptr<ModelEntry> entry = Find(model);
  if (entry == nullptr) return;
  entry->stats.RecordRefusal(status, RefusalReason::kInvalid, absl::ZeroDuration());
}

absl::StatusOr<RequestLimits> Engine::GetRequestLimits(const std::string& name) const {
  std::shared_ptr<ModelEntry> entry = Find(name);
  if (entry == nullptr) return NotFound(name);
  return entry->limits;
}

absl::StatusOr<std::vector<int64_t>> Engine::GetQueueDepths(const std::string& name) const {
  std::shared_ptr<ModelEntry> entry = Find(name);
  if (entry == nullptr) return NotFound(name);
  return entry->batcher->bucket_depths();
}

Engine::MemoryAdmissionStats Engine::GetMemoryAdmissionStats() const { return admission_->Stats(); }

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

bool Engine::Ready() const { return !draining_.load(std::memory_order_acquire) && Accepting(); }

bool Engine::Accepting() const {
  return !shutting_down_.load(std::memory_order_acquire) &&
         !device_lost_.load(std::memory_order_acquire);
}

void Engine::BeginDrain() { draining_.store(true, std::memory_order_release); }

void Engine::NoteDeviceLost(const absl::Status& status) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++device_errors_;
    if (!device_lost_.load(std::memory_order_relaxed)) {
      device_lost_message_ = std::string(status.message());
      device_lost_.store(true, std::memory_order_release);
      first = true;
    }
  }
  if (first && on_device_lost_) on_device_lost_(status);
}

absl::Status Engine::DeviceLostStatus() const {
  if (!device_lost_.load(std::memory_order_acquire)) return absl::OkStatus();  // every batch
  std::lock_guard<std::mutex> lock(mu_);
  return DeviceLostError(device_lost_message_);
}

Engine::DeviceHealth Engine::GetDeviceHealth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {device_lost_.load(std::memory_order_relaxed), device_errors_, device_lost_message_};
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
  if (retry_worker_) retry_worker_->Shutdown();  // after the pipeline: its last batches may retry
}

}  // namespace infer
