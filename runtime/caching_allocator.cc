#include "runtime/caching_allocator.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"

namespace infer {

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream_id != b->stream_id) return a->stream_id < b->stream_id;
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

int64_t CachingAllocator::BlockBytes(int64_t bytes) {
  const size_t rounded = RoundedSize(static_cast<size_t>(bytes));
  if (rounded <= kSmallRequestBytes) return static_cast<int64_t>(rounded);
  const size_t segment = RoundUp(rounded, kLargeRoundBytes);
  return static_cast<int64_t>(segment - rounded > kSmallRequestBytes ? rounded : segment);
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
      return absl::InvalidArgumentError(
          absl::StrCat("memory budget fraction must be in (0, 1], got ", options.budget_fraction));
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
  // No other thread is here any more: waiting under the lock is harmless.
  std::vector<std::shared_ptr<Event>> waits = UnsettledEvents();
  for (const std::shared_ptr<Event>& e : waits) device_->SynchronizeEvent(e.get()).IgnoreError();
  waits.clear();
  ProcessPendingFrees();
  SettleFreeBlocks();
  // Every block, wherever it is; a segment is freed through its first block.
  std::vector<Block*> blocks(small_free_.begin(), small_free_.end());
  blocks.insert(blocks.end(), large_free_.begin(), large_free_.end());
  for (const auto& [ptr, block] : live_) blocks.push_back(block);
  blocks.insert(blocks.end(), lost_.begin(), lost_.end());
  for (Block* b : blocks) {
    if (b->prev == nullptr) device_->Free(b->ptr);
  }
  for (Block* b : blocks) delete b;
}

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes, Stream* stream) {
  if (stream == nullptr) return absl::InvalidArgumentError("allocation stream must not be null");
  const size_t size = RoundedSize(bytes);
  std::unique_lock<std::mutex> lock(mu_);
  if (size == 0 || size > static_cast<size_t>(budget_bytes_)) return OutOfMemory(bytes, 0);
  const bool small = size <= kSmallRequestBytes;
  const size_t segment = small ? kSmallSegmentBytes : RoundUp(size, kLargeRoundBytes);

  ProcessPendingFrees();
  Block* block = TakeFree(small, size, stream->id());
  if (block == nullptr) {
    SettleFreeBlocks();
    block = TakeFree(small, size, stream->id());
  }
  if (block == nullptr) {
    absl::StatusOr<Block*> reserved = ReserveSegment(lock, segment, small, stream->id(), bytes);
    if (!reserved.ok()) return reserved.status();
    block = *reserved;
  }

  // Split off the remainder when it is worth keeping; it stays in the state
  // the block was in (settled, or awaiting the same stream and event).
  const size_t remaining = block->size - size;
  if ((small && remaining >= kRoundBytes) || (!small && remaining > kSmallRequestBytes)) {
    Block* rest = new Block;
    rest->stream_id = block->stream_id;
    rest->free_event = block->free_event;
    rest->ptr = block->ptr + size;
    rest->size = remaining;
    rest->small = small;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    rest->in_pool = true;
    PoolFor(small).insert(rest);
  }
  block->stream_id = stream->id();
  block->stream = stream;
  block->free_event.reset();
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

CachingAllocator::Block* CachingAllocator::TakeFree(bool small, size_t size, uint64_t stream_id) {
  Pool& pool = PoolFor(small);
  Block key;
  key.size = size;
  auto best_of = [&](uint64_t id) -> Block* {
    key.stream_id = id;
    auto it = pool.lower_bound(&key);
    return it != pool.end() && (*it)->stream_id == id ? *it : nullptr;
  };
  Block* own = best_of(stream_id);
  Block* settled = best_of(0);
  Block* pick = own;
  if (pick == nullptr || (settled != nullptr && settled->size < own->size)) pick = settled;
  if (pick != nullptr) {
    pool.erase(pick);
    pick->in_pool = false;
  }
  return pick;
}

absl::StatusOr<CachingAllocator::Block*> CachingAllocator::ReserveSegment(
    std::unique_lock<std::mutex>& lock, size_t bytes, bool small, uint64_t stream_id,
    size_t requested) {
  // The device call runs without the lock (cudaMalloc may synchronise the
  // device); the bytes count against the budget meanwhile.
  absl::Status device_refusal;
  auto try_reserve = [&]() -> absl::StatusOr<Block*> {
    if (stats_.reserved_bytes + reserving_bytes_ + static_cast<int64_t>(bytes) > budget_bytes_) {
      return nullptr;
    }
    reserving_bytes_ += static_cast<int64_t>(bytes);
    lock.unlock();
    absl::StatusOr<void*> ptr = device_->Allocate(bytes);
    lock.lock();
    reserving_bytes_ -= static_cast<int64_t>(bytes);
    if (!ptr.ok()) {
      if (IsDeviceLost(ptr.status())) return ptr.status();
      device_refusal = ptr.status();
      return nullptr;  // refused by the device: handled as out of memory
    }
    ++stats_.device_allocs;
    ++stats_.segments;
    stats_.reserved_bytes += static_cast<int64_t>(bytes);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    Block* b = new Block;  // untouched memory: settled
    b->ptr = static_cast<char*>(*ptr);
    b->size = bytes;
    b->small = small;
    return b;
  };
  absl::StatusOr<Block*> b = try_reserve();
  if (!b.ok() || *b != nullptr) return b;
  // Out of memory: wait (without the lock) for every pending free and
  // unsettled block, and reuse what that frees up; else give back every
  // entirely free cached segment and try once more.
  ++stats_.alloc_retries;
  std::vector<std::shared_ptr<Event>> waits = UnsettledEvents();
  lock.unlock();
  for (const std::shared_ptr<Event>& e : waits) device_->SynchronizeEvent(e.get()).IgnoreError();
  lock.lock();
  waits.clear();  // the last owner of an event returns it to the spares: under mu_
  ProcessPendingFrees();
  SettleFreeBlocks();
  if (Block* free = TakeFree(small, RoundedSize(requested), stream_id)) return free;
  ReleaseCachedSegments(lock);
  device_refusal = absl::OkStatus();
  b = try_reserve();
  if (!b.ok() || *b != nullptr) return b;
  return OutOfMemory(requested, bytes, device_refusal);
}

absl::Status CachingAllocator::Free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pointer ", reinterpret_cast<uintptr_t>(ptr),
                     " was not allocated by this allocator, or was already freed"));
  }
  Block* block = it->second;
  live_.erase(it);
  stats_.allocated_bytes -= static_cast<int64_t>(block->size);
  stats_.requested_bytes -= static_cast<int64_t>(block->requested);
  --stats_.live_blocks;
  block->requested = 0;
  Stream* const stream = block->stream;
  block->stream = nullptr;
  if (block->uses.empty()) {
    // Reusable at once on its own stream; by others once this event is done.
    absl::StatusOr<std::shared_ptr<Event>> event = RecordOn(stream);
    if (!event.ok()) {
      Lose(block);
      return absl::OkStatus();
    }
    stats_.active_bytes -= static_cast<int64_t>(block->size);
    block->free_event = *std::move(event);
    if (EventDone(block->free_event)) {  // e.g. an idle stream, or the CPU
      block->stream_id = 0;
      block->free_event.reset();
    }
    ReturnBlock(block);
    return absl::OkStatus();
  }
  // Other streams used it: out of the cache until all of them, and its own
  // stream, have passed this point.
  PendingFree pending{block, {}};
  block->uses.push_back(stream);
  for (Stream* s : block->uses) {
    absl::StatusOr<std::shared_ptr<Event>> event = RecordOn(s);
    if (!event.ok()) {
      block->uses.clear();
      Lose(block);
      return absl::OkStatus();
    }
    if (*event != nullptr) pending.events.push_back(*std::move(event));
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
  if (stream->id() != block->stream_id &&
      std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) {
    block->uses.push_back(stream);
  }
  return absl::OkStatus();
}

