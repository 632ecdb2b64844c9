// ServedModel: one model's whole path through the engine. It owns the model
// and its policy (batching options, request limits), its memory gate, its
// dynamic batcher and its statistics, and it runs what its batcher forms:
//
//   Submit:       admission (engine/request_admission.h) on the request
//                 source, then the queue; a request over max_batch_size is
//                 split into pieces queued apart and answered once, joined
//   ExecuteBatch: answers what the batcher dropped, prepares the batch
//                 under the model's prepare lock, then runs it inline (a
//                 model without device work) or hands it to the device
//                 pipeline (batch_execution.cc)
//   retry:        a batch that ran out of device memory runs again in
//                 halves on the engine's retry worker, within its
//                 reservation
//   FinishBatch:  every request answered once, statistics recorded
//
// What all models share (clock, device, memory admission, pipeline, retry
// worker, lifecycle) is the Engine's, borrowed through ServingContext; the
// Engine outlives its served models and shuts each down (its batcher
// drained and joined) before the pipeline.
//
// Thread-safe. Private to the engine (not installed): embedders use
// engine/engine.h.
#ifndef INFER_ENGINE_SERVED_MODEL_H_
#define INFER_ENGINE_SERVED_MODEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "batching/batch_queue.h"
#include "batching/clock.h"
#include "batching/dynamic_batcher.h"
#include "engine/lifecycle.h"
#include "engine/memory_admission.h"
#include "engine/model_stats.h"
#include "engine/request_admission.h"
#include "engine/request_limits.h"
#include "engine/request_source.h"
#include "engine/serial_worker.h"
#include "models/model.h"
#include "runtime/compute_stream.h"
#include "runtime/device.h"
#include "runtime/pipeline.h"

namespace infer {

// The engine's parts every served model uses. Borrowed: the Engine owns
// them and outlives its served models.
struct ServingContext {
  Clock* clock = nullptr;
  Device* device = nullptr;
  MemoryAdmission* memory = nullptr;
  DevicePipeline* pipeline = nullptr;
  // The out-of-memory retries run serially on this worker, on this stream.
  SerialWorker* retry_worker = nullptr;
  ComputeStream* retry_stream = nullptr;
  EngineLifecycle* lifecycle = nullptr;
  // Wakes every model's batcher (memory or pipeline room was freed).
  std::function<void()> notify_batchers;
};

class ServedModel {
 public:
  // Called exactly once per submitted request, from any thread.
  using DoneCallback = std::function<void(absl::StatusOr<InferResponse>)>;

  // `batching` and `limits` are validated by the caller.
  static absl::StatusOr<std::unique_ptr<ServedModel>> Create(std::unique_ptr<Model> model,
                                                             const QueueOptions& batching,
                                                             const RequestLimits& limits,
                                                             const ServingContext& context);
  ~ServedModel();
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;

  const Model& model() const { return *model_; }
  const QueueOptions& batching() const { return batching_; }
  const RequestLimits& limits() const { return limits_; }
  ModelStats Stats() const { return stats_.Snapshot(); }
  std::vector<int64_t> QueueDepths() const { return batcher_->bucket_depths(); }

  // Admits the request `source` gives (arrived at `arrival`) and queues it;
  // `done` gets the answer or the refusal, which is counted.
  void Submit(RequestSource& source, absl::Time arrival, DoneCallback done);
  // A request refused before it reached Submit (Engine::CountRefusal).
  void CountRefusal(const absl::Status& refusal, RefusalReason reason) {
    stats_.RecordRefusal(refusal, reason, absl::ZeroDuration());
  }

  // Wakes the batcher: memory or pipeline room may have been freed.
  void Notify() { batcher_->Notify(); }
  // Refuses new tasks, answers or runs the queued ones, joins the batcher.
  // Idempotent.
  void Shutdown() { batcher_->Shutdown(); }

