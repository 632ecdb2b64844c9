// A fake libnvidia-ml for nvml_telemetry_test and metrics_test: two GPUs with
// fixed, distinct readings, some of them NOT_SUPPORTED, behind the few NVML
// entry points NvmlTelemetry uses (same C ABI as the real library). It
// exports the older names of the temperature and throttle-reasons calls, as
// drivers before 535 do. Built with FAKE_NVML_MINIMAL it is a library of a
// later driver that dropped the deprecated calls, reduced to what a library
// needs to be opened plus the memory, temperature (nvmlDeviceGetTemperatureV)
// and throttle reasons (nvmlDeviceGetCurrentClocksEventReasons) readings.
//
// Test hooks (fake_nvml_*) change its state; a test reaches them by dlopen'ing
// the same file. Not thread-safe: tests call it from one thread.
#include <cstring>

namespace {

struct FakeGpu {
  const char* uuid;
  unsigned int utilization_percent;
  unsigned long long memory_total, memory_used;
  unsigned int temperature_c;
  int power_mw;  // < 0: NOT_SUPPORTED
  unsigned int sm_clock_mhz;
  unsigned long long throttle_reasons;
  bool has_ecc;
  unsigned long long ecc_volatile, ecc_aggregate;
  bool has_retired_pages;
  unsigned int retired_single_bit, retired_double_bit;
  bool has_remapped_rows;
  unsigned int remapped_correctable, remapped_uncorrectable, remap_pending, remap_failed;
};

constexpr FakeGpu kInitial[2] = {
    {"GPU-00000000-1111-2222-3333-444444444444", 12, 85899345920ull, 3221225472ull, 41, -1, 345,
     0x1, true, 2, 9, true, 4, 0, false, 0, 0, 0, 0},
    {"GPU-11111111-2222-3333-4444-555555555555", 37, 85899345920ull, 12884901888ull, 67, 312456,
     1755, 0x4 | 0x20 | 0x100, false, 0, 0, false, 0, 0, true, 3, 1, 1, 0},
};

FakeGpu gpus[2] = {kInitial[0], kInitial[1]};
int init_result = 0;
int init_refs = 0;
int utilization_reads = 0;

constexpr int kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3,
              kNotFound = 6, kInsufficientSize = 7;

FakeGpu* Gpu(void* handle) {
  for (FakeGpu& g : gpus) {
    if (handle == &g) return &g;
  }
  return nullptr;
}

}  // namespace

extern "C" {

// --- Test hooks ---------------------------------------------------------
void fake_nvml_reset() {
  gpus[0] = kInitial[0];
  gpus[1] = kInitial[1];
  init_result = 0;
  utilization_reads = 0;
}
void fake_nvml_set_init_result(int rc) { init_result = rc; }
void fake_nvml_set_utilization(unsigned int index, unsigned int percent) {
  gpus[index].utilization_percent = percent;
}
int fake_nvml_utilization_reads() { return utilization_reads; }
int fake_nvml_init_refs() { return init_refs; }

// --- NVML ---------------------------------------------------------------
int nvmlInit_v2() {
  if (init_result != kSuccess) return init_result;
  ++init_refs;
  return kSuccess;
}
int nvmlShutdown() {
  if (init_refs == 0) return kUninitialized;
  --init_refs;
  return kSuccess;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  if (init_refs == 0) return kUninitialized;
  for (FakeGpu& g : gpus) {
    if (std::strcmp(uuid, g.uuid) == 0) {
      *device = &g;
      return kSuccess;
    }
  }
  return kNotFound;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (init_refs == 0) return kUninitialized;
  if (index >= 2) return kInvalidArgument;
  *device = &gpus[index];
  return kSuccess;
}
struct Memory {
  unsigned long long total, free, used;
};
int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  FakeGpu* g = Gpu(device);
  if (init_refs == 0) return kUninitialized;
  if (g == nullptr || memory == nullptr) return kInvalidArgument;
  memory->total = g->memory_total;
  memory->used = g->memory_used;
  memory->free = g->memory_total - g->memory_used;
  return kSuccess;
}

