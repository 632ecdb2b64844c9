#include "models/transformer/encoder_cuda.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_cuda_graphs.h"
#include "models/bert/bert_cuda_kernels.cuh"
#include "models/fp8_quantize_cuda.cuh"
#include "models/half.h"
#include "models/packed_attention_cuda.cuh"
#include "models/transformer/transformer_cuda_kernels.cuh"
#include "runtime/cuda_device.h"
#include "runtime/status_macros.h"

namespace infer {

absl::StatusOr<std::unique_ptr<TransformerEncoder>> TransformerEncoderCuda::Create(
    const TransformerWeights& w, const DeviceContext& context, const EncoderGraphOptions& graphs,
    bool cublaslt_epilogues, Precision precision) {
  const TransformerSpec& c = w.spec;
  if (precision != Precision::kFp16 && precision != Precision::kFp8) {
    return absl::FailedPreconditionError(absl::StrCat("precision ", PrecisionName(precision),
                                                      ": the CUDA encoder computes fp16 or fp8"));
  }
  const bool fp8 = precision == Precision::kFp8;
  if (fp8 && cublaslt_epilogues) {
    return absl::FailedPreconditionError(
        "cuda_fused_epilogues applies to fp16 (the FP8 GEMMs leave the biases to the kernels)");
  }
  const bool general = !c.IsBertShaped();
  const int64_t head_dim = c.head_dim;
  const int64_t max_hidden = general ? cuda::kMaxRowHidden : cuda::kMaxLayerNormHidden;
  if (!cuda::PackedAttentionSupports(head_dim) || c.hidden_size > max_hidden) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA encoder handles head sizes 32, 64 and 128 and hidden sizes up to ",
                     max_hidden, " for ", c.model_type, "; this model has head size ", head_dim,
                     " and hidden size ", c.hidden_size));
  }
  if (general && cublaslt_epilogues) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda_fused_epilogues applies to BERT-shaped models (bias + erf GELU after the "
        "FFN's input GEMM); not to ",
        c.model_type));
  }
  std::unique_ptr<TransformerEncoderCuda> m(new TransformerEncoderCuda(context));
  m->spec_ = c;
  m->classifier_ = ClassificationHead(w);
  m->general_ = general;
  m->precision_ = precision;
  INFER_ASSIGN_OR_RETURN(m->weights_stream_, context.device->CreateStream(StreamKind::kCopy));
  CudaUploader up(context, m->weights_stream_.get());
  auto linear = [&](const TransformerWeights::Linear& l, Linear* out) -> absl::Status {
    out->out = l.out;
    out->in = l.in;
    if (fp8) {
      INFER_ASSIGN_OR_RETURN(out->fp8, LtFp8Linear::Create(l.out, l.in, /*probe_rows=*/128));
      INFER_RETURN_IF_ERROR(up.Fp8Rows(l.w, l.out, l.in, &out->w8, &out->w_scales));
    } else {
      INFER_ASSIGN_OR_RETURN(out->w, up.Half(l.w));
    }
    INFER_ASSIGN_OR_RETURN(out->b, up.Float(l.b));
    return absl::OkStatus();
  };
  auto norm = [&](const TransformerWeights::Norm& n, Norm* out) -> absl::Status {
    INFER_ASSIGN_OR_RETURN(out->gamma, up.Float(n.gamma));
    INFER_ASSIGN_OR_RETURN(out->beta, up.Float(n.beta));
    return absl::OkStatus();
  };
  INFER_ASSIGN_OR_RETURN(m->word_, up.Half(w.word));
  // The whole table: RoBERTa's padding position is read at its row
  // (PositionZero).
  if (!w.position.empty()) {
    INFER_ASSIGN_OR_RETURN(m->position_, up.Half(w.position));
  }
  // A family without token types (DistilBERT) gets one row of zeros on the
  // tuned path, whose embedding kernel always adds a row.
  INFER_ASSIGN_OR_RETURN(m->token_type_, up.Half(w.token_type.empty() && !general
                                                     ? std::vector<float>(c.hidden_size, 0.0f)
                                                     : w.token_type));
  INFER_RETURN_IF_ERROR(norm(w.embed_norm, &m->embed_norm_));
  m->layers_.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const TransformerWeights::Layer& src = w.layers[i];
    Layer& dst = m->layers_[i];
    INFER_RETURN_IF_ERROR(linear(src.qkv, &dst.qkv));
    INFER_RETURN_IF_ERROR(linear(src.attn_out, &dst.attn_out));
    INFER_RETURN_IF_ERROR(linear(src.ffn_in, &dst.ffn_in));
    INFER_RETURN_IF_ERROR(linear(src.ffn_out, &dst.ffn_out));
    INFER_RETURN_IF_ERROR(norm(src.attn_norm, &dst.attn_norm));
    INFER_RETURN_IF_ERROR(norm(src.ffn_norm, &dst.ffn_norm));
    if (cublaslt_epilogues) {
      INFER_ASSIGN_OR_RETURN(dst.ffn_in_bias_half, up.Half(src.ffn_in.b));
      // Probed at a typical batch's row count (the heuristic's answer at load).
      INFER_ASSIGN_OR_RETURN(
          dst.ffn_in_lt, LtLinear::Create(dst.ffn_in.out, dst.ffn_in.in, dst.ffn_in_bias_half.get(),
                                          LtLinear::Epilogue::kBiasGelu, /*probe_rows=*/128));
    }
  }
  if (general) INFER_RETURN_IF_ERROR(m->UploadGeneral(w, up));
  if (w.masked_lm.present()) {
    INFER_ASSIGN_OR_RETURN(m->splade_, SpladeHeadCuda::Create(c, w.masked_lm, up));
  }
  // The host copies die with `up`: wait for the uploads.
  INFER_RETURN_IF_ERROR(context.device->SynchronizeStream(m->weights_stream_.get()));
  m->weight_bytes_ = up.bytes();
  if (graphs.enabled) {
    const BertCudaGraphs::Shape shape{.hidden = c.hidden_size,
                                      .x_cols = m->XCols(),
                                      .work_cols = m->WorkCols(),
                                      .ctx_cols = m->CtxCols(),
                                      .quant_cols = m->QuantCols(),
                                      .max_positions = c.MaxSequenceLength(),
                                      .states_in_ctx = m->StatesInCtx()};
    const TransformerEncoderCuda* self = m.get();  // the graphs die first (declared last)
    INFER_ASSIGN_OR_RETURN(
        m->graphs_, BertCudaGraphs::Create(context, graphs, shape,
                                           [self](Stream* stream, const PackedSequencesView& batch,
                                                  const BertCudaGraphs::Scratch& scratch,
                                                  Pooling pooling, bool normalize, float* out) {
                                             return self->Forward(stream, batch, scratch, pooling,
                                                                  normalize, out);
                                           }));
  }
  return std::unique_ptr<TransformerEncoder>(std::move(m));
}

