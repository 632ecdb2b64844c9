#include "engine/memory_admission.h"

#include <algorithm>
#include <functional>
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

int64_t MemoryAdmission::Available(const void* asking) const {
  std::lock_guard<std::mutex> lock(mu_);
  return AvailableLocked(asking);
}

bool MemoryAdmission::TryReserve(int64_t bytes, const void* asking) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > AvailableLocked(asking)) return false;
  in_flight_ += bytes;
  return true;
}

void MemoryAdmission::SetClaim(const void* claimant, int64_t bytes, absl::Time since) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(claims_.begin(), claims_.end(),
                         [&](const ClaimEntry& c) { return c.claimant == claimant; });
  if (bytes <= 0) {
    if (it != claims_.end()) claims_.erase(it);
  } else if (it != claims_.end()) {
    *it = {claimant, bytes, since};
  } else {
    claims_.push_back({claimant, bytes, since});
  }
}

int64_t MemoryAdmission::AvailableLocked(const void* asking) const {
  const ClaimEntry* own = nullptr;
  for (const ClaimEntry& c : claims_) {
    if (c.claimant == asking) own = &c;
  }
  // Older first; the claimant's key breaks a tie, so the order is total.
  auto older = [](const ClaimEntry& a, const ClaimEntry& b) {
    return a.since != b.since ? a.since < b.since
                              : std::less<const void*>()(a.claimant, b.claimant);
  };
  int64_t held = 0;
  for (const ClaimEntry& c : claims_) {
    if (&c != own && (own == nullptr || older(c, *own))) held += c.bytes;
  }
  return CapacityLocked() - in_flight_ - held;
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
