// TransformerEncoderCuda: the transformer encoder (models/transformer/encoder.h)
// on a CUDA GPU, for every family TransformerSpec describes. BERT-shaped specs
// (TransformerSpec::IsBertShaped: bert, roberta, xlm-roberta, camembert, distilbert) take
// the tuned post-norm path below; the others (MPNet's relative position bias,
// ModernBERT's and the decoders' rotary positions, pre-norm, RMSNorm or
// LayerNorm without β, gated FFNs, grouped KV heads, causal and sliding-window
// masks, Q/K norms, last-token pooling) take the general path
// (encoder_cuda_general.cc, models/transformer/transformer_cuda_kernels.cuh).
// Weights are stored in FP16 (Q, K and V fused into one [q + 2 kv, hidden]
// matrix; biases and norm parameters in FP32); GEMMs run on tensor cores
// through cublasGemmEx (FP16 inputs and outputs, FP32 accumulation).
//
// Packed batches run packed: every GEMM and row kernel runs over the batch's
// real tokens only, and attention is a flash-style tensor-core kernel over
// each sequence's own tokens (models/packed_attention_cuda.cuh; its masked
// variant for causal, windowed and relative-bias attention), so a batch
// costs its real tokens, not rows × longest. On the BERT path bias + GELU,
// bias + residual + LayerNorm, the embedding sum + LayerNorm and pooling are
// fused kernels (models/bert/bert_cuda_layer_norm.cu, bert_cuda_gelu_pool.cu).
//
// Every byte it touches on the GPU comes from the context's caching
// allocator: the weights at load, and per Encode three activation buffers on
// the call's stream. cuBLAS uses the compute stream's own permanent
// workspace (runtime/compute_stream.h); Encode needs a compute stream.
//
// With cublaslt_epilogues (BERT path only), the FFN input GEMM is a cuBLASLt
// matmul that adds the bias and applies GELU in its epilogue
// (models/cuda_lt_linear.h; an FP16 copy of that bias is kept for it), and
// the bias + GELU kernel does not run.
//
// Small batches (up to EncoderGraphOptions::max_tokens real tokens) replay a
// CUDA graph of the whole pass instead (models/bert/bert_cuda_graphs.h), using
// buffers held from load (ResidentBytes) rather than per-batch ones.
//
// Only built with CUDA (INFER_WITH_CUDA). Thread-safety: see TransformerEncoder.
#ifndef INFER_MODELS_TRANSFORMER_ENCODER_CUDA_H_
#define INFER_MODELS_TRANSFORMER_ENCODER_CUDA_H_

#include <memory>
#include <vector>

#include "models/bert/bert_cuda_graphs.h"
#include "models/cuda_lt_linear.h"
#include "models/transformer/cuda_uploader.h"
#include "models/transformer/encoder.h"
#include "models/transformer/splade_head_cuda.h"
#include "models/transformer/transformer_cuda_kernels.cuh"
#include "models/transformer/transformer_weights.h"

namespace infer {

// The CUDA row kernels' code for a spec's activation.
cuda::Activation CudaActivationOf(ActivationKind kind);

class TransformerEncoderCuda final : public TransformerEncoder {
 public:
  // Converts `weights` to FP16 (precision kFp16) or the linear layers' to
  // E4M3 with per-channel scales (kFp8; LtFp8Linear) and uploads them.
  // FAILED_PRECONDITION when a dimension is one the kernels do not handle
  // (head sizes other than 32, 64 and 128; hidden sizes over 8192 on the BERT
  // path, 12256 on the general one; for FP8, widths cuBLASLt's FP8 GEMMs do
  // not take), for cublaslt_epilogues on a model that is not BERT-shaped or
  // with FP8, or for another precision; RESOURCE_EXHAUSTED when the weights
  // do not fit the allocator's budget.
  // With graphs.enabled, also allocates the graphs' buffers and runs one
  // pass to load the kernels (models/bert/bert_cuda_graphs.h). With
  // cublaslt_epilogues, FAILED_PRECONDITION when cuBLASLt has no algorithm
  // for the fused FFN input GEMM.
  static absl::StatusOr<std::unique_ptr<TransformerEncoder>> Create(
      const TransformerWeights& weights, const DeviceContext& context,
      const EncoderGraphOptions& graphs = EncoderGraphOptions(), bool cublaslt_epilogues = false,
      Precision precision = Precision::kFp16);

  const TransformerSpec& spec() const override { return spec_; }
  Precision precision() const override { return precision_; }
  std::string Implementation() const override;
  int64_t WeightBytes() const override { return weight_bytes_; }
  int64_t ResidentBytes() const override;
  // Null when graphs are off.
  const BertCudaGraphs* graphs() const { return graphs_.get(); }
  int64_t PeakBytes(const BatchShape& shape) const override;
  // Host FP32 (ClassificationHead), applied by the caller on the host.
  const DenseHead* classifier() const override {
    return classifier_.empty() ? nullptr : &classifier_;
  }
  // On the GPU (models/transformer/splade_head_cuda.h), when the weights
  // hold a masked-LM head.
  const SpladeHead* splade() const override { return splade_.get(); }
  absl::Status Encode(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                      bool normalize, float* out) const override;
  // The pass leaves the last hidden states in FP16; they are converted to
  // `states` after it, from the graphs' buffers for a batch a graph replays
  // (BertCudaGraphs::Run) and from the pass's own otherwise.
  bool HasTokenStates() const override { return true; }
  absl::Status EncodeWithStates(Stream* stream, const PackedSequencesView& batch, Pooling pooling,
                                bool normalize, float* out, float* states) const override;

