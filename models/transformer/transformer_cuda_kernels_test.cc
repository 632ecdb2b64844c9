// The general CUDA blocks' kernels (transformer_cuda_kernels.cuh) and the FP8
// quantizer (models/fp8_quantize_cuda.cuh) against double-precision
// references on the host, on random inputs: residual add + LayerNorm (with
// and without β) and RMSNorm, with an FP16 or FP32 residual stream and the
// output over x, over y or elsewhere; the embedding sum with positions by id
// or counted within each sequence (with empty sequences); the q/k transform
// (biases, per-head RMSNorm, rotary positions, grouped KV heads, values left
// alone); GELU, tanh-GELU and SiLU, gated and not; last-token pooling; FP8
// codes and scales on the device equal to the host's. So that a failure of
// the end-to-end family tests (encoder_cuda_families_test) can be pinned to a
// kernel. The argument checks run without a GPU.
//
// Tolerances as in bert_cuda_kernels_test: one rounding to FP16 (half an
// ulp, 4.9e-4 relative) plus FP32 arithmetic: 2e-3 relative, 1e-3 absolute.
#include "models/transformer/transformer_cuda_kernels.cuh"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "models/fp8_quantize_cuda.cuh"
#include "models/half.h"
#include "tests/testing/cuda_arrays.h"

