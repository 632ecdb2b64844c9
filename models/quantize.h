// INT8 quantization for the CPU's int8 matmuls (OnednnLinear with
// LinearOptions::int8): weights per output channel once at load, activations
// per token on every batch, and the FP32 result back from the int32 sums.
//
// Weights: symmetric s8, q[n][k] = round(w[n][k] / s[n]) with
// s[n] = max_k |w[n][k]| / levels (WeightLevels), so every channel keeps its
// own range.
//
// Activations: asymmetric u8 per row (token), x ≈ s · (q − z) with the row's
// range [min(0, min x), max(0, max x)] mapped onto [0, 255] and zero
// exactly representable. Per row and not per tensor, so a token's codes do
// not depend on its batch-mates (batch invariance holds) and one outlier
// token does not coarsen the others.
//
// Levels: oneDNN multiplies u8 by s8 with vpmaddubsw on CPUs without VNNI
// (AVX2, AVX-512 before Cascade Lake), which adds pairs of products into
// int16 with saturation: 2 · 255 · 127 overflows it, 2 · 255 · 63 does not.
// There the weights use 7 bits (codes -63..63) and the activations keep 8:
// a token's range is wider than a weight channel's, and the bit does more
// there. On all-mpnet-base-v2 and all-MiniLM-L6-v2 (oneDNN capped at AVX2)
// the precision gate's top-10 neighbour agreement is 0.903 and 0.931 this
// way, against 0.892 and 0.913 with 8-bit weights and 7-bit activations.
// With AVX512-VNNI or AMX the products go straight into int32 and both use
// 8 bits (weights -127..127).
//
// Dequantization, for the int32 sum acc[m][n] = Σ_k q_x[m][k] · q_w[n][k]:
//   y[m][n] = act(s_x[m] · s_w[n] · (acc[m][n] − z[m] · Σ_k q_w[n][k]) + b[n])
// (added to y when accumulating: the residual add), in one pass over the
// sums; act is the layer's activation (models/simd_math.h), or none.
//
// The row loops are written with GCC vector extensions and compiled for AVX-512, AVX2 and the
// x86-64 baseline (cpu::DetectSimdLevel picks, as for the attention kernel).
// Written by hand because oneDNN 2.6 has no per-row (per-token) scales: its
// output scales are per tensor or per output channel, and a per-row binary
// post-op falls back to its reference kernel, a thousand times slower.
//
// Thread-safety: pure functions; `threads` bounds the OpenMP team each uses.
#ifndef INFER_MODELS_QUANTIZE_H_
#define INFER_MODELS_QUANTIZE_H_

#include <cstdint>
#include <vector>

#include "models/activation.h"

namespace infer::cpu {

struct QuantizedWeights {
  std::vector<int8_t> q;     // [out, in]
  std::vector<float> scale;  // [out]
  std::vector<int32_t> sum;  // [out], Σ_k q[n][k]
};

// `w` is [out, in] FP32 (Hugging Face's layout), coded in -levels..levels.
// A channel of zeros gets scale 1 and codes 0.
QuantizedWeights QuantizeWeights(const float* w, int64_t out, int64_t in, int levels);

// The largest weight code for this CPU as oneDNN sees it (127 or 63, see
// above).
int WeightLevels();

// The largest activation code, on every CPU (see above).
inline constexpr int kActivationLevels = 255;

// q[r][k] and each row's scale and zero point for x [rows, width] FP32.
// A row of zeros gets scale 1 and zero point 0.
void QuantizeRows(const float* x, int64_t rows, int64_t width, int levels, uint8_t* q,
                  float* row_scale, int32_t* row_zero, int threads);

struct DequantizeArgs {
  const int32_t* acc = nullptr;  // [rows, width]
  int64_t rows = 0, width = 0;
  const float* row_scale = nullptr;                       // [rows]
  const int32_t* row_zero = nullptr;                      // [rows]
  const float* col_scale = nullptr;                       // [width]
  const int32_t* col_sum = nullptr;                       // [width]
  const float* bias = nullptr;                            // [width]
  LinearActivation activation = LinearActivation::kNone;  // after the bias
  float* y = nullptr;                                     // [rows, width]
  bool accumulate = false;                                // y += result instead of y = result
};

void DequantizeRows(const DequantizeArgs& args, int threads);

}  // namespace infer::cpu

#endif  // INFER_MODELS_QUANTIZE_H_
