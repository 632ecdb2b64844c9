#include "models/bert/precision_check.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/transformer/encoder_cpu.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

// The weights the encoder's layers multiply by (attention's four
// projections and the feed-forward's three, gated or not: an upper bound),
// which the CPU reference multiplies each of the gate's ~39,000 tokens by.
double LayerParameters(const TransformerSpec& s) {
  const double h = static_cast<double>(s.hidden_size);
  return static_cast<double>(s.num_layers) *
         (4.0 * h * h + 3.0 * h * static_cast<double>(s.intermediate_size));
}

}  // namespace

absl::StatusOr<PrecisionCheck> CheckPrecision(const BertModelOptions& options,
                                              const TransformerEncoder& encoder,
                                              const DeviceContext& context,
                                              const Tokenizer& tokenizer, int64_t max_length,
                                              Pooling pooling, const SpladePooling* splade) {
  const Precision precision = encoder.precision();
  const auto* cpu = dynamic_cast<const TransformerEncoderCpu*>(&encoder);
  // On the CPU, FP32 is the reference itself.
  if (cpu != nullptr && precision != Precision::kBf16 && precision != Precision::kInt8) {
    return PrecisionCheck();
  }
  // "int8 against fp32" on the CPU; "fp16 on the device against the CPU's
  // fp32" elsewhere.
  const std::string what = cpu != nullptr
                               ? std::string(PrecisionName(precision))
                               : absl::StrCat(PrecisionName(precision), " on the device");
  const char* fp32_name = cpu != nullptr ? "fp32" : "the CPU's fp32";
  if (!options.precision_gate) {
    PrecisionCheck unchecked;
    unchecked.skipped = true;
    unchecked.summary =
        absl::StrCat(what, " not checked against ", fp32_name, " (precision_gate false)");
    unchecked.description = absl::StrCat("; ", unchecked.summary);
    return unchecked;
  }
  if (const double params = LayerParameters(encoder.spec());
      cpu == nullptr && params > kMaxCheckedParameters) {
    PrecisionCheck unchecked;
    unchecked.skipped = true;
    unchecked.summary = absl::StrFormat(
        "%s not checked against %s: %.1f B parameters in its layers, over the %.1f B a check at "
        "load computes (a subset of the texts sized to a time bound is not implemented yet)",
        what, fp32_name, params / 1e9, kMaxCheckedParameters / 1e9);
    unchecked.description = absl::StrCat("; ", unchecked.summary);
    return unchecked;
  }
  EncoderCpuOptions fp32;
  fp32.precision = Precision::kFp32;
  fp32.threads = cpu != nullptr ? cpu->threads() : 0;  // 0: every core, for a device's check
  fp32.masked_lm_head = splade != nullptr;
  INFER_ASSIGN_OR_RETURN(std::unique_ptr<TransformerEncoderCpu> reference,
                         TransformerEncoderCpu::Load(options.checkpoint_dir, fp32));
  PrecisionCheck check;
  check.checked = true;
  GateFigures& figures = check.figures;
  if (splade != nullptr) {  // judged by its sparse vectors
    if (cpu != nullptr) {
      INFER_ASSIGN_OR_RETURN(figures,
                             MeasureSparseGate(*reference, *cpu, tokenizer, max_length, *splade));
    } else {
      INFER_ASSIGN_OR_RETURN(
          figures, MeasureSparseGate(*reference, SparseEmbedder(encoder, context, *splade),
                                     tokenizer, max_length, *splade));
    }
  } else if (cpu != nullptr) {
    INFER_ASSIGN_OR_RETURN(figures, MeasureGate(*reference, *cpu, tokenizer, max_length, pooling));
  } else {
    INFER_ASSIGN_OR_RETURN(
        figures, MeasureGate(*reference, DeviceEmbedder(encoder, context, pooling), tokenizer,
                             max_length, pooling));
  }
  if (const std::string missed = GateFailure(figures); !missed.empty()) {
    if (cpu != nullptr && options.precision == Precision::kAuto) {
      check.use_fp32 = true;
      check.summary =
          absl::StrCat("auto chose ", what, ", which fails the quality gate against ", fp32_name,
                       " (", missed, "; ", DescribeGate(figures), "): computing fp32");
      check.description = absl::StrCat("; ", check.summary);
      return check;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("precision ", what, " fails the quality gate against ", fp32_name, ": ",
                     missed, " (", DescribeGate(figures),
                     "); parameter precision_gate: false (infer-server "
                     "--precision-gate=false) serves it unchecked"));
  }
  check.summary = absl::StrCat(what, " against ", fp32_name, ": ", DescribeGate(figures));
  check.description = absl::StrCat("; ", check.summary);
  return check;
}

}  // namespace infer
