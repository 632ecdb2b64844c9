// GPU telemetry (runtime/nvml_telemetry.h) as Prometheus metric families and
// as the log summary's GPU line. A reading the sample lacks makes no metric
// and no part of the line: absent, never zero. Every metric is labelled with
// `device` ("cuda:0"); the names are listed in the README ("Metrics").
//
// Pure functions of a sample; thread-safe.
#ifndef INFER_SERVER_GPU_METRICS_H_
#define INFER_SERVER_GPU_METRICS_H_

#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/nvml_telemetry.h"

namespace infer {

// The infer_gpu_* families of one sample.
std::vector<prometheus::MetricFamily> GpuMetricFamilies(const GpuTelemetrySample& s,
                                                        const std::string& device);

// "gpu cuda:0: utilisation 37%, memory used 12.00 GiB by all processes
// (driver) vs 10.50 GiB reserved by this server, 67 C, 312.5 W, SM 1755 MHz,
// throttle sw_power_cap,sw_thermal,other 0x100"; `reserved_bytes` is what
// our caching allocator holds, so the difference shows memory that other
// processes (and the CUDA context) hold on the GPU.
std::string FormatGpuLine(const GpuTelemetrySample& s, const std::string& device,
                          int64_t reserved_bytes);

}  // namespace infer

#endif  // INFER_SERVER_GPU_METRICS_H_