namespace infer {
namespace {

using ::infer::testing::DeviceArray;

bool Near(double got, double want) { return std::abs(got - want) <= 1e-3 + 2e-3 * std::abs(want); }

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<uint16_t> Halves(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToHalf(v[i]);
  return h;
}

std::vector<double> Doubles(const std::vector<uint16_t>& h) {
  std::vector<double> d(h.size());
  for (size_t i = 0; i < h.size(); ++i) d[i] = HalfToFloat(h[i]);
  return d;
}

// norm(s) over one row, as RowNorm defines it.
std::vector<double> HostNorm(const std::vector<double>& s, const float* gamma, const float* beta,
                             float eps, bool rms) {
  const auto n = static_cast<double>(s.size());
  double mean = 0;
  if (!rms) {
    for (double v : s) mean += v / n;
  }
  double var = 0;
  for (double v : s) var += (v - mean) * (v - mean) / n;
  std::vector<double> out(s.size());
  for (size_t j = 0; j < s.size(); ++j) {
    out[j] = (s[j] - mean) / std::sqrt(var + eps) * gamma[j] + (beta != nullptr ? beta[j] : 0.0);
  }
  return out;
}

// Every element of `got` within the tolerance of `want`; names the first miss.
void ExpectAllNear(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!Near(got[i], want[i]) && bad++ == 0) {
      ADD_FAILURE() << "first at " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(TransformerCudaKernelsTest, RejectsBadSizesWithoutLaunching) {
  const cuda::RowNorm none;
  EXPECT_EQ(cuda::LaunchAddNorm(nullptr, static_cast<__half*>(nullptr), nullptr, nullptr, none, -1,
                                8, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchAddNorm(nullptr, static_cast<float*>(nullptr), nullptr, nullptr, none, 1,
                                cuda::kMaxRowHidden + 1, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchAddNorm(nullptr, static_cast<__half*>(nullptr), nullptr, nullptr, none, 0,
                                8, nullptr),
            cudaSuccess);
  EXPECT_EQ(cuda::LaunchQkTransform(nullptr, nullptr, nullptr, nullptr, nullptr, 1e-6f, nullptr,
                                    nullptr, 1, 2, 1, 7),
            cudaErrorInvalidValue);  // odd head size
  EXPECT_EQ(cuda::LaunchQkTransform(nullptr, nullptr, nullptr, nullptr, nullptr, 1e-6f, nullptr,
                                    nullptr, 1, 2, 1, 512),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchActivation(nullptr, nullptr, nullptr, -1, 4, cuda::Activation::kSilu, true),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchLastTokenPool(nullptr, nullptr, nullptr, 0, 8, true, nullptr), cudaSuccess);
  EXPECT_EQ(cuda::LaunchQuantizeRowsFp8(nullptr, nullptr, 2, 8, 4, nullptr, nullptr),
            cudaErrorInvalidValue);  // ld < cols
  EXPECT_EQ(cuda::LaunchHalfToFloat(nullptr, nullptr, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchHalfToFloat(nullptr, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(cuda::LaunchFloatToHalf(nullptr, nullptr, -1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchSpladeFold(nullptr, nullptr, nullptr, nullptr, 0, 70000, 0, 4, 8, false,
                                   false, nullptr),
            cudaErrorInvalidValue);  // over 65535 sequences
  EXPECT_EQ(cuda::LaunchSpladeFold(nullptr, nullptr, nullptr, nullptr, 2, 1, 0, 4, 8, false, false,
                                   nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchSpladeFold(nullptr, nullptr, nullptr, nullptr, 0, 3, 4, 4, 8, true, false,
                                   nullptr),
            cudaSuccess);  // an empty chunk
}

// SPLADE's fold against the host's, chunk by chunk as the head runs it:
// sequences of 3, 0, 5 and 1 tokens in chunks of 4 (a sequence across
// chunks, an empty one), a bias and none, max and sum, log1p once and twice.
TEST(TransformerCudaKernelsTest, SpladeFoldMatchesTheReference) {
  INFER_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> offsets = {0, 3, 3, 8, 9};
  const int64_t rows = 4, tokens = 9, vocab = 300, chunk = 4;
  const std::vector<float> logits = Random(tokens * vocab, 21, -3, 2);
  const std::vector<float> bias = Random(vocab, 22, -0.5f, 0.5f);
  DeviceArray<int32_t> d_offsets(offsets.size());
  DeviceArray<float> d_chunk(chunk * vocab), d_bias(vocab), d_out(rows * vocab);
  INFER_ASSERT_CUDA(d_offsets.Upload(offsets));
  INFER_ASSERT_CUDA(d_bias.Upload(bias));
  for (const bool sum : {false, true}) {
    for (const bool twice : {false, true}) {
      for (const bool with_bias : {false, true}) {
        INFER_ASSERT_CUDA(cudaMemset(d_out.get(), 0, rows * vocab * sizeof(float)));
        for (int64_t c0 = 0; c0 < tokens; c0 += chunk) {
          const int64_t c1 = std::min(tokens, c0 + chunk);
          INFER_ASSERT_CUDA(d_chunk.Upload(
              std::vector<float>(logits.begin() + c0 * vocab, logits.begin() + c1 * vocab)));
          // The sequences the chunk overlaps, found as SpladeHeadCuda::Run
          // finds them (later chunks start past the first sequence).
          int64_t first = 0;
          while (first < rows && offsets[first + 1] <= c0) ++first;
          int64_t last = first;
          while (last < rows && offsets[last] < c1) ++last;
          INFER_ASSERT_CUDA(cuda::LaunchSpladeFold(
              nullptr, d_chunk.get(), with_bias ? d_bias.get() : nullptr, d_offsets.get(), first,
              last, c0, c1, vocab, sum, twice, d_out.get()));
        }
        INFER_ASSERT_CUDA(cudaDeviceSynchronize());
        std::vector<float> got;
        INFER_ASSERT_CUDA(d_out.Download(&got));
        auto f = [twice](double l) { return twice ? std::log1p(std::log1p(l)) : std::log1p(l); };
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t v = 0; v < vocab; ++v) {
            double want = 0, top = -1e30;
            for (int64_t t = offsets[r]; t < offsets[r + 1]; ++t) {
              const double l = logits[t * vocab + v] + (with_bias ? bias[v] : 0.0f);
              if (sum && l > 0) want += f(l);
              top = std::max(top, l);
            }
            if (!sum) want = top > 0 ? f(top) : 0.0;
            ASSERT_NEAR(got[r * vocab + v], want, 1e-5 + 1e-5 * want)
                << "row " << r << " column " << v << " sum " << sum << " twice " << twice
                << " bias " << with_bias;
          }
        }
      }
    }
  }
}

// Every value exactly (FP16 to FP32 is exact), over more values than one
// pass of the grid covers (2^20 blocks of 256), so the stride loop runs.
TEST(TransformerCudaKernelsTest, HalfToFloatIsExactOverAnyCount) {
  INFER_SKIP_WITHOUT_GPU();
  for (const int64_t n : {int64_t{1}, int64_t{1000}, (int64_t{1} << 28) + 3}) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) h[i] = static_cast<uint16_t>((i * 2654435761u) >> 16);
    for (uint16_t& v : h) {
      if ((v & 0x7c00) == 0x7c00) v &= 0x83ff;  // no infinities or NaNs: compared with ==
    }
    DeviceArray<uint16_t> d_h(h.size());
    DeviceArray<float> d_f(h.size());
    INFER_ASSERT_CUDA(d_h.Upload(h));
    INFER_ASSERT_CUDA(
        cuda::LaunchHalfToFloat(nullptr, reinterpret_cast<const __half*>(d_h.get()), n, d_f.get()));
    INFER_ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<float> got;
    INFER_ASSERT_CUDA(d_f.Download(&got));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += got[i] != HalfToFloat(h[i]);
    EXPECT_EQ(bad, 0) << n << " values";
  }
}

// x += y + b, out = norm(x), for each aliasing and residual type.
TEST(TransformerCudaKernelsTest, AddNormMatchesTheReference) {
  INFER_SKIP_WITHOUT_GPU();
  const int64_t tokens = 5, hidden = 200;
  const std::vector<float> x = Random(tokens * hidden, 1, -3, 3), y = Random(tokens * hidden, 2);
  const std::vector<float> bias = Random(hidden, 3), gamma = Random(hidden, 4, 0.5f, 1.5f),
                           beta = Random(hidden, 5);
  DeviceArray<float> d_bias(hidden), d_gamma(hidden), d_beta(hidden);
  INFER_ASSERT_CUDA(d_bias.Upload(bias));
  INFER_ASSERT_CUDA(d_gamma.Upload(gamma));
  INFER_ASSERT_CUDA(d_beta.Upload(beta));
  for (const bool rms : {false, true}) {
    for (const bool with_beta : {false, true}) {
      for (const int target : {0, 1, 2}) {  // out: elsewhere, over y, over x (FP16 x only)
        for (const bool fp32 : {false, true}) {
          if (fp32 && target == 2) continue;
          SCOPED_TRACE(::testing::Message() << "rms " << rms << " beta " << with_beta << " target "
                                            << target << " fp32 x " << fp32);
          const cuda::RowNorm norm{d_gamma.get(), with_beta ? d_beta.get() : nullptr, 1e-5f, rms};
          DeviceArray<uint16_t> xh(tokens * hidden), yh(tokens * hidden), other(tokens * hidden);
          DeviceArray<float> xf(tokens * hidden);
          INFER_ASSERT_CUDA(xh.Upload(Halves(x)));
          INFER_ASSERT_CUDA(xf.Upload(x));
          INFER_ASSERT_CUDA(yh.Upload(Halves(y)));
          auto* out = reinterpret_cast<__half*>(target == 0   ? other.get()
                                                : target == 1 ? yh.get()
                                                              : xh.get());
          const auto* yp = reinterpret_cast<const __half*>(yh.get());
          INFER_ASSERT_CUDA(fp32
                                ? cuda::LaunchAddNorm(nullptr, xf.get(), yp, d_bias.get(), norm,
                                                      tokens, hidden, out)
                                : cuda::LaunchAddNorm(nullptr, reinterpret_cast<__half*>(xh.get()),
                                                      yp, d_bias.get(), norm, tokens, hidden, out));
          INFER_ASSERT_CUDA(cudaDeviceSynchronize());
          std::vector<uint16_t> got_out;
          INFER_ASSERT_CUDA((target == 0 ? other : target == 1 ? yh : xh).Download(&got_out));
          std::vector<double> want_out, want_x;
          const std::vector<double> xs =
              fp32 ? std::vector<double>(x.begin(), x.end()) : Doubles(Halves(x));
          const std::vector<double> ys = Doubles(Halves(y));
          for (int64_t r = 0; r < tokens; ++r) {
            std::vector<double> s(hidden);
            for (int64_t j = 0; j < hidden; ++j) {
              s[j] = xs[r * hidden + j] + ys[r * hidden + j] + bias[j];
            }
            want_x.insert(want_x.end(), s.begin(), s.end());
            const std::vector<double> n =
                HostNorm(s, gamma.data(), with_beta ? beta.data() : nullptr, 1e-5f, rms);
            want_out.insert(want_out.end(), n.begin(), n.end());
          }
          ExpectAllNear(Doubles(got_out), want_out);
          if (target != 2) {  // the residual stream was updated
            std::vector<double> got_x;
            if (fp32) {
              std::vector<float> f;
              INFER_ASSERT_CUDA(xf.Download(&f));
              got_x.assign(f.begin(), f.end());
            } else {
              std::vector<uint16_t> h;
              INFER_ASSERT_CUDA(xh.Download(&h));
              got_x = Doubles(h);
            }
            ExpectAllNear(got_x, want_x);
          }
        }
      }
    }
  }
}

// Each token's position row is read at its packed position past the row
// `position` points at: columns (BERT, with holes and left padding), and
// RoBERTa's, whose padding position (-1) is the row before.
TEST(TransformerCudaKernelsTest, EmbeddingReadsThePackedPositions) {
  INFER_SKIP_WITHOUT_GPU();
  const int64_t hidden = 48, vocab = 30, table = 22, offset = 2;
  const std::vector<int32_t> ids = {1, 5, 7, 2, 2, 9, 29, 0};
  const int64_t tokens = 8;
  const std::vector<float> word = Random(vocab * hidden, 6), pos = Random(table * hidden, 7);
  DeviceArray<uint16_t> d_word(word.size()), d_pos(pos.size()), out(tokens * hidden);
  DeviceArray<int32_t> d_ids(tokens), d_positions(tokens);
  INFER_ASSERT_CUDA(d_word.Upload(Halves(word)));
  INFER_ASSERT_CUDA(d_pos.Upload(Halves(pos)));
  INFER_ASSERT_CUDA(d_ids.Upload(ids));
  for (const std::vector<int32_t>& positions : {std::vector<int32_t>{4, 5, 6, 0, 1, 2, 3, 19},
                                                std::vector<int32_t>{0, -1, 1, 0, 1, -1, -1, 2}}) {
    INFER_ASSERT_CUDA(d_positions.Upload(positions));
    INFER_ASSERT_CUDA(
        cuda::LaunchEmbed(nullptr, d_ids.get(), d_positions.get(), nullptr,
                          reinterpret_cast<const __half*>(d_word.get()),
                          reinterpret_cast<const __half*>(d_pos.get()) + offset * hidden, nullptr,
                          cuda::RowNorm(), tokens, hidden, reinterpret_cast<__half*>(out.get())));
    INFER_ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> got;
    INFER_ASSERT_CUDA(out.Download(&got));
    const std::vector<double> w = Doubles(Halves(word)), p = Doubles(Halves(pos));
    std::vector<double> want;
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t row = offset + positions[t];
      for (int64_t j = 0; j < hidden; ++j)
        want.push_back(w[ids[t] * hidden + j] + p[row * hidden + j]);
    }
    ExpectAllNear(Doubles(got), want);
  }
}

TEST(TransformerCudaKernelsTest, QkTransformMatchesTheReference) {
  INFER_SKIP_WITHOUT_GPU();
  const int64_t tokens = 6, heads = 4, kv_heads = 2;
  for (const int64_t dh : {32, 64, 128, 256}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << dh);
    const int64_t stride = (heads + 2 * kv_heads) * dh, half = dh / 2;
    const std::vector<float> qkv = Random(tokens * stride, 8), bias = Random(stride, 9);
    const std::vector<float> qg = Random(dh, 10, 0.5f, 1.5f), kg = Random(dh, 11, 0.5f, 1.5f);
    const std::vector<int32_t> positions = {0, 1, 2, 700, 5, 4095};
    std::vector<float> inv_freq(half);
    for (int64_t i = 0; i < half; ++i) {
      inv_freq[i] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / static_cast<float>(dh));
    }
    DeviceArray<uint16_t> d_qkv(qkv.size());
    DeviceArray<float> d_bias(stride), d_qg(dh), d_kg(dh), d_inv(half);
    DeviceArray<int32_t> d_pos(tokens);
    INFER_ASSERT_CUDA(d_qkv.Upload(Halves(qkv)));
    INFER_ASSERT_CUDA(d_bias.Upload(bias));
    INFER_ASSERT_CUDA(d_qg.Upload(qg));
    INFER_ASSERT_CUDA(d_kg.Upload(kg));
    INFER_ASSERT_CUDA(d_inv.Upload(inv_freq));
    INFER_ASSERT_CUDA(d_pos.Upload(positions));
    INFER_ASSERT_CUDA(cuda::LaunchQkTransform(
        nullptr, reinterpret_cast<__half*>(d_qkv.get()), d_bias.get(), d_qg.get(), d_kg.get(),
        1e-6f, d_pos.get(), d_inv.get(), tokens, heads, kv_heads, dh));
    INFER_ASSERT_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> got;
    INFER_ASSERT_CUDA(d_qkv.Download(&got));
    std::vector<double> want = Doubles(Halves(qkv));  // values stay as they were
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t h = 0; h < heads + kv_heads; ++h) {
        double* v = want.data() + t * stride + h * dh;
        const std::vector<float>& g = h < heads ? qg : kg;
        double sq = 0;
        for (int64_t i = 0; i < dh; ++i) {
          v[i] += bias[h * dh + i];
          sq += v[i] * v[i];
        }
        const double inv = 1.0 / std::sqrt(sq / dh + 1e-6);
        for (int64_t i = 0; i < dh; ++i) v[i] = v[i] * inv * g[i];
        for (int64_t i = 0; i < half; ++i) {
          const double a = static_cast<double>(static_cast<float>(positions[t]) * inv_freq[i]);
          const double x1 = v[i], x2 = v[i + half];
          v[i] = x1 * std::cos(a) - x2 * std::sin(a);
          v[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
    }
    ExpectAllNear(Doubles(got), want);
  }
}

TEST(TransformerCudaKernelsTest, ActivationsGatedAndNot) {
  INFER_SKIP_WITHOUT_GPU();
  const int64_t tokens = 7, width = 300;
  for (const bool gated : {false, true}) {
    for (const cuda::Activation act :
         {cuda::Activation::kGelu, cuda::Activation::kGeluTanh, cuda::Activation::kSilu}) {
      SCOPED_TRACE(::testing::Message() << "gated " << gated << " act " << static_cast<int>(act));
      const int64_t cols = gated ? 2 * width : width;
      const std::vector<float> y = Random(tokens * cols, 12, -4, 4), bias = Random(cols, 13);
      DeviceArray<uint16_t> d_y(y.size());
      DeviceArray<float> d_bias(cols);
      INFER_ASSERT_CUDA(d_y.Upload(Halves(y)));
      INFER_ASSERT_CUDA(d_bias.Upload(bias));
      INFER_ASSERT_CUDA(cuda::LaunchActivation(nullptr, reinterpret_cast<__half*>(d_y.get()),
                                               d_bias.get(), tokens, width, act, gated));
      INFER_ASSERT_CUDA(cudaDeviceSynchronize());
      std::vector<uint16_t> got;
      INFER_ASSERT_CUDA(d_y.Download(&got));
      std::vector<double> want = Doubles(Halves(y));
      for (int64_t r = 0; r < tokens; ++r) {
        for (int64_t j = 0; j < width; ++j) {
          const double v = want[r * cols + j] + bias[j];
          double a =
              act == cuda::Activation::kGelu ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
              : act == cuda::Activation::kGeluTanh
                  ? 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                  : v / (1 + std::exp(-v));
          if (gated) a *= want[r * cols + width + j] + bias[width + j];
          want[r * cols + j] = a;
        }
      }
      ExpectAllNear(Doubles(got), want);
    }
  }
}

TEST(TransformerCudaKernelsTest, LastTokenPoolAndFp8Codes) {
  INFER_SKIP_WITHOUT_GPU();
  const int64_t hidden = 40;
  const std::vector<int32_t> offsets = {0, 2, 2, 5};
  const std::vector<float> x = Random(5 * hidden, 14, -2, 2);
  DeviceArray<uint16_t> d_x(x.size());
  DeviceArray<int32_t> d_offsets(offsets.size());
  DeviceArray<float> out(3 * hidden);
  INFER_ASSERT_CUDA(d_x.Upload(Halves(x)));
  INFER_ASSERT_CUDA(d_offsets.Upload(offsets));
  INFER_ASSERT_CUDA(cuda::LaunchLastTokenPool(nullptr, reinterpret_cast<const __half*>(d_x.get()),
                                              d_offsets.get(), 3, hidden, true, out.get()));
  INFER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> got;
  INFER_ASSERT_CUDA(out.Download(&got));
  const std::vector<double> xs = Doubles(Halves(x));
  for (const auto& [row, token] : {std::pair{0, 1}, std::pair{2, 4}}) {
    double norm = 0;
    for (int64_t j = 0; j < hidden; ++j) norm += xs[token * hidden + j] * xs[token * hidden + j];
    for (int64_t j = 0; j < hidden; ++j) {
      EXPECT_NEAR(got[row * hidden + j], xs[token * hidden + j] / std::sqrt(norm), 1e-5);
    }
  }
  for (int64_t j = 0; j < hidden; ++j) EXPECT_EQ(got[hidden + j], 0.0f);  // the empty row

  // FP8: the device's codes and scales are the host's for the same values
  // (a row stride past the width, a zero row, a row of mixed magnitudes).
  const int64_t rows = 3, cols = 64, ld = 80;
  std::vector<float> a = Random(rows * ld, 15, -30, 30);
  for (int64_t j = 0; j < ld; ++j) a[ld + j] = 0.0f;
  std::vector<float> packed(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      packed[r * cols + j] = HalfToFloat(FloatToHalf(a[r * ld + j]));
    }
  }
  std::vector<uint8_t> host_codes;
  std::vector<float> host_scales;
  cuda::QuantizeRowsFp8Host(packed, rows, cols, &host_codes, &host_scales);
  DeviceArray<uint16_t> d_a(a.size());
  DeviceArray<uint8_t> codes(rows * cols);
  DeviceArray<float> scales(rows);
  INFER_ASSERT_CUDA(d_a.Upload(Halves(a)));
  INFER_ASSERT_CUDA(cuda::LaunchQuantizeRowsFp8(nullptr, reinterpret_cast<const __half*>(d_a.get()),
                                                rows, cols, ld, codes.get(), scales.get()));
  INFER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> got_codes;
  std::vector<float> got_scales;
  INFER_ASSERT_CUDA(codes.Download(&got_codes));
  INFER_ASSERT_CUDA(scales.Download(&got_scales));
  EXPECT_EQ(got_codes, host_codes);
  EXPECT_EQ(got_scales, host_scales);
  EXPECT_EQ(host_scales[1], 1.0f);  // the zero row
}

}  // namespace
}  // namespace infer
