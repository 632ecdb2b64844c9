#include "models/precision.h"

#include <oneapi/dnnl/dnnl.hpp>

#include "absl/strings/str_cat.h"

namespace infer {

absl::StatusOr<Precision> ParsePrecision(absl::string_view text) {
  if (text == "auto") return Precision::kAuto;
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") return Precision::kFp16;
  if (text == "int8") return Precision::kInt8;
  if (text == "fp8") return Precision::kFp8;
  return absl::InvalidArgumentError(
      absl::StrCat("precision '", text, "' is not one of auto, fp32, bf16, fp16, int8, fp8"));
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kAuto:
      return "auto";
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kInt8:
      return "int8";
    case Precision::kFp8:
      return "fp8";
  }
  return "?";
}

bool CpuHasNativeBf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  // The ISA values are bit sets, each including the ones below it; AMX
  // includes avx512_core_bf16.
  return (isa & bf16) == bf16;
}

}  // namespace infer
