#include "server/gpu_metrics.h"

#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace infer {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Families in order of first use, each created with its help and type.
class Builder {
 public:
  explicit Builder(std::string device) : device_(std::move(device)) {}
  // One sample of family `name`, labelled with the device and `label` (a
  // name and a value; none when the name is empty).
  void Add(const char* name, MetricType type, const char* help, double value,
           std::pair<const char*, std::string> label = {"", ""}) {
    auto [it, added] = index_.try_emplace(name, families_.size());
    if (added) families_.push_back(MetricFamily{name, help, type, {}});
    ClientMetric& m = families_[it->second].metric.emplace_back();
    m.label.push_back({"device", device_});
    if (*label.first != '\0') m.label.push_back({label.first, label.second});
    if (type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
  }
  template <typename T>
  void Gauge(const char* name, const char* help, const std::optional<T>& value) {
    if (value.has_value()) Add(name, MetricType::Gauge, help, static_cast<double>(*value));
  }
  std::vector<MetricFamily> Take() { return std::move(families_); }

 private:
  const std::string device_;
  std::vector<MetricFamily> families_;
  std::map<std::string, size_t> index_;
};

}  // namespace

std::vector<MetricFamily> GpuMetricFamilies(const GpuTelemetrySample& s,
                                            const std::string& device) {
  Builder b(device);
  b.Gauge("infer_gpu_utilization_ratio",
          "Share of the driver's last sample period in which a kernel ran on the GPU",
          s.gpu_utilization_ratio);
  b.Gauge("infer_gpu_memory_used_bytes",
          "Device memory in use as the driver reports it: all processes on the GPU, not only "
          "this server (compare infer_device_memory_reserved_bytes)",
          s.memory_used_bytes);
  b.Gauge("infer_gpu_temperature_celsius", "GPU die temperature", s.temperature_celsius);
  b.Gauge("infer_gpu_power_watts", "Board power draw", s.power_watts);
  b.Gauge("infer_gpu_sm_clock_hertz", "Current SM clock", s.sm_clock_hertz);
  if (s.throttle_reasons.has_value()) {
    const char* help =
        "1 while this reason holds the clocks down, else 0: gpu_idle, sw_power_cap, "
        "hw_slowdown, sw_thermal, hw_thermal, hw_power_brake, other (any further NVML reason)";
    const uint64_t mask = *s.throttle_reasons;
    for (const ThrottleReason& r : kThrottleReasons) {
      b.Add("infer_gpu_throttle_reasons", MetricType::Gauge, help, (mask & r.bit) != 0 ? 1 : 0,
            {"reason", r.name});
    }
    b.Add("infer_gpu_throttle_reasons", MetricType::Gauge, help,
          OtherThrottleReasons(mask) != 0 ? 1 : 0, {"reason", "other"});
  }
  if (s.ecc_uncorrected_volatile.has_value()) {
    b.Add("infer_gpu_ecc_uncorrected_errors_total", MetricType::Counter,
          "Uncorrected ECC errors in device memory since the driver loaded",
          static_cast<double>(*s.ecc_uncorrected_volatile));
  }
  if (s.ecc_uncorrected_aggregate.has_value()) {
    b.Add("infer_gpu_ecc_uncorrected_errors_lifetime_total", MetricType::Counter,
          "Uncorrected ECC errors in device memory over the board's life",
          static_cast<double>(*s.ecc_uncorrected_aggregate));
  }
  for (const auto& [cause, n] :
       {std::pair{"multiple_single_bit", s.retired_pages_multiple_single_bit},
        std::pair{"double_bit", s.retired_pages_double_bit}}) {
    if (!n.has_value()) continue;
    b.Add("infer_gpu_retired_pages", MetricType::Gauge,
          "Device memory pages retired (GPUs before Ampere), by cause: multiple_single_bit or "
          "double_bit ECC errors",
          static_cast<double>(*n), {"cause", cause});
  }
  for (const auto& [cause, n] : {std::pair{"correctable", s.remapped_rows_correctable},
                                 std::pair{"uncorrectable", s.remapped_rows_uncorrectable}}) {
    if (!n.has_value()) continue;
    b.Add("infer_gpu_remapped_rows", MetricType::Gauge,
          "Device memory rows remapped (Ampere and later), by the errors that caused them: "
          "correctable, uncorrectable",
          static_cast<double>(*n), {"cause", cause});
  }
  b.Gauge("infer_gpu_row_remap_pending", "1 while a row remapping waits for a GPU reset",
          s.row_remap_pending);
  b.Gauge("infer_gpu_row_remap_failed", "1 if a row remapping ever failed on this GPU",
          s.row_remap_failed);
  return b.Take();
}

std::string FormatGpuLine(const GpuTelemetrySample& s, const std::string& device,
                          int64_t reserved_bytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::vector<std::string> parts;
  if (s.gpu_utilization_ratio) {
    parts.push_back(absl::StrFormat("utilisation %.0f%%", 100.0 * *s.gpu_utilization_ratio));
  }
  if (s.memory_used_bytes) {
    parts.push_back(absl::StrFormat(
        "memory used %.2f GiB by all processes (driver) vs %.2f GiB reserved by this server",
        static_cast<double>(*s.memory_used_bytes) / kGiB,
        static_cast<double>(reserved_bytes) / kGiB));
  }
  if (s.temperature_celsius) parts.push_back(absl::StrFormat("%.0f C", *s.temperature_celsius));
  if (s.power_watts) parts.push_back(absl::StrFormat("%.1f W", *s.power_watts));
  if (s.sm_clock_hertz) parts.push_back(absl::StrFormat("SM %.0f MHz", *s.sm_clock_hertz / 1e6));
  if (s.throttle_reasons) {
    std::vector<std::string> reasons;
    for (const ThrottleReason& r : kThrottleReasons) {
      if ((*s.throttle_reasons & r.bit) != 0) reasons.push_back(r.name);
    }
    if (const uint64_t other = OtherThrottleReasons(*s.throttle_reasons); other != 0) {
      reasons.push_back(absl::StrFormat("other 0x%x", other));
    }
    parts.push_back(
        absl::StrCat("throttle ", reasons.empty() ? "none" : absl::StrJoin(reasons, ",")));
  }
  if (s.ecc_uncorrected_volatile.value_or(0) > 0) {
    parts.push_back(absl::StrFormat("%d uncorrected ECC errors", *s.ecc_uncorrected_volatile));
  }
  if (s.row_remap_pending.value_or(false)) parts.push_back("row remapping pending (GPU reset)");
  if (s.row_remap_failed.value_or(false)) parts.push_back("a row remapping failed");
  return absl::StrCat("gpu ", device, ": ",
                      parts.empty() ? "no readings" : absl::StrJoin(parts, ", "));
}

}  // namespace infer
