#include "runtime/caching_allocator.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"

namespace infer {

struct CachingAllocator::Block {
  Stream* stream = nullptr;  // the allocation stream; owns the whole segment
  char* ptr = nullptr;
  size_t size = 0;           // bytes of the block (a multiple of kRoundBytes)
  size_t requested = 0;      // bytes asked for, while allocated
  bool small = false;        // from a small segment (small pool)
  bool allocated = false;    // handed out, or freed but awaiting other streams
  Block* prev = nullptr;     // neighbours within the segment
  Block* next = nullptr;
  std::vector<Stream*> uses;  // other streams that used it (RecordStream)
};

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return std::less<Stream*>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

namespace {

size_t RoundUp(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

}  // namespace

size_t CachingAllocator::RoundedSize(size_t bytes) {
  if (bytes > std::numeric_limits<size_t>::max() - kLargeRoundBytes) return 0;
  return std::max(kRoundBytes, RoundUp(bytes, kRoundBytes));
}

absl::StatusOr<std::unique_ptr<CachingAllocator>> CachingAllocator::Create(
    Device* device, const CachingAllocatorOptions& options) {
  if (device == nullptr) return absl::InvalidArgumentError("device is null");
  if (options.budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory budget must not be negative, got ", options.budget_bytes));
  }
  int64_t budget = options.budget_bytes;
  if (budget == 0) {
    if (!(options.budget_fraction > 0.0 && options.budget_fraction <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "memory budget fraction must be in (0, 1], got ", options.budget_fraction));
    }
    budget = static_cast<int64_t>(static_cast<double>(device->info().total_memory_bytes) *
                                  options.budget_fraction);
  }
  const int64_t total = device->info().total_memory_bytes;
  if (total > 0 && budget > total) {
    return absl::InvalidArgumentError(absl::StrCat("memory budget of ", budget, " bytes exceeds ",
                                                   device->spec(), "'s ", total, " bytes"));
  }
  return std::unique_ptr<CachingAllocator>(new CachingAllocator(device, budget));
}

CachingAllocator::CachingAllocator(Device* device, int64_t budget_bytes)
    : device_(device), budget_bytes_(budget_bytes) {
  stats_.budget_bytes = budget_bytes;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessPendingFrees(/*wait=*/true);
  // Every block, wherever it is; a segment is freed through its first block.
  std::vector<Block*> blocks(small_free_.begin(), small_free_.end());
  blocks.insert(blocks.end(), large_free_.begin(), large_free_.end());
  for (const auto& [ptr, block] : live_) blocks.push_back(block);
  for (Block* b : blocks) {
    if (b->prev == nullptr) device_->Free(b->ptr);
  }
  for (Block* b : blocks) delete b;
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes, Stream* stream) {
  if (stream == nullptr) return absl::InvalidArgumentError("allocation stream must not be null");
  const size_t size = RoundedSize(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (size == 0 || size > static_cast<size_t>(budget_bytes_)) return OutOfMemory(bytes, 0);
  const bool small = size <= kSmallRequestBytes;
  Pool& pool = PoolFor(small);
  auto take_cached = [&]() -> Block* {
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    pool.erase(it);
    return b;
  };
  const size_t segment = small ? kSmallSegmentBytes : RoundUp(size, kLargeRoundBytes);

  ProcessPendingFrees(/*wait=*/false);
  Block* block = take_cached();
  if (block == nullptr) {
    absl::StatusOr<Block*> reserved = ReserveSegment(segment, small, stream, bytes);
    if (!reserved.ok()) return reserved.status();
    block = *reserved;
  }

  // Split off the remainder when it is worth keeping.
  const size_t remaining = block->size - size;
  if ((small && remaining >= kRoundBytes) || (!small && remaining > kSmallRequestBytes)) {
    Block* rest = new Block;
    rest->stream = stream;
    rest->ptr = block->ptr + size;
    rest->size = remaining;
    rest->small = small;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    pool.insert(rest);
  }
  block->allocated = true;
  block->requested = bytes;
  live_[block->ptr] = block;
  stats_.allocated_bytes += static_cast<int64_t>(block->size);
  stats_.active_bytes += static_cast<int64_t>(block->size);
  stats_.requested_bytes += static_cast<int64_t>(bytes);
  ++stats_.live_blocks;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return static_cast<void*>(block->ptr);
}

absl::StatusOr<CachingAllocator::Block*> CachingAllocator::ReserveSegment(size_t bytes, bool small,
                                                                          Stream* stream,
                                                                          size_t requested) {
  auto try_reserve = [&]() -> Block* {
    if (stats_.reserved_bytes + static_cast<int64_t>(bytes) > budget_bytes_) return nullptr;
    absl::StatusOr<void*> ptr = device_->Allocate(bytes);
    if (!ptr.ok()) return nullptr;
    ++stats_.device_allocs;
    ++stats_.segments;
    stats_.reserved_bytes += static_cast<int64_t>(bytes);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    Block* b = new Block;
    b->stream = stream;
    b->ptr = static_cast<char*>(*ptr);
    b->size = bytes;
    b->small = small;
    return b;
  };
  if (Block* b = try_reserve()) return b;
  // Out of memory: wait for pending cross-stream frees and reuse what they
  // return; else give back every entirely free cached segment and try once
  // more.
  ++stats_.alloc_retries;
  ProcessPendingFrees(/*wait=*/true);
  Pool& pool = PoolFor(small);
  Block key;
  key.stream = stream;
  key.size = RoundedSize(requested);
  if (auto it = pool.lower_bound(&key); it != pool.end() && (*it)->stream == stream) {
    Block* b = *it;
    pool.erase(it);
    return b;
  }
  ReleaseCachedSegments();
  if (Block* b = try_reserve()) return b;
  return OutOfMemory(requested, bytes);
}

absl::Status CachingAllocator::Free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pointer ", reinterpret_cast<uintptr_t>(ptr),
        " was not allocated by this allocator, or was already freed"));
  }
  Block* block = it->second;
  live_.erase(it);
  stats_.allocated_bytes -= static_cast<int64_t>(block->size);
  stats_.requested_bytes -= static_cast<int64_t>(block->requested);
  --stats_.live_blocks;
  block->requested = 0;
  if (block->uses.empty()) {
    stats_.active_bytes -= static_cast<int64_t>(block->size);
    ReturnBlock(block);
    return absl::OkStatus();
  }
  // Other streams used it: reusable only once their work up to now is done.
  PendingFree pending{block, {}};
  for (Stream* s : block->uses) {
    absl::StatusOr<std::unique_ptr<Event>> event = device_->CreateEvent();
    if (event.ok() && device_->RecordEvent(event->get(), s).ok()) {
      pending.events.push_back(*std::move(event));
    } else {
      device_->SynchronizeStream(s).IgnoreError();  // slower, equally safe
    }
  }
  block->uses.clear();
  pending_.push_back(std::move(pending));
  return absl::OkStatus();
}

