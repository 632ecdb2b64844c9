#include "engine/served_model.h"

#include <utility>

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
  // through this once, and the request is counted once in the statistics.
  task->account = std::make_shared<RequestAccount>();
  task->done = [this, clock, arrival, bucket = task->admitted.bucket, account = task->account,
                tokens = task->admitted.real_tokens,
                done = std::move(done)](absl::StatusOr<InferResponse> r) {
    stats_.RecordAnswer(*account, arrival, clock->Now(), bucket, r.status());
    if (r.ok()) r->real_tokens = tokens;
    done(std::move(r));
  };
  if (task->admitted.rows <= batching_.max_batch_size) {
    Schedule(std::move(task));
  } else {
    SubmitSplit(std::move(task));
  }
}

void ServedModel::SubmitSplit(std::unique_ptr<Task> task) {
  // Larger than max_batch_size: split, run the pieces as separate requests,
  // answer once with the pieces joined in order.
  absl::StatusOr<std::vector<InferRequest>> pieces =
      SplitRequest(task->request, batching_.max_batch_size);
  if (!pieces.ok()) {
    task->done(pieces.status());
    return;
  }
  stats_.RecordRequestSplit();
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
    auto piece = std::make_unique<Task>();
    piece->arrival = task->arrival;
    piece->admitted = task->admitted;
    piece->admitted.rows = RequestBatchSize((*pieces)[i]);
    piece->admitted.real_tokens = model_->RealTokens((*pieces)[i]);
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
    Schedule(std::move(piece));
  }
}

void ServedModel::Schedule(std::unique_ptr<Task> task) {
  absl::Status status = batcher_->Schedule(&task);
  if (status.ok()) return;
  // Still ours: the batcher refused it.
  if (status.code() == absl::StatusCode::kUnavailable) {
    task->account->Refused(context_.lifecycle->Accepting() ? RefusalReason::kQueueFull
                                                           : RefusalReason::kShutdown);
  }
  task->done(std::move(status));
}

}  // namespace infer
