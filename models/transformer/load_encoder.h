// Choosing and loading a transformer encoder for a device: the CPU encoder
// (models/transformer/encoder_cpu.h) or, in a build with CUDA, the CUDA one
// (models/transformer/encoder_cuda.h), behind the TransformerEncoder interface
// (models/transformer/encoder.h), which knows neither.
#ifndef INFER_MODELS_TRANSFORMER_LOAD_ENCODER_H_
#define INFER_MODELS_TRANSFORMER_LOAD_ENCODER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "models/precision.h"
#include "models/transformer/encoder.h"
#include "runtime/device.h"
#include "runtime/device_context.h"

namespace infer {

// The CUDA compute capability FP8 tensor cores start at (Ada: 8.9).
inline constexpr int kMinFp8ComputeCapability = 89;

// The precision `requested` resolves to on `device`: auto becomes bf16 or
// fp32 on a CPU (by the CPU's identity and instruction sets, the same at
// every start: models/cpu_auto_precision.h) and fp16 on CUDA; fp8 is
// taken on CUDA devices of kMinFp8ComputeCapability or later.
// FAILED_PRECONDITION naming what the device's encoder computes when it
// cannot compute the requested one.
absl::StatusOr<Precision> ResolveEncoderPrecision(Precision requested, const Device& device);

// Loads `dir` (config.json, model.safetensors; any family of
// models/transformer/transformer_spec.h, Hugging Face layout) for `context`'s
// device: the CPU encoder, or the CUDA one when the build has CUDA, in the
// resolved precision. INVALID_ARGUMENT naming the file and tensor when one is
// missing or has the wrong shape, or naming an unsupported model_type;
// FAILED_PRECONDITION for dimensions the CUDA encoder's kernels do not take
// (models/transformer/encoder_cuda.h).
absl::StatusOr<std::unique_ptr<TransformerEncoder>> LoadEncoder(
    const std::string& dir, const DeviceContext& context,
    const EncoderOptions& options = EncoderOptions());

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_LOAD_ENCODER_H_
