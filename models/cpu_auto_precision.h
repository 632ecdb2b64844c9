// What `precision: auto` computes in on this CPU: BF16 or FP32, decided
// from the CPU's identity (CPUID vendor and family) and the instruction
// sets oneDNN may use, by a table of measured CPUs: never by timing at
// start-up. The same binary on the same machine, with the same
// ONEDNN_MAX_CPU_ISA, chooses the same precision at every start, whatever
// else the machine is doing; a vector database filled before a restart is
// queried with vectors of the same precision after it.
//
// The table (cpu_auto_precision.cc says where each row was measured):
//   no native BF16 (neither AVX512_BF16 nor AMX within oneDNN's ISA)  fp32
//   AMX (oneDNN's avx512_core_amx)                                    bf16
//   AVX512_BF16 without AMX, AMD family 25 (Zen 4) or 26 (Zen 5)  bf16
//   AVX512_BF16 without AMX, any other CPU (Intel cores among them)   fp32
// Native BF16 is not always faster: on Intel cores VDPBF16PS issues at a
// quarter of the FMA's rate (bench/cpu_peak.cc), so without AMX's tiles
// oneDNN's BF16 matmul runs at about 0.57x its FP32 one there, while a Zen 4
// runs BF16 at 1.85x FP32. A CPU the table does not know gets FP32, the
// precision the quality gate's reference computes in; naming `bf16` (or
// `fp32`) in the config, or `--precision`, overrides the table.
//
// Thread-safety: pure functions; CpuAutoPrecision() computes once per
// process and is safe to call from any thread.
#ifndef INFER_MODELS_CPU_AUTO_PRECISION_H_
#define INFER_MODELS_CPU_AUTO_PRECISION_H_

#include <string>

#include "models/precision.h"

namespace infer {

// The CPU as CPUID names it (x86-64); empty vendor elsewhere.
struct CpuIdentity {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  int family = 0;      // display family (base + extended)
  int model = 0;       // display model (with the extended model bits)
};

// What oneDNN may use (ONEDNN_MAX_CPU_ISA caps it).
struct CpuBf16Isa {
  bool native_bf16 = false;  // AVX512_BF16 or AMX (CpuHasNativeBf16)
  bool amx = false;          // avx512_core_amx
};

struct CpuAutoChoice {
  Precision precision = Precision::kFp32;  // kBf16 or kFp32
  // Why, for the load log and /info, e.g. "AVX512_BF16 without AMX on
  // GenuineIntel family 6 model 207 (BF16 matmuls measured 0.57x FP32's
  // speed on Intel cores), so fp32".
  std::string reason;
};

CpuIdentity DetectCpuIdentity();
CpuBf16Isa DetectCpuBf16Isa();

// The table above, as a pure function of its inputs.
CpuAutoChoice ChooseCpuAutoPrecision(const CpuIdentity& cpu, const CpuBf16Isa& isa);

// ChooseCpuAutoPrecision for this process's CPU, computed on first call.
const CpuAutoChoice& CpuAutoPrecision();

}  // namespace infer

#endif  // INFER_MODELS_CPU_AUTO_PRECISION_H_