#ifdef FAKE_NVML_MINIMAL
struct TemperatureV1 {
  unsigned int version;
  int sensor;
  int celsius;
};
int nvmlDeviceGetTemperatureV(void* device, TemperatureV1* t) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr || t == nullptr || t->sensor != 0) return kInvalidArgument;
  if (t->version != (sizeof(TemperatureV1) | (1u << 24))) {
    return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  }
  t->celsius = static_cast<int>(g->temperature_c);
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* mask) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr || mask == nullptr) return kInvalidArgument;
  *mask = g->throttle_reasons;
  return kSuccess;
}
#else
const char* nvmlErrorString(int rc) {
  switch (rc) {
    case kSuccess:
      return "Success";
    case kNotSupported:
      return "Not Supported";
    case kNotFound:
      return "Not Found";
    case 9:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}
int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  const char kVersion[] = "999.99.fake";
  if (length < sizeof(kVersion)) return kInsufficientSize;
  std::memcpy(version, kVersion, sizeof(kVersion));
  return kSuccess;
}
struct Utilization {
  unsigned int gpu, memory;
};
int nvmlDeviceGetUtilizationRates(void* device, Utilization* u) {
  FakeGpu* g = Gpu(device);
  if (init_refs == 0) return kUninitialized;
  if (g == nullptr || u == nullptr) return kInvalidArgument;
  ++utilization_reads;
  u->gpu = g->utilization_percent;
  u->memory = 5;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* celsius) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr || sensor != 0 || celsius == nullptr) return kInvalidArgument;
  *celsius = g->temperature_c;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr || milliwatts == nullptr) return kInvalidArgument;
  if (g->power_mw < 0) return kNotSupported;
  *milliwatts = static_cast<unsigned int>(g->power_mw);
  return kSuccess;
}
int nvmlDeviceGetClockInfo(void* device, int clock_type, unsigned int* mhz) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr || mhz == nullptr) return kInvalidArgument;
  *mhz = clock_type == 1 ? g->sm_clock_mhz : 1593;  // NVML_CLOCK_SM; other domains differ
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(void* device, unsigned long long* mask) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr || mask == nullptr) return kInvalidArgument;
  *mask = g->throttle_reasons;
  return kSuccess;
}
int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                unsigned long long* count) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr || count == nullptr || counter_type < 0 || counter_type > 1) {
    return kInvalidArgument;
  }
  if (!g->has_ecc) return kNotSupported;
  // Corrected errors (type 0) are many; the uncorrected (type 1) are what is read.
  *count = error_type == 1 ? (counter_type == 0 ? g->ecc_volatile : g->ecc_aggregate) : 1000;
  return kSuccess;
}
int nvmlDeviceGetRetiredPages(void* device, int cause, unsigned int* page_count,
                              unsigned long long* addresses) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr || page_count == nullptr || cause < 0 || cause > 1) return kInvalidArgument;
  if (!g->has_retired_pages) return kNotSupported;
  const unsigned int n = cause == 0 ? g->retired_single_bit : g->retired_double_bit;
  if (*page_count < n) {
    *page_count = n;
    return kInsufficientSize;
  }
  for (unsigned int i = 0; i < n && addresses != nullptr; ++i) addresses[i] = 0x1000 * (i + 1);
  *page_count = n;
  return kSuccess;
}
int nvmlDeviceGetRemappedRows(void* device, unsigned int* correctable, unsigned int* uncorrectable,
                              unsigned int* pending, unsigned int* failed) {
  FakeGpu* g = Gpu(device);
  if (g == nullptr) return kInvalidArgument;
  if (!g->has_remapped_rows) return kNotSupported;
  *correctable = g->remapped_correctable;
  *uncorrectable = g->remapped_uncorrectable;
  *pending = g->remap_pending;
  *failed = g->remap_failed;
  return kSuccess;
}
#endif  // FAKE_NVML_MINIMAL

}  // extern "C"
