// MemoryGate and MemoryReservation: how a batch queue learns what a batch
// costs and holds the device memory of a batch it forms.
//
// - A queue plans a batch against MemoryGate::AvailableBytes and reserves its
//   estimated peak (MemoryReservation::TryTake) in the same call that takes
//   the batch's tasks out: planning and reserving cannot be split, or another
//   model sharing the budget could take the bytes in between. The reservation
//   travels with the batch (BatchQueue::Batch::memory) and whoever holds the
//   batch owns it from then on.
// - A MemoryReservation returns its bytes to the gate exactly once: by
//   Release or, failing that, its destructor; a move hands the duty over.
//   So every path (success, failure, retry, shutdown, an exception) returns
//   them, and none returns them twice.
//
// Thread-safety: a gate is called from the queue's owner and from whoever
// releases reservations (other threads): implementations lock as needed. A
// MemoryReservation is owned by one thread at a time (movable, not copyable).
#ifndef INFER_BATCHING_MEMORY_GATE_H_
#define INFER_BATCHING_MEMORY_GATE_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/time/time.h"
#include "batching/batch_shape.h"

namespace infer {

// What the queue asks about a batch's cost: the device memory it needs and
// the tokens it computes. Implementations are owned by the caller and
// outlive the queue and every reservation taken through them.
class MemoryGate {
 public:
  virtual ~MemoryGate() = default;
  // Estimated peak device bytes of a batch of this shape.
  virtual int64_t PeakBytes(const BatchShape& shape) const = 0;
  // Tokens the model computes for a batch of this shape (what
  // max_batch_tokens limits): by default rows × length, as for a model that
  // pads every sequence to the longest.
  virtual int64_t ComputedTokens(const BatchShape& shape) const { return shape.padded_tokens(); }
  // Bytes a new batch could use now, and at most (with nothing in flight).
  virtual int64_t AvailableBytes() const = 0;
  virtual int64_t CapacityBytes() const = 0;
  // The queue's starving task (batch_queue.h: it has waited past the
  // starvation bound, since `since`, for `bytes` that are not available):
  // a gate over a budget that other queues share holds these bytes back
  // from them (their AvailableBytes and reservations leave them out) until
  // the claim changes, the older claim first when several queues starve.
  // `bytes` 0 withdraws the claim. Called by the queue, from its owner's
  // thread, when the claim changes. Default: nothing to hold back from.
  virtual void Claim(int64_t bytes, absl::Time since) {}

 protected:
  friend class MemoryReservation;
  // Reserves `bytes` if they are available now. Only MemoryReservation
  // calls these two, so every reservation has an owner.
  virtual bool TryReserve(int64_t bytes) = 0;
  // Returns reserved bytes.
  virtual void Release(int64_t bytes) = 0;
};

// Bytes reserved through a gate for one batch. Empty when default-made.
class MemoryReservation {
 public:
  MemoryReservation() = default;
  // The reservation of `bytes` through `gate`, or nullopt if they are not
  // available now. A null gate or 0 bytes gives an empty reservation.
  static std::optional<MemoryReservation> TryTake(MemoryGate* gate, int64_t bytes) {
    MemoryReservation r;
    if (gate == nullptr || bytes == 0) return r;
    if (!gate->TryReserve(bytes)) return std::nullopt;
    r.gate_ = gate;
    r.bytes_ = bytes;
    return r;
  }
  ~MemoryReservation() { Release(); }
  MemoryReservation(MemoryReservation&& other) noexcept
      : gate_(std::exchange(other.gate_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  MemoryReservation& operator=(MemoryReservation&& other) noexcept {
    if (this != &other) {
      Release();
      gate_ = std::exchange(other.gate_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

  // Returns the bytes now; later calls do nothing.
  void Release() {
    if (gate_ == nullptr) return;
    std::exchange(gate_, nullptr)->Release(std::exchange(bytes_, 0));
  }
  int64_t bytes() const { return bytes_; }

 private:
  MemoryGate* gate_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace infer

#endif  // INFER_BATCHING_MEMORY_GATE_H_
