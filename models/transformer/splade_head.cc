#include "models/transformer/splade_head.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "models/quantize.h"
#include "models/transformer/encoder_cpu.h"
#include "runtime/cpu_device.h"
#include "runtime/status_macros.h"

namespace infer {
namespace {

constexpr int64_t kAlign = 64;
int64_t Aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

ActivationKind SpladeHeadActivation(const TransformerSpec& spec) {
  if (spec.model_type != "bert" && spec.model_type != "distilbert") return ActivationKind::kGelu;
  return spec.activation;
}

absl::StatusOr<std::unique_ptr<SpladeHeadCpu>> SpladeHeadCpu::Create(
    const dnnl::engine& engine, const TransformerSpec& spec, TransformerWeights::MaskedLm head,
    int threads, Precision precision) {
  if (!head.present()) return absl::InvalidArgumentError("SPLADE needs a masked-LM head");
  if (precision != Precision::kFp32 && precision != Precision::kBf16 &&
      precision != Precision::kInt8) {
    return absl::InvalidArgumentError(absl::StrCat("the CPU's SPLADE head computes fp32, bf16 or ",
                                                   "int8, not ", PrecisionName(precision)));
  }
  std::unique_ptr<SpladeHeadCpu> m(new SpladeHeadCpu());
  m->engine_ = engine;
  m->threads_ = std::max(threads, 1);
  m->hidden_ = spec.hidden_size;
  m->vocab_ = head.decoder.out;
  UseCpuThreads(m->threads_);
  // The transform stays FP32 (hidden² products a token, beside the
  // decoder's hidden × vocab).
  cpu::LinearOptions dense{.in = m->hidden_, .out = m->hidden_};
  dense.activation = LinearActivationOf(SpladeHeadActivation(spec));
  INFER_ASSIGN_OR_RETURN(m->dense_, cpu::OnednnLinear::Create(engine, dense, head.dense.w.data(),
                                                              head.dense.b.data()));
  // The decoder in the encoder's precision, except INT8 where the CPU's
  // int8 kernels give the weights 7 bits (no VNNI: models/quantize.h): a
  // logit's sign decides whether a term is there at all, and on trained
  // weights (SPLADE-tiny-msmarco) 7-bit decoder weights took the quality
  // gate's lowest sparse cosine from 0.984 to 0.966, below its 0.97 floor;
  // with 8-bit weights 0.996 and 0.994.
  m->precision_ =
      precision == Precision::kInt8 && cpu::WeightLevels() < 127 ? Precision::kFp32 : precision;
  cpu::LinearOptions decoder{.in = m->hidden_, .out = m->vocab_};
  decoder.input =
      m->precision_ == Precision::kBf16 ? cpu::ElementType::kBf16 : cpu::ElementType::kF32;
  decoder.int8 = m->precision_ == Precision::kInt8;
  INFER_ASSIGN_OR_RETURN(
      m->decoder_,
      cpu::OnednnLinear::Create(engine, decoder, head.decoder.w.data(), head.decoder.b.data()));
  INFER_ASSIGN_OR_RETURN(
      m->norm_, cpu::OnednnLayerNorm::Create(
                    engine, m->hidden_, static_cast<float>(spec.norm_eps), head.norm.gamma.data(),
                    head.norm.beta.empty() ? nullptr : head.norm.beta.data()));
  m->weight_bytes_ =
      m->dense_->WeightBytes() + m->decoder_->WeightBytes() + m->norm_->WeightBytes();
  return m;
}

int64_t SpladeHeadCpu::ScratchBytes(int64_t tokens) const {
  const int64_t chunk = std::min(tokens, kChunkTokens);
  if (chunk <= 0) return 0;
  const auto f = static_cast<int64_t>(sizeof(float));
  const int64_t bf16 = precision_ == Precision::kBf16 ? Aligned(chunk * hidden_ * 2) : 0;
  return Aligned(chunk * hidden_ * f) + bf16 + Aligned(chunk * vocab_ * f) +
         Aligned(static_cast<int64_t>(ScratchpadBytes(chunk)));
}

// oneDNN's scratchpad for a chunk of `rows` tokens (INT8's codes and sums
// take room per row).
size_t SpladeHeadCpu::ScratchpadBytes(int64_t rows) const {
  return std::max({dense_->ScratchpadBytesFor(rows, threads_),
                   decoder_->ScratchpadBytesFor(rows, threads_), norm_->ScratchpadBytes(threads_)});
}

absl::Status SpladeHeadCpu::Run(Stream* /*stream*/, const float* states, const int32_t* offsets,
                                const int32_t* /*device_offsets*/, int64_t rows, int64_t tokens,
                                const SpladePooling& pooling, float* out, void* scratch) const {
  const int64_t v = vocab_, h = hidden_;
  if (tokens == 0) {
    std::fill(out, out + rows * v, 0.0f);
    return absl::OkStatus();
  }
  const float start = pooling.sum ? 0.0f : -std::numeric_limits<float>::infinity();
  std::fill(out, out + rows * v, start);
  auto transform = [&pooling](float x) {
    const float y = std::log1p(x);
    return pooling.log1p_twice ? std::log1p(y) : y;
  };
  const int64_t chunk = std::min(tokens, kChunkTokens);
  auto* base = static_cast<char*>(scratch);
  // Scratch: the chunk's transformed states (FP32, and BF16 for a BF16
  // decoder), its logits, oneDNN's scratchpad.
  const bool bf16 = precision_ == Precision::kBf16;
  auto* hidden = reinterpret_cast<float*>(base);
  int64_t at = Aligned(chunk * h * static_cast<int64_t>(sizeof(float)));
  auto* hidden_bf16 = reinterpret_cast<uint16_t*>(base + at);
  if (bf16) at += Aligned(chunk * h * 2);
  auto* logits = reinterpret_cast<float*>(base + at);
  void* scratchpad = base + at + Aligned(chunk * v * static_cast<int64_t>(sizeof(float)));
  UseCpuThreads(threads_);
  std::optional<dnnl::stream> stream;
  try {
    stream.emplace(engine_);
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN stream: ", e.what()));
  }
  // The first sequence that ends after the chunk's first token.
  int64_t first = 0;
  for (int64_t c0 = 0; c0 < tokens; c0 += chunk) {
    const int64_t n = std::min(chunk, tokens - c0), c1 = c0 + n;
    INFER_RETURN_IF_ERROR(dense_->Run(*stream, states + c0 * h, n, hidden, scratchpad));
    INFER_RETURN_IF_ERROR(norm_->Run(*stream, hidden, n, scratchpad));
    if (bf16) cpu::ToBf16(hidden, n * h, hidden_bf16, threads_);
    INFER_RETURN_IF_ERROR(decoder_->Run(*stream, bf16 ? static_cast<void*>(hidden_bf16) : hidden, n,
                                        logits, scratchpad));
    while (first < rows && offsets[first + 1] <= c0) ++first;
    // Fold the chunk into its sequences, columns spread over the team.
    const int64_t block = 256, blocks = (v + block - 1) / block;
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t v0 = b * block, v1 = std::min(v, v0 + block);
      for (int64_t s = first; s < rows && offsets[s] < c1; ++s) {
        float* o = out + s * v;
        const int64_t t0 = std::max<int64_t>(offsets[s], c0);
        const int64_t t1 = std::min<int64_t>(offsets[s + 1], c1);
        for (int64_t t = t0; t < t1; ++t) {
          const float* l = logits + (t - c0) * v;
          if (pooling.sum) {
            for (int64_t j = v0; j < v1; ++j) {
              if (l[j] > 0) o[j] += transform(l[j]);
            }
          } else {
            for (int64_t j = v0; j < v1; ++j) o[j] = std::max(o[j], l[j]);
          }
        }
      }
    }
  }
  if (!pooling.sum) {
    // log1p and ReLU are monotone: the largest logit gives the largest value.
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t i = 0; i < rows * v; ++i) out[i] = out[i] > 0 ? transform(out[i]) : 0.0f;
  }
  return absl::OkStatus();
}

}  // namespace infer
