#include "models/transformer/encoder_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "models/quantize.h"
#include "runtime/cpu_device.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"

namespace infer {
namespace {

using cpu::ElementType;

// Scratch buffers of one Encode call: from the allocator (on the call's
// stream) when the encoder has one and the call a stream, else from the
// heap (the host-side conveniences, which pass no stream).
class Scratch {
 public:
  Scratch(CachingAllocator* allocator, Stream* stream) : allocator_(allocator), stream_(stream) {}

  absl::StatusOr<void*> Bytes(int64_t n) {
    if (n == 0) return nullptr;
    if (allocator_ != nullptr && stream_ != nullptr) {
      INFER_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(allocator_, n, stream_));
      buffers_.push_back(std::move(b));
      return buffers_.back().get();
    }
    heap_.emplace_back((n + sizeof(float) - 1) / sizeof(float));
    return heap_.back().data();
  }

 private:
  CachingAllocator* const allocator_;
  Stream* const stream_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<std::vector<float>> heap_;
};

}  // namespace

cpu::LinearActivation LinearActivationOf(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kGelu:
      return cpu::LinearActivation::kGelu;
    case ActivationKind::kGeluTanh:
      return cpu::LinearActivation::kGeluTanh;
    case ActivationKind::kSilu:
      break;
  }
  return cpu::LinearActivation::kSilu;
}

