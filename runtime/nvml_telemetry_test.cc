#include "runtime/nvml_telemetry.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

// runtime/testdata/fake_nvml.cc: device 0 and device 1 of the fake.
constexpr char kUuid0[] = "GPU-00000000-1111-2222-3333-444444444444";
constexpr char kUuid1[] = "GPU-11111111-2222-3333-4444-555555555555";

DeviceInfo Gpu(int ordinal, const std::string& uuid) {
  DeviceInfo d;
  d.kind = DeviceKind::kCuda;
  d.ordinal = ordinal;
  d.name = "fake";
  d.uuid = uuid;
  return d;
}

NvmlOptions Fake(absl::Duration interval = absl::ZeroDuration()) {
  NvmlOptions o;
  o.library = INFER_FAKE_NVML;
  o.min_sample_interval = interval;
  return o;
}

// The fake's test hooks, reached through a handle of our own on the same
// file (which also keeps its state loaded across tests).
class NvmlTelemetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = dlopen(INFER_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(fake_, nullptr) << dlerror();
    Hook<void (*)()>("fake_nvml_reset")();
  }
  void TearDown() override {
    if (fake_ != nullptr) dlclose(fake_);
  }
  template <typename Fn>
  Fn Hook(const char* name) {
    return reinterpret_cast<Fn>(dlsym(fake_, name));
  }
  int InitRefs() { return Hook<int (*)()>("fake_nvml_init_refs")(); }
  void* fake_ = nullptr;
};

TEST_F(NvmlTelemetryTest, ReadsTheDeviceWithTheSameUuidWhateverItsOrdinal) {
  // CUDA calls it device 0 (CUDA_VISIBLE_DEVICES=1, say); NVML's index 1.
  auto t = NvmlTelemetry::Open(Gpu(0, kUuid1), Fake());
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ((*t)->device_spec(), "cuda:0");
  const GpuTelemetrySample s = (*t)->Sample();
  EXPECT_DOUBLE_EQ(s.gpu_utilization_ratio.value_or(-1), 0.37);
  EXPECT_EQ(s.memory_used_bytes.value_or(-1), 12884901888);
  EXPECT_EQ(s.memory_total_bytes.value_or(-1), 85899345920);
  EXPECT_DOUBLE_EQ(s.temperature_celsius.value_or(-1), 67);
  EXPECT_DOUBLE_EQ(s.power_watts.value_or(-1), 312.456);
  EXPECT_DOUBLE_EQ(s.sm_clock_hertz.value_or(-1), 1755e6);
  // Through the older names: this fake has no nvmlDeviceGetCurrentClocksEventReasons.
  EXPECT_EQ(s.throttle_reasons.value_or(0), 0x124u);
  EXPECT_EQ(OtherThrottleReasons(*s.throttle_reasons), 0x100u);
  EXPECT_EQ(s.remapped_rows_correctable.value_or(99), 3u);
  EXPECT_EQ(s.remapped_rows_uncorrectable.value_or(99), 1u);
  EXPECT_EQ(s.row_remap_pending, std::optional<bool>(true));
  EXPECT_EQ(s.row_remap_failed, std::optional<bool>(false));
  // NOT_SUPPORTED on this device: absent, not zero.
  EXPECT_FALSE(s.ecc_uncorrected_volatile.has_value());
  EXPECT_FALSE(s.ecc_uncorrected_aggregate.has_value());
  EXPECT_FALSE(s.retired_pages_multiple_single_bit.has_value());
  EXPECT_FALSE(s.retired_pages_double_bit.has_value());
  EXPECT_GT(s.time, absl::Now() - absl::Minutes(1));

  const std::string line = (*t)->Describe();
  EXPECT_NE(line.find("driver 999.99.fake"), std::string::npos) << line;
  EXPECT_NE(line.find(absl::StrCat("cuda:0 matched by UUID ", kUuid1)), std::string::npos) << line;
  EXPECT_NE(line.find("reads utilization, memory, temperature, power, sm clock, throttle reasons, "
                      "remapped rows; not available: ecc (volatile), ecc (aggregate), retired "
                      "pages (single bit), retired pages (double bit)"),
            std::string::npos)
      << line;
}

