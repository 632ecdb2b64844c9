#include "models/cpu_auto_precision.h"

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace infer {
namespace {

// Where each row of the table was measured (encoder-bench --precision
// fp32|bf16 on all-MiniLM-L6-v2 and a [256, 768] x [768, 3072] oneDNN
// matmul, 2 threads; README "precision"):
//   AMD EPYC Zen 4 (family 25 model 17), AVX512_BF16: BF16 1.85x FP32.
//   AMD EPYC Zen 5 (family 26), AVX512_BF16: BF16 faster than FP32 (the
//     README's MiniLM BF16 figures were taken there, with auto choosing BF16
//     by the timing this table replaces).
//   Intel Xeon family 6 model 207 (Emerald Rapids) guest, AVX512_BF16 with
//     AMX hidden: BF16 matmul 0.56-0.59x FP32, MiniLM 0.64-0.67x.
//   Intel Xeon with AMX: oneDNN's brg:avx512_core_amx_bf16 at 2.0 TFLOP/s
//     against 344 GFLOP/s FP32 on 2 cores.
constexpr int kAmdZen4Family = 25;  // 0x19 (Zen 3 also, without AVX512_BF16)
constexpr int kAmdZen5Family = 26;  // 0x1A

bool IsaIncludes(unsigned isa, dnnl::cpu_isa part) {
  const auto p = static_cast<unsigned>(part);
  return (isa & p) == p;
}

std::string Name(const CpuIdentity& cpu) {
  if (cpu.vendor.empty()) return "this CPU";
  return absl::StrFormat("%s family %d model %d", cpu.vendor, cpu.family, cpu.model);
}

}  // namespace

CpuIdentity DetectCpuIdentity() {
  CpuIdentity id;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return id;
  char vendor[13];
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  vendor[12] = '\0';
  id.vendor = vendor;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return id;
  const int base_family = static_cast<int>((a >> 8) & 0xF);
  const int base_model = static_cast<int>((a >> 4) & 0xF);
  id.family = base_family == 0xF ? base_family + static_cast<int>((a >> 20) & 0xFF) : base_family;
  id.model = base_family == 0x6 || base_family == 0xF
                 ? base_model + (static_cast<int>((a >> 16) & 0xF) << 4)
                 : base_model;
#endif
  return id;
}

CpuBf16Isa DetectCpuBf16Isa() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return {.native_bf16 = CpuHasNativeBf16(),
          .amx = IsaIncludes(isa, dnnl::cpu_isa::avx512_core_amx)};
}

CpuAutoChoice ChooseCpuAutoPrecision(const CpuIdentity& cpu, const CpuBf16Isa& isa) {
  if (!isa.native_bf16) {
    return {Precision::kFp32,
            "no native BF16 (neither AVX512_BF16 nor AMX) within oneDNN's "
            "instruction sets, so fp32"};
  }
  if (isa.amx) return {Precision::kBf16, absl::StrCat("AMX on ", Name(cpu), ", so bf16")};
  if (cpu.vendor == "AuthenticAMD" &&
      (cpu.family == kAmdZen4Family || cpu.family == kAmdZen5Family)) {
    return {
        Precision::kBf16,
        absl::StrCat("AVX512_BF16 on ", Name(cpu),
                     " (Zen 4 or 5: BF16 matmuls measured 1.85x FP32's speed on Zen 4), so bf16")};
  }
  if (cpu.vendor == "GenuineIntel") {
    return {Precision::kFp32,
            absl::StrCat("AVX512_BF16 without AMX on ", Name(cpu),
                         " (BF16 matmuls measured 0.57x FP32's speed on Intel cores), so fp32")};
  }
  return {Precision::kFp32, absl::StrCat("AVX512_BF16 without AMX on ", Name(cpu),
                                         ", a CPU whose BF16 speed is not known, so fp32")};
}

const CpuAutoChoice& CpuAutoPrecision() {
  static const CpuAutoChoice choice =
      ChooseCpuAutoPrecision(DetectCpuIdentity(), DetectCpuBf16Isa());
  return choice;
}

}  // namespace infer
