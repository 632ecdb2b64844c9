// Vector math for the CPU kernels written by hand (attention, the INT8
// dequantization, activations): GCC vector extensions of W floats, inlined
// into functions each compiled for one instruction set (a function with
// __attribute__((target("avx2,fma"))) and W = 8, AVX-512 with W = 16, the
// x86-64 baseline with W = 4), so one binary runs on any x86-64 CPU.
//
// Written by hand because the activations run fused into our own row loops
// (after the INT8 dequantization, times the gate of a gated FFN), where
// neither oneDNN's eltwise primitive (a pass of its own over memory) nor
// libm (scalar) can go.
//
// Accuracy, against the exact functions:
//   ExpNonPositive, Exp   within 2.5 · 2^-23 relative (ExpNonPositive on
//                         [-87, 0], 0 below; Exp on [-87, 88], clamped
//                         outside);
//   Erf                   within 7e-7 absolute (Abramowitz & Stegun 7.1.26,
//                         the form oneDNN's own GELU uses; the most near 0,
//                         where 1 - erfc cancels);
//   Gelu, GeluTanh, Silu  within 3e-7 · max(1, |x|) absolute, and 0 below
//                         -88 (their limit at -inf, whose true values there
//                         are below 1e-36 in magnitude).
//
// Thread-safety: pure functions.
#ifndef INFER_MODELS_SIMD_MATH_H_
#define INFER_MODELS_SIMD_MATH_H_

#include <cstdint>

#include "models/activation.h"

namespace infer::cpu::simd {

#define INFER_SIMD_INLINE inline __attribute__((always_inline))

// W lanes: 16 is one AVX-512 register of floats, 8 one AVX2 register, 4
// one SSE register.
template <int W>
struct Lanes {
  typedef float F __attribute__((vector_size(4 * W)));
  typedef int32_t I __attribute__((vector_size(4 * W)));
};

// Unaligned loads and stores of whole vectors.
template <typename V, typename T>
INFER_SIMD_INLINE V Load(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <typename V, typename T>
INFER_SIMD_INLINE void Store(T* p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// Every lane x (folded for constants).
template <typename V>
INFER_SIMD_INLINE V Splat(float x) {
  return V{} + x;
}

// e^x from n = round(x / ln 2) (the truncation of `t_rounded`) and
// r = x - n ln 2, |r| <= ln2 / 2: e^r by its degree-6 Taylor polynomial
// (remainder below 1.2e-7 relative), 2^n from the exponent bits, n in
// [-126, 127].
template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F ExpOfReduced(typename Lanes<W>::F x,
                                                    typename Lanes<W>::F t_rounded) {
  using F = typename Lanes<W>::F;
  using I = typename Lanes<W>::I;
  const I n = __builtin_convertvector(t_rounded, I);
  const F nf = __builtin_convertvector(n, F);
  F r = x - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  F p = Splat<F>(1.0f / 720);
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const I bits = (n + 127) << 23;
  F scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// e^x for x <= 0 (a softmax after subtracting the row's maximum); 0 below
// -87 (where e^x < 1.7e-38). Exactly 0 rather than e^-87: the weights of an
// attention's masked keys are then 0, and their products with the values 0,
// where e^-87 · v would be denormals, each a microcode assist (about a
// hundred cycles) on Intel CPUs: a sliding window ran 2.4× slower for it.
template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F ExpNonPositive(typename Lanes<W>::F x) {
  using F = typename Lanes<W>::F;
  const auto under = x < Splat<F>(-87.0f);
  x = under ? Splat<F>(-87.0f) : x;
  const F t = x * 1.44269504088896341f;
  const F e = ExpOfReduced<W>(x, t - 0.5f);  // t <= 0: truncating t - 0.5 rounds
  return under ? F{} : e;
}

// e^x for any x, clamped to [-87, 88] (e^88 = 1.65e38 is finite).
template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F Exp(typename Lanes<W>::F x) {
  using F = typename Lanes<W>::F;
  x = x < Splat<F>(-87.0f) ? Splat<F>(-87.0f) : x;
  x = x > Splat<F>(88.0f) ? Splat<F>(88.0f) : x;
  const F t = x * 1.44269504088896341f;
  const F half = t < F{} ? Splat<F>(-0.5f) : Splat<F>(0.5f);
  return ExpOfReduced<W>(x, t + half);  // truncating t ± 0.5 rounds
}

// 1 - erf(|x|) = q(|x|) e^(-x²), Abramowitz & Stegun 7.1.26.
template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F ErfcOfAbs(typename Lanes<W>::F x) {
  using F = typename Lanes<W>::F;
  const F a = x < F{} ? -x : x;
  const F t = Splat<F>(1.0f) / (a * 0.3275911f + 1.0f);
  F q = Splat<F>(1.061405429f);
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  q = q * t;
  return q * ExpNonPositive<W>(-(a * a));
}

template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F Erf(typename Lanes<W>::F x) {
  using F = typename Lanes<W>::F;
  const F e = Splat<F>(1.0f) - ErfcOfAbs<W>(x);
  return x < F{} ? -e : e;
}

// 0 where x < -88, else f: the activations' limit at -inf, which their
// forms below would reach as -inf · 0 (NaN: GELU) or as x / e^88 (-inf, or
// far from 0 for |x| near FLT_MAX: tanh-GELU, SiLU).
template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F ZeroFarBelowZero(typename Lanes<W>::F x,
                                                        typename Lanes<W>::F f) {
  using F = typename Lanes<W>::F;
  return x < Splat<F>(-88.0f) ? F{} : f;
}

// GELU, erf form: x/2 · (1 + erf(x / √2)). For x < 0, 1 + erf(u) is
// computed as 1 - erf(|u|) directly, without the cancellation of 1 - 0.99….
template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F Gelu(typename Lanes<W>::F x) {
  using F = typename Lanes<W>::F;
  const F c = ErfcOfAbs<W>(x * 0.70710678118654752f);
  const F one_plus_erf = x < F{} ? c : Splat<F>(2.0f) - c;
  return ZeroFarBelowZero<W>(x, x * 0.5f * one_plus_erf);
}

// GELU, tanh form: x/2 · (1 + tanh(u)) = x / (1 + e^(-2u)),
// u = √(2/π) (x + 0.044715 x³).
template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F GeluTanh(typename Lanes<W>::F x) {
  const auto u = (x + x * x * x * 0.044715f) * 0.79788456080286536f;
  return ZeroFarBelowZero<W>(x, x / (Exp<W>(u * -2.0f) + 1.0f));
}

// SiLU (swish): x · sigmoid(x) = x / (1 + e^-x).
template <int W>
INFER_SIMD_INLINE typename Lanes<W>::F Silu(typename Lanes<W>::F x) {
  return ZeroFarBelowZero<W>(x, x / (Exp<W>(-x) + 1.0f));
}

// act(x) for the activation Act, a constant, so that a loop calling it has
// no branch on it (kNone: x).
template <int W, LinearActivation Act>
INFER_SIMD_INLINE typename Lanes<W>::F Activate(typename Lanes<W>::F x) {
  switch (Act) {
    case LinearActivation::kNone:
      return x;
    case LinearActivation::kGelu:
      return Gelu<W>(x);
    case LinearActivation::kGeluTanh:
      return GeluTanh<W>(x);
    case LinearActivation::kSilu:
      return Silu<W>(x);
  }
  return x;
}

}  // namespace infer::cpu::simd

#endif  // INFER_MODELS_SIMD_MATH_H_
