#include "models/transformer/load_encoder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "models/cpu_auto_precision.h"
#include "models/transformer/encoder_cpu.h"
#include "runtime/build_config.h"
#include "runtime/status_macros.h"
#if INFER_WITH_CUDA
#include "models/transformer/encoder_cuda.h"
#endif

namespace infer {

// The interface's default (encoder.h has no source of its own): encoders
// without per-token states.
absl::Status TransformerEncoder::EncodeWithStates(Stream*, const PackedSequencesView&, Pooling,
                                                  bool, float*, float*) const {
  return absl::UnimplementedError(
      absl::StrCat("the ", Implementation(), " encoder does not give per-token states"));
}

absl::StatusOr<Precision> ResolveEncoderPrecision(Precision requested, const Device& device) {
  switch (device.info().kind) {
    case DeviceKind::kCpu:
      if (requested == Precision::kAuto) {
        return CpuAutoPrecision().precision;
      }
      if (requested == Precision::kFp32 || requested == Precision::kBf16 ||
          requested == Precision::kInt8) {
        return requested;
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "precision ", PrecisionName(requested), ": the CPU encoder computes fp32, bf16 or int8"));
    case DeviceKind::kCuda:
      if (requested == Precision::kAuto || requested == Precision::kFp16) return Precision::kFp16;
      if (requested == Precision::kFp8) {
        const int cc = device.info().compute_capability;
        if (cc >= kMinFp8ComputeCapability) return Precision::kFp8;
        return absl::FailedPreconditionError(absl::StrCat(
            "precision fp8 needs FP8 tensor cores (compute capability 8.9 or later: Ada, Hopper); ",
            device.info().name, " has ", cc / 10, ".", cc % 10));
      }
      return absl::FailedPreconditionError(absl::StrCat("precision ", PrecisionName(requested),
                                                        ": the CUDA encoder computes fp16 or fp8"));
  }
  return absl::FailedPreconditionError("unknown device kind");
}

absl::StatusOr<std::unique_ptr<TransformerEncoder>> LoadEncoder(const std::string& dir,
                                                                const DeviceContext& context,
                                                                const EncoderOptions& options) {
  if (context.device == nullptr) return absl::InvalidArgumentError("no device");
  INFER_ASSIGN_OR_RETURN(const Precision precision,
                         ResolveEncoderPrecision(options.precision, *context.device));
  INFER_ASSIGN_OR_RETURN(TransformerWeights weights,
                         LoadTransformerWeights(dir, options.masked_lm_head));
  switch (context.device->info().kind) {
    case DeviceKind::kCpu: {
      EncoderCpuOptions cpu;
      cpu.precision = precision;
      cpu.threads = context.device->info().compute_threads;
      cpu.batch_invariant = options.batch_invariant;
      INFER_ASSIGN_OR_RETURN(
          std::unique_ptr<TransformerEncoderCpu> encoder,
          TransformerEncoderCpu::Create(std::move(weights), cpu, context.allocator));
      return std::unique_ptr<TransformerEncoder>(std::move(encoder));
    }
    case DeviceKind::kCuda:
      if (options.batch_invariant) {
        // cuBLAS picks its GEMM algorithm by the row count too, and the
        // CUDA encoder has no fixed-piece mode.
        return absl::FailedPreconditionError(
            "batch_invariant is a CPU mode; the CUDA encoder does not offer it");
      }
#if INFER_WITH_CUDA
      return TransformerEncoderCuda::Create(weights, context, options.graphs,
                                            options.cublaslt_epilogues, precision);
#else
      break;
#endif
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no transformer encoder for device ", context.device->spec()));
}

}  // namespace infer