 private:
  struct SplitJoin;  // served_model.cc
  // A request (or a piece of a split one) waiting in the queue; answered
  // through Answer, once, while it is alive. Neither copied nor moved
  // (`account` may point into it): it travels as a unique_ptr.
  struct Task {
    InferRequest request;
    // A whole request: the front end's callback (Answer records the
    // statistics, then calls it). A piece: unset, and `join` collects its
    // answer instead.
    DoneCallback done;
    std::shared_ptr<SplitJoin> join;
    size_t piece = 0;  // its place in the joined answer
    RequestAccount own_account;
    RequestAccount* account = &own_account;  // a piece: the request's, in `join`
    absl::Time arrival;
    AdmittedRequest admitted;  // its classification (engine/request_admission.h)

    // What BatchQueue asks of a task.
    int64_t size() const { return admitted.rows; }
    int64_t length() const { return admitted.seq_length; }
    int64_t tokens() const { return admitted.real_tokens; }
    int64_t state_tokens() const { return admitted.state_tokens; }
    int priority() const { return admitted.level; }
    absl::Time deadline() const { return admitted.due; }
    bool cancelled() const {
      return account->failed.load(std::memory_order_relaxed) ||
             (request.is_cancelled && request.is_cancelled());
    }
  };
  class BatchJob;  // batch_execution.cc
  using Batcher = DynamicBatcher<Task>;

  ServedModel(std::unique_ptr<Model> model, const QueueOptions& batching,
              const RequestLimits& limits, const ServingContext& context);
  AdmissionPolicy Policy() const { return {model_.get(), &batching_, &limits_, context_.memory}; }
  // Queues an admitted task (answering it if the queue refuses).
  void Schedule(std::unique_ptr<Task> task);
  // The one way a task is answered: a whole request's answer is counted in
  // the statistics and handed to its callback; a piece's goes to its join,
  // whose last piece answers the request.
  void Answer(Task& task, absl::StatusOr<InferResponse> r);
  // An admitted request over max_batch_size: queued as pieces, answered
  // once with the pieces joined.
  void SubmitSplit(std::unique_ptr<Task> task);

  // batch_execution.cc.
  // Answers the batcher's dropped tasks, prepares the batch and hands it to
  // the device pipeline (blocking while the pipeline is full).
  void ExecuteBatch(Batcher::Batch batch);
  // A prepared batch of a model without device work (Model::UsesDevice),
  // run and answered on the calling (batcher) thread.
  void RunInline(std::vector<std::unique_ptr<Task>>& tasks, std::unique_ptr<ModelBatch> batch,
                 MemoryReservation memory, absl::Time dequeued);
  // Hands a batch that ran out of device memory, with its reservation, to
  // the retry worker (RetryInHalves there, then the reservation returned).
  void PostRetry(std::vector<std::unique_ptr<Task>> tasks, MemoryReservation memory,
                 absl::Time dequeued);
  // After a batch ran out of device memory: runs its requests again in
  // halves, recursively (depth log2 of the batch); a request that fails
  // alone keeps the error.
  void RetryInHalves(std::vector<std::unique_ptr<Task>> tasks, absl::Time dequeued);
  // Answers every task of a finished batch (responses[i] for tasks[i]) and
  // records its statistics (the phases: BatchTiming, engine/model_stats.h).
  void FinishBatch(std::vector<std::unique_ptr<Task>>& tasks, std::vector<InferResponse>& responses,
                   absl::Status status, const BatchTiming& timing);

  const std::unique_ptr<Model> model_;
  const QueueOptions batching_;
  const RequestLimits limits_;
  const ServingContext context_;
  ModelStatsRecorder stats_;
  std::unique_ptr<ModelMemoryGate> gate_;
  // Held around Model::Prepare: the batcher and the retry worker both
  // prepare batches, and Prepare is never concurrent on one model.
  std::mutex prepare_mu_;
  // Declared last so it is destroyed (drained and joined) first.
  std::unique_ptr<Batcher> batcher_;
};

}  // namespace infer

#endif  // INFER_ENGINE_SERVED_MODEL_H_
