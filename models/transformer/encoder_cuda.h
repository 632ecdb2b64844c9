// BertEncoderCuda: the transformer encoder (models/transformer/encoder.h) on
// a CUDA GPU, for BERT-shaped specs (TransformerSpec::IsBertShaped: bert,
// roberta, xlm-roberta, camembert). The other families' blocks (rotary
// positions, pre-norm, RMSNorm, gated FFNs, grouped KV heads, masks) run on
// the CPU encoder only for now.
// Weights are stored in FP16 (Q, K and V fused into one [3*hidden, hidden]
// matrix; biases and LayerNorm parameters in FP32); GEMMs run on tensor cores
// through cublasGemmEx (FP16 inputs and outputs, FP32 accumulation).
//
// Packed batches run packed: every GEMM and row kernel runs over the batch's
// real tokens only, and attention is a flash-style tensor-core kernel over
// each sequence's own tokens (models/packed_attention_cuda.cuh), so a batch
// costs its real tokens, not rows × longest. Bias + GELU, bias + residual +
// LayerNorm, the embedding sum + LayerNorm and pooling are fused kernels
// (models/bert/bert_cuda_layer_norm.cu, bert_cuda_gelu_pool.cu).
//
// Every byte it touches on the GPU comes from the context's caching
// allocator: the weights at load, and per Encode three activation buffers on
// the call's stream. cuBLAS uses the compute stream's own permanent
// workspace (runtime/compute_stream.h); Encode needs a compute stream.
//
// With cublaslt_epilogues, the FFN input GEMM is a cuBLASLt matmul that
// adds the bias and applies GELU in its epilogue (models/cuda_lt_linear.h;
// an FP16 copy of that bias is kept for it), and the bias + GELU kernel
// does not run.
//
// Small batches (up to EncoderGraphOptions::max_tokens real tokens) replay a
// CUDA graph of the whole pass instead (models/bert/bert_cuda_graphs.h), using
// buffers held from load (ResidentBytes) rather than per-batch ones.
//
// Only built with CUDA (INFER_WITH_CUDA). Thread-safety: see TransformerEncoder.
#ifndef INFER_MODELS_BERT_BERT_CUDA_H_
#define INFER_MODELS_BERT_BERT_CUDA_H_

#include <memory>
#include <vector>

#include "models/bert/bert_cuda_graphs.h"
#include "models/cuda_lt_linear.h"
#include "models/transformer/encoder.h"
#include "models/transformer/transformer_weights.h"

namespace infer {

class BertEncoderCuda final : public TransformerEncoder {
 public:
  // Converts `weights` to FP16 and uploads them. FAILED_PRECONDITION for a
  // spec that is not BERT-shaped, or when a dimension is one the kernels do
  // not handle (head sizes other than 32, 64
  // and 128, hidden sizes over 8192); RESOURCE_EXHAUSTED when the weights do
  // not fit the allocator's budget.
  // With graphs.enabled, also allocates the graphs' buffers and runs one
  // pass to load the kernels (models/bert/bert_cuda_graphs.h). With
  // cublaslt_epilogues, FAILED_PRECONDITION when cuBLASLt has no algorithm
  // for the fused FFN input GEMM.
  static absl::StatusOr<std::unique_ptr<TransformerEncoder>> Create(
      const TransformerWeights& weights, const DeviceContext& context,
      const EncoderGraphOptions& graphs = EncoderGraphOptions(), bool cublaslt_epilogues = false);

  const TransformerSpec& spec() const override { return spec_; }
  Precision precision() const override { return Precision::kFp16; }
  std::string Implementation() const override;
  int64_t WeightBytes() const override { return weight_bytes_; }
  int64_t ResidentBytes() const override;
  // Null when graphs are off.
  const BertCudaGraphs* graphs() const { return graphs_.get(); }
  int64_t PeakBytes(const BatchShape& shape) const override;
  absl::Status Encode(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
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
    // cublaslt_epilogues: ffn_in's bias in FP16 and the fused matmul using it.
    DeviceBuffer ffn_in_bias_half;
    std::unique_ptr<LtLinear> ffn_in_lt;
  };

  explicit BertEncoderCuda(const DeviceContext& context) : context_(context) {}
  absl::Status Gemm(Stream* stream, const void* x, int64_t rows, const Linear& l, void* y) const;
  // Enqueues the pass over `packed` with the given activation buffers.
  absl::Status Forward(Stream* stream, const PackedSequencesView& packed,
                       const BertCudaGraphs::Scratch& scratch, Pooling pooling, bool normalize,
                       float* out) const;

  TransformerSpec spec_;
  DeviceContext context_;
  std::unique_ptr<Stream> weights_stream_;
  DeviceBuffer word_, position_, token_type_;  // FP16
  Norm embed_norm_;
  std::vector<Layer> layers_;
  int64_t weight_bytes_ = 0;
  std::unique_ptr<BertCudaGraphs> graphs_;  // last: destroyed before what its passes use
};

}  // namespace infer

#endif  // INFER_MODELS_BERT_BERT_CUDA_H_
