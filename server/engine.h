// Engine: the in-process inference API. A C++ service links this library,
// creates an Engine on a device, adds models, and submits requests; the gRPC
// server is a thin front end over exactly this API.
//
//   auto engine = infer::Engine::Create({.device = "cpu"});
//   (*engine)->AddModel(std::move(model), {.max_batch_size = 32});
//   (*engine)->Submit(std::move(request), [](absl::StatusOr<InferResponse> r) {...});
//
// Each model gets its own bounded queue and dynamic batcher (see
// batching/dynamic_batcher.h); requests are validated against the model's
// spec before they are queued, executed in batches, and answered one by one.
//
// Ownership: the Engine owns its device and its models; the device outlives
// every model. On a GPU, the Engine holds the cross-process ownership lock
// for that GPU (runtime/device_lock.h) for its whole life: one Engine, in one
// process, per GPU. Thread-safe. (Locks are std::mutex so ThreadSanitizer sees
// them; Debian's Abseil is not instrumented.)
#ifndef INFER_SERVER_ENGINE_H_
#define INFER_SERVER_ENGINE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "batching/batch_queue.h"
#include "batching/clock.h"
#include "batching/dynamic_batcher.h"
#include "models/model.h"
#include "runtime/caching_allocator.h"
#include "runtime/compute_stream.h"
#include "runtime/device.h"
#include "runtime/device_context.h"
#include "runtime/device_lock.h"
#include "runtime/pipeline.h"
#include "runtime/staging_pool.h"
#include "server/histogram.h"
#include "server/memory_admission.h"
#include "server/model_stats.h"
#include "server/request_limits.h"
#include "server/serial_worker.h"

namespace infer {

struct EngineOptions {
  // "cpu", "cuda:N", or empty for the first usable GPU, else the CPU.
  std::string device;
  // How the device is set up (the CPU's compute threads).
  DeviceOptions device_options;
  // Creates the device in place of CreateDevice, with the same arguments;
  // null: CreateDevice. The seam through which tests put a device with
  // injected faults under a real engine (tests/testing/faulty_device.h);
  // called once, in Create.
  std::function<absl::StatusOr<std::unique_ptr<Device>>(absl::string_view spec,
                                                        const DeviceOptions& options)>
      create_device;
  // Time source for queueing; nullptr means RealClock(). Borrowed.
  Clock* clock = nullptr;
  // The device memory budget every model allocates under.
  CachingAllocatorOptions memory;
  // Where the per-GPU ownership lock files live (empty: the default, see
  // DeviceOwnershipLock::DefaultLockDir).
  std::string device_lock_dir;
  // Host staging memory for copies to and from the device.
  StagingPoolOptions staging;
  // Batches in flight on the device at once (upload / compute / download).
  PipelineOptions pipeline;
  // Share of the memory budget kept free of batches (for spikes and
  // fragmentation): a batch launches only if the weights, the batches in
  // flight and its own estimated peak fit in budget × (1 − this).
  double memory_headroom_fraction = 0.1;
  // Called once, from the thread that noticed it, when the device is lost
  // (IsDeviceLost, runtime/device.h): the engine has turned not ready and
  // answers everything with UNAVAILABLE from then on; the process should
  // drain and exit non-zero so its supervisor restarts it. Must not block.
  std::function<void(const absl::Status&)> on_device_lost;
};

class Engine {
 public:
  // Called exactly once per submitted request, from any thread.
  using DoneCallback = std::function<void(absl::StatusOr<InferResponse>)>;

  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Device* device() const { return device_.get(); }
  CachingAllocator* allocator() const { return allocator_.get(); }
  HostStagingPool* staging() const { return staging_.get(); }
  DevicePipeline* pipeline() const { return pipeline_.get(); }
  // What models for this engine are created with.
  DeviceContext context() const { return {device_.get(), allocator_.get(), staging_.get()}; }

  // Serves `model` under model->spec().name with the given batching policy.
  // ALREADY_EXISTS if the name is taken; INVALID_ARGUMENT for bad options.
  absl::Status AddModel(std::unique_ptr<Model> model, const QueueOptions& batching,
                        const RequestLimits& limits = {});

  // Validates, classifies and queues `request`; `done` receives the response
  // or the error: NOT_FOUND (unknown model), INVALID_ARGUMENT (bad request,
  // with the limit in the message), RESOURCE_EXHAUSTED (it cannot fit the
  // device memory even alone), UNAVAILABLE (queue full or shutting down),
  // DEADLINE_EXCEEDED (its deadline or timeout passed before it ran),
  // CANCELLED (is_cancelled turned true while queued), INTERNAL (the model
  // failed; the engine keeps serving). A request over max_batch_size is split
  // across executions and answered once.
  void Submit(InferRequest request, DoneCallback done);

  // Submit and wait.
  absl::StatusOr<InferResponse> Infer(InferRequest request);

