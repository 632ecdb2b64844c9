// Packed sequences: a batch of token sequences laid out without padding, the
// input of the transformer encoders. The batch's real tokens are numbered
// 0..tokens-1 in sequence order; sequence r owns [offsets[r], offsets[r + 1]).
// Each token's position id is the column it had in its request's row (BERT:
// a row whose attention mask has holes, or left padding, computes exactly
// what it would padded), or, for the families with RoBERTa's position ids
// (`position_padding_id` >= 0: RoBERTa, XLM-R, CamemBERT, MPNet; see
// TransformerSpec::position_padding_id), as transformers'
// create_position_ids_from_input_ids counts them, less the row of the first
// counted token: the number of tokens of its row before it whose id is not
// position_padding_id (masked ones included, as transformers counts them),
// and -1 for a token whose id is position_padding_id (its padding position).
//
// Staged as one int32 buffer (PackedLayout): ids[tokens], positions[tokens],
// offsets[rows + 1], and, for models with token-type (segment) embeddings,
// types[tokens]. Thread-safety: plain values and pure functions.
#ifndef INFER_MODELS_PACKED_SEQUENCES_H_
#define INFER_MODELS_PACKED_SEQUENCES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace infer {

// A packed batch in device memory (host memory on the CPU device), with its
// offsets also in host memory for scheduling.
struct PackedSequencesView {
  const int32_t* ids = nullptr;        // [tokens]
  const int32_t* positions = nullptr;  // [tokens]
  const int32_t* offsets = nullptr;    // [rows + 1], offsets[0] == 0
  const int32_t* types = nullptr;      // [tokens] token-type ids, or null: all 0
  const int32_t* host_offsets = nullptr;
  int64_t rows = 0;
  int64_t tokens = 0;
  int64_t longest = 0;  // most tokens in one sequence
  int64_t width = 0;    // 1 + the largest position id (0 when empty)
};

// Where the arrays lie in one int32 staging buffer.
struct PackedLayout {
  int64_t rows = 0, tokens = 0;
  bool with_types = false;  // token-type ids after the offsets
  size_t bytes() const { return sizeof(int32_t) * ((with_types ? 3 : 2) * tokens + rows + 1); }
  int64_t ids() const { return 0; }
  int64_t positions() const { return tokens; }
  int64_t offsets() const { return 2 * tokens; }
  int64_t types() const { return 2 * tokens + rows + 1; }
  // The view of such a buffer: `buffer` where the device reads it, its
  // offsets also at `host_offsets` in host memory.
  PackedSequencesView View(const int32_t* buffer, const int32_t* host_offsets, int64_t longest,
                           int64_t width) const;
};

// Tokens with mask 1 among n (all n when mask is null).
int64_t CountRealTokens(const int64_t* mask, int64_t n);

// Appends the rows of a [rows, seq] id matrix to a packed buffer being
// filled (`layout` its final size), keeping the tokens whose mask is 1 (all
// when mask is null), with their token types when the layout has them
// (from `types`, [rows, seq]; all 0 when null). `*row` and `*token` are
// where it continues: the next sequence and token index, advanced past what
// was appended; `*longest` and `*width` grow to cover the rows. The caller
// has checked the ids and types and that the layout holds them. Positions
// are columns when `position_padding_id` is -1, else RoBERTa's (above).
void AppendPackedRows(const int64_t* ids, const int64_t* mask, const int64_t* types, int64_t rows,
                      int64_t seq, const PackedLayout& layout, int32_t* buffer, int64_t* row,
                      int64_t* token, int64_t* longest, int64_t* width,
                      int64_t position_padding_id = -1);

// A packed batch in host memory: for tests, tools and the CPU encoder's
// host-side entry point.
class PackedSequences {
 public:
  // Packs a [rows, seq] id matrix with an optional mask (null: all real)
  // and optional token types (null: none in the layout); positions as
  // AppendPackedRows writes them.
  PackedSequences(const int64_t* ids, const int64_t* mask, int64_t rows, int64_t seq,
                  const int64_t* types = nullptr, int64_t position_padding_id = -1);
  PackedSequencesView view() const;

 private:
  PackedLayout layout_;
  std::vector<int32_t> buffer_;
  int64_t longest_ = 0, width_ = 0;
};

}  // namespace infer

#endif  // INFER_MODELS_PACKED_SEQUENCES_H_
