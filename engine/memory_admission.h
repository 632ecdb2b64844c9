// Memory admission: the device memory batches may use, and who holds it.
//
// MemoryAdmission is the budget left for batches: the allocator's budget
// less headroom, the models' resident bytes (weights, graph buffers) and the
// compute streams' GEMM workspaces. A batch launches only once its estimated
// peak (Model::PeakBytes) is reserved: a model's queue reserves it through
// the model's ModelMemoryGate when it forms the batch, as a
// MemoryReservation (batching/memory_gate.h) that the batch owns, so the
// bytes are returned exactly once on every path (success, failure, retry,
// shutdown) when it is released or destroyed. The admission is the policy;
// the caching allocator's hard budget is the backstop.
//
// Claims keep one model's long batch from starving behind the short ones of
// models sharing the budget: a queue whose oldest task has waited past its
// starvation bound for memory (batching/batch_queue.h) claims that task's
// bytes through its gate; every other gate's Available and TryReserve then
// leave the claimed bytes out, so the memory batches return accumulates for
// the claimant instead of going to the next small batch. When several
// queues claim, the older claim goes first: each claimant sees only the
// claims older than its own, so the oldest always sees the whole budget and
// claims never hold each other back in a circle.
//
// Thread-safe: MemoryAdmission locks internally; ModelMemoryGate adds no
// state of its own.
#ifndef INFER_ENGINE_MEMORY_ADMISSION_H_
#define INFER_ENGINE_MEMORY_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "batching/memory_gate.h"
#include "models/model.h"

namespace infer {

// The admission's view of the memory budget.
struct MemoryAdmissionStats {
  int64_t budget_bytes = 0;
  int64_t headroom_bytes = 0;   // kept free of batches
  int64_t weight_bytes = 0;     // held by the models while loaded (Model::WeightBytes)
  int64_t in_flight_bytes = 0;  // estimated peaks of the batches running now
  int64_t workspace_bytes = 0;  // the compute streams' GEMM workspaces
};

class MemoryAdmission {
 public:
  MemoryAdmission(int64_t budget, int64_t headroom) : budget_(budget), headroom_(headroom) {}
  void AddWeights(int64_t bytes);
  void AddWorkspaces(int64_t bytes);
  // Bytes batches may use with nothing in flight, and now: for `asking` (a
  // claimant's key, or null for one without a claim), less the claims it
  // must leave free.
  int64_t Capacity() const;
  int64_t Available(const void* asking = nullptr) const;
  // Reserves `bytes` if they are available now to `asking`.
  bool TryReserve(int64_t bytes, const void* asking = nullptr);
  // Sets the claim of `claimant` (bytes 0: withdraws it).
  void SetClaim(const void* claimant, int64_t bytes, absl::Time since);
  // Returns reserved bytes (a MemoryReservation does this, through a gate).
  void Release(int64_t bytes);
  MemoryAdmissionStats Stats() const;
  // "budget B - headroom H - weights W [- GEMM workspaces G] = C bytes", for
  // errors that name what a batch may use.
  std::string Describe() const;

 private:
  struct ClaimEntry {
    const void* claimant;
    int64_t bytes;
    absl::Time since;
  };
  int64_t CapacityLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t AvailableLocked(const void* asking) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t budget_, headroom_;
  mutable std::mutex mu_;
  int64_t weights_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t workspaces_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // At most one per queue that starves now: a handful.
  std::vector<ClaimEntry> claims_ ABSL_GUARDED_BY(mu_);
};

// One model's view of the admission: its memory model over the shared
// budget, as its batch queue asks.
class ModelMemoryGate final : public MemoryGate {
 public:
  // Both borrowed; they outlive the gate. `on_release` runs after each
  // release (to wake the queues that wait for memory); may be null.
  ModelMemoryGate(const Model* model, MemoryAdmission* admission,
                  std::function<void()> on_release = nullptr)
      : model_(model), admission_(admission), on_release_(std::move(on_release)) {}
  ~ModelMemoryGate() override { admission_->SetClaim(this, 0, absl::InfinitePast()); }
  ModelMemoryGate(const ModelMemoryGate&) = delete;
  ModelMemoryGate& operator=(const ModelMemoryGate&) = delete;
  int64_t PeakBytes(const BatchShape& shape) const override { return model_->PeakBytes(shape); }
  int64_t ComputedTokens(const BatchShape& shape) const override {
    return model_->ComputedTokens(shape);
  }
  int64_t AvailableBytes() const override { return admission_->Available(this); }
  int64_t CapacityBytes() const override { return admission_->Capacity(); }
  // Withdrawing a claim wakes no one: whoever it held back waits for memory
  // that a batch in flight will return (a claim is only made while the
  // claimant cannot fit, so something is in flight or an older claimant
  // is about to launch), and that release wakes every queue.
  void Claim(int64_t bytes, absl::Time since) override { admission_->SetClaim(this, bytes, since); }

 private:
  bool TryReserve(int64_t bytes) override { return admission_->TryReserve(bytes, this); }
  void Release(int64_t bytes) override {
    admission_->Release(bytes);
    if (on_release_) on_release_();
  }

  const Model* const model_;
  MemoryAdmission* const admission_;
  const std::function<void()> on_release_;
};

}  // namespace infer

#endif  // INFER_ENGINE_MEMORY_ADMISSION_H_
