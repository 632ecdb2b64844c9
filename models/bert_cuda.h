// BertEncoderCuda: the BERT encoder (models/bert_encoder.h) on a CUDA GPU.
// Weights are stored in FP16 (Q, K and V fused into one [3*hidden, hidden]
// matrix; biases and LayerNorm parameters in FP32); GEMMs run on tensor cores
// through cublasGemmEx (FP16 inputs and outputs, FP32 accumulation); bias +
// GELU, bias + residual + LayerNorm, the embedding sum + LayerNorm, masked
// attention (online softmax over key tiles, no [seq, seq] matrix) and mean
// pooling are fused kernels (models/bert_cuda_kernels.cu).
//
// Packed batches are laid out padded on the device first (each sequence's
// tokens, then padding to the batch's longest sequence, with a mask), and
// the layers run over that padded layout; a packed attention kernel is the
// next step for this encoder.
//
// Every byte it touches on the GPU comes from the context's caching allocator:
// the weights at load, and per Encode the padded ids, positions and mask,
// three activation buffers plus the cuBLAS workspace (handed to cuBLAS with cublasSetWorkspace, so
// cuBLAS does not allocate behind the allocator's back), all on the call's stream.
//
// Only built with CUDA (INFER_WITH_CUDA). Thread-safety: see BertEncoder.
#ifndef INFER_MODELS_BERT_CUDA_H_
#define INFER_MODELS_BERT_CUDA_H_

#include <memory>
#include <vector>

#include "models/bert_encoder.h"

namespace infer {

class BertEncoderCuda final : public BertEncoder {
 public:
  // Converts `weights` to FP16 and uploads them. FAILED_PRECONDITION when a
  // dimension exceeds what the kernels handle (head size over 128, hidden
  // size over 8192); RESOURCE_EXHAUSTED when the weights do not fit the
  // allocator's budget.
  static absl::StatusOr<std::unique_ptr<BertEncoder>> Create(const BertWeights& weights,
                                                             const DeviceContext& context);

  const BertConfig& config() const override { return config_; }
  Precision precision() const override { return Precision::kFp16; }
  std::string Implementation() const override {
    return "cuBLAS FP16 tensor-core GEMMs, fused CUDA kernels";
  }
  int64_t WeightBytes() const override { return weight_bytes_; }
  int64_t PeakBytes(const BatchShape& shape) const override;
  absl::Status Encode(Stream* stream, const PackedSequencesView& batch, BertPooling pooling,
                      bool normalize, float* out) const override;

 private:
  struct Linear {
    DeviceBuffer w;  // FP16 [out, in]
    DeviceBuffer b;  // FP32 [out]
    int64_t out = 0, in = 0;
  };
  struct Norm {
    DeviceBuffer gamma, beta;  // FP32 [hidden]
  };
  struct Layer {
    Linear qkv, attn_out, ffn_in, ffn_out;
    Norm attn_norm, ffn_norm;
  };

  explicit BertEncoderCuda(const DeviceContext& context) : context_(context) {}
  absl::Status Gemm(Stream* stream, const void* x, int64_t rows, const Linear& l, void* y) const;

  BertConfig config_;
  DeviceContext context_;
  std::unique_ptr<Stream> weights_stream_;
  DeviceBuffer word_, position_, token_type_;  // FP16
  Norm embed_norm_;
  std::vector<Layer> layers_;
  int64_t weight_bytes_ = 0;
  size_t workspace_bytes_ = 0;  // cuBLAS workspace per Encode
};

}  // namespace infer

#endif  // INFER_MODELS_BERT_CUDA_H_
