// The transformer encoder's CPU work that oneDNN 2.6 has no primitive for,
// written by hand: self-attention over packed sequences (scores, softmax and
// the weighted sum of values fused, per sequence over its own length, with no
// [seq, seq] matrix in memory; grouped KV heads, causal and sliding-window
// masks, relative position biases), the embedding sum, RMSNorm and
// out-of-place norms, q/k norms with rotary positions, gated activations,
// and pooling.
//
// Every function here spreads its work over the calling thread's OpenMP team
// (the same libgomp pool oneDNN runs on), `threads` threads at most; none is
// a single-threaded loop over the batch. The attention inner loops
// (attention_tiles.h) are written once with GCC vector extensions and
// compiled three times (AVX-512, AVX2 + FMA, and the x86-64 baseline), plus
// AVX-512 with BF16 products; the widest one that both this CPU and oneDNN's
// ISA cap (ONEDNN_MAX_CPU_ISA) allow runs, so one binary runs on any x86-64
// CPU and tests can force the narrower paths.
//
// Layouts: token rows are packed, sequence r owning rows
// [offsets[r], offsets[r + 1]) (models/packed_sequences.h).
// Thread-safety: pure functions of their arguments; concurrent calls on
// disjoint outputs are safe.
#ifndef INFER_MODELS_BERT_BERT_CPU_KERNELS_H_
#define INFER_MODELS_BERT_BERT_CPU_KERNELS_H_

#include <cstdint>
#include <cstring>

#include "models/activation.h"