  // Model lookup: NOT_FOUND naming the loaded models when unknown.
  absl::StatusOr<const ModelSpec*> GetModelSpec(const std::string& name) const;
  absl::StatusOr<ModelStats> GetModelStats(const std::string& name) const;
  absl::StatusOr<QueueOptions> GetBatchingOptions(const std::string& name) const;
  absl::StatusOr<RequestLimits> GetRequestLimits(const std::string& name) const;
  // CheckDeclaredLimits with the model's limits, for a front end to call
  // before decoding a request; a refusal is counted in the model's
  // statistics as Submit would count it (failed, over_limit, by code). OK
  // for an unknown model (Submit names it).
  absl::Status CheckDeclared(const std::string& model, absl::Span<const DeclaredInput> inputs,
                             int64_t text_bytes);
  // Counts a request for `model` that a front end refused before it could
  // be submitted (e.g. it could not be decoded): failed (with no duration),
  // by code, and as `invalid`. Nothing for an unknown model.
  void RecordRefused(const std::string& model, const absl::Status& status);
  // Requests waiting now in each of the model's length buckets.
  absl::StatusOr<std::vector<int64_t>> GetQueueDepths(const std::string& name) const;
  std::vector<std::string> ModelNames() const;
  bool ModelReady(const std::string& name) const;
  // True until a drain or Shutdown begins or the device is lost: what
  // health checks, ServerReady and the ready metric report.
  bool Ready() const;
  // True until Shutdown begins or the device is lost: whether Submit takes
  // requests. Differs from Ready() during a drain's grace period.
  bool Accepting() const;
  // Begins a drain: Ready() turns false (health NOT_SERVING) while the
  // engine still accepts and serves requests, so load balancers move
  // traffic away before anything is refused; Shutdown follows. Idempotent.
  void BeginDrain();
  // Whether the device was lost, and how many batches failed for it.
  struct DeviceHealth {
    bool lost = false;
    uint64_t errors = 0;  // batches answered with a lost device's error
    std::string message;  // the first such error
  };
  DeviceHealth GetDeviceHealth() const;
  // Device bytes batches may use: budget − headroom − weights.
  int64_t ActivationCapacityBytes() const;
  // The admission's view of the memory budget (server/memory_admission.h).
  using MemoryAdmissionStats = ::infer::MemoryAdmissionStats;
  MemoryAdmissionStats GetMemoryAdmissionStats() const;

  // Stops accepting (UNAVAILABLE), answers every queued request, joins the
  // batchers. Idempotent.
  void Shutdown();

 private:
  // Defined in engine_internal.h; the batch execution members (ExecuteBatch
  // to FinishBatch) are in batch_execution.cc.
  struct ModelEntry;
  struct InferTask;
  class BatchJob;

  Engine(std::unique_ptr<DeviceOwnershipLock> lock, std::unique_ptr<Device> device,
         std::unique_ptr<CachingAllocator> allocator, std::unique_ptr<HostStagingPool> staging,
         std::unique_ptr<DevicePipeline> pipeline, Clock* clock);
  std::shared_ptr<ModelEntry> Find(const std::string& name) const;
  absl::Status NotFound(const std::string& name) const;
  // Queues an admitted task (answering it if the queue refuses).
  void Schedule(ModelEntry* entry, std::unique_ptr<InferTask> task);
  // An admitted request over max_batch_size: queued as pieces, answered
  // once with the pieces joined.
  void SubmitSplit(ModelEntry* entry, std::unique_ptr<InferTask> task);
  // Answers the batcher's dropped tasks, prepares the batch and hands it to
  // the device pipeline (blocking while the pipeline is full).
  void ExecuteBatch(ModelEntry* entry, DynamicBatcher<InferTask>::Batch batch);
  // A prepared batch of a model without device work (Model::UsesDevice),
  // run and answered on the calling (batcher) thread.
  void RunInline(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>>& tasks,
                 std::unique_ptr<ModelBatch> batch, MemoryReservation memory, absl::Time dequeued);
  // Hands a batch that ran out of device memory, with its reservation, to
  // the retry worker (RetryInHalves there, then the reservation returned).
  void PostRetry(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>> tasks,
                 MemoryReservation memory, absl::Time dequeued);
  // After a batch ran out of device memory: runs its requests again in
  // halves, recursively; a request that fails alone keeps the error.
  void RetryInHalves(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>> tasks,
                     absl::Time dequeued);
  // Wakes every model's batcher (memory or pipeline room was freed).
  void NotifyBatchers();
  // Records a lost device (first call: turns not ready, calls
  // on_device_lost); DeviceLostStatus is its error, OK while the device works.
  void NoteDeviceLost(const absl::Status& status);
  absl::Status DeviceLostStatus() const;
  // Answers every task of a finished batch (responses[i] for tasks[i]) and
  // records its statistics (the phases: BatchTiming, server/model_stats.h).
  void FinishBatch(ModelEntry* entry, std::vector<std::unique_ptr<InferTask>>& tasks,
                   std::vector<InferResponse>& responses, absl::Status status,
                   const BatchTiming& timing);

  // Constant after construction. The GPU lock, the device, then the
  // allocator are declared first so they are destroyed after the models that
  // use them (and the GPU is released last).
  const std::unique_ptr<DeviceOwnershipLock> lock_;  // null on the CPU
  const std::unique_ptr<Device> device_;
  const std::unique_ptr<CachingAllocator> allocator_;
  const std::unique_ptr<HostStagingPool> staging_;
  // Drained by Shutdown before the model entries are destroyed.
  const std::unique_ptr<DevicePipeline> pipeline_;
  std::unique_ptr<MemoryAdmission> admission_;  // set in Create
  ComputeStream retry_stream_;                  // set in Create; driven by the retry worker alone
  // Runs RetryInHalves; shut down after the pipeline. Set in Create.
  std::unique_ptr<SerialWorker> retry_worker_;
  std::function<void(const absl::Status&)> on_device_lost_;  // set in Create
  Clock* const clock_;

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<ModelEntry>> models_ ABSL_GUARDED_BY(mu_);
  // Set under mu_ (Shutdown also checks it there); read without it on the
  // hot path.
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> draining_{false};
  // Written under mu_ (with the message); read without it on the hot path.
  std::atomic<bool> device_lost_{false};
  uint64_t device_errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string device_lost_message_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer

#endif  // INFER_SERVER_ENGINE_H_
