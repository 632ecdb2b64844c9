#include "server/engine.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "batching/dynamic_batcher.h"
#include "runtime/status_macros.h"
#include "server/request_split.h"
#include "server/serial_worker.h"

namespace infer {

// What one accepted client request adds to its model's statistics, gathered
// from its pieces (one, or several when it was split) and recorded once, when
// the request is answered. Thread-safe.
struct Engine::RequestAccount {
  std::mutex mu;
  // Longest wait of a piece: arrival until its batch was taken from the queue.
  absl::Duration queue ABSL_GUARDED_BY(mu);
  // The phases of the batches its pieces ran in, summed over the pieces.
  absl::Duration compute_input ABSL_GUARDED_BY(mu);
  absl::Duration compute_infer ABSL_GUARDED_BY(mu);
  absl::Duration compute_output ABSL_GUARDED_BY(mu);
  // Why it was answered without running (the first piece refused), if so.
  uint64_t ModelStats::*refusal ABSL_GUARDED_BY(mu) = nullptr;
  // Set when a piece fails: its sibling pieces still queued are dropped (the
  // request's answer is that failure whatever they return).
  std::atomic<bool> failed{false};

  void Refused(uint64_t ModelStats::*reason) {
    std::lock_guard<std::mutex> lock(mu);
    if (refusal == nullptr) refusal = reason;
  }
};

struct Engine::InferTask {
  InferRequest request;
  DoneCallback done;
  std::shared_ptr<RequestAccount> account;  // set once the request is accepted
  absl::Time arrival;
  int64_t rows = 0;
  int64_t seq_length = 0;   // Model::SequenceLength: chooses the length bucket
  int64_t real_tokens = 0;  // Model::RealTokens
  int level = 1;            // priority level
  int bucket = 0;           // length bucket (index into ModelStats::buckets)
  absl::Time due = absl::InfiniteFuture();

  // What BatchQueue asks of a task.
  int64_t size() const { return rows; }
  int64_t length() const { return seq_length; }
  int64_t tokens() const { return real_tokens; }
  BatchShape shape() const { return {rows, real_tokens, seq_length}; }
  int priority() const { return level; }
  absl::Time deadline() const { return due; }
  bool cancelled() const {
    return (account != nullptr && account->failed.load(std::memory_order_relaxed)) ||
           (request.is_cancelled && request.is_cancelled());
  }
};

struct Engine::ModelEntry {
  std::unique_ptr<Model> model;
  QueueOptions batching;
  RequestLimits limits;
  std::unique_ptr<ModelMemoryGate> gate;
  // Held around Model::Prepare: the batcher and the retry worker both
  // prepare batches, and Prepare is never concurrent on one model.
  std::mutex prepare_mu;

  mutable std::mutex stats_mu;
  ModelStats stats ABSL_GUARDED_BY(stats_mu);