void CachingAllocator::ReturnBlock(Block* block) {
  Pool& pool = PoolFor(block->small);
  block->allocated = false;
  // Neighbours merge when free (in the pool) and in the same state. When
  // both await the same stream, the block being returned carries the newer
  // event, which implies the older one.
  auto mergeable = [&](const Block* n) {
    return n != nullptr && n->in_pool && n->stream_id == block->stream_id;
  };
  if (Block* p = block->prev; mergeable(p)) {
    pool.erase(p);
    p->size += block->size;
    p->next = block->next;
    if (block->next != nullptr) block->next->prev = p;
    p->free_event = std::move(block->free_event);
    delete block;
    block = p;
  }
  if (Block* n = block->next; mergeable(n)) {
    pool.erase(n);
    block->size += n->size;
    block->next = n->next;
    if (n->next != nullptr) n->next->prev = block;
    delete n;
  }
  block->in_pool = true;
  pool.insert(block);
}

void CachingAllocator::SettleFreeBlocks() {
  // Take the settled ones out first, then return them: returning merges only
  // with blocks in the pool, so no block on the list is deleted before its
  // turn.
  std::vector<Block*> settled;
  for (Pool* pool : {&small_free_, &large_free_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->stream_id == 0 || !EventDone(b->free_event)) {
        ++it;
        continue;
      }
      it = pool->erase(it);
      b->in_pool = false;
      settled.push_back(b);
    }
  }
  for (Block* b : settled) {
    b->stream_id = 0;
    b->free_event.reset();
    ReturnBlock(b);
  }
}

