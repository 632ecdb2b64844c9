// TransformerEncoderCuda's general path (contract in encoder_cuda.h): the
// families that are not BERT-shaped, block by block as the CPU encoder
// computes them (encoder_cpu.cc), over packed tokens in FP16 with FP32
// arithmetic inside every kernel.
//
// Buffers: x [tokens, hidden] holds the residual stream (FP32 for pre-norm
// families, FP16 for post-norm ones, as BERT); ctx [tokens, CtxCols()] the
// normed input of a block, then the attention's output; work [tokens,
// WorkCols()] the fused QKV projection, then the attention's output
// projection, then the FFN's intermediate. A layer:
//   pre-norm:  ctx = attn_norm(x)          (x rounded where there is none:
//                                           ModernBERT's layer 0)
//              work = ctx · Wqkv; q/k transform in work; ctx = attention(work)
//              work = ctx · Wo; x += work + bo; ctx = ffn_norm(x)
//              work = act(ctx · Win); ctx = work · Wout
//              x += ctx + bout; ctx = the next layer's attn_norm(x), or the
//              final norm after the last layer (x rounded without one);
//              pooled from ctx
//   post-norm: work = x · Wqkv; attention; work = ctx · Wo;
//              x = attn_norm(x + work + bo); work = act(x · Win);
//              ctx = work · Wout; x = ffn_norm(x + ctx + bout)
#include <cuda_fp16.h>

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/packed_attention_cuda.cuh"
#include "models/transformer/encoder_cuda.h"
#include "models/transformer/transformer_cuda_kernels.cuh"
#include "runtime/cuda_device.h"
#include "runtime/status_macros.h"

namespace infer {

cuda::Activation CudaActivationOf(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kGelu:
      return cuda::Activation::kGelu;
    case ActivationKind::kGeluTanh:
      return cuda::Activation::kGeluTanh;
    case ActivationKind::kSilu:
    default:
      return cuda::Activation::kSilu;
  }
}

absl::Status TransformerEncoderCuda::UploadGeneral(const TransformerWeights& w, CudaUploader& up) {
  const TransformerSpec& c = spec_;
  if (c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        c.num_heads, " query heads do not group evenly over ", c.num_kv_heads, " KV heads"));
  }
  if (c.relative_buckets > 0 && c.max_position_embeddings > (int64_t{1} << 30)) {
    return absl::FailedPreconditionError("relative position table too large for the CUDA encoder");
  }
  INFER_ASSIGN_OR_RETURN(final_norm_.gamma, up.Float(w.final_norm.gamma));
  INFER_ASSIGN_OR_RETURN(final_norm_.beta, up.Float(w.final_norm.beta));
  INFER_ASSIGN_OR_RETURN(relative_bias_, up.FloatCopy(RelativeBiasByDistance(w)));
  // One rotary table per distinct θ.
  std::vector<double> thetas;
  for (size_t i = 0; i < c.rope_theta.size() && i < layers_.size(); ++i) {
    size_t t = 0;
    while (t < thetas.size() && thetas[t] != c.rope_theta[i]) ++t;
    if (t == thetas.size()) {
      thetas.push_back(c.rope_theta[i]);
      INFER_ASSIGN_OR_RETURN(DeviceBuffer b,
                             up.FloatCopy(RopeInverseFrequencies(c, c.rope_theta[i])));
      inv_freqs_.push_back(std::move(b));
    }
    layers_[i].inv_freq = inv_freqs_[t].as<float>();
  }
  const int64_t qkv_width = c.q_width() + 2 * c.kv_width();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const TransformerWeights::Layer& src = w.layers[i];
    Layer& dst = layers_[i];
    INFER_ASSIGN_OR_RETURN(dst.q_norm.gamma, up.Float(src.q_norm.gamma));
    INFER_ASSIGN_OR_RETURN(dst.k_norm.gamma, up.Float(src.k_norm.gamma));
    // A window past the longest sequence is no window (and fits an int).
    const int64_t window = i < c.window.size() ? c.window[i] : 0;
    dst.window = window < c.MaxSequenceLength() ? static_cast<int>(window) : 0;
    const bool transform = dst.inv_freq != nullptr || !src.q_norm.gamma.empty();
    std::vector<float> bias(qkv_width, 0.0f);
    if (!src.qkv.b.empty()) {
      // The q/k transform adds the query and key biases before it rotates;
      // the attention kernel then gets only the value bias.
      const int64_t from = transform ? c.q_width() + c.kv_width() : 0;
      std::copy(src.qkv.b.begin() + from, src.qkv.b.end(), bias.begin() + from);
    }
    INFER_ASSIGN_OR_RETURN(dst.attention_bias, up.FloatCopy(std::move(bias)));
  }
  return absl::OkStatus();
}

