// Precision: the arithmetic a model computes in, a per-model setting
// (config.pbtxt `precision`) resolved once at load for the device it runs on.
//
//   fp32  FP32 everywhere (the CPU encoder).
//   bf16  BF16 GEMM inputs and weights with FP32 accumulation; the residual
//         stream, LayerNorm, softmax and pooling stay FP32 (the CPU encoder),
//         and attention's q·k and p·v take BF16 inputs in sequences of 128
//         tokens or more where the CPU has AVX512_BF16 (cpu_kernels.h).
//   fp16  FP16 storage, FP32 accumulation (the CUDA encoder).
//   int8  the encoder's linear layers in INT8: weights s8 per output channel,
//         activations u8 per token, quantized dynamically, int32 sums; the
//         residual stream, norms, attention and pooling stay FP32 (the CPU
//         encoder; models/quantize.h). Approximate: the user opts in.
//   fp8   the encoder's linear layers in FP8 (E4M3) on tensor cores: weights
//         per output channel, activations per token, scaled dynamically, FP32
//         accumulation; everything else as fp16 (the CUDA encoder on compute
//         capability 8.9 or later: Ada, Hopper). Approximate: the user opts in.
//   auto  what the device does best: on a CPU, bf16 or fp32 by a table of
//         measured CPUs (cpu_auto_precision.h: bf16 with AMX, or AVX512_BF16
//         on AMD Zen 4/5), the same at every start; on a GPU, fp16. Never
//         int8 or fp8.
//
// Thread-safety: pure functions.
#ifndef INFER_MODELS_PRECISION_H_
#define INFER_MODELS_PRECISION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infer {

enum class Precision { kAuto, kFp32, kBf16, kFp16, kInt8, kFp8 };

// "auto", "fp32", "bf16", "fp16", "int8" or "fp8"; INVALID_ARGUMENT naming the
// accepted values otherwise.
absl::StatusOr<Precision> ParsePrecision(absl::string_view text);
const char* PrecisionName(Precision precision);

// Whether this CPU computes BF16 dot products natively (AVX512_BF16 or AMX)
// within the instruction sets oneDNN may use (ONEDNN_MAX_CPU_ISA caps them).
bool CpuHasNativeBf16();

}  // namespace infer

#endif  // INFER_MODELS_PRECISION_H_
