// What auto's BF16 choice rests on (models/cpu_bf16_speed.h): measured once,
// the same answer every call, and BF16 only where it is native and measured
// at least kMinSpeedup times FP32's speed. Under an ISA cap below
// avx512_core_bf16 (the numeric variants of this test) BF16 is not native.
#include "models/cpu_bf16_speed.h"

#include <cstdio>

#include "gtest/gtest.h"
#include "models/precision.h"

namespace infer {
namespace {

TEST(CpuBf16SpeedTest, MeasuredOnceAndChosenOnlyWhereFaster) {
  const CpuBf16Speed& s = MeasureCpuBf16Speed(2);
  EXPECT_EQ(&MeasureCpuBf16Speed(1), &s) << "measured once per process";
  EXPECT_EQ(s.native, CpuHasNativeBf16());
  if (!s.native) {
    EXPECT_EQ(s.speedup, 0.0);
    EXPECT_FALSE(s.auto_bf16);
    return;
  }
  EXPECT_GT(s.speedup, 0.1);  // both matmuls ran, and took time
  EXPECT_LT(s.speedup, 10.0);
  EXPECT_EQ(s.auto_bf16, s.speedup >= CpuBf16Speed::kMinSpeedup);
  std::printf("bf16 matmul at %.2fx fp32's speed: auto computes %s\n", s.speedup,
              s.auto_bf16 ? "bf16" : "fp32");
}

}  // namespace
}  // namespace infer
