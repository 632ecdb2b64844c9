#include "engine/lifecycle.h"

#include "absl/strings/str_cat.h"
#include "runtime/device.h"

namespace infer {

void EngineLifecycle::NoteDeviceLost(const absl::Status& status) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++device_errors_;
    if (!device_lost_.load(std::memory_order_relaxed)) {
      device_lost_message_ = std::string(status.message());
      device_lost_.store(true, std::memory_order_release);
      first = true;
    }
  }
  if (first && on_device_lost_) on_device_lost_(status);
}

absl::Status EngineLifecycle::DeviceLostStatus() const {
  if (!device_lost_.load(std::memory_order_acquire)) return absl::OkStatus();  // every batch
  std::lock_guard<std::mutex> lock(mu_);
  return DeviceLostError(device_lost_message_);
}

absl::Status EngineLifecycle::NotAcceptingStatus() const {
  const absl::Status lost = DeviceLostStatus();
  if (lost.ok()) {
    return absl::UnavailableError("the server is shutting down and accepts no new requests");
  }
  return absl::UnavailableError(absl::StrCat("the device is lost (", lost.message(),
                                             "); the server accepts no new requests and is "
                                             "restarting"));
}

EngineLifecycle::DeviceHealth EngineLifecycle::Health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {device_lost_.load(std::memory_order_relaxed), device_errors_, device_lost_message_};
}

}  // namespace infer
