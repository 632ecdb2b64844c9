// GPU telemetry from NVML, the NVIDIA driver's management library: GPU
// utilisation, device memory in use as the driver sees it (every process on
// the GPU, not only this one), temperature, power, SM clock, clock throttle
// reasons, and the memory-health counters (uncorrected ECC errors, retired
// pages, remapped rows) where the device keeps them.
//
// NVML is loaded at run time with dlopen ("libnvidia-ml.so.1", which the
// driver installs), never linked, and nvml.h is not needed to build: the same
// binary runs on a machine without the driver, where Open() returns the
// reason there is no telemetry. Builds without CUDA compile this file too.
//
// Each reading is optional. A function the library does not export, or one
// that answers NVML_ERROR_NOT_SUPPORTED for this device (ECC on a board
// without it, retired pages on a GPU that remaps rows instead), leaves that
// reading empty in every later sample; any other error leaves it empty in
// that sample only. Empty means unknown, never zero.
//
// Sample() reads the driver at most once per `min_sample_interval` and
// returns the cached sample in between, so Prometheus scrapes and the log
// summary, however frequent, do not hammer the driver.
//
// Ownership: an NvmlTelemetry owns its library handle and one nvmlInit
// reference; destruction calls nvmlShutdown and dlclose. Thread-safe.
#ifndef INFER_RUNTIME_NVML_TELEMETRY_H_
#define INFER_RUNTIME_NVML_TELEMETRY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/device.h"

namespace infer {

struct NvmlOptions {
  // What dlopen loads: a file name looked up on the library search path, or
  // a path. Tests point it at a fake.
  std::string library = "libnvidia-ml.so.1";
  // Sample() within this long of the last driver read returns that read.
  absl::Duration min_sample_interval = absl::Seconds(1);
};

// One read of the driver. An empty field is a reading the device or the
// library does not provide (see the file comment).
struct GpuTelemetrySample {
  absl::Time time = absl::InfinitePast();  // when the driver was read
  // Share of the last sample period (1/6 s to 1 s, by product) in which a
  // kernel ran, 0..1.
  std::optional<double> gpu_utilization_ratio;
  // Device memory in use, all processes (and, on recent drivers, the
  // driver's own reservation), and the device's total, as NVML reports them.
  std::optional<int64_t> memory_used_bytes;
  std::optional<int64_t> memory_total_bytes;
  std::optional<double> temperature_celsius;  // GPU die
  std::optional<double> power_watts;          // board draw
  std::optional<double> sm_clock_hertz;
  // NVML's clock event ("throttle") reasons bitmask; see kThrottleReasons.
  std::optional<uint64_t> throttle_reasons;
  // Uncorrected ECC errors in device memory: since the driver loaded
  // (volatile) and over the board's life (aggregate).
  std::optional<uint64_t> ecc_uncorrected_volatile;
  std::optional<uint64_t> ecc_uncorrected_aggregate;
  // Pages retired (GPUs before Ampere), by cause.
  std::optional<uint64_t> retired_pages_multiple_single_bit;
  std::optional<uint64_t> retired_pages_double_bit;
  // Rows remapped (Ampere and later), by the error that caused them; whether
  // a remapping waits for a GPU reset, and whether one ever failed.
  std::optional<uint64_t> remapped_rows_correctable;
  std::optional<uint64_t> remapped_rows_uncorrectable;
  std::optional<bool> row_remap_pending;
  std::optional<bool> row_remap_failed;
};

// The clock event reasons with a name of their own (NVML's
// nvmlClocksEventReason* / nvmlClocksThrottleReason* bits).
struct ThrottleReason {
  const char* name;
  uint64_t bit;
};
inline constexpr std::array<ThrottleReason, 6> kThrottleReasons = {{
    {"gpu_idle", 0x1},         // nothing runs; clocks drop to idle
    {"sw_power_cap", 0x4},     // held under the power limit
    {"hw_slowdown", 0x8},      // clocks cut by half or more (thermal or power brake)
    {"sw_thermal", 0x20},      // held under the thermal limit by the driver
    {"hw_thermal", 0x40},      // cut by the hardware for temperature
    {"hw_power_brake", 0x80},  // cut by an external power brake
}};
// Bits set that none of kThrottleReasons names (application clocks, sync
// boost, display clock, board limit, ...).
uint64_t OtherThrottleReasons(uint64_t mask);

class NvmlTelemetry {
 public:
  // Loads NVML, initialises it and finds `device` in it: by its UUID
  // ("GPU-..."), or by its ordinal when it has none (NVML and CUDA number
  // GPUs alike only without CUDA_VISIBLE_DEVICES and with
  // CUDA_DEVICE_ORDER=PCI_BUS_ID, hence the UUID first; a UUID NVML does not
  // know is NOT_FOUND, never a guess by index). Reads one sample.
  // FAILED_PRECONDITION "the device is the CPU"; INVALID_ARGUMENT for bad
  // options; UNAVAILABLE "<library> could not be loaded: <dlerror>",
  // "<library> has no <function>" or "nvmlInit failed: <NVML's reason>";
  // NOT_FOUND when NVML has no such device.
  static absl::StatusOr<std::unique_ptr<NvmlTelemetry>> Open(const DeviceInfo& device,
                                                             const NvmlOptions& options = {});
  ~NvmlTelemetry();
  NvmlTelemetry(const NvmlTelemetry&) = delete;
  NvmlTelemetry& operator=(const NvmlTelemetry&) = delete;

  // The latest sample: the cached one if the driver was read less than
  // `min_sample_interval` ago, else a new read.
  GpuTelemetrySample Sample() const;

  // The device, as Device::spec() names it ("cuda:0").
  const std::string& device_spec() const { return device_spec_; }

  // One line for the log: the driver version, how the device was matched,
  // the readings it provides and those it does not.
  std::string Describe() const;

 private:
  struct Api;  // the NVML entry points found in the library
  enum Reading {
    kUtilization,
    kMemory,
    kTemperature,
    kPower,
    kSmClock,
    kThrottle,
    kEccVolatile,
    kEccAggregate,
    kRetiredSingleBit,
    kRetiredDoubleBit,
    kRemappedRows,
    kNumReadings
  };
  static const char* ReadingName(Reading r);

  NvmlTelemetry(void* library, std::unique_ptr<Api> api, void* nvml_device, std::string device_spec,
                std::string matched_by, const NvmlOptions& options);
  GpuTelemetrySample Read() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `rc` is success; marks `r` unsupported for good when the answer
  // says so.
  bool Ok(Reading r, int rc) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Wanted(Reading r, bool present) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  void* const library_;  // dlopen handle
  const std::unique_ptr<Api> api_;
  void* const nvml_device_;  // nvmlDevice_t
  const std::string device_spec_;
  const std::string matched_by_;  // "UUID GPU-..." or "index N"
  const NvmlOptions options_;

  // Protected by mu_ (held across a driver read, so concurrent callers wait
  // for it and share it rather than each reading the driver). Mutable: a
  // sample is a const read that refreshes a cache.
  mutable std::mutex mu_;
  mutable std::array<bool, kNumReadings> unsupported_ ABSL_GUARDED_BY(mu_) = {};
  mutable GpuTelemetrySample cached_ ABSL_GUARDED_BY(mu_);
};

}  // namespace infer

#endif  // INFER_RUNTIME_NVML_TELEMETRY_H_
