#include "models/transformer/precision_gate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "models/transformer/encode_on_device.h"
#include "models/transformer/precision_gate_internal.h"
#include "runtime/status_macros.h"

namespace infer {

// gate_sentences.cc, made by CMake from gate_sentences.txt.
const char* GateSentencesText();

using namespace gate_internal;  // NOLINT: the gate's shared pieces

namespace {

absl::StatusOr<std::vector<float>> Embed(const GateEmbedder& embed, const Tokenized& t,
                                         int64_t pad) {
  std::vector<float> out;
  INFER_RETURN_IF_ERROR(ForEachChunk(
      t, pad,
      [&](const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
          const std::vector<int64_t>& types, int64_t batch, int64_t seq) -> absl::Status {
        INFER_ASSIGN_OR_RETURN(std::vector<float> e, embed(ids, mask, types, batch, seq));
        out.insert(out.end(), e.begin(), e.end());
        return absl::OkStatus();
      }));
  return out;
}

GateEmbedder CpuEmbedder(const TransformerEncoderCpu& encoder, Pooling pooling) {
  return [&encoder, pooling](const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
                             const std::vector<int64_t>& types, int64_t batch, int64_t seq) {
    return encoder.Encode(ids, mask, batch, seq, /*normalize=*/true, pooling, types);
  };
}

}  // namespace

GateEmbedder DeviceEmbedder(const TransformerEncoder& encoder, const DeviceContext& context,
                            Pooling pooling) {
  return [&encoder, context, pooling](const std::vector<int64_t>& ids,
                                      const std::vector<int64_t>& mask,
                                      const std::vector<int64_t>& types, int64_t batch,
                                      int64_t seq) -> absl::StatusOr<std::vector<float>> {
    const DenseHead* head = encoder.classifier();
    std::vector<int64_t> read = mask;  // a decoder's head reads the last token not padding
    if (head != nullptr && ids.size() == static_cast<size_t>(batch * seq) &&
        (read.empty() || read.size() == ids.size())) {
      MaskTrailingPadTokens(encoder.spec(), ids.data(), batch, seq, &read);
    }
    INFER_ASSIGN_OR_RETURN(
        std::vector<float> pooled,
        EncodeOnDevice(encoder, context, ids, read, types, batch, seq,
                       head != nullptr ? ClassifierPooling(encoder.spec()) : pooling,
                       /*normalize=*/head == nullptr));
    if (head == nullptr) return pooled;
    return head->Apply(pooled.data(), batch);
  };
}

namespace gate_internal {

absl::StatusOr<Tokenized> TokenizeGate(const Tokenizer& tokenizer, int64_t max_length, bool pairs) {
  const std::vector<std::string>& sentences = GateSentences();
  const std::vector<std::string>& passages = GatePassages();
  const text::Truncation cut{static_cast<size_t>(max_length)};
  Tokenized t;
  auto add_pair = [&](const std::string& first, const std::string& second) -> absl::Status {
    INFER_ASSIGN_OR_RETURN(std::vector<text::PairIds> pair,
                           tokenizer.EncodePairIds(first, {second}, cut));
    t.ids.emplace_back(pair[0].ids.begin(), pair[0].ids.end());
    t.types.emplace_back(pair[0].type_ids.begin(), pair[0].type_ids.end());
    return absl::OkStatus();
  };
  auto add_text = [&](const std::string& text) -> absl::Status {
    INFER_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.EncodeIds(text, cut));
    t.ids.emplace_back(ids.begin(), ids.end());
    t.types.emplace_back();
    return absl::OkStatus();
  };
  for (size_t i = 0; i < sentences.size(); ++i) {
    INFER_RETURN_IF_ERROR(pairs ? add_pair(sentences[i], sentences[(i + 1) % sentences.size()])
                                : add_text(sentences[i]));
  }
  for (size_t i = 0; i < passages.size(); ++i) {
    INFER_RETURN_IF_ERROR(pairs ? add_pair(sentences[i], passages[i]) : add_text(passages[i]));
  }
  return t;
}

GateEmbedder CpuScorer(const TransformerEncoderCpu& encoder) {
  return [&encoder](const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
                    const std::vector<int64_t>& types, int64_t batch,
                    int64_t seq) { return encoder.Classify(ids, mask, batch, seq, types); };
}

bool AllFinite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

std::vector<double> Ranks(const std::vector<float>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double average = (static_cast<double>(i) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = average;
    i = j + 1;
  }
  return rank;
}

std::vector<int64_t> TopK(const std::vector<float>& similarity, int64_t i, int k) {
  std::vector<int64_t> idx;
  for (int64_t j = 0; j < static_cast<int64_t>(similarity.size()); ++j) {
    if (j != i) idx.push_back(j);
  }
  const auto kk = std::min<size_t>(static_cast<size_t>(k), idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(kk), idx.end(),
                    [&](int64_t a, int64_t b) {
                      return similarity[a] != similarity[b] ? similarity[a] > similarity[b] : a < b;
                    });
  idx.resize(kk);
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace gate_internal

const std::vector<std::string>& GateSentences() {
  static const std::vector<std::string>* const sentences = [] {
    auto* v = new std::vector<std::string>;
    for (absl::string_view line : absl::StrSplit(GateSentencesText(), '\n', absl::SkipEmpty())) {
      v->emplace_back(line);
    }
    return v;
  }();
  return *sentences;
}

const std::vector<std::string>& GatePassages() {
  static const std::vector<std::string>* const passages = [] {
    const std::vector<std::string>& s = GateSentences();
    auto* v = new std::vector<std::string>;
    for (size_t block = 0; block < kGatePassageBlocks; ++block) {
      for (size_t language = 0; language < kGateLanguages; ++language) {
        std::string passage;
        for (size_t k = 0; k < kGatePassageSentences; ++k) {
          const size_t group = block * kGatePassageSentences + k;
          const size_t at = group * kGateLanguages + language;
          if (at < s.size()) absl::StrAppend(&passage, passage.empty() ? "" : " ", s[at]);
        }
        v->push_back(std::move(passage));
      }
    }
    return v;
  }();
  return *passages;
}

std::string GateTextName(int64_t index) {
  static constexpr const char* kLanguages[kGateLanguages] = {
      "English", "German", "French",  "Spanish", "Portuguese",
      "Italian", "Dutch",  "Russian", "Chinese", "Japanese"};
  const auto sentences = static_cast<int64_t>(GateSentences().size());
  const bool passage = index >= sentences;
  const int64_t i = passage ? index - sentences : index;
  return absl::StrCat(passage ? "passage " : "sentence ", i + 1, ", ",
                      kLanguages[i % static_cast<int64_t>(kGateLanguages)]);
}

GateFigures CompareEmbeddings(const std::vector<float>& reference,
                              const std::vector<float>& candidate, int64_t n, int64_t width,
                              int neighbours) {
  GateFigures f;
  f.texts = n;
  if (!AllFinite(reference) || !AllFinite(candidate)) {  // fails every limit
    f.mean_cosine = f.min_cosine = f.neighbour_overlap = 0.0;
    return f;
  }
  // Unit rows, so that dot products are cosines.
  auto unit = [&](const std::vector<float>& e) {
    std::vector<float> u(e.begin(), e.begin() + n * width);
    for (int64_t i = 0; i < n; ++i) {
      double norm = 0;
      for (int64_t d = 0; d < width; ++d) norm += double{u[i * width + d]} * u[i * width + d];
      const double inv = norm > 0 ? 1.0 / std::sqrt(norm) : 0.0;
      for (int64_t d = 0; d < width; ++d)
        u[i * width + d] = static_cast<float>(u[i * width + d] * inv);
    }
    return u;
  };
  const std::vector<float> a = unit(reference), b = unit(candidate);
  auto dot = [&](const std::vector<float>& x, int64_t i, const std::vector<float>& y, int64_t j) {
    float s = 0;
    for (int64_t d = 0; d < width; ++d) s += x[i * width + d] * y[j * width + d];
    return s;
  };
  double sum = 0, lowest = 1, overlap = 0;
  std::vector<float> sa(n), sb(n);
  for (int64_t i = 0; i < n; ++i) {
    const double c = dot(a, i, b, i);
    sum += c;
    if (c < lowest || f.lowest_text < 0) {
      lowest = c;
      f.lowest_text = i;
    }
    for (int64_t j = 0; j < n; ++j) {
      sa[j] = dot(a, i, a, j);
      sb[j] = dot(b, i, b, j);
    }
    const std::vector<int64_t> ta = TopK(sa, i, neighbours), tb = TopK(sb, i, neighbours);
    std::vector<int64_t> both;
    std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(both));
    overlap += ta.empty() ? 1.0 : static_cast<double>(both.size()) / ta.size();
  }
  f.mean_cosine = n > 0 ? sum / n : 1.0;
  f.min_cosine = n > 0 ? lowest : 1.0;
  f.neighbour_overlap = n > 0 ? overlap / n : 1.0;
  return f;
}

double Spearman(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || !AllFinite(a) || !AllFinite(b)) return 0.0;
  if (a.size() < 2) return 1.0;
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double mean = (static_cast<double>(a.size()) - 1) / 2.0;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va == 0 || vb == 0) return va == vb ? 1.0 : 0.0;
  return cov / std::sqrt(va * vb);
}

