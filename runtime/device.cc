#include "runtime/device.h"

#include <atomic>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/build_config.h"
#include "runtime/cpu_device.h"
#if INFER_WITH_CUDA
#include "runtime/cuda_device.h"
#endif

namespace infer {
namespace {

constexpr absl::string_view kDeviceLostPayload = "infer.device_lost";

uint64_t NextStreamId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

Stream::Stream() : id_(NextStreamId()) {}

absl::Status DeviceLostError(absl::string_view message) {
  absl::Status status = absl::InternalError(message);
  status.SetPayload(kDeviceLostPayload, absl::Cord("1"));
  return status;
}

bool IsDeviceLost(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kDeviceLostPayload).has_value();
}

std::string Device::spec() const {
  const DeviceInfo& i = info();
  return i.kind == DeviceKind::kCpu ? "cpu" : absl::StrCat("cuda:", i.ordinal);
}

CudaAvailability ProbeCuda() {
#if INFER_WITH_CUDA
  return ProbeCudaDevices();
#else
  return {0, "this build has no CUDA backend (nvcc was not found at configure)"};
#endif
}

absl::StatusOr<std::unique_ptr<Device>> CreateDevice(absl::string_view spec,
                                                     const DeviceOptions& options) {
  if (options.cpu_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu_threads must not be negative, got ", options.cpu_threads));
  }
  if (spec == "cpu") {
    return CreateCpuDevice(options.cpu_threads);
  }
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