absl::Status CachingAllocator::RecordStream(void* ptr, Stream* stream) {
  if (stream == nullptr) return absl::InvalidArgumentError("stream must not be null");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    return absl::InvalidArgumentError("RecordStream on a pointer that is not allocated");
  }
  Block* block = it->second;
  if (stream != block->stream &&
      std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
    block->uses.push_back(stream);
  }
  return absl::OkStatus();
}

void CachingAllocator::ReturnBlock(Block* block) {
  Pool& pool = PoolFor(block->small);
  block->allocated = false;
  if (Block* p = block->prev; p != nullptr && !p->allocated) {
    pool.erase(p);
    p->size += block->size;
    p->next = block->next;
    if (block->next != nullptr) block->next->prev = p;
    delete block;
    block = p;
  }
  if (Block* n = block->next; n != nullptr && !n->allocated) {
    pool.erase(n);
    block->size += n->size;
    block->next = n->next;
    if (n->next != nullptr) n->next->prev = block;
    delete n;
  }
  pool.insert(block);
}

void CachingAllocator::ProcessPendingFrees(bool wait) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = true;
    for (const std::unique_ptr<Event>& event : it->events) {
      if (wait) {
        // An error leaves the device unusable; treat the use as over.
        device_->SynchronizeEvent(event.get()).IgnoreError();
        continue;
      }
      absl::StatusOr<bool> complete = device_->QueryEvent(event.get());
      if (complete.ok() && !*complete) {
        done = false;
        break;
      }
    }
    if (!done) {
      ++it;
      continue;
    }
    stats_.active_bytes -= static_cast<int64_t>(it->block->size);
    ReturnBlock(it->block);
    it = pending_.erase(it);
  }
}

void CachingAllocator::ReleaseCachedSegments() {
  for (Pool* pool : {&small_free_, &large_free_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr) {
        ++it;
        continue;
      }
      device_->Free(b->ptr);
      ++stats_.device_frees;
      --stats_.segments;
      stats_.reserved_bytes -= static_cast<int64_t>(b->size);
      delete b;
      it = pool->erase(it);
    }
  }
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessPendingFrees(/*wait=*/false);
  ReleaseCachedSegments();
}

absl::Status CachingAllocator::OutOfMemory(size_t requested, size_t segment) {
  ++stats_.ooms;
  const std::string why =
      segment == 0 ? absl::StrCat("more than the budget of ", budget_bytes_, " bytes")
                   : absl::StrCat("a new ", segment, "-byte segment does not fit the budget of ",
                                  budget_bytes_, " bytes");
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory on ", device_->spec(), ": cannot allocate ", requested, " bytes: ", why,
      "; reserved ", stats_.reserved_bytes, ", allocated ", stats_.allocated_bytes,
      ", largest free block ", LargestFreeBlock()));
}

int64_t CachingAllocator::LargestFreeBlock() const {
  int64_t largest = 0;
  for (const Pool* pool : {&small_free_, &large_free_}) {
    for (const Block* b : *pool) largest = std::max(largest, static_cast<int64_t>(b->size));
  }
  return largest;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  AllocatorStats s = stats_;
  s.cached_free_bytes = 0;
  for (const Pool* pool : {&small_free_, &large_free_}) {
    for (const Block* b : *pool) s.cached_free_bytes += static_cast<int64_t>(b->size);
  }
  s.largest_free_block_bytes = LargestFreeBlock();
  s.fragmentation = s.cached_free_bytes == 0
                        ? 0.0
                        : 1.0 - static_cast<double>(s.largest_free_block_bytes) /
                                    static_cast<double>(s.cached_free_bytes);
  return s;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(DeviceAllocator* allocator, size_t bytes,
                                                    Stream* stream) {
  absl::StatusOr<void*> ptr = allocator->Allocate(bytes, stream);
  if (!ptr.ok()) return ptr.status();
  DeviceBuffer buffer;
  buffer.allocator_ = allocator;
  buffer.ptr_ = *ptr;
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    allocator_ = std::exchange(other.allocator_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (ptr_ != nullptr) allocator_->Free(ptr_).IgnoreError();  // ours: cannot be foreign
  allocator_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace infer
