#include "runtime/staging_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace infer {

StagingBuffer& StagingBuffer::operator=(StagingBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = std::exchange(other.pool_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void StagingBuffer::Reset() {
  if (ptr_ != nullptr) pool_->Release(ptr_, capacity_);
  pool_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
  capacity_ = 0;
}

size_t HostStagingPool::SizeClass(size_t bytes) {
  size_t c = kMinBufferBytes;
  while (c < bytes) {
    if (c > (size_t{1} << 62)) return 0;
    c <<= 1;
  }
  return c;
}

namespace {

// The largest power of two <= n (n > 0).
size_t FloorPow2(size_t n) {
  size_t p = 1;
  while (p <= n / 2) p <<= 1;
  return p;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostStagingPool>> HostStagingPool::Create(
    Device* device, const StagingPoolOptions& options) {
  if (device == nullptr) return absl::InvalidArgumentError("device is null");
  if (options.max_bytes < static_cast<int64_t>(kMinBufferBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("staging pool max_bytes must be at least ",
                                                   kMinBufferBytes, ", got ", options.max_bytes));
  }
  if (options.arena_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("staging pool arena_bytes must not be negative, got ", options.arena_bytes));
  }
  std::unique_ptr<HostStagingPool> pool(new HostStagingPool(device, options.max_bytes));
  const size_t arena = static_cast<size_t>(std::min(options.arena_bytes, options.max_bytes)) /
                       kMinBufferBytes * kMinBufferBytes;
  if (arena > 0) {
    absl::StatusOr<void*> pinned = device->AllocateHost(arena);
    if (!pinned.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot pin the ", arena, "-byte host staging arena: ", pinned.status().message()));
    }
    pool->arena_ = static_cast<char*>(*pinned);
    pool->arena_bytes_ = arena;
    std::lock_guard<std::mutex> lock(pool->mu_);
    // Top-level pieces: the arena as descending powers of two, each at an
    // offset that is a multiple of its size (so buddies are offset ^ size).
    for (size_t offset = 0; offset < arena;) {
      const size_t root = FloorPow2(arena - offset);
      pool->arena_free_[root].insert(offset);
      offset += root;
    }
    pool->stats_.host_allocs = 1;
    pool->stats_.peak_held_bytes = static_cast<int64_t>(arena);
  }
  return pool;
}

HostStagingPool::~HostStagingPool() {
  Trim();
  if (arena_ != nullptr) device_->FreeHost(arena_);
}

size_t HostStagingPool::RootSize(size_t offset) const {
  for (size_t start = 0; start < arena_bytes_;) {
    const size_t root = FloorPow2(arena_bytes_ - start);
    if (offset < start + root) return root;
    start += root;
  }
  return 0;
}

char* HostStagingPool::TakeFromArena(size_t cls) {
  for (auto it = arena_free_.lower_bound(cls); it != arena_free_.end(); ++it) {
    if (it->second.empty()) continue;
    size_t size = it->first;
    const size_t offset = *it->second.begin();
    it->second.erase(it->second.begin());
    while (size > cls) {  // split, keeping the lower half
      size /= 2;
      arena_free_[size].insert(offset + size);
    }
    return arena_ + offset;
  }
  return nullptr;
}

void HostStagingPool::ReturnToArena(char* ptr, size_t cls) {
  size_t offset = static_cast<size_t>(ptr - arena_), size = cls;
  const size_t root = RootSize(offset);
  while (size < root) {
    auto it = arena_free_.find(size);
    if (it == arena_free_.end() || it->second.erase(offset ^ size) == 0) break;
    offset = std::min(offset, offset ^ size);
    size *= 2;
  }
  arena_free_[size].insert(offset);
}

int64_t HostStagingPool::HeldLocked() const {
  return static_cast<int64_t>(arena_bytes_) + overflow_in_use_ + stats_.cached_bytes +
         pinning_bytes_;
}

std::vector<std::pair<void*, size_t>> HostStagingPool::EvictFor(int64_t need) {
  std::vector<std::pair<void*, size_t>> evicted;
  int64_t excess = HeldLocked() + need - max_bytes_;
  if (excess <= 0 || excess > stats_.cached_bytes) return evicted;
  for (auto it = free_.rbegin(); it != free_.rend() && excess > 0; ++it) {
    std::vector<void*>& ptrs = it->second;
    while (!ptrs.empty() && excess > 0) {
      evicted.emplace_back(ptrs.back(), it->first);
      ptrs.pop_back();
      stats_.cached_bytes -= static_cast<int64_t>(it->first);
      excess -= static_cast<int64_t>(it->first);
    }
  }
  return evicted;
}

void HostStagingPool::Unpin(const std::vector<std::pair<void*, size_t>>& buffers) {
  for (const auto& [ptr, cls] : buffers) device_->FreeHost(ptr);
  if (buffers.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.host_frees += buffers.size();
}

absl::StatusOr<StagingBuffer> HostStagingPool::Acquire(size_t bytes) {
  const size_t cls = SizeClass(bytes);
  std::unique_lock<std::mutex> lock(mu_);
  auto refuse = [&](const std::string& why) {
    ++stats_.refusals;
    return absl::ResourceExhaustedError(
        absl::StrCat("host staging pool: cannot provide ", bytes, " bytes: ", why, "; max ",
                     max_bytes_, ", arena ", arena_bytes_, ", in use ", stats_.in_use_bytes,
                     ", cached ", stats_.cached_bytes));
  };
  if (cls == 0 || cls > static_cast<size_t>(max_bytes_)) return refuse("larger than the pool");
  auto lease = [&](void* ptr) {
    stats_.in_use_bytes += static_cast<int64_t>(cls);
    stats_.peak_held_bytes = std::max(stats_.peak_held_bytes, HeldLocked());
    StagingBuffer buffer;
    buffer.pool_ = this;
    buffer.ptr_ = ptr;
    buffer.bytes_ = bytes;
    buffer.capacity_ = cls;
    return buffer;
  };
  if (char* ptr = TakeFromArena(cls)) {
    ++stats_.arena_hits;
    return lease(ptr);
  }
  if (auto it = free_.find(cls); it != free_.end() && !it->second.empty()) {
    void* ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= static_cast<int64_t>(cls);
    overflow_in_use_ += static_cast<int64_t>(cls);
    ++stats_.reuses;
    return lease(ptr);
  }
  // A new overflow buffer: make room, then pin with the lock released.
  const int64_t need = static_cast<int64_t>(cls);
  std::vector<std::pair<void*, size_t>> evicted = EvictFor(need);
  if (HeldLocked() + need > max_bytes_) return refuse("buffers in use fill the pool");
  pinning_bytes_ += need;
  lock.unlock();
  Unpin(evicted);
  absl::StatusOr<void*> fresh = device_->AllocateHost(cls);
  lock.lock();
  pinning_bytes_ -= need;
  if (!fresh.ok()) return refuse(std::string(fresh.status().message()));
  ++stats_.host_allocs;
  overflow_in_use_ += need;
  return lease(*fresh);
}

void HostStagingPool::Release(void* ptr, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.in_use_bytes -= static_cast<int64_t>(capacity);
  char* p = static_cast<char*>(ptr);
  if (arena_ != nullptr && p >= arena_ && p < arena_ + arena_bytes_) {
    ReturnToArena(p, capacity);
    return;
  }
  free_[capacity].push_back(ptr);
  overflow_in_use_ -= static_cast<int64_t>(capacity);
  stats_.cached_bytes += static_cast<int64_t>(capacity);
}

void HostStagingPool::Trim() {
  std::vector<std::pair<void*, size_t>> cached;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [cls, ptrs] : free_) {
      for (void* p : ptrs) cached.emplace_back(p, cls);
      stats_.cached_bytes -= static_cast<int64_t>(cls * ptrs.size());
      ptrs.clear();
    }
  }
  Unpin(cached);
}

StagingPoolStats HostStagingPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  StagingPoolStats s = stats_;
  s.max_bytes = max_bytes_;
  s.arena_bytes = static_cast<int64_t>(arena_bytes_);
  return s;
}

}  // namespace infer