  // Declared last so it is destroyed (drained and joined) first.
  std::unique_ptr<DynamicBatcher<InferTask>> batcher;
};

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

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

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
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<Device> device,
                         CreateDevice(spec, options.device_options));
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
  auto entry = std::make_shared<ModelEntry>();
  entry->model = std::move(model);
  entry->batching = batching;
  entry->limits = limits;
  if (batching.length_buckets.empty()) {
    entry->stats.buckets.emplace_back();
  } else {
    for (int64_t b : batching.length_buckets) entry->stats.buckets.emplace_back().max_length = b;
  }
  entry->gate = std::make_unique<ModelMemoryGate>(entry->model.get(), admission_.get());
  BatcherOptions options;
  options.queue = batching;
  options.clock = clock_;
  options.memory = entry->gate.get();
  // A model without device work runs inline (ExecuteBatch): no pipeline room needed.
  if (entry->model->UsesDevice()) options.can_launch = [this] { return pipeline_->HasRoom(); };
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
  const Model& model = *entry->model;
  const QueueOptions& q = entry->batching;
  const std::string& name = model.spec().name;
  // Refused before it is queued: counted under `reason` and answered.
  auto fail = [&](absl::Status status, uint64_t ModelStats::*reason) {
    RecordRefusal(entry.get(), status, reason, clock_->Now() - arrival);
    done(std::move(status));
  };
  if (!Ready()) {
    const absl::Status lost = DeviceLostStatus();
    return fail(absl::UnavailableError(
                    lost.ok() ? "the server is shutting down and accepts no new requests"
                              : absl::StrCat("the device is lost (", lost.message(),
                                             "); the server accepts no new requests and is "
                                             "restarting")),
                &ModelStats::rejected_shutdown);
  }
  absl::Status status = CheckShapeLimits(entry->limits, model, request);
  if (!status.ok()) return fail(std::move(status), &ModelStats::rejected_over_limit);
  status = ValidateRequestAgainstSpec(model.spec(), request);
  if (status.ok()) status = Guarded([&] { return model.Preprocess(&request); });
  if (!status.ok()) return fail(std::move(status), &ModelStats::rejected_invalid);

  auto task = std::make_unique<InferTask>();
  task->arrival = arrival;
  task->rows = RequestBatchSize(request);
  task->seq_length = model.SequenceLength(request);
  status = CheckLengthLimits(entry->limits, q, name, task->rows, task->seq_length);
  if (!status.ok()) return fail(std::move(status), &ModelStats::rejected_over_limit);
  status = model.ValidateRequest(request);
  if (!status.ok()) return fail(std::move(status), &ModelStats::rejected_invalid);
  task->real_tokens = model.RealTokens(request);
  task->bucket = std::max(0, LengthBucket(q, task->seq_length));

  const int64_t levels = q.priority_levels;
  const int64_t level = request.priority != 0           ? request.priority
                        : q.default_priority_level != 0 ? q.default_priority_level
                                                        : levels;
  if (level < 1 || level > levels) {
    return fail(
        absl::InvalidArgumentError(absl::StrCat("priority ", request.priority, " is outside [1, ",
                                                levels, "] for model '", name,
                                                "' (1 is the most urgent; 0 means the "
                                                "default)")),
        &ModelStats::rejected_invalid);
  }
  task->level = static_cast<int>(level);
  const absl::Duration timeout =
      request.timeout > absl::ZeroDuration() ? request.timeout : q.default_timeout;
  task->due = request.deadline;
  if (timeout > absl::ZeroDuration()) task->due = std::min(task->due, arrival + timeout);
  if (task->due <= arrival) {
    return fail(absl::DeadlineExceededError("the request's deadline passed before it arrived"),
                &ModelStats::rejected_deadline);
  }
  // A batch must fit the device memory with nothing else in flight.
  // (A split request's largest piece: max_batch_size rows, at most all of
  // its real tokens.)
  const int64_t chunk_rows = std::min(task->rows, q.max_batch_size);
  const int64_t peak = model.PeakBytes(
      {chunk_rows, std::min(task->real_tokens, chunk_rows * task->seq_length), task->seq_length});
  if (peak > admission_->Capacity()) {
    return fail(
        absl::ResourceExhaustedError(absl::StrCat(
            "request needs ", peak, " bytes of device memory (", chunk_rows, " sequences of ",
            task->seq_length, " tokens); model '", name, "' may use ", admission_->Describe())),
        &ModelStats::rejected_memory);
  }
  task->request = std::move(request);
  // Accepted: from here every answer, however the request is split, passes
  // through this once, and the request is counted once in the statistics.
  ModelEntry* raw = entry.get();  // entries live as long as the engine
  task->account = std::make_shared<RequestAccount>();
  task->done = [this, raw, arrival, bucket = task->bucket, account = task->account,
                done = std::move(done)](absl::StatusOr<InferResponse> r) {
    RecordAnswer(raw, *account, arrival, bucket, r.status());
    done(std::move(r));
  };
  if (task->rows <= q.max_batch_size) {
    Schedule(entry.get(), std::move(task));
    return;
  }
  // Larger than max_batch_size: split, run the pieces as separate requests,
  // answer once with the pieces joined in order.
  absl::StatusOr<std::vector<InferRequest>> pieces = SplitRequest(task->request, q.max_batch_size);
  if (!pieces.ok()) {
    task->done(pieces.status());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(entry->stats_mu);
    ++entry->stats.request_splits;
  }
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
    piece->arrival = arrival;
    piece->rows = RequestBatchSize((*pieces)[i]);
    piece->seq_length = task->seq_length;
    piece->real_tokens = model.RealTokens((*pieces)[i]);
    piece->level = task->level;
    piece->bucket = task->bucket;
    piece->due = task->due;
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
    Schedule(entry.get(), std::move(piece));
  }
}