absl::StatusOr<GateFigures> MeasureGate(const TransformerEncoderCpu& reference,
                                        const TransformerEncoderCpu& candidate,
                                        const Tokenizer& tokenizer, int64_t max_length,
                                        Pooling pooling, const GateLimits& limits) {
  return MeasureGate(
      reference,
      reference.spec().labels.empty() ? CpuEmbedder(candidate, pooling) : CpuScorer(candidate),
      tokenizer, max_length, pooling, limits);
}

absl::StatusOr<GateFigures> MeasureGate(const TransformerEncoderCpu& reference,
                                        const GateEmbedder& candidate, const Tokenizer& tokenizer,
                                        int64_t max_length, Pooling pooling,
                                        const GateLimits& limits) {
  if (const auto labels = static_cast<int64_t>(reference.spec().labels.size()); labels > 0) {
    INFER_ASSIGN_OR_RETURN(const Tokenized t, TokenizeGate(tokenizer, max_length, /*pairs=*/true));
    const auto n = static_cast<int64_t>(t.ids.size());
    const int64_t pad = tokenizer.pad_id();
    INFER_ASSIGN_OR_RETURN(std::vector<float> a, Embed(CpuScorer(reference), t, pad));
    INFER_ASSIGN_OR_RETURN(std::vector<float> b, Embed(candidate, t, pad));
    if (a.size() != static_cast<size_t>(n * labels) || b.size() != a.size()) {
      return absl::InternalError(absl::StrCat("the gate's scores: ", a.size(), " and ", b.size(),
                                              " values for ", n, " pairs of ", labels, " labels"));
    }
    GateFigures f;
    f.texts = n;
    double lowest = 1;
    for (int64_t l = 0; l < labels; ++l) {
      std::vector<float> la(n), lb(n);
      for (int64_t i = 0; i < n; ++i) {
        la[i] = a[i * labels + l];
        lb[i] = b[i * labels + l];
      }
      lowest = std::min(lowest, Spearman(la, lb));
    }
    f.spearman = lowest;
    return f;
  }
  INFER_ASSIGN_OR_RETURN(const Tokenized t, TokenizeGate(tokenizer, max_length, /*pairs=*/false));
  const auto n = static_cast<int64_t>(t.ids.size());
  const int64_t pad = tokenizer.pad_id();
  INFER_ASSIGN_OR_RETURN(std::vector<float> a, Embed(CpuEmbedder(reference, pooling), t, pad));
  INFER_ASSIGN_OR_RETURN(std::vector<float> b, Embed(candidate, t, pad));
  return CompareEmbeddings(a, b, n, reference.spec().hidden_size, limits.neighbours);
}

