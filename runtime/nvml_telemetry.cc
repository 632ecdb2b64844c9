#include "runtime/nvml_telemetry.h"

#include <dlfcn.h>

#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace infer {
namespace {

// The NVML declarations this file uses, written by hand rather than taken
// from nvml.h: nvml.h comes with the CUDA toolkit's NVML development package
// or the driver's SDK, and the build machines have neither (Debian packages
// no nvml.h; a CPU-only build has no toolkit at all), while the library
// itself is only ever dlopen'ed. They follow NVML's documented C ABI, which
// is stable across drivers: a changed signature gets a new versioned symbol
// (nvmlInit_v2, nvmlDeviceGetHandleByIndex_v2) and the old symbol keeps its
// old one. C enums are int-sized on every platform NVML supports, so they
// are passed as int.
namespace nvml {

// nvmlReturn_t and the codes this file tells apart.
using Return = int;
constexpr Return kSuccess = 0;
constexpr Return kErrorNotSupported = 3;       // NVML_ERROR_NOT_SUPPORTED
constexpr Return kErrorInsufficientSize = 7;   // NVML_ERROR_INSUFFICIENT_SIZE
constexpr Return kErrorFunctionNotFound = 13;  // NVML_ERROR_FUNCTION_NOT_FOUND

// nvmlDevice_t: an opaque pointer.
using DeviceHandle = struct Dev*;

// nvmlUtilization_t: percent of the last sample period in which a kernel ran
// (gpu) and in which device memory was read or written (memory).
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
// nvmlMemory_t (the v1 struct of nvmlDeviceGetMemoryInfo), in bytes.
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlTemperature_v1_t, for nvmlDeviceGetTemperatureV.
struct TemperatureV1 {
  unsigned int version;  // kTemperatureV1
  int sensor;            // nvmlTemperatureSensors_t
  int celsius;
};
// NVML_STRUCT_VERSION(Temperature, 1): the struct's size, 1 in the top byte.
constexpr unsigned int kTemperatureV1 = sizeof(TemperatureV1) | (1u << 24);

// Enum values (nvmlTemperatureSensors_t, nvmlClockType_t,
// nvmlMemoryErrorType_t, nvmlEccCounterType_t, nvmlPageRetirementCause_t).
constexpr int kTemperatureGpu = 0;            // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1;                   // NVML_CLOCK_SM
constexpr int kMemoryErrorUncorrected = 1;    // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;               // NVML_VOLATILE_ECC
constexpr int kAggregateEcc = 1;              // NVML_AGGREGATE_ECC
constexpr int kRetiredMultipleSingleBit = 0;  // ..._MULTIPLE_SINGLE_BIT_ECC_ERRORS
constexpr int kRetiredDoubleBit = 1;          // ..._DOUBLE_BIT_ECC_ERROR
// NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned int kDriverVersionLength = 80;

using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using DriverVersionFn = Return (*)(char* version, unsigned int length);
using HandleByUuidFn = Return (*)(const char* uuid, DeviceHandle* device);
using HandleByIndexFn = Return (*)(unsigned int index, DeviceHandle* device);
using UtilizationFn = Return (*)(DeviceHandle, Utilization*);
using MemoryFn = Return (*)(DeviceHandle, Memory*);
using TemperatureFn = Return (*)(DeviceHandle, int sensor, unsigned int* celsius);
using TemperatureVFn = Return (*)(DeviceHandle, TemperatureV1*);
using PowerFn = Return (*)(DeviceHandle, unsigned int* milliwatts);
using ClockFn = Return (*)(DeviceHandle, int clock_type, unsigned int* mhz);
using ReasonsFn = Return (*)(DeviceHandle, unsigned long long* mask);
using EccFn = Return (*)(DeviceHandle, int error_type, int counter_type, unsigned long long* count);
using RetiredPagesFn = Return (*)(DeviceHandle, int cause, unsigned int* page_count,
                                  unsigned long long* addresses);
using RemappedRowsFn = Return (*)(DeviceHandle, unsigned int* correctable,
                                  unsigned int* uncorrectable, unsigned int* pending,
                                  unsigned int* failure_occurred);

}  // namespace nvml

template <typename Fn>
Fn Find(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

struct NvmlTelemetry::Api {
  nvml::InitFn init = nullptr;
  nvml::ShutdownFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;
  nvml::DriverVersionFn driver_version = nullptr;
  nvml::HandleByUuidFn handle_by_uuid = nullptr;
  nvml::HandleByIndexFn handle_by_index = nullptr;
  nvml::UtilizationFn utilization = nullptr;
  nvml::MemoryFn memory = nullptr;
  nvml::TemperatureFn temperature = nullptr;
  nvml::TemperatureVFn temperature_v = nullptr;
  nvml::PowerFn power = nullptr;
  nvml::ClockFn clock = nullptr;
  nvml::ReasonsFn throttle_reasons = nullptr;
  nvml::EccFn ecc = nullptr;
  nvml::RetiredPagesFn retired_pages = nullptr;
  nvml::RemappedRowsFn remapped_rows = nullptr;

  std::string Error(nvml::Return rc) const {
    const char* s = error_string != nullptr ? error_string(rc) : nullptr;
    return s != nullptr ? absl::StrCat(s, " (NVML error ", rc, ")")
                        : absl::StrCat("NVML error ", rc);
  }
};

uint64_t OtherThrottleReasons(uint64_t mask) {
  for (const ThrottleReason& r : kThrottleReasons) mask &= ~r.bit;
  return mask;
}

absl::StatusOr<std::unique_ptr<NvmlTelemetry>> NvmlTelemetry::Open(const DeviceInfo& device,
                                                                   const NvmlOptions& options) {
  if (device.kind == DeviceKind::kCpu) {
    return absl::FailedPreconditionError("the device is the CPU");
  }
  if (options.library.empty()) return absl::InvalidArgumentError("NvmlOptions::library is empty");
  if (options.min_sample_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("NvmlOptions::min_sample_interval is negative");
  }
  void* library = dlopen(options.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return absl::UnavailableError(absl::StrCat(
        options.library, " could not be loaded: ", why != nullptr ? why : "unknown reason",
        " (is the NVIDIA driver installed and mounted?)"));
  }
  auto api = std::make_unique<Api>();
  api->init = Find<nvml::InitFn>(library, "nvmlInit_v2");
  api->shutdown = Find<nvml::ShutdownFn>(library, "nvmlShutdown");
  api->error_string = Find<nvml::ErrorStringFn>(library, "nvmlErrorString");
  api->driver_version = Find<nvml::DriverVersionFn>(library, "nvmlSystemGetDriverVersion");
  api->handle_by_uuid = Find<nvml::HandleByUuidFn>(library, "nvmlDeviceGetHandleByUUID");
  api->handle_by_index = Find<nvml::HandleByIndexFn>(library, "nvmlDeviceGetHandleByIndex_v2");
  api->utilization = Find<nvml::UtilizationFn>(library, "nvmlDeviceGetUtilizationRates");
  api->memory = Find<nvml::MemoryFn>(library, "nvmlDeviceGetMemoryInfo");
  // Deprecated in NVML 13 for nvmlDeviceGetTemperatureV, still exported.
  api->temperature = Find<nvml::TemperatureFn>(library, "nvmlDeviceGetTemperature");
  if (api->temperature == nullptr) {
    api->temperature_v = Find<nvml::TemperatureVFn>(library, "nvmlDeviceGetTemperatureV");
  }
  api->power = Find<nvml::PowerFn>(library, "nvmlDeviceGetPowerUsage");
  api->clock = Find<nvml::ClockFn>(library, "nvmlDeviceGetClockInfo");
  // The new name (drivers from 535 on) first; older drivers have only the old.
  api->throttle_reasons = Find<nvml::ReasonsFn>(library, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api->throttle_reasons == nullptr) {
    api->throttle_reasons =
        Find<nvml::ReasonsFn>(library, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  api->ecc = Find<nvml::EccFn>(library, "nvmlDeviceGetTotalEccErrors");
  api->retired_pages = Find<nvml::RetiredPagesFn>(library, "nvmlDeviceGetRetiredPages");
  api->remapped_rows = Find<nvml::RemappedRowsFn>(library, "nvmlDeviceGetRemappedRows");

  const char* missing = api->init == nullptr       ? "nvmlInit_v2"
                        : api->shutdown == nullptr ? "nvmlShutdown"
                        : api->handle_by_uuid == nullptr && api->handle_by_index == nullptr
                            ? "nvmlDeviceGetHandleByUUID"
                            : nullptr;
  if (missing != nullptr) {
    dlclose(library);
    return absl::UnavailableError(
        absl::StrCat(options.library, " has no ", missing, ": not an NVML library"));
  }
  if (const nvml::Return rc = api->init(); rc != nvml::kSuccess) {
    const std::string why = api->Error(rc);
    dlclose(library);
    return absl::UnavailableError(absl::StrCat("nvmlInit failed: ", why));
  }
  // From here on a failure shuts NVML down again.
  nvml::DeviceHandle handle = nullptr;
  std::string matched_by;
  nvml::Return rc = nvml::kSuccess;
  if (!device.uuid.empty() && api->handle_by_uuid != nullptr) {
    // A UUID that NVML does not know is another GPU: no guessing by index.
    rc = api->handle_by_uuid(device.uuid.c_str(), &handle);
    matched_by = absl::StrCat("UUID ", device.uuid);
  } else if (api->handle_by_index != nullptr && device.ordinal >= 0) {
    rc = api->handle_by_index(static_cast<unsigned int>(device.ordinal), &handle);
    matched_by = absl::StrCat(
        "index ", device.ordinal,
        device.uuid.empty() ? " (the device has no UUID)" : " (the library cannot look up UUIDs)");
  } else {
    rc = nvml::kErrorFunctionNotFound;
    matched_by = absl::StrCat("index ", device.ordinal);
  }
  if (rc != nvml::kSuccess || handle == nullptr) {
    const std::string why = api->Error(rc);
    api->shutdown();
    dlclose(library);
    return absl::NotFoundError(absl::StrCat("NVML has no device with ", matched_by, ": ", why));
  }
  std::unique_ptr<NvmlTelemetry> t(new NvmlTelemetry(library, std::move(api), handle,
                                                     absl::StrCat("cuda:", device.ordinal),
                                                     std::move(matched_by), options));
  t->Sample();  // learns which readings the device has, for Describe()
  return t;
}

NvmlTelemetry::NvmlTelemetry(void* library, std::unique_ptr<Api> api, void* nvml_device,
                             std::string device_spec, std::string matched_by,
                             const NvmlOptions& options)
    : library_(library),
      api_(std::move(api)),
      nvml_device_(nvml_device),
      device_spec_(std::move(device_spec)),
      matched_by_(std::move(matched_by)),
      options_(options) {}

NvmlTelemetry::~NvmlTelemetry() {
  api_->shutdown();
  dlclose(library_);
}

GpuTelemetrySample NvmlTelemetry::Sample() const {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  if (now - cached_.time >= options_.min_sample_interval) {
    cached_ = Read();
    cached_.time = now;
  }
  return cached_;
}

bool NvmlTelemetry::Wanted(Reading r, bool present) const { return present && !unsupported_[r]; }

bool NvmlTelemetry::Ok(Reading r, int rc) const {
  if (rc == nvml::kSuccess) return true;
  if (rc == nvml::kErrorNotSupported || rc == nvml::kErrorFunctionNotFound) unsupported_[r] = true;
  return false;
}

GpuTelemetrySample NvmlTelemetry::Read() const {
  const Api& a = *api_;
  const auto dev = static_cast<nvml::DeviceHandle>(nvml_device_);
  GpuTelemetrySample s;
  if (Wanted(kUtilization, a.utilization != nullptr)) {
    nvml::Utilization u{};
    if (Ok(kUtilization, a.utilization(dev, &u))) s.gpu_utilization_ratio = u.gpu / 100.0;
  }
  if (Wanted(kMemory, a.memory != nullptr)) {
    nvml::Memory m{};
    if (Ok(kMemory, a.memory(dev, &m))) {
      s.memory_used_bytes = static_cast<int64_t>(m.used);
      s.memory_total_bytes = static_cast<int64_t>(m.total);
    }
  }
  if (Wanted(kTemperature, a.temperature != nullptr)) {
    unsigned int celsius = 0;
    if (Ok(kTemperature, a.temperature(dev, nvml::kTemperatureGpu, &celsius))) {
      s.temperature_celsius = celsius;
    }
  } else if (Wanted(kTemperature, a.temperature_v != nullptr)) {
    nvml::TemperatureV1 t{nvml::kTemperatureV1, nvml::kTemperatureGpu, 0};
    if (Ok(kTemperature, a.temperature_v(dev, &t))) s.temperature_celsius = t.celsius;
  }
  if (Wanted(kPower, a.power != nullptr)) {
    unsigned int milliwatts = 0;
    if (Ok(kPower, a.power(dev, &milliwatts))) s.power_watts = milliwatts / 1000.0;
  }
  if (Wanted(kSmClock, a.clock != nullptr)) {
    unsigned int mhz = 0;
    if (Ok(kSmClock, a.clock(dev, nvml::kClockSm, &mhz))) s.sm_clock_hertz = mhz * 1e6;
  }
  if (Wanted(kThrottle, a.throttle_reasons != nullptr)) {
    unsigned long long mask = 0;
    if (Ok(kThrottle, a.throttle_reasons(dev, &mask))) s.throttle_reasons = mask;
  }
  for (const auto& [reading, counter, out] :
       {std::tuple{kEccVolatile, nvml::kVolatileEcc, &s.ecc_uncorrected_volatile},
        std::tuple{kEccAggregate, nvml::kAggregateEcc, &s.ecc_uncorrected_aggregate}}) {
    if (!Wanted(reading, a.ecc != nullptr)) continue;
    unsigned long long count = 0;
    if (Ok(reading, a.ecc(dev, nvml::kMemoryErrorUncorrected, counter, &count))) *out = count;
  }
  for (const auto& [reading, cause, out] :
       {std::tuple{kRetiredSingleBit, nvml::kRetiredMultipleSingleBit,
                   &s.retired_pages_multiple_single_bit},
        std::tuple{kRetiredDoubleBit, nvml::kRetiredDoubleBit, &s.retired_pages_double_bit}}) {
    if (!Wanted(reading, a.retired_pages != nullptr)) continue;
    // A count of 0 with no buffer asks for the count only: SUCCESS when there
    // are none, INSUFFICIENT_SIZE with the count when there are some.
    unsigned int count = 0;
    const nvml::Return rc = a.retired_pages(dev, cause, &count, nullptr);
    if (rc == nvml::kErrorInsufficientSize || Ok(reading, rc)) *out = count;
  }
  if (Wanted(kRemappedRows, a.remapped_rows != nullptr)) {
    unsigned int correctable = 0, uncorrectable = 0, pending = 0, failed = 0;
    if (Ok(kRemappedRows, a.remapped_rows(dev, &correctable, &uncorrectable, &pending, &failed))) {
      s.remapped_rows_correctable = correctable;
      s.remapped_rows_uncorrectable = uncorrectable;
      s.row_remap_pending = pending != 0;
      s.row_remap_failed = failed != 0;
    }
  }
  return s;
}

const char* NvmlTelemetry::ReadingName(Reading r) {
  switch (r) {
    case kUtilization:
      return "utilization";
    case kMemory:
      return "memory";
    case kTemperature:
      return "temperature";
    case kPower:
      return "power";
    case kSmClock:
      return "sm clock";
    case kThrottle:
      return "throttle reasons";
    case kEccVolatile:
      return "ecc (volatile)";
    case kEccAggregate:
      return "ecc (aggregate)";
    case kRetiredSingleBit:
      return "retired pages (single bit)";
    case kRetiredDoubleBit:
      return "retired pages (double bit)";
    case kRemappedRows:
      return "remapped rows";
    case kNumReadings:
      break;
  }
  return "?";
}

std::string NvmlTelemetry::Describe() const {
  std::string driver = "driver version unknown";
  if (api_->driver_version != nullptr) {
    char version[nvml::kDriverVersionLength] = {};
    if (api_->driver_version(version, sizeof(version)) == nvml::kSuccess) {
      driver = absl::StrCat("driver ", version);
    }
  }
  const bool present[kNumReadings] = {
      api_->utilization != nullptr,
      api_->memory != nullptr,
      api_->temperature != nullptr || api_->temperature_v != nullptr,
      api_->power != nullptr,
      api_->clock != nullptr,
      api_->throttle_reasons != nullptr,
      api_->ecc != nullptr,
      api_->ecc != nullptr,
      api_->retired_pages != nullptr,
      api_->retired_pages != nullptr,
      api_->remapped_rows != nullptr};
  std::vector<std::string> have, lack;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int r = 0; r < kNumReadings; ++r) {
      const Reading reading = static_cast<Reading>(r);
      (Wanted(reading, present[r]) ? have : lack).push_back(ReadingName(reading));
    }
  }
  return absl::StrCat(
      "NVML (", options_.library, ", ", driver, "), ", device_spec_, " matched by ", matched_by_,
      "; reads ", have.empty() ? "nothing" : absl::StrJoin(have, ", "),
      lack.empty() ? "" : absl::StrCat("; not available: ", absl::StrJoin(lack, ", ")));
}

}  // namespace infer