void Engine::Schedule(ModelEntry* entry, std::unique_ptr<InferTask> task) {
  absl::Status status = entry->batcher->Schedule(&task);
  if (status.ok()) return;
  // Still ours: the batcher refused it.
  if (status.code() == absl::StatusCode::kUnavailable) {
    task->account->Refused(Ready() ? &ModelStats::rejected_queue_full
                                   : &ModelStats::rejected_shutdown);
  }
  task->done(std::move(status));
}

void Engine::RecordAnswer(ModelEntry* entry, RequestAccount& account, absl::Time arrival,
                          int bucket, const absl::Status& status) {
  const absl::Time now = clock_->Now();
  std::lock_guard<std::mutex> account_lock(account.mu);
  std::lock_guard<std::mutex> lock(entry->stats_mu);
  ModelStats& s = entry->stats;
  ++s.requests_by_code[status.code()];
  if (!status.ok()) {
    s.fail.Add(now - arrival);
    if (account.refusal != nullptr) ++(s.*account.refusal);
    return;
  }
  s.success.Add(now - arrival);
  s.queue.Add(account.queue);
  s.compute_input.Add(account.compute_input);
  s.compute_infer.Add(account.compute_infer);
  s.compute_output.Add(account.compute_output);
  LengthBucketStats& b = s.buckets[bucket];
  b.request_seconds.Observe(Seconds(now - arrival));
  b.queue_seconds.Observe(Seconds(account.queue));
}

absl::StatusOr<InferResponse> Engine::Infer(InferRequest request) {
  std::promise<absl::StatusOr<InferResponse>> promise;
  std::future<absl::StatusOr<InferResponse>> result = promise.get_future();
  Submit(std::move(request),
         [&promise](absl::StatusOr<InferResponse> r) { promise.set_value(std::move(r)); });
  return result.get();
}

// A prepared batch travelling through the device pipeline.
class Engine::BatchJob final : public PipelineJob {
 public:
  BatchJob(Engine* engine, ModelEntry* entry, std::vector<std::unique_ptr<InferTask>> tasks,
           std::unique_ptr<ModelBatch> batch, MemoryReservation memory, absl::Time dequeued)
      : engine_(engine),
        entry_(entry),
        tasks_(std::move(tasks)),
        batch_(std::move(batch)),
        memory_(std::move(memory)),
        dequeued_(dequeued) {}

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
  // Releases the batch's buffers and its memory reservation; the answers
  // wait for Respond, after the pipeline has freed this batch's slot.
  void Complete(absl::Status status) override {
    downloaded_ = engine_->clock_->Now();
    if (start_ == absl::InfinitePast()) start_ = downloaded_;
    responses_.resize(tasks_.size());
    if (status.ok()) {
      std::vector<InferResponse*> ptrs;
      for (InferResponse& r : responses_) ptrs.push_back(&r);
      status = Guarded([&] { return batch_->Finish(ptrs); });
    }
    batch_.reset();  // the device work is done: release its buffers now
    if (status.code() == absl::StatusCode::kResourceExhausted && tasks_.size() > 1) {
      // Out of memory despite admission: run the requests again in halves,
      // within this batch's reservation, before giving up on any of them;
      // on the retry worker, so this thread goes on completing batches.
      engine_->PostRetry(entry_, std::move(tasks_), std::move(memory_), dequeued_);
      tasks_.clear();
    }
    status_ = std::move(status);
    memory_.Release();
  }
  void Respond() override {
    if (tasks_.empty()) return;  // answered by the retry
    engine_->FinishBatch(entry_, tasks_, responses_, std::move(status_),
                         {dequeued_, start_, downloaded_, engine_->clock_->Now()});
  }