std::string TransformerEncoderCuda::Implementation() const {
  std::string s = precision_ == Precision::kFp8
                      ? "cuBLASLt FP8 (E4M3, per-channel x per-token scales) tensor-core GEMMs"
                      : "cuBLAS FP16 tensor-core GEMMs";
  absl::StrAppend(&s, " over packed tokens, flash attention (mma)");
  if (general_) absl::StrAppend(&s, ", general blocks (", spec_.model_type, ")");
  if (!layers_.empty() && layers_.front().ffn_in_lt != nullptr) {
    absl::StrAppend(&s, ", the FFN's bias + GELU in cuBLASLt's GEMM epilogue");
  }
  if (graphs_ != nullptr) {
    absl::StrAppend(&s, ", CUDA graphs for batches of up to ", graphs_->max_tokens(), " tokens");
  }
  return s;
}

int64_t TransformerEncoderCuda::ResidentBytes() const {
  return graphs_ != nullptr ? graphs_->Bytes() : 0;
}

const __half* TransformerEncoderCuda::PositionZero() const {
  if (position_.get() == nullptr) return nullptr;
  return position_.as<__half>() + spec_.position_offset * spec_.hidden_size;
}

int64_t TransformerEncoderCuda::XCols() const {
  // The general path keeps a pre-norm family's residual stream in FP32.
  return general_ && spec_.pre_norm ? 2 * spec_.hidden_size : spec_.hidden_size;
}

int64_t TransformerEncoderCuda::CtxCols() const {
  return std::max(spec_.hidden_size, spec_.q_width());
}

int64_t TransformerEncoderCuda::QuantCols() const {
  if (precision_ != Precision::kFp8) return 0;
  const TransformerSpec& c = spec_;
  return std::max({c.hidden_size, c.q_width(), c.intermediate_size}) +
         static_cast<int64_t>(sizeof(float));
}

int64_t TransformerEncoderCuda::WorkCols() const {
  const TransformerSpec& c = spec_;
  if (!general_) return std::max(3 * c.hidden_size, c.intermediate_size);
  return std::max(
      {c.q_width() + 2 * c.kv_width(), (c.gated ? 2 : 1) * c.intermediate_size, c.hidden_size});
}

