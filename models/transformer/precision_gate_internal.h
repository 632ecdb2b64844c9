// What the precision gate's translation units share (precision_gate.cc:
// the texts, embeddings and scores; precision_gate_sparse.cc: SPLADE
// vectors). Internal to them; the gate's interface is precision_gate.h.
//
// Thread-safety: pure functions.
#ifndef INFER_MODELS_TRANSFORMER_PRECISION_GATE_INTERNAL_H_
#define INFER_MODELS_TRANSFORMER_PRECISION_GATE_INTERNAL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/text/tokenizer.h"
#include "runtime/status_macros.h"

namespace infer::gate_internal {

// Texts per host Encode call: padding is packed away, so this only bounds
// the scratch.
constexpr size_t kChunk = 32;

struct Tokenized {
  std::vector<std::vector<int64_t>> ids, types;
};

// The gate's texts tokenized: each sentence, then each passage, alone; or
// for a classifier the pairs (sentence i, sentence i + 1), then (sentence
// i, passage i), with their segment ids.
absl::StatusOr<Tokenized> TokenizeGate(const Tokenizer& tokenizer, int64_t max_length, bool pairs);

bool AllFinite(const std::vector<float>& v);

// The `k` indices j != i of the largest similarity[j], ties by index.
std::vector<int64_t> TopK(const std::vector<float>& similarity, int64_t i, int k);

// Runs fn(ids, mask, types, batch, seq) over chunks of padded rows.
template <typename Fn>
absl::Status ForEachChunk(const Tokenized& t, int64_t pad, Fn fn) {
  for (size_t first = 0; first < t.ids.size(); first += kChunk) {
    const size_t last = std::min(t.ids.size(), first + kChunk);
    size_t seq = 0;
    for (size_t i = first; i < last; ++i) seq = std::max(seq, t.ids[i].size());
    std::vector<int64_t> ids, mask, types;
    for (size_t i = first; i < last; ++i) {
      const size_t n = t.ids[i].size();
      for (size_t s = 0; s < seq; ++s) {
        ids.push_back(s < n ? t.ids[i][s] : pad);
        mask.push_back(s < n ? 1 : 0);
        types.push_back(s < n && !t.types[i].empty() ? t.types[i][s] : 0);
      }
    }
    INFER_RETURN_IF_ERROR(
        fn(ids, mask, types, static_cast<int64_t>(last - first), static_cast<int64_t>(seq)));
  }
  return absl::OkStatus();
}

}  // namespace infer::gate_internal

#endif  // INFER_MODELS_TRANSFORMER_PRECISION_GATE_INTERNAL_H_