 private:
  Engine* const engine_;     // outlives the pipeline's jobs (Shutdown drains)
  ModelEntry* const entry_;  // entries live as long as the engine
  std::vector<std::unique_ptr<InferTask>> tasks_;
  std::unique_ptr<ModelBatch> batch_;
  MemoryReservation memory_;   // the batch's estimated peak, released in Complete
  const absl::Time dequeued_;  // the batch was taken from the queue
  absl::Time start_ = absl::InfinitePast();
  absl::Time downloaded_;
  absl::Status status_;  // from Complete, for Respond
  std::vector<InferResponse> responses_;
};

void Engine::ExecuteBatch(ModelEntry* entry, DynamicBatcher<InferTask>::Batch batch) {
  const std::string& name = entry->model->spec().name;
  const absl::Time now = clock_->Now();
  auto drop = [&](std::vector<std::unique_ptr<InferTask>>& tasks, auto make_status,
                  uint64_t ModelStats::*reason) {
    for (auto& task : tasks) {
      task->account->Refused(reason);
      task->done(make_status(*task));
    }
  };
  drop(
      batch.expired,
      [&](const InferTask& t) {
        return absl::DeadlineExceededError(absl::StrCat(
            "request waited ", absl::ToInt64Microseconds(now - t.arrival),
            " us in the queue of model '", name, "' and passed its deadline; it was not run"));
      },
      &ModelStats::rejected_deadline);
  drop(
      batch.cancelled,
      [](const InferTask&) {
        return absl::CancelledError("the client cancelled the request while it was queued");
      },
      &ModelStats::cancelled);
  drop(
      batch.unfit,
      [&](const InferTask& t) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "request needs ", entry->model->PeakBytes(t.shape()),
            " bytes of device memory; model '", name, "' may use ", admission_->Describe()));
      },
      &ModelStats::rejected_memory);
  // The queue reserved the batch's peak when it formed the batch: from here
  // the batch owns it, and every path below returns it exactly once.
  MemoryReservation memory =
      MemoryReservation::Adopt(admission_.get(), batch.peak_bytes, [this] { NotifyBatchers(); });
  if (batch.tasks.empty()) return;

  {
    const int64_t real = batch.tokens, computed = batch.computed_tokens;
    std::lock_guard<std::mutex> lock(entry->stats_mu);
    entry->stats.real_tokens += real;
    entry->stats.computed_tokens += computed;
    LengthBucketStats& b = entry->stats.buckets[batch.bucket];
    b.batch_rows.Observe(static_cast<double>(batch.rows));
    b.padding_efficiency.Observe(
        computed > 0 ? static_cast<double>(real) / static_cast<double>(computed) : 1.0);
  }
  std::vector<const InferRequest*> requests;
  requests.reserve(batch.tasks.size());
  for (const auto& task : batch.tasks) requests.push_back(&task->request);
  const absl::Time dequeued = clock_->Now();
  absl::StatusOr<std::unique_ptr<ModelBatch>> prepared =
      Guarded([&]() -> absl::StatusOr<std::unique_ptr<ModelBatch>> {
        // A lost device runs nothing more: answer without trying.
        if (absl::Status lost = DeviceLostStatus(); !lost.ok()) return lost;
        std::lock_guard<std::mutex> lock(entry->prepare_mu);
        return entry->model->Prepare(requests);
      });
  if (!prepared.ok()) {
    std::vector<InferResponse> none(batch.tasks.size());
    const absl::Time failed = clock_->Now();
    memory.Release();  // before answering, as a batch that ran does
    FinishBatch(entry, batch.tasks, none, prepared.status(), {dequeued, failed, failed, failed});
    return;
  }
  if (!entry->model->UsesDevice()) {
    RunInline(entry, batch.tasks, *std::move(prepared), std::move(memory), dequeued);
    return;
  }
  std::unique_ptr<PipelineJob> job = std::make_unique<BatchJob>(
      this, entry, std::move(batch.tasks), *std::move(prepared), std::move(memory), dequeued);
  if (absl::Status s = pipeline_->Submit(&job); !s.ok()) {
    job->Complete(std::move(s));  // refused (shutting down): still ours to answer
    job->Respond();
  }
}

