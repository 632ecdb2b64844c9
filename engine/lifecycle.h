// EngineLifecycle: the engine's state as its served models see it. Whether
// it accepts requests (until Shutdown or a lost device), whether it is ready
// (until a drain begins as well), and the device's health: the first batch
// that fails with a lost device's error (IsDeviceLost, runtime/device.h)
// turns the engine not ready and not accepting, and calls on_device_lost
// once.
//
// Thread-safe. The flags are read without a lock on every request and batch.
// Embedders see it through Engine (its DeviceHealth); the served models
// hold it through ServingContext.
#ifndef INFER_ENGINE_LIFECYCLE_H_
#define INFER_ENGINE_LIFECYCLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

namespace infer {

class EngineLifecycle {
 public:
  struct DeviceHealth {
    bool lost = false;
    uint64_t errors = 0;  // batches answered with a lost device's error
    std::string message;  // the first such error
  };

  // `on_device_lost` may be empty; it must not block.
  explicit EngineLifecycle(std::function<void(const absl::Status&)> on_device_lost)
      : on_device_lost_(std::move(on_device_lost)) {}

  bool Ready() const { return !draining_.load(std::memory_order_acquire) && Accepting(); }
  bool Accepting() const {
    return !shutting_down_.load(std::memory_order_acquire) &&
           !device_lost_.load(std::memory_order_acquire);
  }
  bool ShuttingDown() const { return shutting_down_.load(std::memory_order_acquire); }
  void BeginDrain() { draining_.store(true, std::memory_order_release); }
  void BeginShutdown() { shutting_down_.store(true, std::memory_order_release); }

  // Records a batch that failed with a lost device's error; the first call
  // turns the engine not accepting and calls on_device_lost.
  void NoteDeviceLost(const absl::Status& status);
  // A lost device's error for what cannot run any more; OK while the device
  // works.
  absl::Status DeviceLostStatus() const;
  // The UNAVAILABLE a request gets once the engine does not accept.
  absl::Status NotAcceptingStatus() const;
  DeviceHealth Health() const;

 private:
  const std::function<void(const absl::Status&)> on_device_lost_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> draining_{false};
  // Written under mu_ (with the message); read without it on the hot path.
  std::atomic<bool> device_lost_{false};
  mutable std::mutex mu_;
  uint64_t device_errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string device_lost_message_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer

#endif  // INFER_ENGINE_LIFECYCLE_H_
