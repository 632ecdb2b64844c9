// BatchShape: the size of a batch of token sequences as the memory models,
// the token limits and the statistics see it. A plain value; header-only.
#ifndef INFER_BATCHING_BATCH_SHAPE_H_
#define INFER_BATCHING_BATCH_SHAPE_H_

#include <cstdint>

namespace infer {

struct BatchShape {
  int64_t rows = 0;    // sequences
  int64_t tokens = 0;  // real tokens, summed over the sequences
  // The longest sequence as the requests declare it (their padded width):
  // what the batch's length class is chosen by, and at least its longest
  // real sequence.
  int64_t length = 0;
  // Real tokens of the requests that ask for per-token outputs (a model's
  // last hidden state of each token handed out, as TEI's /embed_all): a
  // model that keeps every token's state for them counts it in its memory
  // model (Model::StateTokens). At most `tokens`; 0 when none asks.
  int64_t state_tokens = 0;

  // Rows × length: what a model that pads every sequence to the longest
  // computes.
  int64_t padded_tokens() const { return rows * length; }
};

}  // namespace infer

#endif  // INFER_BATCHING_BATCH_SHAPE_H_