void Engine::RunInline(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>>& tasks,
                       std::unique_ptr<ModelBatch> batch, MemoryReservation memory,
                       absl::Time dequeued) {
  std::vector<InferResponse> responses(tasks.size());
  std::vector<InferResponse*> ptrs;
  ptrs.reserve(responses.size());
  for (InferResponse& r : responses) ptrs.push_back(&r);
  const absl::Time start = clock_->Now();
  const absl::Status status = Guarded([&] { return RunPrepared(*batch, nullptr, nullptr, ptrs); });
  batch.reset();
  memory.Release();  // release, then answer
  const absl::Time done = clock_->Now();
  FinishBatch(entry, tasks, responses, status, {dequeued, start, done, done});
}

void Engine::PostRetry(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>> tasks,
                       MemoryReservation memory, absl::Time dequeued) {
  // std::function needs a copyable callable: the job travels in a shared_ptr.
  struct Job {
    std::vector<std::unique_ptr<InferTask>> tasks;
    MemoryReservation memory;
  };
  auto job = std::make_shared<Job>(Job{std::move(tasks), std::move(memory)});
  retry_worker_->Post([this, entry, job, dequeued] {
    RetryInHalves(entry, std::move(job->tasks), dequeued);
    job->memory.Release();  // the retries ran within the batch's reservation
  });
}

void Engine::RetryInHalves(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>> tasks,
                           absl::Time dequeued) {
  {
    std::lock_guard<std::mutex> lock(entry->stats_mu);
    ++entry->stats.oom_batch_splits;
  }
  const size_t mid = tasks.size() / 2;
  std::vector<std::unique_ptr<InferTask>> halves[2];
  for (size_t i = 0; i < tasks.size(); ++i) halves[i < mid ? 0 : 1].push_back(std::move(tasks[i]));
  for (auto& half : halves) {
    std::vector<const InferRequest*> requests;
    for (const auto& t : half) requests.push_back(&t->request);
    std::vector<InferResponse> responses(half.size());
    std::vector<InferResponse*> ptrs;
    for (InferResponse& r : responses) ptrs.push_back(&r);
    // Serially on the engine's own stream, on the retry worker: outside the
    // pipeline, which may be full.
    const absl::Time run_start = clock_->Now();
    const absl::Status status = Guarded([&]() -> absl::Status {
      absl::StatusOr<std::unique_ptr<ModelBatch>> batch;
      {
        std::lock_guard<std::mutex> lock(entry->prepare_mu);
        batch = entry->model->Prepare(requests);
      }
      if (!batch.ok()) return batch.status();
      return RunPrepared(**batch, device_.get(), retry_stream_.get(), ptrs);
    });
    if (status.code() == absl::StatusCode::kResourceExhausted && half.size() > 1) {
      RetryInHalves(entry, std::move(half), dequeued);
    } else {
      // The failed attempt counts as the half's input phase: the phases
      // still add up to the time since the batch left the queue.
      const absl::Time end = clock_->Now();
      FinishBatch(entry, half, responses, status, {dequeued, run_start, end, end});
    }
  }
}

void Engine::NotifyBatchers() {
  std::vector<std::shared_ptr<ModelEntry>> entries;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, entry] : models_) entries.push_back(entry);
  }
  for (const auto& entry : entries) entry->batcher->Notify();
}

