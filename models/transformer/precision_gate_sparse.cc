// The precision gate for SPLADE models (precision_gate.h): their sparse
// vectors under the reduced precision against FP32's, kept as sparse rows.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "models/transformer/encode_on_device.h"
#include "models/transformer/precision_gate.h"
#include "models/transformer/precision_gate_internal.h"
#include "runtime/status_macros.h"

namespace infer {
using namespace gate_internal;  // NOLINT: the gate's shared pieces

namespace {

// Runs `embed` over the texts, keeping each chunk's [batch, vocab] rows as
// sparse rows (the dense rows of all texts would take gigabytes for a
// 250k-term vocabulary).
absl::StatusOr<SparseRows> EmbedSparse(const GateEmbedder& embed, const Tokenized& t, int64_t pad,
                                       int64_t vocab) {
  SparseRows out;
  INFER_RETURN_IF_ERROR(ForEachChunk(
      t, pad,
      [&](const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
          const std::vector<int64_t>& types, int64_t batch, int64_t seq) -> absl::Status {
        INFER_ASSIGN_OR_RETURN(std::vector<float> e, embed(ids, mask, types, batch, seq));
        if (e.size() != static_cast<size_t>(batch * vocab)) {
          return absl::InternalError(absl::StrCat("the gate's sparse vectors: ", e.size(),
                                                  " values for ", batch, " texts of ", vocab,
                                                  " terms"));
        }
        out.Append(e.data(), batch, vocab);
        return absl::OkStatus();
      }));
  return out;
}

GateEmbedder CpuSparseEmbedder(const TransformerEncoderCpu& encoder, const SpladePooling& pooling) {
  return [&encoder, pooling](const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
                             const std::vector<int64_t>& types, int64_t batch, int64_t seq) {
    return encoder.Sparse(ids, mask, batch, seq, pooling, types);
  };
}

}  // namespace

void SparseRows::Append(const float* dense, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = dense + i * vocab;
    std::vector<int32_t>& t = terms.emplace_back();
    std::vector<float>& v = values.emplace_back();
    for (int64_t k = 0; k < vocab; ++k) {
      if (row[k] != 0.0f) {  // NaN included: it must fail the figures
        t.push_back(static_cast<int32_t>(k));
        v.push_back(row[k]);
      }
    }
  }
}

GateFigures CompareSparse(const SparseRows& reference, const SparseRows& candidate, int64_t vocab,
                          int neighbours) {
  GateFigures f;
  f.sparse = true;
  const int64_t n = reference.size();
  f.texts = n;
  bool finite = candidate.size() == n;
  for (const SparseRows* rows : {&reference, &candidate}) {
    for (const std::vector<float>& v : rows->values) finite = finite && AllFinite(v);
  }
  if (!finite) {  // fails every limit
    f.mean_cosine = f.min_cosine = f.neighbour_overlap = 0.0;
    return f;
  }
  // Dot products of row i with every row of `rows`, through row i scattered
  // into `dense` (all zeros again on return).
  std::vector<float> dense(static_cast<size_t>(vocab), 0.0f);
  auto dots = [&](const SparseRows& rows, int64_t i, std::vector<float>* out) {
    const std::vector<int32_t>& ti = rows.terms[i];
    for (size_t k = 0; k < ti.size(); ++k) dense[ti[k]] = rows.values[i][k];
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      const std::vector<int32_t>& tj = rows.terms[j];
      const std::vector<float>& vj = rows.values[j];
      for (size_t k = 0; k < tj.size(); ++k) s += double{dense[tj[k]]} * vj[k];
      (*out)[j] = static_cast<float>(s);
    }
    for (int32_t k : ti) dense[k] = 0.0f;
  };
  auto norm = [](const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double{x} * x;
    return std::sqrt(s);
  };
  double sum = 0, lowest = 1, overlap = 0;
  std::vector<float> sa(n), sb(n);
  for (int64_t i = 0; i < n; ++i) {
    // The cosine of the two vectors of text i, by merging their terms.
    const std::vector<int32_t>&ta = reference.terms[i], &tb = candidate.terms[i];
    const std::vector<float>&va = reference.values[i], &vb = candidate.values[i];
    double ab = 0;
    for (size_t x = 0, y = 0; x < ta.size() && y < tb.size();) {
      if (ta[x] < tb[y]) {
        ++x;
      } else if (tb[y] < ta[x]) {
        ++y;
      } else {
        ab += double{va[x++]} * vb[y++];
      }
    }
    const double na = norm(va), nb = norm(vb);
    const double c = na == 0 && nb == 0 ? 1.0 : na == 0 || nb == 0 ? 0.0 : ab / (na * nb);
    sum += c;
    if (c < lowest || f.lowest_text < 0) {
      lowest = c;
      f.lowest_text = i;
    }
    dots(reference, i, &sa);
    dots(candidate, i, &sb);
    const std::vector<int64_t> na_top = TopK(sa, i, neighbours), nb_top = TopK(sb, i, neighbours);
    std::vector<int64_t> both;
    std::set_intersection(na_top.begin(), na_top.end(), nb_top.begin(), nb_top.end(),
                          std::back_inserter(both));
    overlap += na_top.empty() ? 1.0 : static_cast<double>(both.size()) / na_top.size();
  }
  f.mean_cosine = n > 0 ? sum / n : 1.0;
  f.min_cosine = n > 0 ? lowest : 1.0;
  f.neighbour_overlap = n > 0 ? overlap / n : 1.0;
  return f;
}

GateEmbedder SparseEmbedder(const TransformerEncoder& encoder, const DeviceContext& context,
                            const SpladePooling& pooling) {
  return [&encoder, context, pooling](
             const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
             const std::vector<int64_t>& types, int64_t batch, int64_t seq) {
    return SparseOnDevice(encoder, context, ids, mask, types, batch, seq, pooling);
  };
}

absl::StatusOr<GateFigures> MeasureSparseGate(const TransformerEncoderCpu& reference,
                                              const TransformerEncoderCpu& candidate,
                                              const Tokenizer& tokenizer, int64_t max_length,
                                              const SpladePooling& pooling,
                                              const GateLimits& limits) {
  return MeasureSparseGate(reference, CpuSparseEmbedder(candidate, pooling), tokenizer, max_length,
                           pooling, limits);
}

absl::StatusOr<GateFigures> MeasureSparseGate(const TransformerEncoderCpu& reference,
                                              const GateEmbedder& candidate,
                                              const Tokenizer& tokenizer, int64_t max_length,
                                              const SpladePooling& pooling,
                                              const GateLimits& limits) {
  const SpladeHead* head = reference.splade();
  if (head == nullptr) {
    return absl::FailedPreconditionError("the sparse gate's reference has no masked-LM head");
  }
  INFER_ASSIGN_OR_RETURN(const Tokenized t, TokenizeGate(tokenizer, max_length, /*pairs=*/false));
  const int64_t pad = tokenizer.pad_id(), vocab = head->vocab();
  INFER_ASSIGN_OR_RETURN(const SparseRows a,
                         EmbedSparse(CpuSparseEmbedder(reference, pooling), t, pad, vocab));
  INFER_ASSIGN_OR_RETURN(const SparseRows b, EmbedSparse(candidate, t, pad, vocab));
  return CompareSparse(a, b, vocab, limits.neighbours);
}

}  // namespace infer
