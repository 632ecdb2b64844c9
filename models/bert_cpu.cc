#include "models/bert_cpu.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"

namespace infer {
namespace {

// Scratch buffers of one Encode call: from the allocator (on the call's
// stream) when the encoder has one, else from the heap.
class Scratch {
 public:
  Scratch(CachingAllocator* allocator, Stream* stream) : allocator_(allocator), stream_(stream) {}

  absl::StatusOr<float*> Floats(int64_t n) {
    if (allocator_ != nullptr) {
      INFER_ASSIGN_OR_RETURN(DeviceBuffer b,
                             DeviceBuffer::Allocate(allocator_, n * sizeof(float), stream_));
      buffers_.push_back(std::move(b));
      return buffers_.back().as<float>();
    }
    heap_.emplace_back(n);
    return heap_.back().data();
  }

 private:
  CachingAllocator* const allocator_;
  Stream* const stream_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<std::vector<float>> heap_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BertEncoderCpu>> BertEncoderCpu::Load(const std::string& dir,
                                                                     CachingAllocator* allocator) {
  INFER_ASSIGN_OR_RETURN(BertWeights w, LoadBertWeights(dir));
  return FromWeights(std::move(w), allocator);
}

std::unique_ptr<BertEncoderCpu> BertEncoderCpu::FromWeights(BertWeights weights,
                                                            CachingAllocator* allocator) {
  return std::unique_ptr<BertEncoderCpu>(new BertEncoderCpu(std::move(weights), allocator));
}

int64_t BertEncoderCpu::WeightBytes() const {
  return w_.ParameterCount() * static_cast<int64_t>(sizeof(float));
}

// Encode's scratch, by allocator block: x, q, k, v, context and a temporary
// ([tokens, hidden] each), the FFN intermediate, one head's scores.
int64_t BertEncoderCpu::PeakBytes(int64_t rows, int64_t length) const {
  const int64_t tokens = rows * length, f = sizeof(float);
  if (tokens == 0) return 0;
  return 6 * CachingAllocator::BlockBytes(tokens * w_.config.hidden_size * f) +
         CachingAllocator::BlockBytes(tokens * w_.config.intermediate_size * f) +
         CachingAllocator::BlockBytes(length * length * f);
}

void BertEncoderCpu::Apply(const BertWeights::Linear& l, const float* x, int64_t rows, float* y) {
  for (int64_t r = 0; r < rows; ++r) std::copy(l.b.begin(), l.b.end(), y + r * l.out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
              static_cast<int>(l.out), static_cast<int>(l.in), 1.0f, x, static_cast<int>(l.in),
              l.w.data(), static_cast<int>(l.in), 1.0f, y, static_cast<int>(l.out));
}

void BertEncoderCpu::LayerNorm(const BertWeights::Norm& n, float* x, int64_t rows) const {
  const int64_t h = w_.config.hidden_size;
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * h;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < h; ++i) mean += v[i];
    mean /= h;
    for (int64_t i = 0; i < h; ++i) var += (v[i] - mean) * (v[i] - mean);
    var /= h;
    const double inv = 1.0 / std::sqrt(var + w_.config.layer_norm_eps);
    for (int64_t i = 0; i < h; ++i) {
      v[i] = static_cast<float>((v[i] - mean) * inv) * n.gamma[i] + n.beta[i];
    }
  }
}

absl::StatusOr<std::vector<float>> BertEncoderCpu::Encode(absl::Span<const int64_t> ids,
                                                          absl::Span<const int64_t> mask,
                                                          int64_t batch, int64_t seq,
                                                          bool normalize,
                                                          BertPooling pooling) const {
  const BertConfig& c = w_.config;
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
  std::vector<float> out(batch * c.hidden_size);
  INFER_RETURN_IF_ERROR(
      Encode(nullptr, ids.data(), mask.data(), batch, seq, pooling, normalize, out.data()));
  return out;
}

absl::Status BertEncoderCpu::Encode(Stream* stream, const int64_t* ids, const int64_t* mask,
                                    int64_t batch, int64_t seq, BertPooling pooling, bool normalize,
                                    float* out) const {
  const BertConfig& c = w_.config;
  const int64_t h = c.hidden_size, heads = c.num_attention_heads, dh = h / heads;
  const int64_t rows = batch * seq;
  if (rows == 0) return absl::OkStatus();
  Scratch scratch(allocator_, stream);
  INFER_ASSIGN_OR_RETURN(float* x, scratch.Floats(rows * h));
  INFER_ASSIGN_OR_RETURN(float* q, scratch.Floats(rows * h));
  INFER_ASSIGN_OR_RETURN(float* k, scratch.Floats(rows * h));
  INFER_ASSIGN_OR_RETURN(float* v, scratch.Floats(rows * h));
  INFER_ASSIGN_OR_RETURN(float* ctx, scratch.Floats(rows * h));
  INFER_ASSIGN_OR_RETURN(float* tmp, scratch.Floats(rows * h));
  INFER_ASSIGN_OR_RETURN(float* inter, scratch.Floats(rows * c.intermediate_size));
  INFER_ASSIGN_OR_RETURN(float* scores, scratch.Floats(seq * seq));
  // Embeddings.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = r % seq;
    for (int64_t i = 0; i < h; ++i) {
      x[r * h + i] = w_.word[ids[r] * h + i] + w_.position[pos * h + i] + w_.token_type[i];
    }
  }
  LayerNorm(w_.embed_norm, x, rows);

  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  for (const BertWeights::Layer& l : w_.layers) {
    Apply(l.q, x, rows, q);
    Apply(l.k, x, rows, k);
    Apply(l.v, x, rows, v);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t hd = 0; hd < heads; ++hd) {
        const float* qb = q + b * seq * h + hd * dh;
        const float* kb = k + b * seq * h + hd * dh;
        const float* vb = v + b * seq * h + hd * dh;
        // scores[s, t] = q[s] · k[t] / sqrt(dh), padded keys masked out.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(seq),
                    static_cast<int>(seq), static_cast<int>(dh), scale, qb, static_cast<int>(h), kb,
                    static_cast<int>(h), 0.0f, scores, static_cast<int>(seq));
        for (int64_t s = 0; s < seq; ++s) {
          float* row = scores + s * seq;
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t t = 0; t < seq; ++t) {
            if (mask[b * seq + t] == 0) row[t] = -std::numeric_limits<float>::infinity();
            mx = std::max(mx, row[t]);
          }
          double sum = 0;
          for (int64_t t = 0; t < seq; ++t) {
            row[t] = std::isinf(row[t]) ? 0.0f : std::exp(row[t] - mx);
            sum += row[t];
          }
          const float inv = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
          for (int64_t t = 0; t < seq; ++t) row[t] *= inv;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(seq),
                    static_cast<int>(dh), static_cast<int>(seq), 1.0f, scores,
                    static_cast<int>(seq), vb, static_cast<int>(h), 0.0f,
                    ctx + b * seq * h + hd * dh, static_cast<int>(h));
      }
    }
    Apply(l.attn_out, ctx, rows, tmp);
    for (int64_t i = 0; i < rows * h; ++i) x[i] += tmp[i];
    LayerNorm(l.attn_norm, x, rows);
    Apply(l.ffn_in, x, rows, inter);
    for (int64_t i = 0; i < rows * c.intermediate_size; ++i) {
      inter[i] = 0.5f * inter[i] * (1.0f + std::erf(inter[i] * static_cast<float>(M_SQRT1_2)));
    }
    Apply(l.ffn_out, inter, rows, tmp);
    for (int64_t i = 0; i < rows * h; ++i) x[i] += tmp[i];
    LayerNorm(l.ffn_norm, x, rows);
  }
  // Mean pooling over real tokens (or the [CLS] state), then optional L2
  // normalisation.
  std::fill(out, out + batch * h, 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t count = 0;
    for (int64_t s = 0; s < seq; ++s) {
      if (pooling == BertPooling::kCls ? s != 0 : mask[b * seq + s] == 0) continue;
      ++count;
      for (int64_t i = 0; i < h; ++i) out[b * h + i] += x[(b * seq + s) * h + i];
    }
    double norm = 0;
    for (int64_t i = 0; i < h; ++i) {
      out[b * h + i] /= static_cast<float>(std::max<int64_t>(count, 1));
      norm += double{out[b * h + i]} * out[b * h + i];
    }
    if (normalize && norm > 0) {
      const float inv = static_cast<float>(1.0 / std::sqrt(norm));
      for (int64_t i = 0; i < h; ++i) out[b * h + i] *= inv;
    }
  }
  return absl::OkStatus();
}

}  // namespace infer
