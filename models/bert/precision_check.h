// The check a served transformer passes at load, before it answers
// anything (models/transformer/precision_gate.h measures; this decides):
//   - on the CPU, a reduced precision (BF16, INT8) against the CPU
//     encoder's own FP32;
//   - on any other device (CUDA), every precision (FP16, the GPU default,
//     FP32, BF16, FP8): the device's outputs against the CPU encoder's FP32
//     on the gate's texts, through what the served model computes there
//     (pooled embeddings, the classification head's scores, SPLADE's sparse
//     vectors). A kernel bug in a family's device path then refuses the
//     model with its figures instead of serving wrong vectors.
// On a device, a model whose layers hold more than kMaxCheckedParameters
// weights is not checked (the CPU FP32 reference over the gate's ~39,000
// tokens would take minutes: about a minute at 1 B on 16 cores), which the
// description says; a subset of the texts sized to a time bound would lift
// this.
// The limits are the gate's (GateLimits). A precision `auto` chose on the
// CPU (BF16) that fails falls back to FP32; anything else that fails is
// refused (FAILED_PRECONDITION with the figures). The parameter
// precision_gate: false (infer-server --precision-gate=false) skips the
// check, which the description, /info and the log then say.
//
// Thread-safe: a pure function; the CPU reference runs on the calling
// thread's OpenMP team.
#ifndef INFER_MODELS_BERT_PRECISION_CHECK_H_
#define INFER_MODELS_BERT_PRECISION_CHECK_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "models/bert/bert_model.h"
#include "models/transformer/encoder.h"
#include "models/transformer/precision_gate.h"

namespace infer {

inline constexpr double kMaxCheckedParameters = 1.0e9;

struct PrecisionCheck {
  // What the model's description says of it ("; fp16 on the device against
  // the CPU's fp32: 1050 texts: cosine mean ..."); empty when nothing was
  // to check (FP32 on the CPU).
  std::string description;
  // The same for /info, without the leading "; ".
  std::string summary;
  bool use_fp32 = false;  // auto's choice failed on the CPU: load FP32 instead
  bool checked = false;   // figures were measured (else skipped or not needed)
  bool skipped = false;   // precision_gate false: served unchecked
  GateFigures figures;    // when checked
};

// Checks `encoder` (loaded from options.checkpoint_dir for `context`'s
// device) as above. `splade`: the model serves SPLADE vectors pooled so.
absl::StatusOr<PrecisionCheck> CheckPrecision(const BertModelOptions& options,
                                              const TransformerEncoder& encoder,
                                              const DeviceContext& context,
                                              const Tokenizer& tokenizer, int64_t max_length,
                                              Pooling pooling, const SpladePooling* splade);

}  // namespace infer

#endif  // INFER_MODELS_BERT_PRECISION_CHECK_H_
