// Launchers for the blocks the CUDA encoder runs for families that are not
// BERT-shaped (models/transformer/transformer_spec.h): the embedding sum with
// an optional norm, residual add + LayerNorm (with or without β) or RMSNorm,
// the q/k transform (bias, per-head RMSNorm, rotary positions), GELU / tanh-
// GELU / SiLU, gated or not, last-token pooling, FP16 and FP32 conversions,
// and SPLADE's pooling of vocabulary-wide logits. FP16 storage, FP32
// arithmetic, over packed tokens (models/packed_sequences.h). Plain CUDA types
// only, so the host compiler can include this. Design in
// transformer_cuda_kernels.cu.
//
// Every launcher: enqueues its kernel on `stream` alone and returns
// cudaGetLastError() after the launch; never allocates, copies or
// synchronises, so it can be captured into a CUDA graph. A size of 0 returns
// cudaSuccess without launching; a negative size, a hidden size over
// kMaxRowHidden or a grid out of range returns cudaErrorInvalidValue without
// launching. Pointers need only their elements' natural alignment.
#ifndef INFER_MODELS_TRANSFORMER_TRANSFORMER_CUDA_KERNELS_CUH_
#define INFER_MODELS_TRANSFORMER_TRANSFORMER_CUDA_KERNELS_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace infer::cuda {

// The row kernels hold a row in FP32 in shared memory (48 KiB, less the sums).
inline constexpr int64_t kMaxRowHidden = 12256;

// A norm over a row of `hidden` values s, with FP32 statistics:
// LayerNorm (s - mean) · rsqrt(var + eps) · gamma (+ beta when not null),
// var the two-pass mean of (s - mean)^2; RMSNorm s · rsqrt(mean(s^2) + eps)
// · gamma. gamma null: no norm (the row as summed).
struct RowNorm {
  const float* gamma = nullptr;  // FP32 [hidden]
  const float* beta = nullptr;   // FP32 [hidden], LayerNorm only
  float eps = 0.0f;
  bool rms = false;
};

// x[r] = norm(word[ids[r]] (+ position[positions[r]]) (+ token_type[t]))
// for the `tokens` rows, t = types[r] (0 when types is null); position or
// token_type null: that table is not added. Tables FP16 [*, hidden];
// `position` points at the row of position 0, so that a negative packed
// position (RoBERTa's padding position, -1: models/packed_sequences.h)
// reads the row before it. x FP16, or FP32 (a residual stream kept in FP32).
cudaError_t LaunchEmbed(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                        const int32_t* types, const __half* word, const __half* position,
                        const __half* token_type, const RowNorm& norm, int64_t tokens,
                        int64_t hidden, __half* x);
cudaError_t LaunchEmbed(cudaStream_t stream, const int32_t* ids, const int32_t* positions,
                        const int32_t* types, const __half* word, const __half* position,
                        const __half* token_type, const RowNorm& norm, int64_t tokens,
                        int64_t hidden, float* x);

// For each row r of `tokens`: s = x[r] (+ y[r] + bias, when y is not null;
// bias may be null), summed in FP32. When y is not null and out != x, the
// residual stream is updated: x[r] = s (rounded to x's type). Then out[r] =
// norm(s) in FP16. out may be x (post-norm: x = norm(x + y + b)), y, or
// another buffer of [tokens, hidden]; each row is read whole before it is
// written. x FP16, or FP32 (a residual stream kept in FP32; out is then
// never x).
cudaError_t LaunchAddNorm(cudaStream_t stream, __half* x, const __half* y, const float* bias,
                          const RowNorm& norm, int64_t tokens, int64_t hidden, __half* out);
cudaError_t LaunchAddNorm(cudaStream_t stream, float* x, const __half* y, const float* bias,
                          const RowNorm& norm, int64_t tokens, int64_t hidden, __half* out);

// In place on qkv [tokens, (heads + 2 kv_heads) · head_dim] FP16, over the
// query and key heads of every token (values untouched):
//   v = head + its bias (bias FP32 [(heads + 2 kv_heads) · head_dim], or null);
//   v = RMSNorm(v) · gamma over head_dim (q_gamma for query heads, k_gamma for
//       key heads, FP32 [head_dim]; null: skipped), eps as given;
//   rotary (when inv_freq is not null, FP32 [head_dim / 2]): with p =
//       positions[t] and a_i = p · inv_freq[i] in FP32, the pair (v_i,
//       v_{i + d/2}) becomes (v_i cos a_i - v_{i + d/2} sin a_i,
//       v_{i + d/2} cos a_i + v_i sin a_i) (the rotate-half form).
// head_dim even, at most 256.
cudaError_t LaunchQkTransform(cudaStream_t stream, __half* qkv, const float* bias,
                              const float* q_gamma, const float* k_gamma, float eps,
                              const int32_t* positions, const float* inv_freq, int64_t tokens,
                              int64_t heads, int64_t kv_heads, int64_t head_dim);

enum class Activation { kGelu, kGeluTanh, kSilu };

// Ungated: y[r, j] = act(y[r, j] + bias[j]) in place, y [tokens, width].
// Gated: y [tokens, 2 · width]; y[r, j] = act(y[r, j] + bias[j]) ·
// (y[r, width + j] + bias[width + j]) for j < width, in place (row stride
// stays 2 · width; the second half is left as it was). bias may be null.
cudaError_t LaunchActivation(cudaStream_t stream, __half* y, const float* bias, int64_t tokens,
                             int64_t width, Activation act, bool gated);

// out[r] = x[offsets[r + 1] - 1] (the sequence's last token) in FP32, L2-
// normalised if `normalize`; zeros for an empty sequence. offsets on the
// device. x FP16 [tokens, hidden], out FP32 [rows, hidden].
cudaError_t LaunchLastTokenPool(cudaStream_t stream, const __half* x, const int32_t* offsets,
                                int64_t rows, int64_t hidden, bool normalize, float* out);

// y[i] = x[i] in FP32 for i < n: the last hidden states handed out per token
// (TransformerEncoder::EncodeWithStates). x FP16, y FP32.
cudaError_t LaunchHalfToFloat(cudaStream_t stream, const __half* x, int64_t n, float* y);

// x FP32 -> y FP16 (round to nearest), for i < n.
cudaError_t LaunchFloatToHalf(cudaStream_t stream, const float* x, int64_t n, __half* y);

// SPLADE's fold of one chunk of tokens [c0, c1) into the per-sequence result
// (models/transformer/splade_head.h): for each sequence s in [first, last)
// and column v < vocab, over s's tokens t in the chunk (offsets on the
// device, [rows + 1]), l = logits[t - c0][v] + bias[v] (bias null: 0) and
// f(l) = log1p(l) (log1p twice with `twice`) for l > 0, else 0:
//   sum: out[s][v] += Σ f(l);   max: out[s][v] = max(out[s][v], f(max l)).
// out FP32 [rows, vocab] starts at zeros before the first chunk; logits FP32
// [c1 - c0, vocab]. At most 65535 sequences a chunk.
cudaError_t LaunchSpladeFold(cudaStream_t stream, const float* logits, const float* bias,
                             const int32_t* offsets, int64_t first, int64_t last, int64_t c0,
                             int64_t c1, int64_t vocab, bool sum, bool twice, float* out);

}  // namespace infer::cuda

#endif  // INFER_MODELS_TRANSFORMER_TRANSFORMER_CUDA_KERNELS_CUH_