absl::StatusOr<std::unique_ptr<TransformerEncoderCpu>> TransformerEncoderCpu::Create(
    TransformerWeights w, const EncoderCpuOptions& options, CachingAllocator* allocator) {
  const TransformerSpec& c = w.spec;
  if (options.precision != Precision::kFp32 && options.precision != Precision::kBf16 &&
      options.precision != Precision::kInt8) {
    return absl::FailedPreconditionError(
        absl::StrCat("precision ", PrecisionName(options.precision),
                     ": the CPU encoder computes fp32, bf16 or int8"));
  }
  if (c.head_dim > cpu::kMaxHeadDim) {
    return absl::FailedPreconditionError(absl::StrCat("the CPU encoder handles head sizes up to ",
                                                      cpu::kMaxHeadDim, "; this model has ",
                                                      c.head_dim));
  }
  std::unique_ptr<TransformerEncoderCpu> m(new TransformerEncoderCpu());
  m->spec_ = c;
  m->precision_ = options.precision;
  m->threads_ = options.threads > 0 ? options.threads : DefaultCpuThreads();
  m->batch_invariant_ = options.batch_invariant;
  const int64_t fixed_rows = options.batch_invariant ? kInvariantRows : 0;
  m->allocator_ = allocator;
  // oneDNN sizes its work split by the team it is made on.
  UseCpuThreads(m->threads_);
  m->simd_ = cpu::DetectSimdLevel();
  try {
    m->engine_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN CPU engine: ", e.what()));
  }
  const ElementType in = m->bf16() ? ElementType::kBf16 : ElementType::kF32;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  const auto eps = static_cast<float>(c.norm_eps);
  const auto f = static_cast<int64_t>(sizeof(float));
  int64_t bytes = 0;
  // A norm; made as a oneDNN LayerNorm too when it runs in place.
  auto norm = [&](TransformerWeights::Norm& n, bool in_place) -> absl::StatusOr<Norm> {
    Norm out;
    out.gamma = std::move(n.gamma);
    out.beta = std::move(n.beta);
    bytes += static_cast<int64_t>(out.gamma.size() + out.beta.size()) * f;
    if (in_place && c.norm == NormKind::kLayerNorm && out.present()) {
      INFER_ASSIGN_OR_RETURN(
          out.onednn,
          cpu::OnednnLayerNorm::Create(m->engine_, h, eps, out.gamma.data(),
                                       out.beta.empty() ? nullptr : out.beta.data(), fixed_rows));
      m->scratchpad_bytes_ =
          std::max(m->scratchpad_bytes_, out.onednn->ScratchpadBytes(m->threads_));
      bytes += out.onednn->WeightBytes();
    }
    return out;
  };
  auto linear = [&](cpu::LinearOptions o, const TransformerWeights::Linear& l)
      -> absl::StatusOr<std::unique_ptr<cpu::OnednnLinear>> {
    o.in = l.in;
    o.out = l.out;
    o.input = in;
    o.fixed_rows = fixed_rows;
    o.int8 = m->precision_ == Precision::kInt8;
    INFER_ASSIGN_OR_RETURN(auto op, cpu::OnednnLinear::Create(m->engine_, o, l.w.data(),
                                                              l.b.empty() ? nullptr : l.b.data()));
    m->scratchpad_bytes_ = std::max(m->scratchpad_bytes_, op->ScratchpadBytes(m->threads_));
    m->scratchpad_row_bytes_ = std::max(m->scratchpad_row_bytes_, op->ScratchpadBytesPerRow());
    bytes += op->WeightBytes();
    return op;
  };
  INFER_ASSIGN_OR_RETURN(m->embed_norm_, norm(w.embed_norm, true));
  INFER_ASSIGN_OR_RETURN(m->final_norm_, norm(w.final_norm, true));
  // Rotary tables, one per distinct θ, as transformers computes them in
  // FP32: inv_freq = 1 / θ^(2i / d), angle = position × inv_freq.
  const int64_t half = c.head_dim / 2;
  std::vector<int> rope_of_layer(c.num_layers, -1);
  for (int64_t i = 0; i < static_cast<int64_t>(c.rope_theta.size()); ++i) {
    const double theta = c.rope_theta[i];
    int index = -1;
    for (size_t t = 0; t < m->rope_.size(); ++t) {
      if (m->rope_[t].theta == theta) index = static_cast<int>(t);
    }
    if (index < 0) {
      RopeTable table;
      table.theta = theta;
      const std::vector<float> inv_freq = RopeInverseFrequencies(c, theta);
      const int64_t positions = c.MaxSequenceLength();
      table.cos.resize(positions * half);
      table.sin.resize(positions * half);
      for (int64_t p = 0; p < positions; ++p) {
        for (int64_t j = 0; j < half; ++j) {
          const float angle = static_cast<float>(p) * inv_freq[j];
          table.cos[p * half + j] = std::cos(angle);
          table.sin[p * half + j] = std::sin(angle);
        }
      }
      bytes += 2 * positions * half * f;
      m->rope_.push_back(std::move(table));
      index = static_cast<int>(m->rope_.size()) - 1;
    }
    rope_of_layer[i] = index;
  }
  m->relative_bias_ = RelativeBiasByDistance(w);
  bytes += static_cast<int64_t>(m->relative_bias_.size()) * f;
  m->layers_.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    TransformerWeights::Layer& src = w.layers[i];
    Layer& dst = m->layers_[i];
    const cpu::LinearActivation act =
        c.gated ? cpu::LinearActivation::kNone : LinearActivationOf(c.activation);
    INFER_ASSIGN_OR_RETURN(dst.qkv, linear({.output = ElementType::kF32}, src.qkv));
    INFER_ASSIGN_OR_RETURN(dst.attn_out,
                           linear({.output = ElementType::kF32, .accumulate = true}, src.attn_out));
    INFER_ASSIGN_OR_RETURN(
        dst.ffn_in,
        linear({.output = c.gated ? ElementType::kF32 : in, .activation = act}, src.ffn_in));
    INFER_ASSIGN_OR_RETURN(dst.ffn_out,
                           linear({.output = ElementType::kF32, .accumulate = true}, src.ffn_out));
    INFER_ASSIGN_OR_RETURN(dst.attn_norm, norm(src.attn_norm, !c.pre_norm));
    INFER_ASSIGN_OR_RETURN(dst.ffn_norm, norm(src.ffn_norm, !c.pre_norm));
    dst.q_norm = std::move(src.q_norm.gamma);
    dst.k_norm = std::move(src.k_norm.gamma);
    bytes += static_cast<int64_t>(dst.q_norm.size() + dst.k_norm.size()) * f;
    dst.rope = rope_of_layer[i];
    src = TransformerWeights::Layer();  // the prepacked copies are what remains
  }
  m->word_ = std::move(w.word);
  m->position_ = std::move(w.position);
  m->token_type_ = std::move(w.token_type);
  bytes += static_cast<int64_t>(m->word_.size() + m->position_.size() + m->token_type_.size()) * f;
  m->classifier_ = ClassificationHead(w);
  bytes += m->classifier_.WeightBytes();
  if (w.masked_lm.present()) {
    INFER_ASSIGN_OR_RETURN(m->splade_, SpladeHeadCpu::Create(m->engine_, c, std::move(w.masked_lm),
                                                             m->threads_, m->precision_));
    bytes += m->splade_->WeightBytes();
  }
  m->weight_bytes_ = bytes;
  return m;
}

absl::StatusOr<std::unique_ptr<TransformerEncoderCpu>> TransformerEncoderCpu::Load(
    const std::string& dir, const EncoderCpuOptions& options, CachingAllocator* allocator) {
  INFER_ASSIGN_OR_RETURN(TransformerWeights w, LoadTransformerWeights(dir, options.masked_lm_head));
  return Create(std::move(w), options, allocator);
}