absl::Status TransformerEncoderCuda::ForwardGeneral(Stream* stream,
                                                    const PackedSequencesView& packed,
                                                    const BertCudaGraphs::Scratch& scratch,
                                                    Pooling pooling, bool normalize,
                                                    float* out) const {
  const TransformerSpec& c = spec_;
  const int64_t rows = packed.rows, tokens = packed.tokens, h = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  cudaStream_t s = NativeCudaStream(stream);
  auto* ctx = static_cast<__half*>(scratch.ctx);
  auto* work = static_cast<__half*>(scratch.work);
  const auto eps = static_cast<float>(c.norm_eps);
  const bool rms = c.norm == NormKind::kRmsNorm;
  auto row_norm = [&](const Norm& n) {
    return cuda::RowNorm{n.gamma.as<float>(), n.beta.as<float>(), eps, rms};
  };
  cuda::AttentionMask mask;
  mask.causal = c.causal;
  if (relative_bias_.get() != nullptr) {
    mask.relative_bias = relative_bias_.as<float>();
    mask.relative_span = static_cast<int>(c.max_position_embeddings);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const cuda::Activation act = CudaActivationOf(c.activation);
  // in -> q/k/v (work) -> attention (ctx) -> the output projection (work).
  auto attention = [&](const Layer& l, const __half* in) -> absl::Status {
    INFER_RETURN_IF_ERROR(Gemm(stream, in, tokens, l.qkv, work, scratch.quant));
    if (l.inv_freq != nullptr || l.q_norm.gamma.get() != nullptr) {
      INFER_RETURN_IF_CUDA_ERROR(
          cuda::LaunchQkTransform(s, work, l.qkv.b.as<float>(), l.q_norm.gamma.as<float>(),
                                  l.k_norm.gamma.as<float>(), eps, packed.positions, l.inv_freq,
                                  tokens, c.num_heads, c.num_kv_heads, c.head_dim),
          "q/k transform kernel");
    }
    mask.window = l.window;
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchPackedAttentionMasked(s, work, l.attention_bias.as<float>(), packed.offsets,
                                          rows, packed.longest, c.num_heads, c.num_kv_heads,
                                          c.head_dim, scale, mask, ctx),
        "attention kernel");
    return Gemm(stream, ctx, tokens, l.attn_out, work, scratch.quant);
  };
  // in -> the FFN (work) -> its output projection (ctx).
  auto ffn = [&](const Layer& l, const __half* in) -> absl::Status {
    INFER_RETURN_IF_ERROR(Gemm(stream, in, tokens, l.ffn_in, work, scratch.quant));
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchActivation(s, work, l.ffn_in.b.as<float>(), tokens, inter, act, c.gated),
        "activation kernel");
    return Gemm(stream, work, tokens, l.ffn_out, ctx, scratch.quant, c.gated ? 2 * inter : inter);
  };
  const __half* pooled = ctx;  // what pooling reads
  if (c.pre_norm) {
    // The residual stream in FP32 (decoders' hidden states can reach the
    // thousands, where FP16's step is 2 or more); each block's input is its
    // norm of it, in FP16, in ctx.
    auto* x = static_cast<float*>(scratch.x);
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchEmbed(s, packed.ids, packed.positions, packed.types, word_.as<__half>(),
                          PositionZero(), token_type_.as<__half>(), row_norm(embed_norm_), tokens,
                          h, x),
        "embedding kernel");
    // The first block's input: its norm (none in ModernBERT's layer 0), or
    // with no layers the final norm.
    const Norm& first = layers_.empty() ? final_norm_ : layers_.front().attn_norm;
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchAddNorm(s, x, nullptr, nullptr, row_norm(first), tokens, h, ctx),
        "norm kernel");
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Layer& l = layers_[i];
      INFER_RETURN_IF_ERROR(attention(l, ctx));
      INFER_RETURN_IF_CUDA_ERROR(cuda::LaunchAddNorm(s, x, work, l.attn_out.b.as<float>(),
                                                     row_norm(l.ffn_norm), tokens, h, ctx),
                                 "residual norm kernel");
      INFER_RETURN_IF_ERROR(ffn(l, ctx));
      // x += ctx + b, and the next block's input (the final norm's output
      // after the last), in place in ctx.
      const Norm& next = i + 1 < layers_.size() ? layers_[i + 1].attn_norm : final_norm_;
      INFER_RETURN_IF_CUDA_ERROR(
          cuda::LaunchAddNorm(s, x, ctx, l.ffn_out.b.as<float>(), row_norm(next), tokens, h, ctx),
          "residual norm kernel");
    }
  } else {
    // Post-norm (MPNet): BERT's order, the residual stream in FP16.
    auto* x = static_cast<__half*>(scratch.x);
    INFER_RETURN_IF_CUDA_ERROR(
        cuda::LaunchEmbed(s, packed.ids, packed.positions, packed.types, word_.as<__half>(),
                          PositionZero(), token_type_.as<__half>(), row_norm(embed_norm_), tokens,
                          h, x),
        "embedding kernel");
    for (const Layer& l : layers_) {
      INFER_RETURN_IF_ERROR(attention(l, x));
      INFER_RETURN_IF_CUDA_ERROR(cuda::LaunchAddNorm(s, x, work, l.attn_out.b.as<float>(),
                                                     row_norm(l.attn_norm), tokens, h, x),
                                 "residual norm kernel");
      INFER_RETURN_IF_ERROR(ffn(l, x));
      INFER_RETURN_IF_CUDA_ERROR(cuda::LaunchAddNorm(s, x, ctx, l.ffn_out.b.as<float>(),
                                                     row_norm(l.ffn_norm), tokens, h, x),
                                 "residual norm kernel");
    }
    if (final_norm_.gamma.get() != nullptr) {
      INFER_RETURN_IF_CUDA_ERROR(
          cuda::LaunchAddNorm(s, x, nullptr, nullptr, row_norm(final_norm_), tokens, h, x),
          "norm kernel");
    }
    pooled = x;
  }
  return Pool(stream, pooled, packed, pooling, normalize, out);
}

}  // namespace infer
