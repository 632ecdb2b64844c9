// Batch execution, the part of ServedModel (engine/served_model.h) that runs
// what its batcher forms:
// answers the tasks a batch dropped (expired, cancelled, unfit), takes over
// the batch's memory reservation, prepares the batch under the model's prepare
// lock, and then either runs it inline (a model without device work) or
// hands it to the device pipeline (upload → compute → download →
// complete); a batch that runs out of device memory is retried in halves
// on the retry worker, within its reservation; FinishBatch answers every
// request and records the statistics. The one stage sequence outside the
// pipeline is RunPrepared (models/model.h).
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "engine/guarded.h"
#include "engine/served_model.h"

namespace infer {
namespace {

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

// A prepared batch travelling through the device pipeline.
class ServedModel::BatchJob final : public PipelineJob {
 public:
  BatchJob(ServedModel* served, std::vector<std::unique_ptr<Task>> tasks,
           std::unique_ptr<ModelBatch> batch, MemoryReservation memory, absl::Time dequeued)
      : served_(served),
        tasks_(std::move(tasks)),
        batch_(std::move(batch)),
        memory_(std::move(memory)),
        dequeued_(dequeued) {}

  absl::Status Upload(Stream* stream) override {
    start_ = served_->context_.clock->Now();  // the batch reaches the device
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
    downloaded_ = served_->context_.clock->Now();
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
      served_->PostRetry(std::move(tasks_), std::move(memory_), dequeued_);
      tasks_.clear();
    }
    status_ = std::move(status);
    memory_.Release();
  }
  void Respond() override {
    if (tasks_.empty()) return;  // answered by the retry
    served_->FinishBatch(tasks_, responses_, std::move(status_),
                         {dequeued_, start_, downloaded_, served_->context_.clock->Now()});
  }

 private:
  // Outlives the pipeline's jobs: the engine drains the pipeline before
  // its served models go.
  ServedModel* const served_;
  std::vector<std::unique_ptr<Task>> tasks_;
  std::unique_ptr<ModelBatch> batch_;
  MemoryReservation memory_;   // the batch's estimated peak, released in Complete
  const absl::Time dequeued_;  // the batch was taken from the queue
  absl::Time start_ = absl::InfinitePast();
  absl::Time downloaded_;
  absl::Status status_;  // from Complete, for Respond
  std::vector<InferResponse> responses_;
};

void ServedModel::ExecuteBatch(Batcher::Batch batch) {
  const std::string& name = model_->spec().name;
  Clock* clock = context_.clock;
  // Read only for what expired (rarely anything).
  const absl::Time now = batch.expired.empty() ? absl::InfinitePast() : clock->Now();
  auto drop = [&](std::vector<std::unique_ptr<Task>>& tasks, auto make_status,
                  RefusalReason reason) {
    for (auto& task : tasks) {
      task->account->Refused(reason);
      Answer(*task, make_status(*task));
    }
  };
  drop(
      batch.expired,
      [&](const Task& t) {
        return absl::DeadlineExceededError(absl::StrCat(
            "request waited ", absl::ToInt64Microseconds(now - t.arrival),
            " us in the queue of model '", name, "' and passed its deadline; it was not run"));
      },
      RefusalReason::kDeadline);
  drop(
      batch.cancelled,
      [](const Task&) {
        return absl::CancelledError("the client cancelled the request while it was queued");
      },
      RefusalReason::kCancelled);
  drop(
      batch.unfit,
      [&](const Task& t) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "request needs ", model_->PeakBytes(t.admitted.shape()),
            " bytes of device memory; model '", name, "' may use ", context_.memory->Describe()));
      },
      RefusalReason::kMemory);
  // The queue reserved the batch's peak when it formed the batch; every path
  // below returns it exactly once (before answering), and it returns itself
  // if a path forgets.
  MemoryReservation memory = std::move(batch.memory);
  if (batch.tasks.empty()) return;

  stats_.RecordBatchFormed(batch.bucket, batch.rows, batch.tokens, batch.computed_tokens);
  // Inline for the usual batch sizes: no allocation per batch.
  absl::InlinedVector<const InferRequest*, 16> requests;
  requests.reserve(batch.tasks.size());
  for (const auto& task : batch.tasks) requests.push_back(&task->request);
  const absl::Time dequeued = clock->Now();
  absl::StatusOr<std::unique_ptr<ModelBatch>> prepared =
      Guarded([&]() -> absl::StatusOr<std::unique_ptr<ModelBatch>> {
        // A lost device runs nothing more: answer without trying.
        if (absl::Status lost = context_.lifecycle->DeviceLostStatus(); !lost.ok()) return lost;
        std::lock_guard<std::mutex> lock(prepare_mu_);
        return model_->Prepare(requests);
      });
  if (!prepared.ok()) {
    std::vector<InferResponse> none(batch.tasks.size());
    const absl::Time failed = clock->Now();
    memory.Release();  // before answering, as a batch that ran does
    FinishBatch(batch.tasks, none, prepared.status(), {dequeued, failed, failed, failed});
    return;
  }
  if (!model_->UsesDevice()) {
    RunInline(batch.tasks, *std::move(prepared), std::move(memory), dequeued);
    return;
  }
  std::unique_ptr<PipelineJob> job = std::make_unique<BatchJob>(
      this, std::move(batch.tasks), *std::move(prepared), std::move(memory), dequeued);
  if (absl::Status s = context_.pipeline->Submit(&job); !s.ok()) {
    job->Complete(std::move(s));  // refused (shutting down): still ours to answer
    job->Respond();
  }
}

