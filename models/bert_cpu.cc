#include "models/bert_cpu.h"

#include <cblas.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"
#include "runtime/tensor.h"

namespace infer {
namespace {

using Tensors = std::map<std::string, CheckpointTensor>;

// The tensor `name` (or "bert." + name), which must have `shape`.
absl::StatusOr<std::vector<float>> Take(Tensors& t, const std::string& name,
                                        const std::vector<int64_t>& shape) {
  auto it = t.find(name);
  if (it == t.end()) it = t.find("bert." + name);
  if (it == t.end()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has no tensor '", name, "'"));
  }
  if (it->second.shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has shape ",
                                                   ShapeToString(it->second.shape),
                                                   "; the config needs ", ShapeToString(shape)));
  }
  return std::move(it->second.values);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BertEncoderCpu>> BertEncoderCpu::Load(const std::string& dir) {
  std::unique_ptr<BertEncoderCpu> m(new BertEncoderCpu());
  INFER_ASSIGN_OR_RETURN(m->config_, ReadBertConfig(dir + "/config.json"));
  INFER_ASSIGN_OR_RETURN(Tensors t, ReadSafetensors(dir + "/model.safetensors"));
  const BertConfig& c = m->config_;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  auto with_file = [&](absl::Status s) {
    return absl::Status(s.code(), absl::StrCat(dir, "/model.safetensors: ", s.message()));
  };
  auto take = [&](const std::string& name, std::vector<int64_t> shape,
                  std::vector<float>* out) -> absl::Status {
    absl::StatusOr<std::vector<float>> v = Take(t, name, shape);
    if (!v.ok()) return with_file(v.status());
    *out = *std::move(v);
    return absl::OkStatus();
  };
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in, Linear* l) -> absl::Status {
    l->out = out;
    l->in = in;
    INFER_RETURN_IF_ERROR(take(prefix + ".weight", {out, in}, &l->w));
    return take(prefix + ".bias", {out}, &l->b);
  };
  auto norm = [&](const std::string& prefix, Norm* n) -> absl::Status {
    INFER_RETURN_IF_ERROR(take(prefix + ".weight", {h}, &n->gamma));
    return take(prefix + ".bias", {h}, &n->beta);
  };
  INFER_RETURN_IF_ERROR(take("embeddings.word_embeddings.weight", {c.vocab_size, h}, &m->word_));
  INFER_RETURN_IF_ERROR(
      take("embeddings.position_embeddings.weight", {c.max_position_embeddings, h}, &m->position_));
  INFER_RETURN_IF_ERROR(
      take("embeddings.token_type_embeddings.weight", {c.type_vocab_size, h}, &m->token_type_));
  INFER_RETURN_IF_ERROR(norm("embeddings.LayerNorm", &m->embed_norm_));
  m->layers_.resize(c.num_hidden_layers);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = absl::StrCat("encoder.layer.", i, ".");
    Layer& l = m->layers_[i];
    INFER_RETURN_IF_ERROR(linear(p + "attention.self.query", h, h, &l.q));
    INFER_RETURN_IF_ERROR(linear(p + "attention.self.key", h, h, &l.k));
    INFER_RETURN_IF_ERROR(linear(p + "attention.self.value", h, h, &l.v));
    INFER_RETURN_IF_ERROR(linear(p + "attention.output.dense", h, h, &l.attn_out));
    INFER_RETURN_IF_ERROR(norm(p + "attention.output.LayerNorm", &l.attn_norm));
    INFER_RETURN_IF_ERROR(linear(p + "intermediate.dense", inter, h, &l.ffn_in));
    INFER_RETURN_IF_ERROR(linear(p + "output.dense", h, inter, &l.ffn_out));
    INFER_RETURN_IF_ERROR(norm(p + "output.LayerNorm", &l.ffn_norm));
  }
  return m;
}

