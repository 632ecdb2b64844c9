// The activation a linear layer applies to its result after the bias: GELU
// (erf form), GELU (tanh approximation) or SiLU. oneDNN fuses it into the
// FP32/BF16 matmuls (models/onednn_ops.h); the INT8 path applies it in its
// own dequantization pass (models/quantize.h).
#ifndef INFER_MODELS_ACTIVATION_H_
#define INFER_MODELS_ACTIVATION_H_

namespace infer::cpu {

enum class LinearActivation { kNone, kGelu, kGeluTanh, kSilu };

}  // namespace infer::cpu

#endif  // INFER_MODELS_ACTIVATION_H_