TEST_F(NvmlTelemetryTest, OtherDeviceOtherReadingsAndOtherGaps) {
  auto t = NvmlTelemetry::Open(Gpu(1, kUuid0), Fake());
  ASSERT_THAT(t, IsOk());
  const GpuTelemetrySample s = (*t)->Sample();
  EXPECT_DOUBLE_EQ(s.gpu_utilization_ratio.value_or(-1), 0.12);
  EXPECT_EQ(s.memory_used_bytes.value_or(-1), 3221225472);
  EXPECT_EQ(s.throttle_reasons.value_or(0), 0x1u);
  EXPECT_EQ(s.ecc_uncorrected_volatile.value_or(99), 2u);
  EXPECT_EQ(s.ecc_uncorrected_aggregate.value_or(99), 9u);
  EXPECT_EQ(s.retired_pages_multiple_single_bit.value_or(99), 4u) << "from INSUFFICIENT_SIZE";
  EXPECT_EQ(s.retired_pages_double_bit.value_or(99), 0u) << "a real zero";
  EXPECT_FALSE(s.power_watts.has_value());
  EXPECT_FALSE(s.remapped_rows_correctable.has_value());
  EXPECT_FALSE(s.row_remap_pending.has_value());
  EXPECT_FALSE((*t)->Sample().power_watts.has_value()) << "and stays absent";
}

TEST_F(NvmlTelemetryTest, WithoutAUuidTheOrdinalIsTheIndex) {
  auto t = NvmlTelemetry::Open(Gpu(1, ""), Fake());
  ASSERT_THAT(t, IsOk());
  EXPECT_DOUBLE_EQ((*t)->Sample().gpu_utilization_ratio.value_or(-1), 0.37);
  EXPECT_NE((*t)->Describe().find("matched by index 1 (the device has no UUID)"),
            std::string::npos);
}

TEST_F(NvmlTelemetryTest, AnUnknownUuidIsNotFoundAndNotGuessed) {
  EXPECT_THAT(NvmlTelemetry::Open(Gpu(0, "GPU-deadbeef"), Fake()),
              StatusIs(absl::StatusCode::kNotFound,
                       "NVML has no device with UUID GPU-deadbeef: Not Found (NVML error 6)"));
  EXPECT_EQ(InitRefs(), 0) << "the failed open shut NVML down again";
}

// The minimal fake: a newer library without the deprecated calls, and
// without most others.
TEST_F(NvmlTelemetryTest, NewerNamesAreUsedAndMissingFunctionsLeaveReadingsAbsent) {
  NvmlOptions o = Fake();
  o.library = INFER_FAKE_NVML_MINIMAL;
  auto t = NvmlTelemetry::Open(Gpu(0, kUuid1), o);
  ASSERT_THAT(t, IsOk());
  const GpuTelemetrySample s = (*t)->Sample();
  EXPECT_EQ(s.memory_used_bytes.value_or(-1), 12884901888);
  EXPECT_DOUBLE_EQ(s.temperature_celsius.value_or(-1), 67) << "nvmlDeviceGetTemperatureV";
  EXPECT_EQ(s.throttle_reasons.value_or(0), 0x124u) << "nvmlDeviceGetCurrentClocksEventReasons";
  EXPECT_FALSE(s.gpu_utilization_ratio.has_value());
  EXPECT_FALSE(s.power_watts.has_value());
  EXPECT_FALSE(s.sm_clock_hertz.has_value());
  EXPECT_FALSE(s.ecc_uncorrected_volatile.has_value());
  EXPECT_FALSE(s.retired_pages_double_bit.has_value());
  EXPECT_FALSE(s.remapped_rows_uncorrectable.has_value());
  const std::string line = (*t)->Describe();
  EXPECT_NE(line.find("driver version unknown"), std::string::npos) << line;
  EXPECT_NE(line.find("reads memory, temperature, throttle reasons; not available: utilization, "
                      "power, sm clock,"),
            std::string::npos)
      << line;
}

