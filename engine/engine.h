// Engine: the in-process inference API. A C++ service links this library
// (infer::engine), creates an Engine on a device, adds models, and submits
// requests; the gRPC and HTTP front ends (server/) are built over exactly
// this API.
//
//   auto engine = infer::Engine::Create({.device = "cpu"});
//   (*engine)->AddModel(std::move(model), {.max_batch_size = 32});
//   (*engine)->Submit(std::move(request), [](absl::StatusOr<InferResponse> r) {...});
//
// Each model is served by its own ServedModel (engine/served_model.h): its
// limits, memory gate, bounded queue and dynamic batcher, statistics and
// execution. The Engine keeps what they share: the device, the memory
// budget, the pipeline, the set of models and the lifecycle (ready, drain,
// shutdown, a lost device). Every request, from a front end or in-process,
// enters through Submit(RequestSource&): its model looked up once, its
// declared limits checked once before it is decoded, then admitted
// (engine/request_admission.h), queued, executed in batches and answered
// once.
//
// Ownership: the Engine owns its device and its models; the device outlives
// every model. On a GPU, the Engine holds the cross-process ownership lock
// for that GPU (runtime/device_lock.h) for its whole life: one Engine, in one
// process, per GPU. Thread-safe. (Locks are std::mutex so ThreadSanitizer sees
// them; Debian's Abseil is not instrumented.)
#ifndef INFER_ENGINE_ENGINE_H_
#define INFER_ENGINE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "batching/batch_queue.h"
#include "batching/clock.h"
#include "engine/lifecycle.h"
#include "engine/memory_admission.h"
#include "engine/model_stats.h"
#include "engine/request_limits.h"
#include "engine/request_source.h"
#include "models/model.h"
#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/device_context.h"
#include "runtime/pipeline.h"
#include "runtime/staging_pool.h"

namespace infer {

class ComputeStream;
class DeviceOwnershipLock;
class SerialWorker;
class ServedModel;

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

  // The one entry point: looks the request's model up, checks the request
  // limits on what `source` declares, has it decoded, admits and queues it
  // (engine/request_source.h); `done` receives the response or the error:
  // NOT_FOUND (unknown model), INVALID_ARGUMENT (bad request, or over a
  // limit, named in the message), RESOURCE_EXHAUSTED (it cannot fit the
  // device memory even alone, or a batch still ran out of memory after
  // being retried in halves), UNAVAILABLE (queue full, shutting down, or the
  // device lost), DEADLINE_EXCEEDED (its deadline or timeout passed before
  // it ran), CANCELLED (is_cancelled turned true while queued), INTERNAL
  // (the model failed; the engine keeps serving). A request over
  // max_batch_size is split across executions and answered once. Every
  // refusal is counted in the model's statistics.
  void Submit(RequestSource& source, DoneCallback done);
  // A request already in the engine's form, through the same walk
  // (InferRequestSource): the same limits and checks as a network client's.
  void Submit(InferRequest request, DoneCallback done);

  // A request a front end refused itself, before any part of it was
  // submitted (one it would submit in parts, refused on a check of the
  // whole): counted in the model's statistics like Submit's own refusals,
  // by `refusal`'s code and under `reason`. NOT_FOUND for an unknown model.
  absl::Status CountRefusal(const std::string& name, const absl::Status& refusal,
                            RefusalReason reason);

  // Submit and wait.
  absl::StatusOr<InferResponse> Infer(InferRequest request);

  // Model lookup: NOT_FOUND naming the loaded models when unknown.
  absl::StatusOr<const ModelSpec*> GetModelSpec(const std::string& name) const;
  // The model itself, for its const methods (thread-safe: models/model.h),
  // e.g. its tokenizer. Models live as long as the engine.
  absl::StatusOr<const Model*> GetModel(const std::string& name) const;
  absl::StatusOr<ModelStats> GetModelStats(const std::string& name) const;
  absl::StatusOr<QueueOptions> GetBatchingOptions(const std::string& name) const;
  absl::StatusOr<RequestLimits> GetRequestLimits(const std::string& name) const;
  // Requests waiting now in each of the model's length buckets.
  absl::StatusOr<std::vector<int64_t>> GetQueueDepths(const std::string& name) const;
  std::vector<std::string> ModelNames() const;
  // Makes `alias` another name of the loaded model `name` wherever a model
  // is looked up by name (a hub id such as "BAAI/bge-m3" beside the model's
  // own name "bge-m3"); ModelNames lists only the model's own name.
  // NOT_FOUND when `name` is not loaded, ALREADY_EXISTS when `alias` is a
  // model's name or another alias.
  absl::Status AddAlias(const std::string& alias, const std::string& name);
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
  // Whether the device was lost, and how many batches failed for it
  // (engine/lifecycle.h).
  using DeviceHealth = EngineLifecycle::DeviceHealth;
  DeviceHealth GetDeviceHealth() const;
  // Device bytes batches may use: budget − headroom − weights.
  int64_t ActivationCapacityBytes() const;
  // The admission's view of the memory budget (engine/memory_admission.h).
  using MemoryAdmissionStats = ::infer::MemoryAdmissionStats;
  MemoryAdmissionStats GetMemoryAdmissionStats() const;

  // Stops accepting (UNAVAILABLE), answers every queued request, joins the
  // batchers. Idempotent.
  void Shutdown();

 private:
  Engine(std::unique_ptr<DeviceOwnershipLock> lock, std::unique_ptr<Device> device,
         std::unique_ptr<CachingAllocator> allocator, std::unique_ptr<HostStagingPool> staging,
         std::unique_ptr<DevicePipeline> pipeline, Clock* clock,
         std::function<void(const absl::Status&)> on_device_lost);
  std::shared_ptr<ServedModel> Find(const std::string& name) const;
  absl::Status NotFound(const std::string& name) const;
  // Wakes every model's batcher (memory or pipeline room was freed).
  void NotifyBatchers();

  // Constant after construction. The GPU lock, the device, then the
  // allocator are declared first so they are destroyed after the models that
  // use them (and the GPU is released last).
  const std::unique_ptr<DeviceOwnershipLock> lock_;  // null on the CPU
  const std::unique_ptr<Device> device_;
  const std::unique_ptr<CachingAllocator> allocator_;
  const std::unique_ptr<HostStagingPool> staging_;
  // Drained by Shutdown before the served models are destroyed.
  const std::unique_ptr<DevicePipeline> pipeline_;
  const std::unique_ptr<EngineLifecycle> lifecycle_;
  Clock* const clock_;
  std::unique_ptr<MemoryAdmission> admission_;   // set in Create
  std::unique_ptr<ComputeStream> retry_stream_;  // set in Create; driven by the retry worker alone
  // Runs the out-of-memory retries; shut down after the pipeline. Set in
  // Create.
  std::unique_ptr<SerialWorker> retry_worker_;

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<ServedModel>> models_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> aliases_ ABSL_GUARDED_BY(mu_);  // to a name
};

}  // namespace infer

#endif  // INFER_ENGINE_ENGINE_H_
