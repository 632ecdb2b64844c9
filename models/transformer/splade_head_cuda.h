// SpladeHeadCuda: the SPLADE head (models/transformer/splade_head.h) on a
// CUDA GPU, made by the CUDA encoder with its weights. Per chunk of
// SpladeHead::kChunkTokens tokens: the states to FP16, the transform's dense
// layer (cublasGemmEx, FP16 in and out, FP32 accumulation), its bias and
// activation and the LayerNorm (the encoder's row kernels), the decoder
// into FP32 logits [chunk, vocab] (FP16 inputs, FP32 accumulation and
// output: a logit's rounding does not decide whether it is above zero), and
// the fold into each sequence's row (cuda::LaunchSpladeFold, which adds the
// decoder's bias). Weights in FP16, biases and norm parameters in FP32, from
// the context's caching allocator (counted in the encoder's WeightBytes).
//
// Only built with CUDA (INFER_WITH_CUDA). Thread-safety: see SpladeHead;
// Run needs a compute stream (its cuBLAS handle).
#ifndef INFER_MODELS_TRANSFORMER_SPLADE_HEAD_CUDA_H_
#define INFER_MODELS_TRANSFORMER_SPLADE_HEAD_CUDA_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "models/transformer/cuda_uploader.h"
#include "models/transformer/splade_head.h"
#include "models/transformer/transformer_spec.h"
#include "models/transformer/transformer_weights.h"

namespace infer {

class SpladeHeadCuda final : public SpladeHead {
 public:
  // Enqueues the uploads on `up`'s stream; the caller synchronises it.
  // `head` must be present.
  static absl::StatusOr<std::unique_ptr<SpladeHeadCuda>> Create(
      const TransformerSpec& spec, const TransformerWeights::MaskedLm& head, CudaUploader& up);

  int64_t vocab() const override { return vocab_; }
  int64_t WeightBytes() const override { return weight_bytes_; }
  // The chunk's FP16 input and transformed states and its FP32 logits.
  int64_t ScratchBytes(int64_t tokens) const override;
  absl::Status Run(Stream* stream, const float* states, const int32_t* offsets,
                   const int32_t* device_offsets, int64_t rows, int64_t tokens,
                   const SpladePooling& pooling, float* out, void* scratch) const override;

 private:
  SpladeHeadCuda() = default;

  int64_t hidden_ = 0, vocab_ = 0, weight_bytes_ = 0;
  float eps_ = 0;
  ActivationKind activation_ = ActivationKind::kGelu;
  DeviceBuffer dense_w_, dense_b_;      // FP16 [hidden, hidden], FP32 [hidden]
  DeviceBuffer gamma_, beta_;           // FP32 [hidden]; beta may be empty
  DeviceBuffer decoder_w_, decoder_b_;  // FP16 [vocab, hidden], FP32 [vocab] or empty
};

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_SPLADE_HEAD_CUDA_H_
