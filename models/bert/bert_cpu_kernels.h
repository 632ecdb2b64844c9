// The BERT encoder's CPU work that oneDNN 2.6 has no primitive for, written
// by hand: self-attention over packed sequences (scores, softmax and the
// weighted sum of values fused, per sequence over its own length, with no
// [seq, seq] matrix in memory), the embedding sum, and pooling.
//
// Every function here spreads its work over the calling thread's OpenMP team
// (the same libgomp pool oneDNN runs on), `threads` threads at most; none is
// a single-threaded loop over the batch. The attention inner loops are
// written once with GCC vector extensions and compiled three times (AVX-512,
// AVX2 + FMA, and the x86-64 baseline); the widest one that both this CPU and
// oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA) allow runs, so one binary runs on any
// x86-64 CPU and tests can force the narrower paths.
//
// Layouts: token rows are packed, sequence r owning rows
// [offsets[r], offsets[r + 1]) (models/packed_sequences.h).
// Thread-safety: pure functions of their arguments; concurrent calls on
// disjoint outputs are safe.
#ifndef INFER_MODELS_BERT_BERT_CPU_KERNELS_H_
#define INFER_MODELS_BERT_BERT_CPU_KERNELS_H_

#include <cstdint>

namespace infer::cpu {

enum class SimdLevel { kBaseline, kAvx2, kAvx512 };

// The widest level the CPU supports and oneDNN's effective ISA allows.
SimdLevel DetectSimdLevel();
const char* SimdLevelName(SimdLevel level);

// Largest head size the attention kernel handles.
inline constexpr int64_t kMaxHeadDim = 128;

// Floats of per-thread scratch Attention needs for sequences of up to
// `longest` tokens.
int64_t AttentionScratchFloats(int64_t longest, int64_t head_dim);

struct AttentionArgs {
  // [tokens, 3 * hidden]: each token's query, key and value projections,
  // biases included (head h owns columns [h * head_dim, (h + 1) * head_dim)
  // of each third).
  const float* qkv = nullptr;
  const int32_t* offsets = nullptr;  // [rows + 1], host memory
  int64_t rows = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t longest = 0;  // most tokens in one sequence
  float scale = 1.0f;   // applied to q·k (1 / sqrt(head_dim))
  // [tokens, hidden] output, FP32 or BF16 (the next GEMM's input type).
  void* context = nullptr;
  bool context_bf16 = false;
  // threads × AttentionScratchFloats(longest, head_dim) floats.
  float* scratch = nullptr;
};

// context[t, head] = softmax(q_t · K^T * scale) · V over the keys and values
// of t's own sequence, for every head.
void Attention(SimdLevel level, const AttentionArgs& args, int threads);

// x[t] = word[ids[t]] + position[positions[t]] + token_type (one row of
// `hidden` floats each), for `tokens` rows. Ids and positions are trusted.
void EmbeddingSum(const int32_t* ids, const int32_t* positions, int64_t tokens, int64_t hidden,
                  const float* word, const float* position, const float* token_type, float* x,
                  int threads);

// out[r] = mean of x over sequence r's rows (or its first row when `first`),
// L2-normalised when `normalize`; zeros for an empty sequence.
void Pool(const float* x, const int32_t* offsets, int64_t rows, int64_t hidden, bool first,
          bool normalize, float* out, int threads);

// Round-to-nearest-even FP32 → BF16 (NaN stays NaN).
void ToBf16(const float* in, int64_t n, uint16_t* out, int threads);

}  // namespace infer::cpu

#endif  // INFER_MODELS_BERT_BERT_CPU_KERNELS_H_
