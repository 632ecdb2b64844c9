#include "models/bert/bert_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/cpu_device.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"

namespace infer {
namespace {

using cpu::ElementType;

// Scratch buffers of one Encode call: from the allocator (on the call's
// stream) when the encoder has one, else from the heap.
class Scratch {
 public:
  Scratch(CachingAllocator* allocator, Stream* stream) : allocator_(allocator), stream_(stream) {}

  absl::StatusOr<void*> Bytes(int64_t n) {
    if (n == 0) return nullptr;
    if (allocator_ != nullptr) {
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

absl::StatusOr<std::unique_ptr<BertEncoderCpu>> BertEncoderCpu::Create(
    BertWeights w, const BertCpuOptions& options, CachingAllocator* allocator) {
  const BertConfig& c = w.config;
  if (options.precision != Precision::kFp32 && options.precision != Precision::kBf16) {
    return absl::FailedPreconditionError(absl::StrCat(
        "precision ", PrecisionName(options.precision), ": the CPU encoder computes fp32 or bf16"));
  }
  const int64_t head_dim = c.hidden_size / c.num_attention_heads;
  if (head_dim > cpu::kMaxHeadDim) {
    return absl::FailedPreconditionError(absl::StrCat("the CPU encoder handles head sizes up to ",
                                                      cpu::kMaxHeadDim, "; this model has ",
                                                      head_dim));
  }
  std::unique_ptr<BertEncoderCpu> m(new BertEncoderCpu());
  m->config_ = c;
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
  const auto eps = static_cast<float>(c.layer_norm_eps);
  int64_t bytes = 0;
  auto norm =
      [&](const BertWeights::Norm& n) -> absl::StatusOr<std::unique_ptr<cpu::OnednnLayerNorm>> {
    INFER_ASSIGN_OR_RETURN(auto op, cpu::OnednnLayerNorm::Create(m->engine_, h, eps, n.gamma.data(),
                                                                 n.beta.data(), fixed_rows));
    m->scratchpad_bytes_ = std::max(m->scratchpad_bytes_, op->ScratchpadBytes(m->threads_));
    bytes += op->WeightBytes();
    return op;
  };
  auto linear =
      [&](cpu::LinearOptions o, const std::vector<float>& weights,
          const std::vector<float>& bias) -> absl::StatusOr<std::unique_ptr<cpu::OnednnLinear>> {
    o.fixed_rows = fixed_rows;
    INFER_ASSIGN_OR_RETURN(auto op,
                           cpu::OnednnLinear::Create(m->engine_, o, weights.data(), bias.data()));
    m->scratchpad_bytes_ = std::max(m->scratchpad_bytes_, op->ScratchpadBytes(m->threads_));
    bytes += op->WeightBytes();
    return op;
  };
  INFER_ASSIGN_OR_RETURN(m->embed_norm_, norm(w.embed_norm));
  m->layers_.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    BertWeights::Layer& src = w.layers[i];
    Layer& dst = m->layers_[i];
    const BertWeights::Linear qkv = FusedQkv(src);
    INFER_ASSIGN_OR_RETURN(dst.qkv,
                           linear({h, 3 * h, in, ElementType::kF32, false, false}, qkv.w, qkv.b));
    INFER_ASSIGN_OR_RETURN(dst.attn_out, linear({h, h, in, ElementType::kF32, false, true},
                                                src.attn_out.w, src.attn_out.b));
    INFER_ASSIGN_OR_RETURN(
        dst.ffn_in, linear({h, inter, in, in, /*gelu=*/true, false}, src.ffn_in.w, src.ffn_in.b));
    INFER_ASSIGN_OR_RETURN(dst.ffn_out, linear({inter, h, in, ElementType::kF32, false, true},
                                               src.ffn_out.w, src.ffn_out.b));
    INFER_ASSIGN_OR_RETURN(dst.attn_norm, norm(src.attn_norm));
    INFER_ASSIGN_OR_RETURN(dst.ffn_norm, norm(src.ffn_norm));
    src = BertWeights::Layer();  // the prepacked copies are what remains
  }
  m->word_ = std::move(w.word);
  m->position_ = std::move(w.position);
  m->token_type_ = std::move(w.token_type);
  bytes += static_cast<int64_t>((m->word_.size() + m->position_.size() + m->token_type_.size()) *
                                sizeof(float));
  m->weight_bytes_ = bytes;
  return m;
}

absl::StatusOr<std::unique_ptr<BertEncoderCpu>> BertEncoderCpu::Load(const std::string& dir,
                                                                     const BertCpuOptions& options,
                                                                     CachingAllocator* allocator) {
  INFER_ASSIGN_OR_RETURN(BertWeights w, LoadBertWeights(dir));
  return Create(std::move(w), options, allocator);
}

std::string BertEncoderCpu::Implementation() const {
  return absl::StrCat("matmul ", layers_.empty() ? "none" : layers_[0].qkv->implementation(),
                      ", attention ", cpu::SimdLevelName(simd_), ", ", threads_, " threads",
                      batch_invariant_
                          ? absl::StrCat(", batch-invariant (pieces of ", kInvariantRows, " rows)")
                          : "");
}

int64_t BertEncoderCpu::ComputedRows(int64_t tokens) const {
  if (!batch_invariant_) return tokens;
  return (tokens + kInvariantRows - 1) / kInvariantRows * kInvariantRows;
}

// Encode's scratch: x (FP32 residual stream), its BF16 copy (bf16 only), the
// fused QKV projection (FP32), the attention output and the FFN intermediate
// (in the matmul input type), the attention kernel's per-thread scratch, and
// oneDNN's scratchpad.
std::array<int64_t, BertEncoderCpu::kBuffers> BertEncoderCpu::ScratchBytes(int64_t tokens,
                                                                           int64_t longest) const {
  const int64_t h = config_.hidden_size, f = sizeof(float), e = bf16() ? 2 : 4;
  std::array<int64_t, kBuffers> bytes{};
  bytes[kX] = tokens * h * f;
  bytes[kXBf16] = bf16() ? tokens * h * e : 0;
  bytes[kQkv] = tokens * 3 * h * f;
  bytes[kContext] = tokens * h * e;
  bytes[kIntermediate] = tokens * config_.intermediate_size * e;
  bytes[kAttention] =
      threads_ * cpu::AttentionScratchFloats(longest, h / config_.num_attention_heads) * f;
  bytes[kScratchpad] = static_cast<int64_t>(scratchpad_bytes_);
  return bytes;
}

int64_t BertEncoderCpu::PeakBytes(const BatchShape& shape) const {
  if (shape.tokens == 0) return 0;
  int64_t total = 0;
  for (int64_t b : ScratchBytes(ComputedRows(shape.tokens), shape.length)) {
    if (b > 0) total += CachingAllocator::BlockBytes(b);
  }
  return total;
}

absl::StatusOr<std::vector<float>> BertEncoderCpu::Encode(absl::Span<const int64_t> ids,
                                                          absl::Span<const int64_t> mask,
                                                          int64_t batch, int64_t seq,
                                                          bool normalize,
                                                          BertPooling pooling) const {
  const BertConfig& c = config_;
  if (batch < 0 || seq < 0 || static_cast<int64_t>(ids.size()) != batch * seq ||
      static_cast<int64_t>(mask.size()) != batch * seq) {
    return absl::InvalidArgumentError("ids and mask must both be [batch, seq]");
  }
  if (seq > c.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence of ", seq, " tokens; the model allows ", c.max_position_embeddings));
  }
  for (int64_t id : ids) {
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside [0, ", c.vocab_size, ")"));
    }
  }
  const PackedSequences packed(ids.data(), mask.data(), batch, seq);
  std::vector<float> out(batch * c.hidden_size);
  INFER_RETURN_IF_ERROR(Encode(nullptr, packed.view(), pooling, normalize, out.data()));
  return out;
}

absl::Status BertEncoderCpu::Encode(Stream* stream, const PackedSequencesView& batch,
                                    BertPooling pooling, bool normalize, float* out) const {
  const BertConfig& c = config_;
  const int64_t h = c.hidden_size, tokens = batch.tokens;
  if (batch.rows == 0) return absl::OkStatus();
  if (tokens == 0) {
    std::fill(out, out + batch.rows * h, 0.0f);
    return absl::OkStatus();
  }
  UseCpuThreads(threads_);
  Scratch scratch(allocator_, stream);
  // The rows every matmul and LayerNorm computes: the tokens, then in
  // batch-invariant mode zero rows up to a multiple of the piece.
  const int64_t rows = ComputedRows(tokens);
  const std::array<int64_t, kBuffers> sizes = ScratchBytes(rows, batch.longest);
  std::array<void*, kBuffers> p{};
  for (int i = 0; i < kBuffers; ++i) {
    INFER_ASSIGN_OR_RETURN(p[i], scratch.Bytes(sizes[i]));  // null when unused
  }
  auto* x = static_cast<float*>(p[kX]);
  auto* xb = static_cast<uint16_t*>(p[kXBf16]);
  auto* qkv = static_cast<float*>(p[kQkv]);
  void* ctx = p[kContext];
  void* inter = p[kIntermediate];
  auto* attention_scratch = static_cast<float*>(p[kAttention]);
  void* pad = p[kScratchpad];
  const void* x_in = bf16() ? static_cast<const void*>(xb) : x;
  auto round = [&] {
    if (bf16()) cpu::ToBf16(x, rows * h, xb, threads_);
  };

  cpu::AttentionArgs attention;
  attention.qkv = qkv;
  attention.offsets = batch.host_offsets;
  attention.rows = batch.rows;
  attention.hidden = h;
  attention.heads = c.num_attention_heads;
  attention.longest = batch.longest;
  attention.scale = 1.0f / std::sqrt(static_cast<float>(h / c.num_attention_heads));
  attention.context = ctx;
  attention.context_bf16 = bf16();
  attention.scratch = attention_scratch;

  std::optional<dnnl::stream> s;
  try {
    s.emplace(engine_);
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN stream: ", e.what()));
  }
  cpu::EmbeddingSum(batch.ids, batch.positions, tokens, h, word_.data(), position_.data(),
                    token_type_.data(), x, threads_);
  if (rows > tokens) {
    // Padding rows: zero in, so everything computed from them is finite;
    // attention never writes the context's padding rows, so once is enough.
    std::fill(x + tokens * h, x + rows * h, 0.0f);
    const size_t e = bf16() ? 2 : 4;
    std::memset(static_cast<char*>(ctx) + tokens * h * e, 0, (rows - tokens) * h * e);
  }
  INFER_RETURN_IF_ERROR(embed_norm_->Run(*s, x, rows, pad));
  round();
  for (const Layer& l : layers_) {
    INFER_RETURN_IF_ERROR(l.qkv->Run(*s, x_in, rows, qkv, pad));
    cpu::Attention(simd_, attention, threads_);
    INFER_RETURN_IF_ERROR(l.attn_out->Run(*s, ctx, rows, x, pad));
    INFER_RETURN_IF_ERROR(l.attn_norm->Run(*s, x, rows, pad));
    round();
    INFER_RETURN_IF_ERROR(l.ffn_in->Run(*s, x_in, rows, inter, pad));
    INFER_RETURN_IF_ERROR(l.ffn_out->Run(*s, inter, rows, x, pad));
    INFER_RETURN_IF_ERROR(l.ffn_norm->Run(*s, x, rows, pad));
    if (&l != &layers_.back()) round();
  }
  cpu::Pool(x, batch.host_offsets, batch.rows, h, pooling == BertPooling::kCls, normalize, out,
            threads_);
  return absl::OkStatus();
}

}  // namespace infer