absl::StatusOr<std::shared_ptr<Event>> CachingAllocator::RecordOn(Stream* stream) {
  if (device_->synchronous()) return nullptr;  // all work is already done
  std::unique_ptr<Event> event;
  if (!spare_events_.empty()) {
    event = std::move(spare_events_.back());
    spare_events_.pop_back();
  } else {
    absl::StatusOr<std::unique_ptr<Event>> fresh = device_->CreateEvent();
    if (!fresh.ok()) return fresh.status();
    event = *std::move(fresh);
  }
  if (absl::Status s = device_->RecordEvent(event.get(), stream); !s.ok()) {
    spare_events_.push_back(std::move(event));
    return s;
  }
  // Back to the spare list when the last block holding it lets go (always
  // under mu_: blocks are only touched under it, and waits outside it keep
  // their copies until they hold the lock again).
  return std::shared_ptr<Event>(event.release(),
                                [this](Event* e) { spare_events_.emplace_back(e); });
}

bool CachingAllocator::EventDone(const std::shared_ptr<Event>& event) {
  if (event == nullptr) return true;
  // A failed query means the device is lost: the work may never finish, so
  // the block is never recycled.
  absl::StatusOr<bool> done = device_->QueryEvent(event.get());
  return done.ok() && *done;
}

void CachingAllocator::Lose(Block* block) {
  // Whether work still touches the block cannot be known (recording failed:
  // the device is lost). It stays out of every pool, counted as active and
  // in lost_bytes, until the allocator goes.
  stats_.lost_bytes += static_cast<int64_t>(block->size);
  lost_.push_back(block);
}

std::vector<std::shared_ptr<Event>> CachingAllocator::UnsettledEvents() const {
  std::vector<std::shared_ptr<Event>> events;
  for (const PendingFree& p : pending_)
    events.insert(events.end(), p.events.begin(), p.events.end());
  for (const Pool* pool : {&small_free_, &large_free_}) {
    for (const Block* b : *pool) {
      if (b->stream_id != 0 && b->free_event != nullptr) events.push_back(b->free_event);
    }
  }
  return events;
}

void CachingAllocator::ProcessPendingFrees() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = true, lost = false;
    for (const std::shared_ptr<Event>& event : it->events) {
      absl::StatusOr<bool> passed = device_->QueryEvent(event.get());
      // A failed query: the device is lost and the streams may never pass
      // the free, so the block is never recycled (counted as lost).
      lost = !passed.ok();
      if (lost || !*passed) {
        done = false;
        break;
      }
    }
    if (lost) {
      Block* block = it->block;
      it = pending_.erase(it);
      Lose(block);
      continue;
    }
    if (!done) {
      ++it;
      continue;
    }
    Block* block = it->block;
    it = pending_.erase(it);  // drops its events before the block rejoins
    stats_.active_bytes -= static_cast<int64_t>(block->size);
    block->stream_id = 0;  // every stream that touched it is done: settled
    ReturnBlock(block);
  }
}

void CachingAllocator::ReleaseCachedSegments(std::unique_lock<std::mutex>& lock) {
  std::vector<Block*> whole;
  for (Pool* pool : {&small_free_, &large_free_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr || b->stream_id != 0) {
        ++it;  // part of a segment, or a stream may still be using it
        continue;
      }
      b->in_pool = false;
      whole.push_back(b);
      it = pool->erase(it);
    }
  }
  if (whole.empty()) return;
  // Freed without the lock (cudaFree synchronises the device). Until then
  // the bytes still count as reserved, so the budget holds throughout.
  lock.unlock();
  for (Block* b : whole) device_->Free(b->ptr);
  lock.lock();
  for (Block* b : whole) {
    ++stats_.device_frees;
    --stats_.segments;
    stats_.reserved_bytes -= static_cast<int64_t>(b->size);
    delete b;
  }
}

void CachingAllocator::EmptyCache() {
  std::unique_lock<std::mutex> lock(mu_);
  ProcessPendingFrees();
  SettleFreeBlocks();
  ReleaseCachedSegments(lock);
}

absl::Status CachingAllocator::OutOfMemory(size_t requested, size_t segment,
                                           const absl::Status& device_refusal) {
  ++stats_.ooms;
  const std::string why =
      segment == 0 ? absl::StrCat("more than the budget of ", budget_bytes_, " bytes")
      : !device_refusal.ok()
          ? absl::StrCat("the device refused a new ", segment,
                         "-byte segment within the budget of ", budget_bytes_, " bytes (",
                         device_refusal.message(), ")")
          : absl::StrCat("a new ", segment, "-byte segment does not fit the budget of ",
                         budget_bytes_, " bytes");
  return absl::ResourceExhaustedError(
      absl::StrCat("out of memory on ", device_->spec(), ": cannot allocate ", requested,
                   " bytes: ", why, "; reserved ", stats_.reserved_bytes, ", allocated ",
                   stats_.allocated_bytes, ", largest free block ", LargestFreeBlock()));
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

}  // namespace infer
