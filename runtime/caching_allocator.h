// CachingAllocator: device memory for everything above the device layer,
// with a hard budget as its first principle.
//
// Design notes and invariants
// - Budget: the bytes reserved from the device (segments obtained with
//   Device::Allocate) never exceed `budget_bytes`. A request that would need
//   more fails with RESOURCE_EXHAUSTED; nothing else can push the device past
//   the budget, because every other layer allocates through this class.
// - Segments and blocks: memory is reserved in segments and handed out in
//   blocks carved from them. Requests are rounded up to 512 bytes. Requests of
//   up to 1 MiB come from 2 MiB "small" segments shared by many blocks;
//   larger requests get their own segments, rounded up to 2 MiB. A free block
//   is split when the remainder is worth keeping (>= 512 bytes in small
//   segments, > 1 MiB in large ones); freed blocks merge with free neighbours
//   in the same segment. Reuse is best fit: the smallest cached free block of
//   the same stream and kind that is large enough.
// - Streams: an allocated block belongs to the stream it was allocated on,
//   known by the stream's id (Stream::id, never reused), not its address.
//   Freed, it is reused at once by later work on that stream (the stream's
//   order makes that safe), and Free records an event on that stream: once
//   the event has completed, the block is "settled" and any stream may reuse
//   it. If other streams used the block (RecordStream), Free also records an
//   event on each of them, and the block stays out of the cache until all
//   have completed (then it is settled). Untouched memory (the rest of a new
//   segment) is settled from the start. Free neighbours merge when they are
//   in the same state (both settled, or both awaiting the same stream).
// - Lookup is best fit among the blocks of the asking stream and the
//   settled ones; only when neither fits are the pending events queried
//   (cheap, non-blocking) to settle more blocks before reserving a segment.
// - Out of memory, in this order: (1) wait for the pending cross-stream
//   frees and reuse a block they return, (2) release every cached segment
//   that is entirely free, (3) retry the reservation once; then fail with
//   RESOURCE_EXHAUSTED naming the bytes asked, the budget, reserved,
//   allocated and the largest free block. The same order applies when the
//   device itself refuses (a real cudaMalloc failure under the budget, e.g.
//   memory held by another process). A lost device (IsDeviceLost) fails the
//   allocation with its own error.
// - A lost device: an event that cannot be recorded or queried means work
//   on the block may never finish, so the block is never reused (it stays
//   active and is counted in lost_bytes) rather than handed to new work.
//
// Thread-safe: one mutex guards all state. Only non-blocking device calls
// (event record and query) run under it; segment reservation (cudaMalloc),
// release (cudaFree) and the out-of-memory waits run with it released, so
// one thread's out-of-memory path does not stall the others' allocations.
// Bytes being reserved count against the budget while the lock is out, and
// bytes being released still count until they are freed.
#ifndef INFER_RUNTIME_CACHING_ALLOCATOR_H_
#define INFER_RUNTIME_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace infer {

// What models and executors allocate device memory through.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // Memory usable by work on `stream` (non-null). RESOURCE_EXHAUSTED when it
  // cannot be had within the budget.
  virtual absl::StatusOr<void*> Allocate(size_t bytes, Stream* stream) = 0;
  // Returns memory from Allocate. INVALID_ARGUMENT for any other pointer
  // (including a second Free of the same one).
  virtual absl::Status Free(void* ptr) = 0;
};

struct CachingAllocatorOptions {
  // Hard cap on device memory reserved, in bytes. 0: use budget_fraction.
  int64_t budget_bytes = 0;
  // Used when budget_bytes is 0: this fraction of the device's total memory.
  double budget_fraction = 0.9;
};

struct AllocatorStats {
  int64_t budget_bytes = 0;
  int64_t reserved_bytes = 0;   // held from the device, in segments
  int64_t allocated_bytes = 0;  // in blocks handed out and not yet freed
  int64_t active_bytes = 0;     // allocated + freed blocks awaiting other streams
  int64_t requested_bytes = 0;  // as asked by callers, before rounding
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t cached_free_bytes = 0;  // reserved, free, reusable
  int64_t largest_free_block_bytes = 0;
  // 1 - largest free block / cached free bytes: 0 when the cached memory is
  // one block (or there is none), near 1 when it is in many small pieces.
  double fragmentation = 0.0;
  int64_t segments = 0;
  int64_t live_blocks = 0;
  uint64_t device_allocs = 0;  // segments reserved from the device
  uint64_t device_frees = 0;   // segments returned to the device
  uint64_t alloc_retries = 0;  // times the out-of-memory path freed cache and retried
  uint64_t ooms = 0;           // allocations refused with RESOURCE_EXHAUSTED
  int64_t lost_bytes = 0;      // blocks never to be reused: the device was lost
};

class CachingAllocator final : public DeviceAllocator {
 public:
  // `device` is borrowed and must outlive the allocator. INVALID_ARGUMENT for
  // a negative budget or a fraction outside (0, 1].
  static absl::StatusOr<std::unique_ptr<CachingAllocator>> Create(
      Device* device, const CachingAllocatorOptions& options);
  // Returns every segment to the device. Blocks still allocated are leaked to
  // the device's teardown (their owners outlived the allocator: a bug).
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  absl::StatusOr<void*> Allocate(size_t bytes, Stream* stream) override;
  absl::Status Free(void* ptr) override;

