// What `precision: auto` computes in on a CPU (models/cpu_auto_precision.h):
// the table's every row, and the same answer at every call for this
// process's CPU, with no timing involved. Under an ISA cap below
// avx512_core_bf16 (the numeric variants of this test) BF16 is not native,
// so auto is FP32 whatever the CPU.
#include "models/cpu_auto_precision.h"

#include <cstdio>

#include "gtest/gtest.h"

namespace infer {
namespace {

const CpuIdentity kEmeraldRapids{"GenuineIntel", 6, 207};
const CpuIdentity kSapphireRapids{"GenuineIntel", 6, 143};
const CpuIdentity kZen3{"AuthenticAMD", 25, 1};
const CpuIdentity kZen4{"AuthenticAMD", 25, 17};
const CpuIdentity kZen5{"AuthenticAMD", 26, 2};
const CpuIdentity kOther{"HygonGenuine", 24, 1};

TEST(CpuAutoPrecisionTest, NoNativeBf16IsFp32OnEveryCpu) {
  for (const CpuIdentity& cpu : {kEmeraldRapids, kSapphireRapids, kZen3, kZen4, kZen5, kOther}) {
    const CpuAutoChoice c = ChooseCpuAutoPrecision(cpu, {.native_bf16 = false, .amx = false});
    EXPECT_EQ(c.precision, Precision::kFp32) << cpu.vendor;
    EXPECT_EQ(c.reason,
              "no native BF16 (neither AVX512_BF16 nor AMX) within oneDNN's instruction sets, "
              "so fp32");
  }
}

TEST(CpuAutoPrecisionTest, AmxIsBf16) {
  const CpuAutoChoice c =
      ChooseCpuAutoPrecision(kSapphireRapids, {.native_bf16 = true, .amx = true});
  EXPECT_EQ(c.precision, Precision::kBf16);
  EXPECT_EQ(c.reason, "AMX on GenuineIntel family 6 model 143, so bf16");
}

TEST(CpuAutoPrecisionTest, Avx512Bf16WithoutAmxDependsOnTheCore) {
  const CpuBf16Isa avx512_bf16{.native_bf16 = true, .amx = false};
  // An Intel core without AMX: BF16 measured slower than FP32.
  CpuAutoChoice c = ChooseCpuAutoPrecision(kEmeraldRapids, avx512_bf16);
  EXPECT_EQ(c.precision, Precision::kFp32);
  EXPECT_EQ(c.reason,
            "AVX512_BF16 without AMX on GenuineIntel family 6 model 207 (BF16 matmuls measured "
            "0.57x FP32's speed on Intel cores), so fp32");
  // Zen 4 and Zen 5: BF16 faster.
  for (const CpuIdentity& zen : {kZen4, kZen5}) {
    c = ChooseCpuAutoPrecision(zen, avx512_bf16);
    EXPECT_EQ(c.precision, Precision::kBf16) << zen.family;
  }
  EXPECT_EQ(ChooseCpuAutoPrecision(kZen4, avx512_bf16).reason,
            "AVX512_BF16 on AuthenticAMD family 25 model 17 (Zen 4 or 5: BF16 matmuls measured "
            "1.85x FP32's speed on Zen 4), so bf16");
  // A CPU the table does not know: the reference's precision.
  c = ChooseCpuAutoPrecision(kOther, avx512_bf16);
  EXPECT_EQ(c.precision, Precision::kFp32);
  EXPECT_EQ(c.reason,
            "AVX512_BF16 without AMX on HygonGenuine family 24 model 1, a CPU whose BF16 speed is "
            "not known, so fp32");
  // Without CPUID (not x86-64).
  EXPECT_EQ(ChooseCpuAutoPrecision({}, avx512_bf16).reason,
            "AVX512_BF16 without AMX on this CPU, a CPU whose BF16 speed is not known, so fp32");
}

TEST(CpuAutoPrecisionTest, ThisCpuIsDecidedByTheTableAlone) {
  const CpuIdentity cpu = DetectCpuIdentity();
  const CpuBf16Isa isa = DetectCpuBf16Isa();
#if defined(__x86_64__)
  EXPECT_FALSE(cpu.vendor.empty());
  EXPECT_GT(cpu.family, 0);
#endif
  EXPECT_EQ(isa.native_bf16, CpuHasNativeBf16());
  if (isa.amx) EXPECT_TRUE(isa.native_bf16);
  const CpuAutoChoice& c = CpuAutoPrecision();
  EXPECT_EQ(&CpuAutoPrecision(), &c) << "decided once per process";
  const CpuAutoChoice again = ChooseCpuAutoPrecision(DetectCpuIdentity(), DetectCpuBf16Isa());
  EXPECT_EQ(c.precision, again.precision);
  EXPECT_EQ(c.reason, again.reason);
  if (!isa.native_bf16) EXPECT_EQ(c.precision, Precision::kFp32);
  std::printf("%s family %d model %d: auto computes %s (%s)\n", cpu.vendor.c_str(), cpu.family,
              cpu.model, PrecisionName(c.precision), c.reason.c_str());
}

}  // namespace
}  // namespace infer
