// The engine's private types, shared by its parts: engine.cc (models,
// submission, splitting, lifecycle) and batch_execution.cc (running
// batches). Not part of the library's API.
#ifndef INFER_SERVER_ENGINE_INTERNAL_H_
#define INFER_SERVER_ENGINE_INTERNAL_H_

#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "batching/dynamic_batcher.h"
#include "server/engine.h"
#include "server/guarded.h"
#include "server/memory_admission.h"
#include "server/model_stats.h"
#include "server/request_admission.h"

namespace infer {

// A request (or a piece of a split one) waiting in a model's queue.
struct Engine::InferTask {
  InferRequest request;
  DoneCallback done;
  std::shared_ptr<RequestAccount> account;  // shared by the pieces of a request
  absl::Time arrival;
  AdmittedRequest admitted;  // its classification (server/request_admission.h)

  // What BatchQueue asks of a task.
  int64_t size() const { return admitted.rows; }
  int64_t length() const { return admitted.seq_length; }
  int64_t tokens() const { return admitted.real_tokens; }
  int priority() const { return admitted.level; }
  absl::Time deadline() const { return admitted.due; }
  bool cancelled() const {
    return account->failed.load(std::memory_order_relaxed) ||
           (request.is_cancelled && request.is_cancelled());
  }
};

struct Engine::ModelEntry {
  ModelEntry(std::unique_ptr<Model> m, const QueueOptions& q, const RequestLimits& l)
      : model(std::move(m)), batching(q), limits(l), stats(q.length_buckets) {}

  const std::unique_ptr<Model> model;
  const QueueOptions batching;
  const RequestLimits limits;
  ModelStatsRecorder stats;
  std::unique_ptr<ModelMemoryGate> gate;
  // Held around Model::Prepare: the batcher and the retry worker both
  // prepare batches, and Prepare is never concurrent on one model.
  std::mutex prepare_mu;

  // Declared last so it is destroyed (drained and joined) first.
  std::unique_ptr<DynamicBatcher<InferTask>> batcher;
};

}  // namespace infer

#endif  // INFER_SERVER_ENGINE_INTERNAL_H_