  // Declares that work on `stream` (other than the allocation stream) uses
  // the block at `ptr`, so a later Free waits for that work before reuse.
  absl::Status RecordStream(void* ptr, Stream* stream);

  // Returns every cached, entirely free segment to the device.
  void EmptyCache();

  AllocatorStats stats() const;
  // Sets the peaks to the current values.
  void ResetPeak();

  int64_t budget_bytes() const { return budget_bytes_; }
  Device* device() const { return device_; }

  // Rounding and segment sizes (exposed for tests and memory models).
  static constexpr size_t kRoundBytes = 512;
  static constexpr size_t kSmallRequestBytes = 1 << 20;  // <= this: small pool
  static constexpr size_t kSmallSegmentBytes = 2 << 20;
  static constexpr size_t kLargeRoundBytes = 2 << 20;
  // Bytes a request of `bytes` occupies in a block (0 on overflow).
  static size_t RoundedSize(size_t bytes);
  // The block a request of `bytes` gets from a fresh segment: the rounded
  // size for small requests; for large ones the rounded size when the rest of
  // its 2 MiB-rounded segment exceeds 1 MiB (the rest is split off and stays
  // free for others), else the whole segment. A cached free block is split by
  // the same rule, so reusing one can cost up to 1 MiB more per large block;
  // the memory headroom covers that.
  static int64_t BlockBytes(int64_t bytes);

 private:
  struct Block {
    // Allocated: the allocation stream's id. Free: the id of the stream whose
    // work may still touch the block (until free_event completes), or 0 once
    // settled. Ids, unlike addresses, are never reused by a later stream.
    uint64_t stream_id = 0;
    Stream* stream = nullptr;  // the allocation stream, while allocated
    char* ptr = nullptr;
    size_t size = 0;                    // bytes of the block (a multiple of kRoundBytes)
    size_t requested = 0;               // bytes asked for, while allocated
    bool small = false;                 // from a small segment (small pool)
    bool allocated = false;             // handed out, or freed but awaiting other streams
    bool in_pool = false;               // free and in small_free_ / large_free_
    std::shared_ptr<Event> free_event;  // free, not settled: recorded on `stream` at Free
    Block* prev = nullptr;              // neighbours within the segment
    Block* next = nullptr;
    std::vector<Stream*> uses;  // other streams that used it (RecordStream)
  };
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockLess>;
  struct PendingFree {
    Block* block;
    std::vector<std::shared_ptr<Event>> events;
  };

  CachingAllocator(Device* device, int64_t budget_bytes);

  Pool& PoolFor(bool small) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return small ? small_free_ : large_free_;
  }
  // The best-fitting free block of `size` for `stream` (its own or settled),
  // removed from its pool; null if none.
  Block* TakeFree(bool small, size_t size, uint64_t stream_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves a segment of `bytes` for a request of `requested` bytes on
  // stream `stream_id`, following the out-of-memory order above; may instead
  // return a cached block that the out-of-memory path freed up. Releases
  // `lock` (on mu_) around device calls and waits.
  absl::StatusOr<Block*> ReserveSegment(std::unique_lock<std::mutex>& lock, size_t bytes,
                                        bool small, uint64_t stream_id, size_t requested)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts a free block into its pool, merging neighbours in the same state.
  void ReturnBlock(Block* block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Settles free blocks whose stream has passed their free event.
  void SettleFreeBlocks() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An event recorded on `stream` now (pooled), or null when there is
  // nothing to wait for (a synchronous device); the device's error when the
  // event cannot be created or recorded.
  absl::StatusOr<std::shared_ptr<Event>> RecordOn(Stream* stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the work before `event` has completed (null: yes). Does not
  // block; false when the query fails.
  bool EventDone(const std::shared_ptr<Event>& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps a freed block out of reuse for good (see "A lost device").
  void Lose(Block* block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The events of every pending free and unsettled free block, to wait for
  // outside the lock. Drop the copies under the lock.
  std::vector<std::shared_ptr<Event>> UnsettledEvents() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves pending frees whose events completed into the pools.
  void ProcessPendingFrees() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns every cached, entirely free, settled segment to the device,
  // releasing `lock` around the device calls.
  void ReleaseCachedSegments(std::unique_lock<std::mutex>& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED, with the figures, for `requested` bytes that needed a
  // new `segment` (0: the request alone exceeds the budget); `device_refusal`:
  // the device's error when it, not the budget, refused the segment.
  absl::Status OutOfMemory(size_t requested, size_t segment,
                           const absl::Status& device_refusal = absl::OkStatus())
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t LargestFreeBlock() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Device* const device_;
  const int64_t budget_bytes_;

  mutable std::mutex mu_;
  Pool small_free_ ABSL_GUARDED_BY(mu_);
  Pool large_free_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<void*, Block*> live_ ABSL_GUARDED_BY(mu_);
  std::deque<PendingFree> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Event>> spare_events_ ABSL_GUARDED_BY(mu_);
  std::vector<Block*> lost_ ABSL_GUARDED_BY(mu_);
  int64_t reserving_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // in device calls, lock released
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

// RAII owner of one allocation from a DeviceAllocator. Movable, not copyable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Allocate(DeviceAllocator* allocator, size_t bytes,
                                               Stream* stream);
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t size() const { return bytes_; }
  void Reset();

 private:
  DeviceAllocator* allocator_ = nullptr;  // borrowed: allocators outlive buffers
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace infer

#endif  // INFER_RUNTIME_CACHING_ALLOCATOR_H_
