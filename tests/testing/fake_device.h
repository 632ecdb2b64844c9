// FakeDevice: a Device over host memory with a fixed capacity, for testing
// what runs above the device layer (allocator, pipeline) without a GPU.
//
// - Allocate fails with RESOURCE_EXHAUSTED past `capacity_bytes`.
// - Copies are memcpy. Streams are tokens. Events complete at once, unless
//   manual events are on: then a recorded event stays pending until
//   CompleteAllEvents() or SynchronizeEvent() (which counts the wait).
// - Sgemm is not provided (UNIMPLEMENTED).
// - Faults (allocations refused under the capacity, a lost device): wrap it
//   in FaultyDevice (tests/testing/faulty_device.h), the one fault injector.
// - Hooks: a test may run code inside Allocate, Free, AllocateHost and
//   FreeHost (outside the fake's own lock), e.g. to check that the caller
//   holds no lock of its own across them.
//
// Thread-safe.
#ifndef INFER_TESTS_TESTING_FAKE_DEVICE_H_
#define INFER_TESTS_TESTING_FAKE_DEVICE_H_

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/device.h"

namespace infer::testing {

class FakeDevice final : public Device {
 public:
  // `reported_total_bytes` (default: the capacity) is what info() reports as
  // total memory; reporting more than the capacity models memory that some
  // other process holds.
  explicit FakeDevice(int64_t capacity_bytes, int64_t reported_total_bytes = 0)
      : capacity_(capacity_bytes) {
    info_.kind = DeviceKind::kCuda;  // behaves like a GPU: a memory separate from the host's
    info_.ordinal = 7;
    info_.name = "fake";
    info_.uuid = "GPU-fake";
    info_.total_memory_bytes = reported_total_bytes > 0 ? reported_total_bytes : capacity_bytes;
  }

  const DeviceInfo& info() const override { return info_; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    RunHook();
    std::lock_guard<std::mutex> lock(mu_);
    if (used_ + static_cast<int64_t>(bytes) > capacity_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("fake device: ", bytes, " bytes do not fit; ", used_, " used"));
    }
    void* ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    used_ += static_cast<int64_t>(bytes);
    sizes_[ptr] = bytes;
    ++allocations_;
    return ptr;
  }
  void Free(void* ptr) override {
    RunHook();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(ptr);
    if (it == sizes_.end()) {
      ++bad_frees_;
      return;
    }
    used_ -= static_cast<int64_t>(it->second);
    sizes_.erase(it);
    std::free(ptr);
  }
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    RunHook();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++host_allocations_;
    }
    return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  }
  void FreeHost(void* ptr) override {
    RunHook();
    std::free(ptr);
  }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(StreamKind = StreamKind::kCompute) override {
    return std::make_unique<Stream>();
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++events_created_;
    return std::unique_ptr<Event>(new FakeEvent(this));
  }
  absl::Status CopyToDevice(void* dst, const void* host, size_t bytes, Stream*) override {
    std::memcpy(dst, host, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* host, const void* src, size_t bytes, Stream*) override {
    std::memcpy(host, src, bytes);
    return absl::OkStatus();
  }
  absl::Status RecordEvent(Event* event, Stream*) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (manual_events_) pending_.insert(event);
    return absl::OkStatus();
  }
  absl::Status StreamWaitEvent(Stream*, Event*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stream_waits_;
    return absl::OkStatus();
  }
  absl::Status SynchronizeEvent(Event* event) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.erase(event) > 0) ++event_waits_;
    return absl::OkStatus();
  }
  absl::Status SynchronizeStream(Stream*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stream_syncs_;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> QueryEvent(Event* event) override {
    std::lock_guard<std::mutex> lock(mu_);
    return !pending_.contains(event);
  }
  absl::Status Sgemm(Stream*, const GemmArgs&) override {
    return absl::UnimplementedError("fake device has no GEMM");
  }

  // Test controls and counters.
  void set_manual_events(bool manual) {
    std::lock_guard<std::mutex> lock(mu_);
    manual_events_ = manual;
  }
  void CompleteAllEvents() {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.clear();
  }
  // Runs inside Allocate, Free, AllocateHost and FreeHost; null: none.
  void set_hook(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = std::move(hook);
  }
  int64_t events_created() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_created_;
  }
  int64_t host_allocations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return host_allocations_;
  }
  int64_t used_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return used_;
  }
  int64_t allocations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocations_;
  }
  int64_t event_waits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return event_waits_;
  }
  int64_t stream_waits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stream_waits_;
  }
  int64_t stream_syncs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stream_syncs_;
  }
  int64_t bad_frees() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_frees_;
  }

 private:
  void RunHook() {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = hook_;
    }
    if (hook) hook();
  }

  class FakeEvent final : public Event {
   public:
    explicit FakeEvent(FakeDevice* device) : device_(device) {}
    ~FakeEvent() override {
      std::lock_guard<std::mutex> lock(device_->mu_);
      device_->pending_.erase(this);
    }

   private:
    FakeDevice* device_;
  };

  DeviceInfo info_;
  const int64_t capacity_;
  mutable std::mutex mu_;
  int64_t used_ = 0;
  int64_t allocations_ = 0;
  int64_t event_waits_ = 0;
  int64_t bad_frees_ = 0;
  int64_t stream_waits_ = 0;
  int64_t stream_syncs_ = 0;
  int64_t events_created_ = 0;
  int64_t host_allocations_ = 0;
  bool manual_events_ = false;
  std::function<void()> hook_;
  absl::flat_hash_map<void*, size_t> sizes_;
  std::set<Event*> pending_;
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_FAKE_DEVICE_H_
