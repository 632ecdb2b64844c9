// The quality gate a reduced precision (BF16 or INT8 on the CPU) must pass
// for a model before it is served in it: the model's own FP32 encoder and
// the reduced one embed a fixed set of 1,000 multilingual sentences
// (gate_sentences.txt, compiled in: 100 everyday sentences, each in English,
// German, French, Spanish, Portuguese, Italian, Dutch, Russian, Chinese and
// Japanese) and 50 passages made of them (ten consecutive sentences of one
// language: 125 to 575 tokens with all-MiniLM-L6-v2's tokenizer, cut at the
// model's length, so that what long sequences alone run, such as BF16
// attention products from 128 tokens, is judged too), and
//   - each text's embedding under the reduced precision has cosine
//     >= 0.97 to its FP32 embedding, and >= 0.99 on average;
//   - each text's 10 nearest neighbours (by cosine, among the others)
//     are on average >= 90% the same under both;
//   - for a sequence-classification head (a reranker), each label's scores
//     over 1,050 pairs (sentence, next sentence; and sentence, passage)
//     rank the pairs alike: Spearman >= 0.99.
// A classifier is judged by its scores alone (its pooled states are not
// what it serves). A SPLADE model is judged by what it serves too, its
// sparse vectors (the reduced encoder's states through the masked-LM head):
// each text's vector has cosine >= 0.97 to its FP32 vector, >= 0.99 on
// average, and its 10 nearest neighbours by dot product (SPLADE's retrieval
// score) are on average >= 90% the same. Non-finite outputs fail every
// limit.
//
// A precision the config names that fails is refused at load; one `auto`
// chose (BF16) falls back to FP32 (models/bert/bert_model.cc).
//
// Cost: the FP32 encoder is loaded beside the reduced one for the check
// (its weights, host memory, freed after), and both encode about 39,000
// tokens (27,000 in the sentences, 11,500 in the passages, with
// all-MiniLM-L6-v2's tokenizer cut at 256): seconds for MiniLM on two
// cores, about a minute for a base-sized model. The config may skip it (parameter precision_gate:
// false), which the model's description then says.
//
// Thread-safety: pure functions; the encoders run on the calling thread's
// OpenMP team.
#ifndef INFER_MODELS_TRANSFORMER_PRECISION_GATE_H_
#define INFER_MODELS_TRANSFORMER_PRECISION_GATE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/text/tokenizer.h"
#include "models/transformer/encoder_cpu.h"

