#include "runtime/device.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/build_config.h"
#include "runtime/cpu_device.h"
#if INFER_WITH_CUDA
#include "runtime/cuda_device.h"
#endif

namespace infer {

std::string Device::spec() const {
  const DeviceInfo& i = info();
  return i.kind == DeviceKind::kCpu ? "cpu" : absl::StrCat("cuda:", i.ordinal);
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(Device* device, size_t bytes) {
  absl::StatusOr<void*> ptr = device->Allocate(bytes);
  if (!ptr.ok()) return ptr.status();
  DeviceBuffer buffer;
  buffer.device_ = device;
  buffer.ptr_ = *ptr;
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    device_ = std::exchange(other.device_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (ptr_ != nullptr) device_->Free(ptr_);
  device_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

CudaAvailability ProbeCuda() {
#if INFER_WITH_CUDA
  return ProbeCudaDevices();
#else
  return {0, "this build has no CUDA backend (nvcc was not found at configure)"};
#endif
}

absl::StatusOr<std::unique_ptr<Device>> CreateDevice(absl::string_view spec) {
  if (spec == "cpu") return CreateCpuDevice();
  absl::string_view rest = spec;
  int ordinal = -1;
  if (!absl::ConsumePrefix(&rest, "cuda:") || !absl::SimpleAtoi(rest, &ordinal) || ordinal < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device '", spec, "' is not 'cpu' or 'cuda:N'"));
  }
#if INFER_WITH_CUDA
  return CreateCudaDevice(ordinal);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("device '", spec, "' requested but ", ProbeCuda().reason));
#endif
}

std::string DefaultDeviceSpec() { return ProbeCuda().device_count > 0 ? "cuda:0" : "cpu"; }

}  // namespace infer