void ServedModel::RunInline(std::vector<std::unique_ptr<Task>>& tasks,
                            std::unique_ptr<ModelBatch> batch, MemoryReservation memory,
                            absl::Time dequeued) {
  Clock* clock = context_.clock;
  std::vector<InferResponse> responses(tasks.size());
  absl::InlinedVector<InferResponse*, 16> ptrs;
  ptrs.reserve(responses.size());
  for (InferResponse& r : responses) ptrs.push_back(&r);
  const absl::Time start = clock->Now();
  const absl::Status status = Guarded([&] { return RunPrepared(*batch, nullptr, nullptr, ptrs); });
  batch.reset();
  memory.Release();  // release, then answer
  const absl::Time done = clock->Now();
  FinishBatch(tasks, responses, status, {dequeued, start, done, done});
}

void ServedModel::PostRetry(std::vector<std::unique_ptr<Task>> tasks, MemoryReservation memory,
                            absl::Time dequeued) {
  // std::function needs a copyable callable: the job travels in a shared_ptr.
  struct Job {
    std::vector<std::unique_ptr<Task>> tasks;
    MemoryReservation memory;
  };
  auto job = std::make_shared<Job>(Job{std::move(tasks), std::move(memory)});
  context_.retry_worker->Post([this, job, dequeued] {
    RetryInHalves(std::move(job->tasks), dequeued);
    job->memory.Release();  // the retries ran within the batch's reservation
  });
}

void ServedModel::RetryInHalves(std::vector<std::unique_ptr<Task>> tasks, absl::Time dequeued) {
  Clock* clock = context_.clock;
  stats_.RecordOomSplit();
  const size_t mid = tasks.size() / 2;
  std::vector<std::unique_ptr<Task>> halves[2];
  for (size_t i = 0; i < tasks.size(); ++i) halves[i < mid ? 0 : 1].push_back(std::move(tasks[i]));
  for (auto& half : halves) {
    std::vector<const InferRequest*> requests;
    for (const auto& t : half) requests.push_back(&t->request);
    std::vector<InferResponse> responses(half.size());
    std::vector<InferResponse*> ptrs;
    for (InferResponse& r : responses) ptrs.push_back(&r);
    // Serially on the engine's own stream, on the retry worker: outside the
    // pipeline, which may be full.
    const absl::Time run_start = clock->Now();
    const absl::Status status = Guarded([&]() -> absl::Status {
      absl::StatusOr<std::unique_ptr<ModelBatch>> batch;
      {
        std::lock_guard<std::mutex> lock(prepare_mu_);
        batch = model_->Prepare(requests);
      }
      if (!batch.ok()) return batch.status();
      return RunPrepared(**batch, context_.device, context_.retry_stream->get(), ptrs);
    });
    if (status.code() == absl::StatusCode::kResourceExhausted && half.size() > 1) {
      RetryInHalves(std::move(half), dequeued);
    } else {
      // The failed attempt counts as the half's input phase: the phases
      // still add up to the time since the batch left the queue.
      const absl::Time end = clock->Now();
      FinishBatch(half, responses, status, {dequeued, run_start, end, end});
    }
  }
}

void ServedModel::FinishBatch(std::vector<std::unique_ptr<Task>>& tasks,
                              std::vector<InferResponse>& responses, absl::Status status,
                              const BatchTiming& t) {
  int64_t rows = 0;
  for (const auto& task : tasks) rows += task->admitted.rows;
  if (IsDeviceLost(status)) {
    // Every batch's outcome passes here: the one place a lost device is
    // noticed. Its requests get UNAVAILABLE: another replica can serve them.
    context_.lifecycle->NoteDeviceLost(status);
    status = absl::UnavailableError(absl::StrCat("model '", model_->spec().name,
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
        code, absl::StrCat("model '", model_->spec().name, "' failed: ", status.message()));
  }
  if (status.ok() && !tasks.empty()) {
    stats_.RecordBatchDone(rows, tasks.front()->admitted.bucket, t);
    // Each request's share, recorded with its answer (RecordAnswer).
    for (const auto& task : tasks) AddBatchShare(*task->account, task->arrival, t);
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    Task& task = *tasks[i];
    if (!status.ok()) {
      Answer(task, status);
      continue;
    }
    InferResponse& r = responses[i];
    r.model_name = task.request.model_name;
    r.id = task.request.id;
    SelectOutputs(task.request.requested_outputs, &r);
    Answer(task, std::move(r));
  }
}

}  // namespace infer