void Engine::FinishBatch(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>>& tasks,
                         std::vector<InferResponse>& responses, absl::Status status,
                         const BatchTiming& t) {
  int64_t rows = 0;
  for (const auto& task : tasks) rows += task->rows;
  if (IsDeviceLost(status)) {
    // Every batch's outcome passes here: the one place a lost device is
    // noticed. Its requests get UNAVAILABLE: another replica can serve them.
    NoteDeviceLost(status);
    status = absl::UnavailableError(absl::StrCat("model '", entry->model->spec().name,
                                                 "' failed: the device is lost (", status.message(),
                                                 "); the server is restarting"));
  } else if (!status.ok()) {
    // Running out of the memory budget keeps its code (RESOURCE_EXHAUSTED:
    // the batch needed more than the budget allows); anything else is the
    // model's failure (INTERNAL). Either way the engine keeps serving.
    const absl::StatusCode code = status.code() == absl::StatusCode::kResourceExhausted
                                      ? absl::StatusCode::kResourceExhausted
                                      : absl::StatusCode::kInternal;
    status = absl::Status(
        code, absl::StrCat("model '", entry->model->spec().name, "' failed: ", status.message()));
  }
  const absl::Duration input = t.start - t.dequeued;
  const absl::Duration infer = t.downloaded - t.start;
  const absl::Duration output = t.end - t.downloaded;
  if (status.ok()) {
    {
      std::lock_guard<std::mutex> lock(entry->stats_mu);
      ModelStats& s = entry->stats;
      ++s.execution_count;
      ModelStats::BatchPhases& phases = s.batch_stats[static_cast<uint64_t>(rows)];
      phases.compute_input.Add(input);
      phases.compute_infer.Add(infer);
      phases.compute_output.Add(output);
      s.inference_count += static_cast<uint64_t>(rows);
      s.last_inference_ms = WallMillis();
      if (!tasks.empty()) {
        s.buckets[tasks.front()->bucket].compute_seconds.Observe(Seconds(t.end - t.dequeued));
      }
    }
    // Each request's share, recorded with its answer (RecordAnswer).
    for (const auto& task : tasks) {
      RequestAccount& a = *task->account;
      std::lock_guard<std::mutex> lock(a.mu);
      a.queue = std::max(a.queue, t.dequeued - task->arrival);
      a.compute_input += input;
      a.compute_infer += infer;
      a.compute_output += output;
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

int64_t Engine::ActivationCapacityBytes() const { return admission_->Capacity(); }

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

absl::Status Engine::CheckDeclared(const std::string& model, absl::Span<const DeclaredInput> inputs,
                                   int64_t text_bytes) {
  const absl::Time arrival = clock_->Now();
  std::shared_ptr<ModelEntry> entry = Find(model);
  if (entry == nullptr) return absl::OkStatus();
  absl::Status status = CheckDeclaredLimits(entry->limits, model, inputs, text_bytes,
                                            entry->model->DeclaredSequenceLength(inputs));
  if (!status.ok()) {
    RecordRefusal(entry.get(), status, &ModelStats::rejected_over_limit, clock_->Now() - arrival);
  }
  return status;
}

void Engine::RecordRefused(const std::string& model, const absl::Status& status) {
  std::shared_ptr<ModelEntry> entry = Find(model);
  if (entry == nullptr) return;
  RecordRefusal(entry.get(), status, &ModelStats::rejected_invalid, absl::ZeroDuration());
}

void Engine::RecordRefusal(ModelEntry* entry, const absl::Status& status,
                           uint64_t ModelStats::*reason, absl::Duration spent) {
  std::lock_guard<std::mutex> lock(entry->stats_mu);
  entry->stats.fail.Add(spent);
  ++(entry->stats.*reason);
  ++entry->stats.requests_by_code[status.code()];
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

bool Engine::Ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !shutting_down_ && !device_lost_;
}

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
