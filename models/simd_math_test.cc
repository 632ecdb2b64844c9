// The vector math of models/simd_math.h against libm in double, at every
// vector width this CPU runs, over the whole range the kernels feed it.
#include "models/simd_math.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/transformer/cpu_kernels.h"

namespace infer::cpu::simd {
namespace {

enum class Fn { kExpNonPositive, kExp, kErf, kGelu, kGeluTanh, kSilu };

template <int W>
inline __attribute__((always_inline)) void EvalAll(Fn fn, const float* x, float* y, int64_t n) {
  using F = typename Lanes<W>::F;
  for (int64_t i = 0; i + W <= n; i += W) {
    const F v = Load<F>(x + i);
    F r;
    switch (fn) {
      case Fn::kExpNonPositive:
        r = ExpNonPositive<W>(v);
        break;
      case Fn::kExp:
        r = Exp<W>(v);
        break;
      case Fn::kErf:
        r = Erf<W>(v);
        break;
      case Fn::kGelu:
        r = Gelu<W>(v);
        break;
      case Fn::kGeluTanh:
        r = GeluTanh<W>(v);
        break;
      case Fn::kSilu:
        r = Silu<W>(v);
        break;
    }
    Store(y + i, r);
  }
}

__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void Eval16(Fn fn,
                                                                                   const float* x,
                                                                                   float* y,
                                                                                   int64_t n) {
  EvalAll<16>(fn, x, y, n);
}
__attribute__((target("avx2,fma"))) void Eval8(Fn fn, const float* x, float* y, int64_t n) {
  EvalAll<8>(fn, x, y, n);
}
void Eval4(Fn fn, const float* x, float* y, int64_t n) { EvalAll<4>(fn, x, y, n); }

struct Width {
  int lanes;
  void (*eval)(Fn, const float*, float*, int64_t);
};

std::vector<Width> WidthsThisCpuRuns() {
  std::vector<Width> widths = {{4, Eval4}};
  const SimdLevel best = DetectSimdLevel();
  if (best == SimdLevel::kAvx2 || best == SimdLevel::kAvx512) widths.push_back({8, Eval8});
  if (best == SimdLevel::kAvx512) widths.push_back({16, Eval16});
  return widths;
}

// Every 1/4096 over [lo, hi] ∩ [-30, 30], every 1/64 over [lo, hi] ∩
// [-100, 100], 200,000 random floats of every magnitude from 1e-30 to 1e30
// in [lo, hi], and the values far out (up to the ends of float's range)
// that lie in [lo, hi]; a multiple of 16 values.
std::vector<float> Inputs(float lo, float hi) {
  std::vector<float> x;
  for (int i = -30 * 4096; i <= 30 * 4096; ++i) {
    const float v = static_cast<float>(i) / 4096;
    if (v >= lo && v <= hi) x.push_back(v);
  }
  for (int i = -100 * 64; i <= 100 * 64; ++i) {
    const float v = static_cast<float>(i) / 64;
    if (v >= lo && v <= hi) x.push_back(v);
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
  for (int i = 0; i < 200000; ++i) {
    const float v = (i % 2 == 0 ? 1.0f : -1.0f) * std::pow(10.0f, exponent(rng));
    if (v >= lo && v <= hi) x.push_back(v);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {-inf, -3e38f, -1e30f, -1e5f, -100.0f, -88.5f, -88.0f, -87.0f, -40.0f, 40.0f,
                  87.0f, 88.0f, 1e5f, 1e30f, -0.0f, 1e-30f, -1e-30f}) {
    if (v >= lo && v <= hi) x.push_back(v);
  }
  while (x.size() % 16 != 0) x.push_back(0.0f);
  return x;
}

struct Check {
  Fn fn;
  const char* name;
  float lo, hi;
  std::function<double(double)> exact;
  // The error allowed at x for an exact value e.
  std::function<double(double, double)> tolerance;
};

TEST(SimdMathTest, EveryFunctionMatchesLibmAtEveryWidth) {
  // 2.5 · 2^-23 relative.
  const double ulps = 2.5 * std::ldexp(1.0, -23);
  auto relative = [ulps](double, double e) { return ulps * std::fabs(e) + 1e-45; };
  // Below -88 the activations are 0 (the exact values are under 1e-36).
  auto absolute = [](double x, double) {
    return x < -88 ? 1e-30 : 3e-7 * std::max(1.0, std::fabs(x));
  };
  auto clamp = [](double x) { return std::min(88.0, std::max(-87.0, x)); };
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Check> checks = {
      {Fn::kExpNonPositive, "ExpNonPositive", -inf, 0.0f,
       [](double x) { return x < -87.0 ? 0.0 : std::exp(x); }, relative},
      {Fn::kExp, "Exp", -1e30f, 1e30f, [clamp](double x) { return std::exp(clamp(x)); }, relative},
      {Fn::kErf, "Erf", -1e30f, 1e30f, [](double x) { return std::erf(x); },
       [](double, double) { return 7e-7; }},
      // The activations down to -inf, where each tends to 0 (x · 0 there
      // in the exact forms is NaN, hence the limits by hand).
      {Fn::kGelu, "Gelu", -inf, 1e5f,
       [](double x) { return std::isinf(x) ? 0.0 : 0.5 * x * std::erfc(-x / std::sqrt(2.0)); },
       absolute},
      {Fn::kGeluTanh, "GeluTanh", -inf, 1e5f,
       [](double x) {
         if (x < -1e5) return 0.0;  // x³ overflows; the value is below 1e-300
         const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
         return x / (1.0 + std::exp(-2.0 * u));
       },
       absolute},
      {Fn::kSilu, "Silu", -inf, 1e5f,
       [](double x) { return x < -1e5 ? 0.0 : x / (1.0 + std::exp(-x)); }, absolute},
  };
  for (const Width& width : WidthsThisCpuRuns()) {
    for (const Check& c : checks) {
      const std::vector<float> all = Inputs(c.lo, c.hi);
      std::vector<float> y(all.size(), std::nanf(""));
      width.eval(c.fn, all.data(), y.data(), static_cast<int64_t>(all.size()));
      double worst = 0;
      float worst_x = 0;
      for (size_t i = 0; i < all.size(); ++i) {
        const double e = c.exact(all[i]);
        ASSERT_TRUE(std::isfinite(y[i])) << c.name << "(" << all[i] << "), " << width.lanes;
        const double ratio = std::fabs(y[i] - e) / c.tolerance(all[i], e);
        if (ratio > worst) worst = ratio, worst_x = all[i];
      }
      EXPECT_LE(worst, 1.0) << c.name << " at width " << width.lanes
                            << ": worst at x = " << worst_x;
    }
  }
}

}  // namespace
}  // namespace infer::cpu::simd
