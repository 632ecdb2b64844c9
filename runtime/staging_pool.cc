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

absl::StatusOr<std::unique_ptr<HostStagingPool>> HostStagingPool::Create(
    Device* device, const StagingPoolOptions& options) {
  if (device == nullptr) return absl::InvalidArgumentError("device is null");
  if (options.max_bytes < static_cast<int64_t>(kMinBufferBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("staging pool max_bytes must be at least ",
                                                   kMinBufferBytes, ", got ", options.max_bytes));
  }
  return std::unique_ptr<HostStagingPool>(new HostStagingPool(device, options.max_bytes));
}

HostStagingPool::~HostStagingPool() {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked();
}

absl::StatusOr<StagingBuffer> HostStagingPool::Acquire(size_t bytes) {
  const size_t cls = SizeClass(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto refuse = [&](const std::string& why) {
    ++stats_.refusals;
    return absl::ResourceExhaustedError(absl::StrCat(
        "host staging pool: cannot provide ", bytes, " bytes: ", why, "; max ", max_bytes_,
        ", in use ", stats_.in_use_bytes, ", cached ", stats_.cached_bytes));
  };
  if (cls == 0 || cls > static_cast<size_t>(max_bytes_)) return refuse("larger than the pool");
  void* ptr = nullptr;
  if (auto it = free_.find(cls); it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= static_cast<int64_t>(cls);
    ++stats_.reuses;
  } else {
    const int64_t need = static_cast<int64_t>(cls);
    if (stats_.in_use_bytes + stats_.cached_bytes + need > max_bytes_) TrimLocked();
    if (stats_.in_use_bytes + need > max_bytes_) return refuse("buffers in use fill the pool");
    absl::StatusOr<void*> fresh = device_->AllocateHost(cls);
    if (!fresh.ok()) return refuse(std::string(fresh.status().message()));
    ptr = *fresh;
    ++stats_.host_allocs;
  }
  stats_.in_use_bytes += static_cast<int64_t>(cls);
  stats_.peak_held_bytes =
      std::max(stats_.peak_held_bytes, stats_.in_use_bytes + stats_.cached_bytes);
  StagingBuffer buffer;
  buffer.pool_ = this;
  buffer.ptr_ = ptr;
  buffer.bytes_ = bytes;
  buffer.capacity_ = cls;
  return buffer;
}

void HostStagingPool::Release(void* ptr, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  free_[capacity].push_back(ptr);
  stats_.in_use_bytes -= static_cast<int64_t>(capacity);
  stats_.cached_bytes += static_cast<int64_t>(capacity);
}

void HostStagingPool::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked();
}

void HostStagingPool::TrimLocked() {
  for (auto& [cls, ptrs] : free_) {
    for (void* p : ptrs) {
      device_->FreeHost(p);
      ++stats_.host_frees;
      stats_.cached_bytes -= static_cast<int64_t>(cls);
    }
    ptrs.clear();
  }
}

StagingPoolStats HostStagingPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  StagingPoolStats s = stats_;
  s.max_bytes = max_bytes_;
  return s;
}

}  // namespace infer