int64_t BertEncoderCpu::weight_bytes() const {
  int64_t floats = static_cast<int64_t>(word_.size() + position_.size() + token_type_.size() +
                                        embed_norm_.gamma.size() + embed_norm_.beta.size());
  for (const Layer& l : layers_) {
    for (const Linear* lin : {&l.q, &l.k, &l.v, &l.attn_out, &l.ffn_in, &l.ffn_out}) {
      floats += static_cast<int64_t>(lin->w.size() + lin->b.size());
    }
    floats += static_cast<int64_t>(4 * config_.hidden_size);
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

void BertEncoderCpu::Apply(const Linear& l, const float* x, int64_t rows, float* y) {
  for (int64_t r = 0; r < rows; ++r) std::copy(l.b.begin(), l.b.end(), y + r * l.out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
              static_cast<int>(l.out), static_cast<int>(l.in), 1.0f, x, static_cast<int>(l.in),
              l.w.data(), static_cast<int>(l.in), 1.0f, y, static_cast<int>(l.out));
}

void BertEncoderCpu::LayerNorm(const Norm& n, float* x, int64_t rows) const {
  const int64_t h = config_.hidden_size;
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * h;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < h; ++i) mean += v[i];
    mean /= h;
    for (int64_t i = 0; i < h; ++i) var += (v[i] - mean) * (v[i] - mean);
    var /= h;
    const double inv = 1.0 / std::sqrt(var + config_.layer_norm_eps);
    for (int64_t i = 0; i < h; ++i) {
      v[i] = static_cast<float>((v[i] - mean) * inv) * n.gamma[i] + n.beta[i];
    }
  }
}

absl::StatusOr<std::vector<float>> BertEncoderCpu::Encode(absl::Span<const int64_t> ids,
                                                          absl::Span<const int64_t> mask,
                                                          int64_t batch, int64_t seq,
                                                          bool normalize) const {
  const BertConfig& c = config_;
  const int64_t h = c.hidden_size, heads = c.num_attention_heads, dh = h / heads;
  const int64_t rows = batch * seq;
  if (static_cast<int64_t>(ids.size()) != rows || static_cast<int64_t>(mask.size()) != rows) {
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
  // Embeddings.
  std::vector<float> x(rows * h);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = r % seq;
    for (int64_t i = 0; i < h; ++i) {
      x[r * h + i] = word_[ids[r] * h + i] + position_[pos * h + i] + token_type_[i];
    }
  }
  LayerNorm(embed_norm_, x.data(), rows);

  std::vector<float> q(rows * h), k(rows * h), v(rows * h), ctx(rows * h), tmp(rows * h);
  std::vector<float> inter(rows * c.intermediate_size), scores(seq * seq);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  for (const Layer& l : layers_) {
    Apply(l.q, x.data(), rows, q.data());
    Apply(l.k, x.data(), rows, k.data());
    Apply(l.v, x.data(), rows, v.data());
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t hd = 0; hd < heads; ++hd) {
        const float* qb = q.data() + b * seq * h + hd * dh;
        const float* kb = k.data() + b * seq * h + hd * dh;
        const float* vb = v.data() + b * seq * h + hd * dh;
        // scores[s, t] = q[s] · k[t] / sqrt(dh), padded keys masked out.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(seq),
                    static_cast<int>(seq), static_cast<int>(dh), scale, qb, static_cast<int>(h), kb,
                    static_cast<int>(h), 0.0f, scores.data(), static_cast<int>(seq));
        for (int64_t s = 0; s < seq; ++s) {
          float* row = scores.data() + s * seq;
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
                    static_cast<int>(dh), static_cast<int>(seq), 1.0f, scores.data(),
                    static_cast<int>(seq), vb, static_cast<int>(h), 0.0f,
                    ctx.data() + b * seq * h + hd * dh, static_cast<int>(h));
      }
    }
    Apply(l.attn_out, ctx.data(), rows, tmp.data());
    for (int64_t i = 0; i < rows * h; ++i) x[i] += tmp[i];
    LayerNorm(l.attn_norm, x.data(), rows);
    Apply(l.ffn_in, x.data(), rows, inter.data());
    for (float& f : inter) f = 0.5f * f * (1.0f + std::erf(f * static_cast<float>(M_SQRT1_2)));
    Apply(l.ffn_out, inter.data(), rows, tmp.data());
    for (int64_t i = 0; i < rows * h; ++i) x[i] += tmp[i];
    LayerNorm(l.ffn_norm, x.data(), rows);
  }
  // Mean pooling over real tokens, then optional L2 normalisation.
  std::vector<float> out(batch * h, 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t count = 0;
    for (int64_t s = 0; s < seq; ++s) {
      if (mask[b * seq + s] == 0) continue;
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
  return out;
}

}  // namespace infer
