// HostStagingPool: host buffers that device copies read from and write to
// asynchronously — page-locked (cudaHostAlloc) on CUDA, so copies are truly
// asynchronous and run at full bus speed; aligned heap memory on the CPU.
// Pinning is slow (it maps and locks pages, and can stall the GPU), so it
// happens at start, not per batch.
//
// Design notes and invariants
// - Sizes are rounded up to a power of two (at least 64 KiB): the size class.
// - Arena: `arena_bytes` are pinned once, at Create, and carved into buffers
//   by a buddy allocator (a free buffer merges with its free buddy). Serving
//   from the arena takes no device call, so after start the hot path pins
//   nothing as long as the arena covers the buffers in use.
// - Overflow: a request the arena cannot serve gets a buffer of its own,
//   pinned with the pool's lock released, and cached per size class when
//   released, for the next request of that class.
// - Bounded: pinned memory held (arena + overflow buffers in use or cached)
//   never exceeds max_bytes. When a new overflow buffer would exceed it,
//   just enough cached overflow buffers are unpinned to make room (largest
//   first); if that cannot make room, Acquire fails with RESOURCE_EXHAUSTED
//   (the caller sheds or retries), never over-allocates.
// - No device call (pin or unpin) runs under the pool's lock.
// - A StagingBuffer returns to the pool when destroyed. Its owner must not
//   destroy it while a device copy using it may still be running.
//
// Thread-safe.
#ifndef INFER_RUNTIME_STAGING_POOL_H_
#define INFER_RUNTIME_STAGING_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace infer {

class HostStagingPool;

// RAII lease of one staging buffer. Movable, not copyable.
class StagingBuffer {
 public:
  StagingBuffer() = default;
  ~StagingBuffer() { Reset(); }
  StagingBuffer(StagingBuffer&& other) noexcept { *this = std::move(other); }
  StagingBuffer& operator=(StagingBuffer&& other) noexcept;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t size() const { return bytes_; }         // as requested
  size_t capacity() const { return capacity_; }  // the size class
  void Reset();

 private:
  friend class HostStagingPool;
  HostStagingPool* pool_ = nullptr;  // borrowed: the pool outlives its buffers
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  size_t capacity_ = 0;
};

struct StagingPoolOptions {
  // Most host staging memory held at once (arena + overflow buffers), bytes.
  int64_t max_bytes = int64_t{512} << 20;
  // Pinned at Create and carved into buffers (0: none). Rounded down to a
  // multiple of kMinBufferBytes, and to max_bytes when larger.
  int64_t arena_bytes = int64_t{64} << 20;
};

struct StagingPoolStats {
  int64_t max_bytes = 0;
  int64_t arena_bytes = 0;
  int64_t in_use_bytes = 0;     // buffers handed out, arena or overflow
  int64_t cached_bytes = 0;     // overflow buffers free for reuse
  int64_t peak_held_bytes = 0;  // arena + overflow in use + cached
  uint64_t host_allocs = 0;     // buffers pinned (the arena counts once)
  uint64_t host_frees = 0;      // overflow buffers unpinned
  uint64_t arena_hits = 0;      // Acquires served from the arena
  uint64_t reuses = 0;          // Acquires served from cached overflow buffers
  uint64_t refusals = 0;        // Acquires refused (RESOURCE_EXHAUSTED)
};

class HostStagingPool {
 public:
  static constexpr size_t kMinBufferBytes = 64 << 10;

  // `device` is borrowed and must outlive the pool. Pins the arena:
  // INVALID_ARGUMENT for sizes out of range, RESOURCE_EXHAUSTED when the
  // arena cannot be pinned.
  static absl::StatusOr<std::unique_ptr<HostStagingPool>> Create(Device* device,
                                                                 const StagingPoolOptions& options);
  // Unpins the arena and the cached buffers. Every StagingBuffer must be
  // gone by then.
  ~HostStagingPool();
  HostStagingPool(const HostStagingPool&) = delete;
  HostStagingPool& operator=(const HostStagingPool&) = delete;

  absl::StatusOr<StagingBuffer> Acquire(size_t bytes);
  // Unpins every cached overflow buffer (the arena stays).
  void Trim();
  StagingPoolStats stats() const;

  // The size class of a request (0 if it cannot be represented).
  static size_t SizeClass(size_t bytes);

 private:
  friend class StagingBuffer;
  HostStagingPool(Device* device, int64_t max_bytes) : device_(device), max_bytes_(max_bytes) {}
  void Release(void* ptr, size_t capacity);
  // The arena's buddy allocator: a free buffer of `cls` bytes (split from a
  // larger one if need be), or null.
  char* TakeFromArena(size_t cls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReturnToArena(char* ptr, size_t cls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The size of the arena's top-level piece holding `offset`.
  size_t RootSize(size_t offset) const;
  // Removes cached overflow buffers (largest first) until `need` more bytes
  // fit under max_bytes; returns them, to unpin without the lock. Empty if
  // even all of them would not make room.
  std::vector<std::pair<void*, size_t>> EvictFor(int64_t need) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t HeldLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unpin(const std::vector<std::pair<void*, size_t>>& buffers);

  Device* const device_;
  const int64_t max_bytes_;
  char* arena_ = nullptr;  // constant after Create
  size_t arena_bytes_ = 0;

  mutable std::mutex mu_;
  // Arena buffers free, by size class: offsets into the arena.
  std::map<size_t, std::set<size_t>> arena_free_ ABSL_GUARDED_BY(mu_);
  // Cached overflow buffers, by size class.
  std::map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  int64_t pinning_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // overflow being pinned, lock released
  int64_t overflow_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  StagingPoolStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer

#endif  // INFER_RUNTIME_STAGING_POOL_H_
