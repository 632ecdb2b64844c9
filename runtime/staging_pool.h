// HostStagingPool: host buffers that device copies read from and write to
// asynchronously — page-locked (cudaHostAlloc) on CUDA, so copies are truly
// asynchronous and run at full bus speed; aligned heap memory on the CPU.
// Pinning is slow (it maps and locks pages), so buffers are reused across
// batches instead of allocated per batch.
//
// Design notes and invariants
// - Sizes are rounded up to a power of two (at least 64 KiB); free buffers are
//   cached per size and handed out again for any request of that class.
// - Bounded: pinned memory held (in use + cached) never exceeds max_bytes.
//   When a new buffer would exceed it, cached free buffers are released
//   first; if buffers in use alone leave no room, Acquire fails with
//   RESOURCE_EXHAUSTED (the caller sheds or retries), never over-allocates.
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
  // Most host staging memory held at once (in use + cached), in bytes.
  int64_t max_bytes = int64_t{512} << 20;
};

struct StagingPoolStats {
  int64_t max_bytes = 0;
  int64_t in_use_bytes = 0;
  int64_t cached_bytes = 0;
  int64_t peak_held_bytes = 0;  // in use + cached
  uint64_t host_allocs = 0;     // buffers pinned
  uint64_t host_frees = 0;      // buffers unpinned
  uint64_t reuses = 0;          // Acquires served from the cache
  uint64_t refusals = 0;        // Acquires refused (RESOURCE_EXHAUSTED)
};

class HostStagingPool {
 public:
  static constexpr size_t kMinBufferBytes = 64 << 10;

  // `device` is borrowed and must outlive the pool.
  static absl::StatusOr<std::unique_ptr<HostStagingPool>> Create(Device* device,
                                                                 const StagingPoolOptions& options);
  // Frees the cached buffers. Every StagingBuffer must be gone by then.
  ~HostStagingPool();
  HostStagingPool(const HostStagingPool&) = delete;
  HostStagingPool& operator=(const HostStagingPool&) = delete;

  absl::StatusOr<StagingBuffer> Acquire(size_t bytes);
  // Unpins every cached free buffer.
  void Trim();
  StagingPoolStats stats() const;

  // The size class of a request (0 if it cannot be represented).
  static size_t SizeClass(size_t bytes);

 private:
  friend class StagingBuffer;
  HostStagingPool(Device* device, int64_t max_bytes) : device_(device), max_bytes_(max_bytes) {}
  void Release(void* ptr, size_t capacity);
  void TrimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Device* const device_;
  const int64_t max_bytes_;

  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);  // by size class
  StagingPoolStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer

#endif  // INFER_RUNTIME_STAGING_POOL_H_