// Encode's scratch, by allocator block, over the batch's real tokens (none
// for a batch a graph replays): x ([tokens, hidden] FP16), ctx ([tokens,
// CtxCols()]: the attention's output, and on the general path the normed
// input of each block) and the work buffer (the fused QKV projection, then
// the attention's projection and the FFN intermediate: [tokens, WorkCols()]).
// The packed ids, positions and offsets are the batch's upload (BertModel
// counts them); the cuBLAS workspace belongs to the compute stream
// (runtime/compute_stream.h), outside every batch.
int64_t TransformerEncoderCuda::PeakBytes(const BatchShape& shape) const {
  const int64_t tokens = shape.tokens, half = 2;
  if (tokens == 0) return 0;
  // A batch a graph replays computes in the graphs' resident buffers.
  if (graphs_ != nullptr && graphs_->Covers(shape.rows, tokens)) return 0;
  const int64_t quant =
      QuantCols() > 0 ? CachingAllocator::BlockBytes(tokens * QuantCols() + 256) : 0;
  return CachingAllocator::BlockBytes(tokens * XCols() * half) +
         CachingAllocator::BlockBytes(tokens * CtxCols() * half) +
         CachingAllocator::BlockBytes(tokens * WorkCols() * half) + quant;
}

// y[rows, out] = x[rows, in] · W^T (row-major FP16; W stored [out, in]). In
// cuBLAS's column-major terms: y^T = W · x^T, i.e. op(A) = W^T-as-stored.
absl::Status TransformerEncoderCuda::Gemm(Stream* stream, const void* x, int64_t rows,
                                          const Linear& l, void* y, void* quant, int64_t ld) const {
  if (l.fp8 != nullptr) {
    // Codes [rows, in] at the buffer's start, the row scales after them at
    // the next 256-byte boundary (QuantCols sizes both).
    auto* codes = static_cast<uint8_t*>(quant);
    auto* scales = reinterpret_cast<float*>(codes + (rows * l.in + 255) / 256 * 256);
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchQuantizeRowsFp8(NativeCudaStream(stream), static_cast<const __half*>(x), rows,
                                    l.in, ld > 0 ? ld : l.in, codes, scales),
        "FP8 quantize kernel");
    return l.fp8->Run(stream, l.w8.get(), l.w_scales.as<float>(), codes, scales, rows, y);
  }
  const float alpha = 1.0f, beta = 0.0f;
  return CublasStatus(
      cublasGemmEx(NativeCublasHandle(stream), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(l.out),
                   static_cast<int>(rows), static_cast<int>(l.in), &alpha, l.w.get(), CUDA_R_16F,
                   static_cast<int>(l.in), x, CUDA_R_16F, static_cast<int>(ld > 0 ? ld : l.in),
                   &beta, y, CUDA_R_16F, static_cast<int>(l.out), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx (FP16)");
}

absl::Status TransformerEncoderCuda::Encode(Stream* stream, const PackedSequencesView& packed,
                                            Pooling pooling, bool normalize, float* out) const {
  return EncodeWithStates(stream, packed, pooling, normalize, out, nullptr);
}

absl::Status TransformerEncoderCuda::EncodeWithStates(Stream* stream,
                                                      const PackedSequencesView& packed,
                                                      Pooling pooling, bool normalize, float* out,
                                                      float* states) const {
  const TransformerSpec& c = spec_;
  const int64_t rows = packed.rows, tokens = packed.tokens, h = c.hidden_size;
  if (rows == 0) return absl::OkStatus();
  if (NativeCublasHandle(stream) == nullptr) {
    return absl::FailedPreconditionError("the CUDA encoder runs on a compute stream");
  }
  if (tokens == 0) {  // every sequence empty: zero vectors, no states
    if (out == nullptr) return absl::OkStatus();
    INFER_RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(out, 0, rows * h * sizeof(float), NativeCudaStream(stream)),
        "cudaMemsetAsync");
    return absl::OkStatus();
  }
  if (graphs_ != nullptr && graphs_->Covers(rows, tokens)) {
    return graphs_->Run(stream, packed, pooling, normalize, out, states);
  }
  const int64_t work_cols = WorkCols();
  if (tokens > (int64_t{1} << 31) / work_cols) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", tokens, " tokens is too large"));
  }
  CachingAllocator* alloc = context_.allocator;
  INFER_ASSIGN_OR_RETURN(DeviceBuffer x,
                         DeviceBuffer::Allocate(alloc, tokens * XCols() * 2, stream));
  INFER_ASSIGN_OR_RETURN(DeviceBuffer ctx,
                         DeviceBuffer::Allocate(alloc, tokens * CtxCols() * 2, stream));
  INFER_ASSIGN_OR_RETURN(DeviceBuffer work,
                         DeviceBuffer::Allocate(alloc, tokens * work_cols * 2, stream));
  DeviceBuffer quant;
  if (QuantCols() > 0) {
    INFER_ASSIGN_OR_RETURN(quant,
                           DeviceBuffer::Allocate(alloc, tokens * QuantCols() + 256, stream));
  }
  INFER_RETURN_IF_ERROR(Forward(stream, packed, {x.get(), ctx.get(), work.get(), quant.get()},
                                pooling, normalize, out));
  if (states != nullptr) {
    // Enqueued before the buffers go back to the allocator (stream-ordered).
    const void* from = StatesInCtx() ? ctx.get() : x.get();
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchHalfToFloat(NativeCudaStream(stream), static_cast<const __half*>(from),
                                tokens * h, states),
        "states kernel");
  }
  return absl::OkStatus();
}