TEST_F(NvmlTelemetryTest, SamplesAreCachedForTheInterval) {
  const auto reads = Hook<int (*)()>("fake_nvml_utilization_reads");
  const auto set_utilization = Hook<void (*)(unsigned, unsigned)>("fake_nvml_set_utilization");
  {
    auto t = NvmlTelemetry::Open(Gpu(0, kUuid1), Fake(absl::Hours(1)));
    ASSERT_THAT(t, IsOk());
    const int after_open = reads();
    EXPECT_EQ(after_open, 1) << "Open reads one sample";
    set_utilization(1, 90);
    for (int i = 0; i < 5; ++i) {
      EXPECT_DOUBLE_EQ((*t)->Sample().gpu_utilization_ratio.value_or(-1), 0.37);
    }
    EXPECT_EQ(reads(), after_open) << "scrapes within the interval read the cache";
  }
  auto fresh = NvmlTelemetry::Open(Gpu(0, kUuid1), Fake(absl::ZeroDuration()));
  ASSERT_THAT(fresh, IsOk());
  EXPECT_DOUBLE_EQ((*fresh)->Sample().gpu_utilization_ratio.value_or(-1), 0.90);
  set_utilization(1, 10);
  EXPECT_DOUBLE_EQ((*fresh)->Sample().gpu_utilization_ratio.value_or(-1), 0.10);
}

TEST_F(NvmlTelemetryTest, ShutsNvmlDownWhenDestroyed) {
  {
    auto a = NvmlTelemetry::Open(Gpu(0, kUuid0), Fake());
    auto b = NvmlTelemetry::Open(Gpu(1, kUuid1), Fake());
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    EXPECT_EQ(InitRefs(), 2);
  }
  EXPECT_EQ(InitRefs(), 0);
}

TEST_F(NvmlTelemetryTest, SaysWhyThereIsNoTelemetry) {
  DeviceInfo cpu;
  EXPECT_THAT(NvmlTelemetry::Open(cpu, Fake()),
              StatusIs(absl::StatusCode::kFailedPrecondition, "the device is the CPU"));

  NvmlOptions missing = Fake();
  missing.library = "/nonexistent/libnvidia-ml.so.1";
  EXPECT_THAT(NvmlTelemetry::Open(Gpu(0, kUuid0), missing),
              StatusIs(absl::StatusCode::kUnavailable,
                       "/nonexistent/libnvidia-ml.so.1 could not be loaded: "
                       "/nonexistent/libnvidia-ml.so.1: cannot open shared object file: No such "
                       "file or directory"));

  NvmlOptions not_nvml = Fake();
  not_nvml.library = "libm.so.6";
  EXPECT_THAT(NvmlTelemetry::Open(Gpu(0, kUuid0), not_nvml),
              StatusIs(absl::StatusCode::kUnavailable, "libm.so.6 has no nvmlInit_v2"));

  Hook<void (*)(int)>("fake_nvml_set_init_result")(9);
  EXPECT_THAT(NvmlTelemetry::Open(Gpu(0, kUuid0), Fake()),
              StatusIs(absl::StatusCode::kUnavailable,
                       "nvmlInit failed: Driver Not Loaded (NVML error 9)"));

  NvmlOptions negative = Fake();
  negative.min_sample_interval = absl::Seconds(-1);
  EXPECT_THAT(NvmlTelemetry::Open(Gpu(0, kUuid0), negative),
              StatusIs(absl::StatusCode::kInvalidArgument, "min_sample_interval is negative"));
}

}  // namespace
}  // namespace infer
