#include "server/memory_admission.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace infer {

void MemoryAdmission::AddWeights(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  weights_ += bytes;
}

void MemoryAdmission::AddWorkspaces(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  workspaces_ += bytes;
}

int64_t MemoryAdmission::Capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return CapacityLocked();
}

int64_t MemoryAdmission::Available() const {
  std::lock_guard<std::mutex> lock(mu_);
  return CapacityLocked() - in_flight_;
}

bool MemoryAdmission::TryReserve(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > CapacityLocked() - in_flight_) return false;
  in_flight_ += bytes;
  return true;
}

void MemoryAdmission::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_ -= bytes;
}

MemoryAdmissionStats MemoryAdmission::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {budget_, headroom_, weights_, in_flight_, workspaces_};
}

std::string MemoryAdmission::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return absl::StrCat("budget ", budget_, " - headroom ", headroom_, " - weights ", weights_,
                      workspaces_ > 0 ? absl::StrCat(" - GEMM workspaces ", workspaces_) : "",
                      " = ", CapacityLocked(), " bytes");
}

int64_t MemoryAdmission::CapacityLocked() const {
  return std::max<int64_t>(0, budget_ - headroom_ - weights_ - workspaces_);
}

}  // namespace infer