std::string DescribeGate(const GateFigures& f, const GateLimits& limits) {
  std::string out = absl::StrCat(f.texts, " texts:");
  if (f.mean_cosine.has_value()) {
    absl::StrAppendFormat(&out, "%s cosine mean %.4f, min %.4f", f.sparse ? " sparse vectors'" : "",
                          *f.mean_cosine, *f.min_cosine);
    if (f.lowest_text >= 0) absl::StrAppend(&out, " (", GateTextName(f.lowest_text), ")");
    absl::StrAppendFormat(&out, "; top-%d neighbours%s %.3f", limits.neighbours,
                          f.sparse ? " by dot product" : "", *f.neighbour_overlap);
  }
  if (f.spearman.has_value()) absl::StrAppendFormat(&out, " score Spearman %.4f", *f.spearman);
  return out;
}

std::string GateFailure(const GateFigures& f, const GateLimits& limits) {
  std::vector<std::string> missed;
  if (f.mean_cosine.has_value() && !(*f.mean_cosine >= limits.mean_cosine)) {
    missed.push_back(
        absl::StrFormat("mean cosine %.4f < %.2f", *f.mean_cosine, limits.mean_cosine));
  }
  if (f.min_cosine.has_value() && !(*f.min_cosine >= limits.min_cosine)) {
    missed.push_back(absl::StrFormat("min cosine %.4f < %.2f", *f.min_cosine, limits.min_cosine));
  }
  if (f.neighbour_overlap.has_value() && !(*f.neighbour_overlap >= limits.neighbour_overlap)) {
    missed.push_back(absl::StrFormat("top-%d neighbour agreement %.3f < %.2f", limits.neighbours,
                                     *f.neighbour_overlap, limits.neighbour_overlap));
  }
  if (f.spearman.has_value() && !(*f.spearman >= limits.spearman)) {
    missed.push_back(absl::StrFormat("score Spearman %.4f < %.2f", *f.spearman, limits.spearman));
  }
  std::string out;
  for (const std::string& m : missed) absl::StrAppend(&out, out.empty() ? "" : ", ", m);
  return out;
}

}  // namespace infer