std::string TransformerEncoderCpu::Implementation() const {
  return absl::StrCat(precision_ == Precision::kInt8
                          ? absl::StrCat("int8 matmul (weights s8 ±", cpu::WeightLevels(), ") ")
                          : "matmul ",
                      layers_.empty() ? "none" : layers_[0].qkv->implementation(), ", attention ",
                      cpu::SimdLevelName(simd_), ", ", threads_, " threads",
                      batch_invariant_
                          ? absl::StrCat(", batch-invariant (pieces of ", kInvariantRows, " rows)")
                          : "");
}

int64_t TransformerEncoderCpu::ComputedRows(int64_t tokens) const {
  if (!batch_invariant_) return tokens;
  return (tokens + kInvariantRows - 1) / kInvariantRows * kInvariantRows;
}

std::array<int64_t, TransformerEncoderCpu::kBuffers> TransformerEncoderCpu::ScratchBytes(
    int64_t tokens, int64_t longest) const {
  const TransformerSpec& c = spec_;
  const int64_t h = c.hidden_size, f = sizeof(float), e = bf16() ? 2 : 4;
  std::array<int64_t, kBuffers> bytes{};
  bytes[kX] = tokens * h * f;
  bytes[kXIn] = bf16() || c.pre_norm ? tokens * h * e : 0;
  bytes[kQkv] = tokens * (c.q_width() + 2 * c.kv_width()) * f;
  bytes[kContext] = tokens * c.q_width() * e;
  bytes[kGate] = c.gated ? tokens * 2 * c.intermediate_size * f : 0;
  bytes[kIntermediate] = tokens * c.intermediate_size * e;
  bytes[kAttention] = threads_ * cpu::AttentionScratchFloats(longest, c.head_dim) * f;
  // INT8 ops keep a piece's codes and sums there too, per row of the largest
  // piece a batch of `tokens` rows runs.
  bytes[kScratchpad] = static_cast<int64_t>(
      scratchpad_bytes_ +
      scratchpad_row_bytes_ * static_cast<size_t>(std::min(tokens, cpu::PieceSizes().front())));
  return bytes;
}

int64_t TransformerEncoderCpu::PeakBytes(const BatchShape& shape) const {
  if (shape.tokens == 0) return 0;
  int64_t total = 0;
  for (int64_t b : ScratchBytes(ComputedRows(shape.tokens), shape.length)) {
    if (b > 0) total += CachingAllocator::BlockBytes(b);
  }
  return total;
}

absl::Status TransformerEncoderCpu::Encode(Stream* stream, const PackedSequencesView& batch,
                                           Pooling pooling, bool normalize, float* out) const {
  return EncodeWithStates(stream, batch, pooling, normalize, out, nullptr);
}

absl::Status TransformerEncoderCpu::EncodeWithStates(Stream* stream,
                                                     const PackedSequencesView& batch,
                                                     Pooling pooling, bool normalize, float* out,
                                                     float* states) const {
  const int64_t h = spec_.hidden_size, tokens = batch.tokens;
  if (batch.rows == 0) return absl::OkStatus();
  if (tokens == 0) {
    if (out != nullptr) std::fill(out, out + batch.rows * h, 0.0f);
    return absl::OkStatus();
  }
  UseCpuThreads(threads_);
  Scratch scratch(allocator_, stream);
  const int64_t rows = ComputedRows(tokens);
  const std::array<int64_t, kBuffers> sizes = ScratchBytes(rows, batch.longest);
  std::array<void*, kBuffers> p{};
  for (int i = 0; i < kBuffers; ++i) {
    INFER_ASSIGN_OR_RETURN(p[i], scratch.Bytes(sizes[i]));  // null when unused
  }
  // Without states to return, [CLS] and last-token pooling need the last
  // layer's output at one token per sequence only.
  Keep keep = Keep::kEveryToken;
  if (states == nullptr && out != nullptr && !layers_.empty()) {
    if (pooling == Pooling::kCls) keep = Keep::kFirstToken;
    if (pooling == Pooling::kLastToken) keep = Keep::kLastToken;
  }
  INFER_RETURN_IF_ERROR(Forward(batch, p, rows, keep));
  if (states != nullptr) {
    std::memcpy(states, p[kX], static_cast<size_t>(tokens * h) * sizeof(float));
  }
  if (out == nullptr) return absl::OkStatus();
  if (keep != Keep::kEveryToken) {
    // x holds one row per non-empty sequence: offsets of 1-row sequences,
    // and empty ones for the empty sequences (zero vectors).
    std::vector<int32_t> kept(batch.rows + 1, 0);
    for (int64_t r = 0; r < batch.rows; ++r) {
      const bool empty = batch.host_offsets[r + 1] == batch.host_offsets[r];
      kept[r + 1] = kept[r] + (empty ? 0 : 1);
    }
    cpu::Pool(static_cast<const float*>(p[kX]), kept.data(), batch.rows, h, cpu::PoolMode::kFirst,
              normalize, out, threads_);
    return absl::OkStatus();
  }
  const cpu::PoolMode mode = pooling == Pooling::kCls         ? cpu::PoolMode::kFirst
                             : pooling == Pooling::kLastToken ? cpu::PoolMode::kLast
                                                              : cpu::PoolMode::kMean;
  cpu::Pool(static_cast<const float*>(p[kX]), batch.host_offsets, batch.rows, h, mode, normalize,
            out, threads_);
  return absl::OkStatus();
}

