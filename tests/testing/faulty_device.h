// FaultyDevice: a working device behind a wrapper that injects the faults a
// GPU shows in production, so that the layers above it (caching allocator,
// pipeline, engine, gRPC server) can be tested against them: over the CPU's
// device with real models, or over FakeDevice (tests/testing/fake_device.h)
// for the allocator's bookkeeping. The tests' one fault injector. Engine::
// Create takes it through EngineOptions::create_device; nothing in the server
// refers to it.
//
// - FailAllocations(skip, count): after `skip` more device allocations have
//   succeeded, the next `count` fail with RESOURCE_EXHAUSTED, as cudaMalloc
//   does under the budget when another process holds the memory.
// - LoseDevice(): from then on every call that runs something on the device
//   (allocations, copies, events, streams, GEMM) fails with DeviceLostError,
//   as every CUDA call does after a sticky error. Frees still free, so the
//   test process does not leak.
// - It reports itself asynchronous (synchronous() false) although the inner
//   CPU device has finished each call when it returns (which that contract
//   allows): the event paths a GPU takes above it run (the allocator's
//   per-stream frees, the pipeline's event waits).
// - Counts the faults that fired and the device bytes it holds, so a test
//   can check that they fired and that nothing leaked below the allocator.
//
// Streams and events are the inner device's, passed through. Thread-safe.
#ifndef INFER_TESTS_TESTING_FAULTY_DEVICE_H_
#define INFER_TESTS_TESTING_FAULTY_DEVICE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/device.h"

namespace infer::testing {

class FaultyDevice final : public Device {
 public:
  explicit FaultyDevice(std::unique_ptr<Device> inner) : inner_(std::move(inner)) {}

  // For EngineOptions::create_device: the device `spec` names, wrapped;
  // *created (if not null) is set to the wrapper, which the engine owns.
  static absl::StatusOr<std::unique_ptr<Device>> Create(absl::string_view spec,
                                                        const DeviceOptions& options,
                                                        FaultyDevice** created) {
    absl::StatusOr<std::unique_ptr<Device>> inner = CreateDevice(spec, options);
    if (!inner.ok()) return inner.status();
    auto device = std::make_unique<FaultyDevice>(*std::move(inner));
    if (created != nullptr) *created = device.get();
    return std::unique_ptr<Device>(std::move(device));
  }

  // --- test controls -------------------------------------------------------
  void FailAllocations(int skip, int count) {
    std::lock_guard<std::mutex> lock(mu_);
    skip_ = skip;
    fail_ = count;
  }
  void LoseDevice() {
    std::lock_guard<std::mutex> lock(mu_);
    lost_ = true;
  }
  int64_t allocation_faults() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocation_faults_;
  }
  // Calls refused because the device was lost.
  int64_t lost_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_calls_;
  }
  // Device memory allocated and not yet freed.
  int64_t held_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

  // --- Device --------------------------------------------------------------
  const DeviceInfo& info() const override { return inner_->info(); }
  bool synchronous() const override { return false; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lost_) return LostLocked();
      if (skip_ > 0) {
        --skip_;
      } else if (fail_ > 0) {
        --fail_;
        ++allocation_faults_;
        return absl::ResourceExhaustedError(
            absl::StrCat("out of memory allocating ", bytes, " bytes (injected)"));
      }
    }
    absl::StatusOr<void*> ptr = inner_->Allocate(bytes);
    if (ptr.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[*ptr] = bytes;
      held_ += static_cast<int64_t>(bytes);
    }
    return ptr;
  }
  void Free(void* ptr) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {
        held_ -= static_cast<int64_t>(it->second);
        sizes_.erase(it);
      }
    }
    inner_->Free(ptr);
  }
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->AllocateHost(bytes);
  }
  void FreeHost(void* ptr) override { inner_->FreeHost(ptr); }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(StreamKind kind) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->CreateStream(kind);
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->CreateEvent();
  }
  size_t GemmWorkspaceBytes() const override { return inner_->GemmWorkspaceBytes(); }
  absl::Status SetGemmWorkspace(Stream* stream, void* ptr, size_t bytes) override {
    return inner_->SetGemmWorkspace(stream, ptr, bytes);
  }
  absl::Status CopyToDevice(void* dst, const void* host, size_t bytes, Stream* stream) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->CopyToDevice(dst, host, bytes, stream);
  }
  absl::Status CopyToHost(void* host, const void* src, size_t bytes, Stream* stream) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->CopyToHost(host, src, bytes, stream);
  }
  absl::Status RecordEvent(Event* event, Stream* stream) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->RecordEvent(event, stream);
  }
  absl::Status StreamWaitEvent(Stream* waiter, Event* event) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->StreamWaitEvent(waiter, event);
  }
  absl::Status SynchronizeEvent(Event* event) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->SynchronizeEvent(event);
  }
  absl::Status SynchronizeStream(Stream* stream) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->SynchronizeStream(stream);
  }
  absl::StatusOr<bool> QueryEvent(Event* event) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->QueryEvent(event);
  }
  absl::Status Sgemm(Stream* stream, const GemmArgs& args) override {
    if (absl::Status s = CheckNotLost(); !s.ok()) return s;
    return inner_->Sgemm(stream, args);
  }

 private:
  absl::Status CheckNotLost() {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_ ? LostLocked() : absl::OkStatus();
  }
  absl::Status LostLocked() {
    ++lost_calls_;
    return DeviceLostError("an illegal memory access was encountered (injected)");
  }

  const std::unique_ptr<Device> inner_;
  mutable std::mutex mu_;
  int skip_ = 0;
  int fail_ = 0;
  bool lost_ = false;
  int64_t allocation_faults_ = 0;
  int64_t lost_calls_ = 0;
  int64_t held_ = 0;
  absl::flat_hash_map<void*, size_t> sizes_;
};

}  // namespace infer::testing

#endif  // INFER_TESTS_TESTING_FAULTY_DEVICE_H_
