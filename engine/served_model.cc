#include "engine/served_model.h"

#include <mutex>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "engine/request_split.h"
#include "runtime/status_macros.h"

namespace infer {

ServedModel::ServedModel(std::unique_ptr<Model> model, const QueueOptions& batching,
                         const RequestLimits& limits, const ServingContext& context)
    : model_(std::move(model)),
      batching_(batching),
      limits_(limits),
      context_(context),
      stats_(batching.length_buckets) {}

ServedModel::~ServedModel() { Shutdown(); }

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Create(std::unique_ptr<Model> model,
                                                                 const QueueOptions& batching,
                                                                 const RequestLimits& limits,
                                                                 const ServingContext& context) {
  std::unique_ptr<ServedModel> served(new ServedModel(std::move(model), batching, limits, context));
  ServedModel* raw = served.get();
  // Released memory may let any model's waiting batch launch.
  served->gate_ =
      std::make_unique<ModelMemoryGate>(raw->model_.get(), context.memory, context.notify_batchers);
  BatcherOptions options;
  options.queue = batching;
  options.clock = context.clock;
  options.memory = served->gate_.get();
  if (served->model_->UsesDevice()) {
    DevicePipeline* pipeline = context.pipeline;
    options.can_launch = [pipeline] { return pipeline->HasRoom(); };
  } else {
    // Runs inline (ExecuteBatch): no pipeline room needed, and a batch
    // ready at once runs on the submitting thread (no hand-off at all).
    options.run_on_caller = true;
  }
  // The batcher is owned by the served model and joined before the rest of
  // it is destroyed, so `raw` outlives every call of the process function.
  INFER_ASSIGN_OR_RETURN(served->batcher_, Batcher::Create(options, [raw](Batcher::Batch batch) {
                           raw->ExecuteBatch(std::move(batch));
                         }));
  return served;
}

void ServedModel::Submit(RequestSource& source, absl::Time arrival, DoneCallback done) {
  Clock* clock = context_.clock;
  // Refused before it is queued: counted under `reason` and answered.
  auto refuse = [&](absl::Status status, RefusalReason reason) {
    stats_.RecordRefusal(status, reason, clock->Now() - arrival);
    done(std::move(status));
  };
  if (!context_.lifecycle->Accepting()) {
    return refuse(context_.lifecycle->NotAcceptingStatus(), RefusalReason::kShutdown);
  }
  auto task = std::make_unique<Task>();
  RefusalReason reason = RefusalReason::kInvalid;
  if (absl::Status s =
          AdmitRequest(Policy(), arrival, source, &task->request, &task->admitted, &reason);
      !s.ok()) {
    return refuse(std::move(s), reason);
  }
  task->arrival = arrival;
  // Accepted: from here every answer, however the request is split, passes
  // through Answer once, and the request is counted once in the statistics.
  task->done = std::move(done);
  if (task->admitted.rows <= batching_.max_batch_size) {
    Schedule(std::move(task));
  } else {
    SubmitSplit(std::move(task));
  }
}

// A split request's answer, gathered from its pieces.
struct ServedModel::SplitJoin {
  std::mutex mu;
  std::vector<InferResponse> parts ABSL_GUARDED_BY(mu);
  size_t remaining ABSL_GUARDED_BY(mu);
  absl::Status error ABSL_GUARDED_BY(mu);
  // The whole request, answered by its last piece: its account (shared by
  // the pieces), callback and classification.
  RequestAccount account;
  DoneCallback done;
  absl::Time arrival;
  AdmittedRequest admitted;
};

void ServedModel::SubmitSplit(std::unique_ptr<Task> task) {
  // Larger than max_batch_size: split, run the pieces as separate requests,
  // answer once with the pieces joined in order.
  absl::StatusOr<std::vector<InferRequest>> pieces =
      SplitRequest(task->request, batching_.max_batch_size);
  if (!pieces.ok()) {
    Answer(*task, pieces.status());
    return;
  }
  stats_.RecordRequestSplit();
  auto join = std::make_shared<SplitJoin>();
  join->parts.resize(pieces->size());
  join->remaining = pieces->size();
  join->done = std::move(task->done);
  join->arrival = task->arrival;
  join->admitted = task->admitted;
  for (size_t i = 0; i < pieces->size(); ++i) {
    auto piece = std::make_unique<Task>();
    piece->arrival = task->arrival;
    piece->admitted = task->admitted;
    piece->admitted.rows = RequestBatchSize((*pieces)[i]);
    piece->admitted.real_tokens = model_->RealTokens((*pieces)[i]);
    piece->admitted.state_tokens = model_->StateTokens((*pieces)[i]);
    piece->join = join;
    piece->piece = i;
    piece->account = &join->account;
    piece->request = std::move((*pieces)[i]);
    Schedule(std::move(piece));
  }
}

void ServedModel::Answer(Task& task, absl::StatusOr<InferResponse> r) {
  RequestAccount* account = task.account;
  DoneCallback* done = &task.done;
  const AdmittedRequest* admitted = &task.admitted;
  absl::Time arrival = task.arrival;
  if (task.join != nullptr) {
    SplitJoin& join = *task.join;
    // Its sibling pieces still queued are dropped: the answer is this.
    if (!r.ok()) join.account.failed.store(true, std::memory_order_relaxed);
    std::unique_lock<std::mutex> lock(join.mu);
    if (r.ok()) {
      join.parts[task.piece] = *std::move(r);
    } else if (join.error.ok()) {
      join.error = r.status();
    }
    if (--join.remaining > 0) return;
    // The last piece: every other piece has answered.
    const absl::Status error = join.error;
    std::vector<InferResponse> parts = std::move(join.parts);
    lock.unlock();
    r = error.ok() ? absl::StatusOr<InferResponse>(JoinResponses(std::move(parts))) : error;
    account = &join.account;
    done = &join.done;
    admitted = &join.admitted;
    arrival = join.arrival;
  }
  stats_.RecordAnswer(*account, arrival, context_.clock->Now(), admitted->bucket, r.status());
  if (r.ok()) r->real_tokens = admitted->real_tokens;
  (*done)(std::move(r));
}

void ServedModel::Schedule(std::unique_ptr<Task> task) {
  absl::Status status = batcher_->Schedule(&task);
  if (status.ok()) return;
  // Still ours: the batcher refused it.
  if (status.code() == absl::StatusCode::kUnavailable) {
    task->account->Refused(context_.lifecycle->Accepting() ? RefusalReason::kQueueFull
                                                           : RefusalReason::kShutdown);
  }
  Answer(*task, std::move(status));
}

}  // namespace infer