int64_t TransformerEncoderCpu::KeepPooledRows(const PackedSequencesView& batch, Keep keep, float* x,
                                              void* ctx) const {
  const int64_t h = spec_.hidden_size;
  const size_t ctx_row = static_cast<size_t>(spec_.q_width()) * (bf16() ? 2 : 4);
  auto* c = static_cast<char*>(ctx);
  // Row k's source is at or after row k, and after every earlier source, so
  // moving in order never overwrites a row still to be read.
  int64_t k = 0;
  for (int64_t r = 0; r < batch.rows; ++r) {
    const int64_t begin = batch.host_offsets[r], end = batch.host_offsets[r + 1];
    if (begin == end) continue;
    const int64_t from = keep == Keep::kFirstToken ? begin : end - 1;
    if (from != k) {
      std::memcpy(x + k * h, x + from * h, static_cast<size_t>(h) * sizeof(float));
      std::memcpy(c + k * ctx_row, c + from * ctx_row, ctx_row);
    }
    ++k;
  }
  const int64_t rows = ComputedRows(k);
  std::fill(x + k * h, x + rows * h, 0.0f);
  std::memset(c + k * ctx_row, 0, static_cast<size_t>(rows - k) * ctx_row);
  return rows;
}

// `rows` is the batch's tokens, padded with zero rows in batch-invariant
// mode: every matmul and norm computes them all, except in the last layer
// after attention when `keep` names one token per sequence (m rows then).
absl::Status TransformerEncoderCpu::Forward(const PackedSequencesView& batch,
                                            const std::array<void*, kBuffers>& p, int64_t rows,
                                            Keep keep) const {
  const TransformerSpec& c = spec_;
  const int64_t h = c.hidden_size, tokens = batch.tokens;
  auto* x = static_cast<float*>(p[kX]);
  auto* qkv = static_cast<float*>(p[kQkv]);
  void* ctx = p[kContext];
  auto* gate = static_cast<float*>(p[kGate]);
  void* inter = p[kIntermediate];
  void* pad = p[kScratchpad];
  // The matmuls' input: x itself (post-norm FP32), else the kXIn buffer.
  void* x_in = p[kXIn] != nullptr ? p[kXIn] : x;
  // The rows computed from here on: all of them, until the last layer keeps
  // only the pooled ones.
  int64_t m = rows;
  const auto eps = static_cast<float>(c.norm_eps);
  const bool rms = c.norm == NormKind::kRmsNorm;
  // x_in = x, rounded to BF16 when computing in BF16.
  auto round = [&] {
    if (bf16()) {
      cpu::ToBf16(x, m * h, static_cast<uint16_t*>(x_in), threads_);
    } else if (x_in != x) {
      std::memcpy(x_in, x, m * h * sizeof(float));
    }
  };
  // x_in = norm(x) (pre-norm), or x when the layer has no such norm.
  auto normalize_in = [&](const Norm& n) {
    if (!n.present()) return round();
    cpu::Norm(x, m, h, n.gamma.data(), n.beta.empty() ? nullptr : n.beta.data(), eps, rms, x_in,
              bf16(), threads_);
  };
  // x = norm(x), in place.
  auto normalize_x = [&](dnnl::stream& s, const Norm& n) -> absl::Status {
    if (n.onednn != nullptr) return n.onednn->Run(s, x, m, pad);
    cpu::Norm(x, m, h, n.gamma.data(), n.beta.empty() ? nullptr : n.beta.data(), eps, rms, x, false,
              threads_);
    return absl::OkStatus();
  };

  cpu::AttentionArgs attention;
  attention.qkv = qkv;
  attention.offsets = batch.host_offsets;
  attention.rows = batch.rows;
  attention.heads = c.num_heads;
  attention.kv_heads = c.num_kv_heads;
  attention.head_dim = c.head_dim;
  attention.longest = batch.longest;
  attention.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  attention.causal = c.causal;
  attention.relative_bias = relative_bias_.empty() ? nullptr : relative_bias_.data();
  attention.relative_span = c.max_position_embeddings;
  attention.context = ctx;
  attention.context_bf16 = bf16();
  attention.bf16_products = bf16();
  attention.scratch = static_cast<float*>(p[kAttention]);

  cpu::QkTransformArgs qk;
  qk.qkv = qkv;
  qk.positions = batch.positions;
  qk.tokens = tokens;
  qk.heads = c.num_heads;
  qk.kv_heads = c.num_kv_heads;
  qk.head_dim = c.head_dim;
  qk.eps = eps;

  std::optional<dnnl::stream> s;
  try {
    s.emplace(engine_);
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN stream: ", e.what()));
  }
  cpu::EmbeddingArgs embed;
  embed.ids = batch.ids;
  embed.positions = batch.positions;
  embed.tokens = tokens;
  embed.hidden = h;
  embed.word = word_.data();
  embed.position = position_.empty() ? nullptr : position_.data();
  embed.position_offset = c.position_offset;
  embed.token_type = token_type_.empty() ? nullptr : token_type_.data();
  embed.types = batch.types;
  cpu::EmbeddingSum(embed, x, threads_);
  if (rows > tokens) {
    // Padding rows: zero in, so everything computed from them is finite;
    // attention never writes the context's padding rows, so once is enough.
    std::fill(x + tokens * h, x + rows * h, 0.0f);
    const size_t e = bf16() ? 2 : 4;
    std::memset(static_cast<char*>(ctx) + tokens * c.q_width() * e, 0,
                (rows - tokens) * c.q_width() * e);
  }
  if (embed_norm_.present()) INFER_RETURN_IF_ERROR(normalize_x(*s, embed_norm_));
  if (!c.pre_norm) round();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    if (c.pre_norm) normalize_in(l.attn_norm);
    INFER_RETURN_IF_ERROR(l.qkv->Run(*s, x_in, rows, qkv, pad));
    if (!l.q_norm.empty() || l.rope >= 0) {
      qk.q_gamma = l.q_norm.empty() ? nullptr : l.q_norm.data();
      qk.k_gamma = l.k_norm.empty() ? nullptr : l.k_norm.data();
      qk.cos = l.rope >= 0 ? rope_[l.rope].cos.data() : nullptr;
      qk.sin = l.rope >= 0 ? rope_[l.rope].sin.data() : nullptr;
      cpu::QkTransform(qk, threads_);
    }
    attention.window = c.window[i];
    const bool pooled_only = keep != Keep::kEveryToken && i + 1 == layers_.size();
    if (pooled_only) {
      attention.queries = keep == Keep::kFirstToken ? cpu::AttentionArgs::Queries::kFirst
                                                    : cpu::AttentionArgs::Queries::kLast;
    }
    cpu::Attention(simd_, attention, threads_);
    if (pooled_only) m = KeepPooledRows(batch, keep, x, ctx);
    INFER_RETURN_IF_ERROR(l.attn_out->Run(*s, ctx, m, x, pad));
    if (c.pre_norm) {
      normalize_in(l.ffn_norm);
    } else {
      INFER_RETURN_IF_ERROR(normalize_x(*s, l.attn_norm));
      round();
    }
    if (c.gated) {
      INFER_RETURN_IF_ERROR(l.ffn_in->Run(*s, x_in, m, gate, pad));
      cpu::GatedActivation(gate, m, c.intermediate_size, LinearActivationOf(c.activation), inter,
                           bf16(), threads_);
    } else {
      INFER_RETURN_IF_ERROR(l.ffn_in->Run(*s, x_in, m, inter, pad));
    }
    INFER_RETURN_IF_ERROR(l.ffn_out->Run(*s, inter, m, x, pad));
    if (!c.pre_norm) {
      INFER_RETURN_IF_ERROR(normalize_x(*s, l.ffn_norm));
      if (i + 1 < layers_.size()) round();
    }
  }
  if (final_norm_.present()) INFER_RETURN_IF_ERROR(normalize_x(*s, final_norm_));
  return absl::OkStatus();
}

}  // namespace infer