absl::Status TransformerEncoderCuda::Forward(Stream* stream, const PackedSequencesView& packed,
                                             const BertCudaGraphs::Scratch& scratch,
                                             Pooling pooling, bool normalize, float* out) const {
  if (general_) return ForwardGeneral(stream, packed, scratch, pooling, normalize, out);
  const TransformerSpec& c = spec_;
  const int64_t rows = packed.rows, tokens = packed.tokens;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  const int64_t heads = c.num_heads, dh = c.head_dim;
  cudaStream_t s = NativeCudaStream(stream);
  auto* xh = static_cast<__half*>(scratch.x);
  auto* ctxh = static_cast<__half*>(scratch.ctx);
  auto* workh = static_cast<__half*>(scratch.work);
  const auto eps = static_cast<float>(c.norm_eps);
  INFER_RETURN_IF_CUDA_ERROR(
      cuda::LaunchEmbedLayerNorm(s, packed.ids, packed.positions, packed.types, word_.as<__half>(),
                                 PositionZero(), token_type_.as<__half>(),
                                 embed_norm_.gamma.as<float>(), embed_norm_.beta.as<float>(), eps,
                                 tokens, h, xh),
      "embedding kernel");
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  for (const Layer& l : layers_) {
    INFER_RETURN_IF_ERROR(Gemm(stream, xh, tokens, l.qkv, workh, scratch.quant));
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchPackedAttention(s, workh, l.qkv.b.as<float>(), packed.offsets, rows,
                                    packed.longest, heads, dh, scale, ctxh),
        "attention kernel");
    INFER_RETURN_IF_ERROR(Gemm(stream, ctxh, tokens, l.attn_out, workh, scratch.quant));
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchBiasResidualLayerNorm(s, xh, workh, l.attn_out.b.as<float>(),
                                          l.attn_norm.gamma.as<float>(),
                                          l.attn_norm.beta.as<float>(), eps, tokens, h),
        "residual LayerNorm kernel");
    if (l.ffn_in_lt != nullptr) {
      INFER_RETURN_IF_ERROR(l.ffn_in_lt->Run(stream, l.ffn_in.w.get(), xh, tokens, workh));
    } else {
      INFER_RETURN_IF_ERROR(Gemm(stream, xh, tokens, l.ffn_in, workh, scratch.quant));
      INFER_RETURN_IF_CUDA_ERROR(
          cuda::LaunchBiasGelu(s, workh, l.ffn_in.b.as<float>(), tokens, inter), "GELU kernel");
    }
    INFER_RETURN_IF_ERROR(Gemm(stream, workh, tokens, l.ffn_out, ctxh, scratch.quant));
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchBiasResidualLayerNorm(s, xh, ctxh, l.ffn_out.b.as<float>(),
                                          l.ffn_norm.gamma.as<float>(), l.ffn_norm.beta.as<float>(),
                                          eps, tokens, h),
        "residual LayerNorm kernel");
  }
  return Pool(stream, xh, packed, pooling, normalize, out);
}

absl::Status TransformerEncoderCuda::Pool(Stream* stream, const void* x,
                                          const PackedSequencesView& packed, Pooling pooling,
                                          bool normalize, float* out) const {
  if (out == nullptr) return absl::OkStatus();
  cudaStream_t s = NativeCudaStream(stream);
  const auto* xh = static_cast<const __half*>(x);
  const int64_t h = spec_.hidden_size;
  INFER_RETURN_IF_CUDA_ERROR(
      pooling == Pooling::kLastToken
          ? cuda::LaunchLastTokenPool(s, xh, packed.offsets, packed.rows, h, normalize, out)
          : cuda::LaunchPackedPool(s, xh, packed.offsets, packed.rows, h, pooling == Pooling::kCls,
                                   normalize, out),
      "pooling kernel");
  return absl::OkStatus();
}

}  // namespace infer