namespace infer {

struct GateFigures {
  int64_t texts = 0;
  // Embeddings (absent for a classifier).
  std::optional<double> mean_cosine, min_cosine, neighbour_overlap;
  // The text with the lowest cosine (its index), or -1.
  int64_t lowest_text = -1;
  // A classifier's scores: the lowest over its labels.
  std::optional<double> spearman;
  // The embeddings are SPLADE vectors, neighbours by dot product.
  bool sparse = false;
};

// The SPLADE vectors of n texts: each row's non-zero terms, ascending, and
// their values.
struct SparseRows {
  std::vector<std::vector<int32_t>> terms;
  std::vector<std::vector<float>> values;
  int64_t size() const { return static_cast<int64_t>(terms.size()); }
  // Appends the non-zero entries of `n` dense rows of `vocab` values.
  void Append(const float* dense, int64_t n, int64_t vocab);
};

struct GateLimits {
  double mean_cosine = 0.99;
  double min_cosine = 0.97;
  double neighbour_overlap = 0.9;
  int neighbours = 10;
  double spearman = 0.99;
};

// The gate's sentences, in file order (groups of kGateLanguages
// translations).
inline constexpr size_t kGateLanguages = 10;
const std::vector<std::string>& GateSentences();
// The gate's passages: for each of kGatePassageBlocks blocks of
// kGatePassageSentences sentence groups and each language, that language's
// sentences of the block joined by spaces (block-major).
inline constexpr size_t kGatePassageBlocks = 5;
inline constexpr size_t kGatePassageSentences = 10;
const std::vector<std::string>& GatePassages();
// "sentence 12, German" or "passage 38, Russian" for the gate's text
// `index` (sentences first, then passages, as MeasureGate embeds them).
std::string GateTextName(int64_t index);

// Cosine figures and top-`neighbours` agreement of two sets of `n`
// embeddings of `width` floats each (any norm).
GateFigures CompareEmbeddings(const std::vector<float>& reference,
                              const std::vector<float>& candidate, int64_t n, int64_t width,
                              int neighbours);

// The same figures for two sets of SPLADE vectors of the same texts:
// cosines per text (two empty vectors agree: 1; one empty: 0), neighbours
// ranked by dot product. Cost: n² times a row's non-zero terms.
GateFigures CompareSparse(const SparseRows& reference, const SparseRows& candidate, int64_t vocab,
                          int neighbours);

// Spearman's rank correlation of two equally long score lists (ties get
// their average rank); 1 for fewer than two scores; 0 for lists of
// different lengths or with a non-finite score.
double Spearman(const std::vector<float>& a, const std::vector<float>& b);

// What the gate measures for `candidate` against `reference` (same
// checkpoint, FP32) on GateSentences(), tokenized by `tokenizer` and cut at
// `max_length` tokens; embeddings pooled by `pooling`. Classifiers (the
// reference has spec().labels) are measured on the pairs (sentence i,
// sentence i + 1).
absl::StatusOr<GateFigures> MeasureGate(const TransformerEncoderCpu& reference,
                                        const TransformerEncoderCpu& candidate,
                                        const Tokenizer& tokenizer, int64_t max_length,
                                        Pooling pooling, const GateLimits& limits = GateLimits());

// Embeds one chunk of right-padded texts: ids, mask and types [batch, seq]
// -> [batch, hidden] normalised embeddings pooled as the gate asks; for a
// classifier, scores the chunk's pairs instead: [batch, labels], the
// classification head's logits.
using GateEmbedder = std::function<absl::StatusOr<std::vector<float>>(
    const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
    const std::vector<int64_t>& types, int64_t batch, int64_t seq)>;

// Any encoder on any device through EncodeOnDevice
// (models/transformer/encode_on_device.h): embeddings pooled by `pooling`,
// normalised; or where the encoder has a classification head, its scores
// (pooled as its head reads them on the device, then the head on the host, as
// the served model computes them). The encoder and context must outlive it.
GateEmbedder DeviceEmbedder(const TransformerEncoder& encoder, const DeviceContext& context,
                            Pooling pooling);

// The same for a candidate on any device (the CUDA encoder's FP8: see
// models/transformer/encode_on_device.h), which embeds, or scores where the
// reference has a classification head. INTERNAL when it gives the wrong
// number of scores.
absl::StatusOr<GateFigures> MeasureGate(const TransformerEncoderCpu& reference,
                                        const GateEmbedder& candidate, const Tokenizer& tokenizer,
                                        int64_t max_length, Pooling pooling,
                                        const GateLimits& limits = GateLimits());

// The gate of a SPLADE model (`reference` has splade()): the texts' sparse
// vectors under `candidate` (CPU: its own Sparse; any device:
// SparseEmbedder, whose GateEmbedder gives [batch, vocab] rows) against the
// reference's, both pooled by `pooling`. INTERNAL when the candidate gives
// the wrong number of values.
absl::StatusOr<GateFigures> MeasureSparseGate(const TransformerEncoderCpu& reference,
                                              const TransformerEncoderCpu& candidate,
                                              const Tokenizer& tokenizer, int64_t max_length,
                                              const SpladePooling& pooling,
                                              const GateLimits& limits = GateLimits());
absl::StatusOr<GateFigures> MeasureSparseGate(const TransformerEncoderCpu& reference,
                                              const GateEmbedder& candidate,
                                              const Tokenizer& tokenizer, int64_t max_length,
                                              const SpladePooling& pooling,
                                              const GateLimits& limits = GateLimits());
// SparseOnDevice (models/transformer/encode_on_device.h) as a GateEmbedder.
// The encoder and context must outlive it.
GateEmbedder SparseEmbedder(const TransformerEncoder& encoder, const DeviceContext& context,
                            const SpladePooling& pooling);

// The figures in one line, e.g. "1050 texts: cosine mean 0.9961, min
// 0.9812 (passage 38, Russian); top-10 neighbours 0.951" (the text named
// where figures.lowest_text is set).
std::string DescribeGate(const GateFigures& figures, const GateLimits& limits = GateLimits());
// Empty when the figures pass; else which limits they miss.
std::string GateFailure(const GateFigures& figures, const GateLimits& limits = GateLimits());

}  // namespace infer

#endif  // INFER_MODELS_TRANSFORMER_PRECISION_GATE_H_