namespace infer::cpu {

enum class SimdLevel { kBaseline, kAvx2, kAvx512 };

// The widest level the CPU supports and oneDNN's effective ISA allows.
SimdLevel DetectSimdLevel();

// Whether attention can take BF16 products (AttentionArgs::bf16_products):
// AVX-512 with AVX512_BF16, and oneDNN's ISA cap at avx512_core_bf16 or
// above (ONEDNN_MAX_CPU_ISA=AVX512_CORE turns it off).
bool HasBf16Products();
// BF16 products pay for their packing from this many tokens in a sequence
// (attention-bench on a Zen 4: 0.75× FP32's rate at 16 tokens, even at 64,
// 1.2× at 256 and 1.4× at 1024); shorter sequences take FP32 products. The
// choice depends on the sequence alone, so a sequence's result does not
// depend on its batch.
inline constexpr int64_t kBf16ProductsMinTokens = 128;
const char* SimdLevelName(SimdLevel level);

// Largest head size the attention kernel handles.
inline constexpr int64_t kMaxHeadDim = 128;

// Floats of per-thread scratch Attention needs for sequences of up to
// `longest` tokens.
int64_t AttentionScratchFloats(int64_t longest, int64_t head_dim);

struct AttentionArgs {
  // [tokens, (heads + 2 * kv_heads) * head_dim]: each token's queries, then
  // keys, then values, biases, norms and rotary positions applied. Query
  // head h reads KV head h / (heads / kv_heads).
  const float* qkv = nullptr;
  const int32_t* offsets = nullptr;  // [rows + 1], host memory
  int64_t rows = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t longest = 0;  // most tokens in one sequence
  float scale = 1.0f;   // applied to q·k (1 / sqrt(head_dim))
  // Masks, by index within the sequence: causal keeps keys k <= q; window
  // > 0 keeps keys with |k - q| <= window.
  bool causal = false;
  int64_t window = 0;
  // Added to the scaled scores when not null: [heads, 2 * relative_span - 1],
  // the bias of key k for query q at [head][k - q + relative_span - 1]
  // (relative_span > longest - 1).
  const float* relative_bias = nullptr;
  int64_t relative_span = 0;
  // [tokens, heads * head_dim] output, FP32 or BF16 (the next GEMM's input type).
  void* context = nullptr;
  bool context_bf16 = false;
  // q·k and p·v from BF16 inputs (q, k, the softmax's weights and v rounded
  // to BF16), summed in FP32, for sequences of 128 tokens or more, where
  // HasBf16Products() and the level is kAvx512: twice the FP32 rate, with
  // BF16's rounding (relative 2^-9 per input). Elsewhere, shorter
  // sequences, or when false: FP32 products. Scores, softmax and the output
  // stay FP32.
  bool bf16_products = false;
  // threads × AttentionScratchFloats(longest, head_dim) floats.
  float* scratch = nullptr;
  // The queries computed: every token's, or only each sequence's first or
  // last token's (the one row [CLS] or last-token pooling reads after the
  // last layer); the other tokens' context rows are left as they were.
  enum class Queries { kAll, kFirst, kLast };
  Queries queries = Queries::kAll;
};

// context[t, head] = softmax(q_t · K^T * scale + bias) · V over the keys and
// values of t's own sequence that the masks keep, for every head and every
// token t that `queries` names.
void Attention(SimdLevel level, const AttentionArgs& args, int threads);

struct EmbeddingArgs {
  const int32_t* ids = nullptr;        // [tokens], trusted
  const int32_t* positions = nullptr;  // [tokens], trusted
  int64_t tokens = 0, hidden = 0;
  const float* word = nullptr;  // [vocab, hidden]
  // [positions, hidden] or null (no absolute positions). Row
  // position_offset + p for the token at position p, p as packed
  // (models/packed_sequences.h: RoBERTa's -1 is the padding row).
  const float* position = nullptr;
  int64_t position_offset = 0;
  // [type_vocab_size, hidden] or null (no token-type table); row types[t]
  // for token t, row 0 for every token when types is null.
  const float* token_type = nullptr;
  const int32_t* types = nullptr;  // [tokens], each < type_vocab_size
};

// x[t] = word[ids[t]] (+ position row) (+ token-type row), [tokens, hidden].
void EmbeddingSum(const EmbeddingArgs& args, float* x, int threads);

// out[t] = norm(x[t]) * gamma (+ beta): LayerNorm, or RMSNorm when `rms`
// (x / sqrt(mean(x²) + eps)), over rows of `hidden` floats; beta may be
// null. `out` is FP32 (may be `x`) or BF16.
void Norm(const float* x, int64_t rows, int64_t hidden, const float* gamma, const float* beta,
          float eps, bool rms, void* out, bool out_bf16, int threads);

struct QkTransformArgs {
  float* qkv = nullptr;                // as AttentionArgs::qkv, updated in place
  const int32_t* positions = nullptr;  // [tokens]
  int64_t tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;
  // RMSNorm over each q head and each k head (null: none).
  const float* q_gamma = nullptr;
  const float* k_gamma = nullptr;
  float eps = 1e-6f;
  // Rotary positions, rotate-half form: [positions, head_dim / 2] cosines
  // and sines of position × frequency (null: none).
  const float* cos = nullptr;
  const float* sin = nullptr;
};

// The per-head q/k norms, then the rotary positions, on q and k.
void QkTransform(const QkTransformArgs& args, int threads);

// out[r, i] = act(in[r, i]) * in[r, inter + i] for in [rows, 2 * inter]
// (kNone: the product alone); out [rows, inter] FP32 or BF16.
void GatedActivation(const float* in, int64_t rows, int64_t inter, LinearActivation act, void* out,
                     bool out_bf16, int threads);

enum class PoolMode { kMean, kFirst, kLast };
// out[r] = mean of x over sequence r's rows (or its first or last row),
// L2-normalised when `normalize`; zeros for an empty sequence.
void Pool(const float* x, const int32_t* offsets, int64_t rows, int64_t hidden, PoolMode mode,
          bool normalize, float* out, int threads);

// Each of `rows` rows of `width` floats divided by its L2 norm (summed in
// double); a zero row stays zero.
void L2NormalizeRows(float* x, int64_t rows, int64_t width);

// Round-to-nearest-even FP32 → BF16 (NaN stays NaN), one value.
inline uint16_t RoundToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// The same over an array.
void ToBf16(const float* in, int64_t n, uint16_t* out, int threads);

}  // namespace infer::cpu

#endif  // INFER_MODELS_BERT_BERT_CPU_KERNELS_H_
