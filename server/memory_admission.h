// Memory admission: the device memory batches may use, and who holds it.
//
// MemoryAdmission is the budget left for batches: the allocator's budget
// less headroom, the models' resident bytes (weights, graph buffers) and the
// compute streams' GEMM workspaces. A batch launches only once its estimated
// peak (Model::PeakBytes) is reserved; a model's queue reserves through its
// ModelMemoryGate when it forms the batch (batching/batch_queue.h), and the
// engine hands the bytes at once to a MemoryReservation that the batch owns,
// so they are returned exactly once on every path (success, failure, retry,
// shutdown) when it is released or destroyed. The admission is the policy;
// the caching allocator's hard budget is the backstop.
//
// Thread-safe: MemoryAdmission and ModelMemoryGate lock internally; a
// MemoryReservation is owned by one batch at a time (movable, not copyable).
#ifndef INFER_SERVER_MEMORY_ADMISSION_H_
#define INFER_SERVER_MEMORY_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "batching/batch_queue.h"
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
  // Bytes batches may use with nothing in flight, and now.
  int64_t Capacity() const;
  int64_t Available() const;
  // Reserves `bytes` if they are available now.
  bool TryReserve(int64_t bytes);
  // Returns reserved bytes (MemoryReservation does this).
  void Release(int64_t bytes);
  MemoryAdmissionStats Stats() const;
  // "budget B - headroom H - weights W [- GEMM workspaces G] = C bytes", for
  // errors that name what a batch may use.
  std::string Describe() const;

 private:
  int64_t CapacityLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t budget_, headroom_;
  mutable std::mutex mu_;
  int64_t weights_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t workspaces_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

// Bytes reserved for one batch, returned to the admission exactly once: by
// Release or, failing that, the destructor. Empty when default-made.
class MemoryReservation {
 public:
  MemoryReservation() = default;
  // Takes over `bytes` already reserved from `admission` (by TryReserve,
  // through a gate); `on_release` runs each time bytes are returned (to wake
  // whoever waits for memory). A null admission or 0 bytes holds nothing.
  static MemoryReservation Adopt(MemoryAdmission* admission, int64_t bytes,
                                 std::function<void()> on_release);
  ~MemoryReservation() { Release(); }
  MemoryReservation(MemoryReservation&& other) noexcept { *this = std::move(other); }
  MemoryReservation& operator=(MemoryReservation&& other) noexcept;
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

  // Returns the bytes now; later calls do nothing.
  void Release();
  int64_t bytes() const { return bytes_; }

 private:
  MemoryAdmission* admission_ = nullptr;
  int64_t bytes_ = 0;
  std::function<void()> on_release_;
};

// One model's view of the admission: its memory model over the shared
// budget, as its batch queue asks.
class ModelMemoryGate final : public MemoryGate {
 public:
  // Both borrowed; they outlive the gate.
  ModelMemoryGate(const Model* model, MemoryAdmission* admission)
      : model_(model), admission_(admission) {}
  int64_t PeakBytes(const BatchShape& shape) const override { return model_->PeakBytes(shape); }
  int64_t ComputedTokens(const BatchShape& shape) const override {
    return model_->ComputedTokens(shape);
  }
  int64_t AvailableBytes() const override { return admission_->Available(); }
  int64_t CapacityBytes() const override { return admission_->Capacity(); }
  bool TryReserve(int64_t bytes) override { return admission_->TryReserve(bytes); }

 private:
  const Model* const model_;
  MemoryAdmission* const admission_;
};

}  // namespace infer

#endif  // INFER_SERVER_MEMORY_ADMISSION_H_
