#include "models/transformer/splade_head.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
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
    int threads) {
  if (!head.present()) return absl::InvalidArgumentError("SPLADE needs a masked-LM head");
  std::unique_ptr<SpladeHeadCpu> m(new SpladeHeadCpu());
  m->engine_ = engine;
  m->threads_ = std::max(threads, 1);
  m->hidden_ = spec.hidden_size;
  m->vocab_ = head.decoder.out;
  UseCpuThreads(m->threads_);
  cpu::LinearOptions dense{.in = m->hidden_, .out = m->hidden_};
  dense.activation = LinearActivationOf(SpladeHeadActivation(spec));
  INFER_ASSIGN_OR_RETURN(m->dense_, cpu::OnednnLinear::Create(engine, dense, head.dense.w.data(),
                                                              head.dense.b.data()));
  const cpu::LinearOptions decoder{.in = m->hidden_, .out = m->vocab_};
  INFER_ASSIGN_OR_RETURN(
      m->decoder_,
      cpu::OnednnLinear::Create(engine, decoder, head.decoder.w.data(), head.decoder.b.data()));
  INFER_ASSIGN_OR_RETURN(
      m->norm_, cpu::OnednnLayerNorm::Create(
                    engine, m->hidden_, static_cast<float>(spec.norm_eps), head.norm.gamma.data(),
                    head.norm.beta.empty() ? nullptr : head.norm.beta.data()));
  m->scratchpad_bytes_ =
      std::max({m->dense_->ScratchpadBytes(m->threads_), m->decoder_->ScratchpadBytes(m->threads_),
                m->norm_->ScratchpadBytes(m->threads_)});
  m->weight_bytes_ =
      m->dense_->WeightBytes() + m->decoder_->WeightBytes() + m->norm_->WeightBytes();
  return m;
}

int64_t SpladeHeadCpu::ScratchBytes(int64_t tokens) const {
  const int64_t chunk = std::min(tokens, kChunkTokens);
  if (chunk <= 0) return 0;
  const auto f = static_cast<int64_t>(sizeof(float));
  return Aligned(chunk * hidden_ * f) + Aligned(chunk * vocab_ * f) +
         Aligned(static_cast<int64_t>(scratchpad_bytes_));
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
  auto* hidden = reinterpret_cast<float*>(base);
  auto* logits = reinterpret_cast<float*>(base + Aligned(chunk * h * sizeof(float)));
  void* scratchpad = base + Aligned(chunk * h * sizeof(float)) + Aligned(chunk * v * sizeof(float));
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
    INFER_RETURN_IF_ERROR(decoder_->Run(*stream, hidden, n, logits, scratchpad));
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