 private:
  struct Linear {
    DeviceBuffer w;  // FP16 [out, in]; empty with FP8
    DeviceBuffer b;  // FP32 [out]; empty when the model has none (general path)
    int64_t out = 0, in = 0;
    // FP8: E4M3 codes [out, in], FP32 scales [out], and the GEMM.
    DeviceBuffer w8, w_scales;
    std::unique_ptr<LtFp8Linear> fp8;
  };
  struct Norm {
    DeviceBuffer gamma, beta;  // FP32 [hidden]; empty when absent (general path)
  };
  struct Layer {
    Linear qkv, attn_out, ffn_in, ffn_out;
    Norm attn_norm, ffn_norm;
    // cublaslt_epilogues: ffn_in's bias in FP16 and the fused matmul using it.
    DeviceBuffer ffn_in_bias_half;
    std::unique_ptr<LtLinear> ffn_in_lt;
    // General path. The bias the attention kernel gets (FP32 [q + 2 kv]):
    // qkv's own, or, when the q/k transform runs (it adds the q and k
    // biases itself), zeros but for the value bias; zeros when qkv has none.
    DeviceBuffer attention_bias;
    Norm q_norm, k_norm;              // [head_dim] gammas (Qwen3)
    const float* inv_freq = nullptr;  // this layer's rotary table, or none
    int window = 0;
  };

  explicit TransformerEncoderCuda(const DeviceContext& context) : context_(context) {}
  // y = x · W^T: cublasGemmEx, or with FP8 x quantized per token into
  // `quant` (the scratch's) and LtFp8Linear. ld: the leading dimension of x
  // (0: l.in).
  absl::Status Gemm(Stream* stream, const void* x, int64_t rows, const Linear& l, void* y,
                    void* quant, int64_t ld = 0) const;
  // The general path's weights, after the BERT-path ones (encoder_cuda_general.cc).
  absl::Status UploadGeneral(const TransformerWeights& weights, CudaUploader& up);
  // Enqueues the pass over `packed` with the given activation buffers.
  absl::Status Forward(Stream* stream, const PackedSequencesView& packed,
                       const BertCudaGraphs::Scratch& scratch, Pooling pooling, bool normalize,
                       float* out) const;
  // Where the pass leaves the last hidden states ([tokens, hidden] FP16 at
  // the start of the buffer): ctx on the general path's pre-norm families
  // (the final norm's output; x holds the FP32 residual stream), else x.
  bool StatesInCtx() const { return general_ && spec_.pre_norm; }
  // Pools `x` ([tokens, hidden] FP16) into `out` as `pooling` says; nothing
  // when `out` is null.
  absl::Status Pool(Stream* stream, const void* x, const PackedSequencesView& packed,
                    Pooling pooling, bool normalize, float* out) const;
  absl::Status ForwardGeneral(Stream* stream, const PackedSequencesView& packed,
                              const BertCudaGraphs::Scratch& scratch, Pooling pooling,
                              bool normalize, float* out) const;
  // FP16 columns of the x, ctx and work buffers (x: twice the hidden size
  // when it holds an FP32 residual stream); bytes per token of the quant
  // buffer (0 without FP8): the widest linear input's codes and a scale.
  int64_t XCols() const;
  int64_t CtxCols() const;
  int64_t WorkCols() const;
  int64_t QuantCols() const;
  // The position table's row of packed position 0 (spec_.position_offset,
  // so that RoBERTa's padding position, -1, is the row before), or null
  // without one.
  const __half* PositionZero() const;

  TransformerSpec spec_;
  DenseHead classifier_;                    // spec_.labels' head (host memory), or empty
  std::unique_ptr<SpladeHeadCuda> splade_;  // the masked-LM head, or null
  bool general_ = false;                    // !spec_.IsBertShaped()
  Precision precision_ = Precision::kFp16;
  DeviceContext context_;
  std::unique_ptr<Stream> weights_stream_;
  // FP16, whole; position, token_type may be empty.
  DeviceBuffer word_, position_, token_type_;
  Norm embed_norm_, final_norm_;
  std::vector<Layer> layers_;
  std::vector<DeviceBuffer> inv_freqs_;  // FP32 [head_dim / 2] per distinct θ
  DeviceBuffer relative_bias_;           // FP32 [heads, 2 P - 1] (MPNet), or empty
  int64_t weight_bytes_ = 0;
  std::unique_ptr<BertCudaGraphs> graphs_;  // last: destroyed before what its passes use
};

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_ENCODER_CUDA_H_
