// The BERT encoder's element-wise CUDA kernels (bert_cuda_kernels.cuh)
// against double-precision references on the host, on random inputs, on
// every path of each launcher: LayerNorm in registers with one warp per row
// (hidden <= 512, a multiple of 8) or one block per row (up to 8192), and the
// scalar fallback (hidden not a multiple of 8, above 8192, or a misaligned
// pointer); GELU with 16-byte or scalar accesses, a grid that walks its row
// groups with a stride, a wide row; embedding LayerNorm with repeated ids and
// positions; mean and CLS pooling with an empty sequence; replay from a
// captured CUDA graph. Every output buffer has sentinels around it that must
// survive. The argument checks run without a GPU.
//
// Tolerances: the kernels compute in FP32 and round the result to FP16 once,
// which is off by at most half an FP16 ulp, 2^-11 ~ 4.9e-4 of the value;
// kRelTolerance = 2e-3 leaves room for the FP32 arithmetic (sums over up to
// 8200 elements, rsqrtf, erff, all ~1e-6 relative) and kAbsTolerance = 1e-4
// covers outputs near zero (FP16 subnormals, and 1 + erf(v / sqrt 2)
// cancelling in FP32 for v near -4, ~1e-7 absolute). The pooling output is
// FP32 with FP32 sums: 1e-5 relative, 1e-6 absolute.
#include "models/bert/bert_cuda_kernels.cuh"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "models/half.h"
#include "runtime/device.h"
#include "tests/testing/cuda_arrays.h"

namespace infer {
namespace {

using ::infer::testing::DeviceArray;

constexpr double kRelTolerance = 2e-3;
constexpr double kAbsTolerance = 1e-4;
// FP16 -2.0, compared bit for bit: a stray write would have to round to exactly this.
constexpr uint16_t kSentinel = 0xC000;
constexpr int64_t kGuard = 16;  // sentinel elements after (and, where used, before) an output
constexpr float kEps = 1e-12f;  // BERT's layer_norm_eps

__half* AsHalf(uint16_t* p) { return reinterpret_cast<__half*>(p); }
const __half* AsHalf(const uint16_t* p) { return reinterpret_cast<const __half*>(p); }

std::vector<float> Uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<uint16_t> UniformHalf(size_t n, float lo, float hi, std::mt19937& rng) {
  std::vector<uint16_t> v(n);
  std::uniform_real_distribution<float> d(lo, hi);
  for (uint16_t& x : v) x = FloatToHalf(d(rng));
  return v;
}

double H(uint16_t h) { return static_cast<double>(HalfToFloat(h)); }

// got[begin + i] (FP16 bits) near want[i] for every i; `width` names the
// first bad element's row and column.
void ExpectHalfsNear(const std::vector<uint16_t>& got, int64_t begin,
                     const std::vector<double>& want, int64_t width) {
  ASSERT_GE(static_cast<int64_t>(got.size()), begin + static_cast<int64_t>(want.size()));
  int64_t bad = 0, first_bad = -1;
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = H(got[begin + i]);
    const double error = std::abs(g - want[i]);
    if (!(error <= kRelTolerance * std::abs(want[i]) + kAbsTolerance)) {
      if (bad++ == 0) first_bad = static_cast<int64_t>(i);
    }
    if (!(error <= worst)) worst = error;
  }
  EXPECT_EQ(bad, 0) << "first at row " << first_bad / width << ", column " << first_bad % width
                    << ": got " << (bad ? H(got[begin + first_bad]) : 0.0) << ", want "
                    << (bad ? want[first_bad] : 0.0) << "; largest error " << worst;
}

// got[begin, end) all equal to kSentinel.
void ExpectSentinels(const std::vector<uint16_t>& got, int64_t begin, int64_t end,
                     const char* where) {
  for (int64_t i = begin; i < end; ++i) {
    ASSERT_EQ(got[i], kSentinel) << "written " << where << " at element " << i;
  }
}

// LayerNorm of each row of `rows` ([tokens, hidden], double), as the
// contract defines it.
std::vector<double> LayerNormReference(const std::vector<double>& rows, int64_t hidden,
                                       const std::vector<float>& gamma,
                                       const std::vector<float>& beta, float eps) {
  std::vector<double> out(rows.size());
  const int64_t tokens = static_cast<int64_t>(rows.size()) / hidden;
  for (int64_t r = 0; r < tokens; ++r) {
    const double* row = rows.data() + r * hidden;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < hidden; ++i) mean += row[i];
    mean /= static_cast<double>(hidden);
    for (int64_t i = 0; i < hidden; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(hidden);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t i = 0; i < hidden; ++i) {
      out[r * hidden + i] = (row[i] - mean) * inv * gamma[i] + beta[i];
    }
  }
  return out;
}

// ---- Bias + residual LayerNorm ------------------------------------------------

struct ResidualCase {
  int64_t tokens, hidden;
  int64_t x_offset = 0;     // halves before x in its buffer (4: misaligned by 8 bytes)
  int64_t bias_offset = 0;  // floats before bias in its buffer
};

void RunResidual(const ResidualCase& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "tokens " << c.tokens << ", hidden " << c.hidden << ", x offset " << c.x_offset
               << ", bias offset " << c.bias_offset);
  const int64_t n = c.tokens * c.hidden;
  std::mt19937 rng(seed);
  // x: a per-row offset in [-8, 8] plus noise in [-1, 1], so that a row's
  // mean is large against its spread (E[x^2] - E[x]^2 would lose it).
  std::vector<uint16_t> x_host(c.x_offset + n + kGuard, kSentinel);
  std::uniform_real_distribution<float> offset(-8.0f, 8.0f), noise(-1.0f, 1.0f);
  for (int64_t r = 0; r < c.tokens; ++r) {
    const float o = offset(rng);
    for (int64_t i = 0; i < c.hidden; ++i) {
      x_host[c.x_offset + r * c.hidden + i] = FloatToHalf(o + noise(rng));
    }
  }
  const std::vector<uint16_t> y_host = UniformHalf(n, -1.0f, 1.0f, rng);
  std::vector<float> bias_host(c.bias_offset + c.hidden);
  const std::vector<float> bias_values = Uniform(c.hidden, -0.5f, 0.5f, rng);
  std::copy(bias_values.begin(), bias_values.end(), bias_host.begin() + c.bias_offset);
  const std::vector<float> gamma = Uniform(c.hidden, 0.5f, 1.5f, rng);
  const std::vector<float> beta = Uniform(c.hidden, -0.5f, 0.5f, rng);

  std::vector<double> rows(n);
  for (int64_t i = 0; i < n; ++i) {
    rows[i] = H(x_host[c.x_offset + i]) + H(y_host[i]) + bias_values[i % c.hidden];
  }
  const std::vector<double> want = LayerNormReference(rows, c.hidden, gamma, beta, kEps);

  DeviceArray<uint16_t> x(x_host.size()), y(y_host.size());
  DeviceArray<float> bias(bias_host.size()), g(gamma.size()), b(beta.size());
  INFER_ASSERT_CUDA(x.Upload(x_host));
  INFER_ASSERT_CUDA(y.Upload(y_host));
  INFER_ASSERT_CUDA(bias.Upload(bias_host));
  INFER_ASSERT_CUDA(g.Upload(gamma));
  INFER_ASSERT_CUDA(b.Upload(beta));
  INFER_ASSERT_CUDA(cuda::LaunchBiasResidualLayerNorm(nullptr, AsHalf(x.get()) + c.x_offset,
                                                      AsHalf(y.get()), bias.get() + c.bias_offset,
                                                      g.get(), b.get(), kEps, c.tokens, c.hidden));
  INFER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got;
  INFER_ASSERT_CUDA(x.Download(&got));
  ExpectSentinels(got, 0, c.x_offset, "before x");
  ExpectHalfsNear(got, c.x_offset, want, c.hidden);
  ExpectSentinels(got, c.x_offset + n, static_cast<int64_t>(got.size()), "past the last token");
}

// The hidden sizes in use: 384 (a warp per row), 768 and 1024 (a block per
// row: 96 and 128 threads of one chunk each); token counts on and off the 4
// rows of a warp-per-row block.
TEST(BiasResidualLayerNormTest, HiddenSizesInUse) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (int64_t hidden : {384, 768, 1024}) {
    for (int64_t tokens : {1, 5, 8, 67}) RunResidual({tokens, hidden}, seed++);
  }
}

// A warp per row (hidden <= 512) with one or two chunks per lane, the last
// one full or partly filled.
TEST(BiasResidualLayerNormTest, WarpPerRow) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 51;
  for (int64_t hidden : {8, 256, 264, 512}) {
    for (int64_t tokens : {1, 6}) RunResidual({tokens, hidden}, seed++);
  }
}

// A block per row, 512 < hidden <= 8192: a partly used last warp (520,
// 1032), one to four chunks per thread (2048, 4104, 8192).
TEST(BiasResidualLayerNormTest, BlockPerRow) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 101;
  for (int64_t hidden : {520, 1032, 2048, 4104, 8192}) {
    for (int64_t tokens : {1, 3, 17}) RunResidual({tokens, hidden}, seed++);
  }
}

// The scalar kernel: hidden not a multiple of 8, above 8192, or a misaligned
// pointer.
TEST(BiasResidualLayerNormTest, ScalarFallback) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 201;
  for (int64_t hidden : {100, 7, 8200}) {
    for (int64_t tokens : {1, 5, 13}) RunResidual({tokens, hidden}, seed++);
  }
  RunResidual({9, 768, /*x_offset=*/4}, seed++);
  RunResidual({9, 768, /*x_offset=*/0, /*bias_offset=*/2}, seed++);
}

// ---- Embedding LayerNorm ------------------------------------------------------

void RunEmbed(int64_t tokens, int64_t hidden, bool with_types, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "tokens " << tokens << ", hidden " << hidden
                                    << (with_types ? ", types 0 and 1" : ", no types"));
  constexpr int64_t kVocab = 37, kPositions = 20;
  std::mt19937 rng(seed);
  const std::vector<uint16_t> word = UniformHalf(kVocab * hidden, -1.0f, 1.0f, rng);
  const std::vector<uint16_t> position = UniformHalf(kPositions * hidden, -0.5f, 0.5f, rng);
  const std::vector<uint16_t> token_type = UniformHalf(2 * hidden, -0.2f, 0.2f, rng);
  const std::vector<float> gamma = Uniform(hidden, 0.5f, 1.5f, rng);
  const std::vector<float> beta = Uniform(hidden, -0.5f, 0.5f, rng);
  // Ids from 5 words (repeated), and the largest id; positions repeating;
  // types 0 and 1 (all 0 when !with_types: no types given).
  std::vector<int32_t> ids(tokens), positions(tokens), types(tokens);
  for (int64_t r = 0; r < tokens; ++r) {
    ids[r] = r == tokens - 1 ? static_cast<int32_t>(kVocab - 1) : static_cast<int32_t>(rng() % 5);
    positions[r] = static_cast<int32_t>((r * 3) % kPositions);
    types[r] = with_types ? static_cast<int32_t>(r % 3 == 1) : 0;
  }
  std::vector<double> rows(tokens * hidden);
  for (int64_t r = 0; r < tokens; ++r) {
    for (int64_t i = 0; i < hidden; ++i) {
      rows[r * hidden + i] = H(word[ids[r] * hidden + i]) + H(position[positions[r] * hidden + i]) +
                             H(token_type[types[r] * hidden + i]);
    }
  }
  const std::vector<double> want = LayerNormReference(rows, hidden, gamma, beta, kEps);

  DeviceArray<uint16_t> w(word.size()), p(position.size()), tt(token_type.size());
  DeviceArray<uint16_t> x(tokens * hidden + kGuard);
  DeviceArray<float> g(gamma.size()), b(beta.size());
  DeviceArray<int32_t> id(ids.size()), pos(positions.size()), ty(types.size());
  INFER_ASSERT_CUDA(ty.Upload(types));
  INFER_ASSERT_CUDA(w.Upload(word));
  INFER_ASSERT_CUDA(p.Upload(position));
  INFER_ASSERT_CUDA(tt.Upload(token_type));
  INFER_ASSERT_CUDA(g.Upload(gamma));
  INFER_ASSERT_CUDA(b.Upload(beta));
  INFER_ASSERT_CUDA(id.Upload(ids));
  INFER_ASSERT_CUDA(pos.Upload(positions));
  INFER_ASSERT_CUDA(x.Upload(std::vector<uint16_t>(tokens * hidden + kGuard, kSentinel)));
  INFER_ASSERT_CUDA(cuda::LaunchEmbedLayerNorm(
      nullptr, id.get(), pos.get(), with_types ? ty.get() : nullptr, AsHalf(w.get()),
      AsHalf(p.get()), AsHalf(tt.get()), g.get(), b.get(), kEps, tokens, hidden, AsHalf(x.get())));
  INFER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got;
  INFER_ASSERT_CUDA(x.Download(&got));
  ExpectHalfsNear(got, 0, want, hidden);
  ExpectSentinels(got, tokens * hidden, static_cast<int64_t>(got.size()), "past the last token");
}

TEST(EmbedLayerNormTest, MatchesReferenceOnEveryPath) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 301;
  // Warp per row, block per row, scalar (not a multiple of 8; above 8192).
  for (int64_t hidden : {384, 264, 768, 1024, 1032, 100, 8200}) {
    for (int64_t tokens : {1, 7, 30}) {
      for (bool with_types : {false, true}) RunEmbed(tokens, hidden, with_types, seed++);
    }
  }
}

// ---- Bias + GELU --------------------------------------------------------------

struct GeluCase {
  int64_t tokens, width;
  int64_t y_offset = 0;  // halves before y in its buffer (1: misaligned)
};

void RunGelu(const GeluCase& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "tokens " << c.tokens << ", width " << c.width << ", y offset " << c.y_offset);
  const int64_t n = c.tokens * c.width;
  std::mt19937 rng(seed);
  std::vector<uint16_t> y_host(c.y_offset + n + kGuard, kSentinel);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);  // the tails of erf too
  for (int64_t i = 0; i < n; ++i) y_host[c.y_offset + i] = FloatToHalf(d(rng));
  const std::vector<float> bias_host = Uniform(c.width, -0.5f, 0.5f, rng);
  std::vector<double> want(n);
  for (int64_t r = 0, i = 0; r < c.tokens; ++r) {
    for (int64_t col = 0; col < c.width; ++col, ++i) {
      const double v = H(y_host[c.y_offset + i]) + bias_host[col];
      want[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    }
  }
  DeviceArray<uint16_t> y(y_host.size());
  DeviceArray<float> bias(bias_host.size());
  INFER_ASSERT_CUDA(y.Upload(y_host));
  INFER_ASSERT_CUDA(bias.Upload(bias_host));
  INFER_ASSERT_CUDA(
      cuda::LaunchBiasGelu(nullptr, AsHalf(y.get()) + c.y_offset, bias.get(), c.tokens, c.width));
  INFER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got;
  INFER_ASSERT_CUDA(y.Download(&got));
  ExpectSentinels(got, 0, c.y_offset, "before y");
  ExpectHalfsNear(got, c.y_offset, want, c.width);
  ExpectSentinels(got, c.y_offset + n, static_cast<int64_t>(got.size()), "past the last token");
}

TEST(BiasGeluTest, SixteenByteAccesses) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 401;
  for (int64_t width : {1536, 3072, 8, 16384}) {
    for (int64_t tokens : {1, 7, 33}) RunGelu({tokens, width}, seed++);
  }
}

TEST(BiasGeluTest, ScalarFallback) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 501;
  for (int64_t width : {1001, 1, 3}) {
    for (int64_t tokens : {1, 7, 33}) RunGelu({tokens, width}, seed++);
  }
  RunGelu({5, 3072, /*y_offset=*/1}, seed++);  // misaligned: scalar accesses
}

// More row groups than gridDim.y (65535) holds: the grid-stride loop over
// rows, on both paths (width 8: 8 row groups of 4 rows per block).
TEST(BiasGeluTest, GridStrideOverRows) {
  INFER_SKIP_WITHOUT_GPU();
  RunGelu({(int64_t{1} << 21) + 4099, 8}, 601);
  RunGelu({(int64_t{1} << 21) + 4099, 1}, 602);
}

// ---- Pooling ------------------------------------------------------------------

void RunPool(int64_t hidden, bool cls, bool normalize, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "hidden " << hidden << ", cls " << cls << ", normalize " << normalize);
  const std::vector<int32_t> offsets = {0, 3, 3, 10, 11, 11};  // rows 1 and 4 empty
  const int64_t rows = static_cast<int64_t>(offsets.size()) - 1, tokens = offsets.back();
  std::mt19937 rng(seed);
  const std::vector<uint16_t> x_host = UniformHalf(tokens * hidden, -2.0f, 2.0f, rng);
  std::vector<double> want(rows * hidden, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t begin = offsets[r], n = offsets[r + 1] - begin;
    const int64_t count = cls ? std::min<int64_t>(n, 1) : n;
    double sq = 0.0;
    for (int64_t d = 0; d < hidden; ++d) {
      double acc = 0.0;
      for (int64_t t = 0; t < count; ++t) acc += H(x_host[(begin + t) * hidden + d]);
      if (count > 0) acc /= static_cast<double>(count);
      want[r * hidden + d] = acc;
      sq += acc * acc;
    }
    if (normalize && sq > 0.0) {
      for (int64_t d = 0; d < hidden; ++d) want[r * hidden + d] /= std::sqrt(sq);
    }
  }
  DeviceArray<uint16_t> x(x_host.size());
  DeviceArray<int32_t> off(offsets.size());
  DeviceArray<float> out(rows * hidden + kGuard);
  INFER_ASSERT_CUDA(x.Upload(x_host));
  INFER_ASSERT_CUDA(off.Upload(offsets));
  INFER_ASSERT_CUDA(cudaMemset(out.get(), 0xFF, (rows * hidden + kGuard) * sizeof(float)));
  INFER_ASSERT_CUDA(cuda::LaunchPackedPool(nullptr, AsHalf(x.get()), off.get(), rows, hidden, cls,
                                           normalize, out.get()));
  INFER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> got;
  INFER_ASSERT_CUDA(out.Download(&got));
  for (int64_t i = 0; i < rows * hidden; ++i) {
    ASSERT_LE(std::abs(got[i] - want[i]), 1e-5 * std::abs(want[i]) + 1e-6)
        << "row " << i / hidden << ", column " << i % hidden << ": got " << got[i] << ", want "
        << want[i];
  }
  for (int64_t i = rows * hidden; i < rows * hidden + kGuard; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &got[i], sizeof(bits));
    ASSERT_EQ(bits, 0xFFFFFFFFu) << "written past the last row at element " << i;
  }
}

TEST(PackedPoolTest, MeanAndClsWithEmptySequences) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 701;
  for (int64_t hidden : {384, 100}) {
    for (bool cls : {false, true}) {
      for (bool normalize : {false, true}) RunPool(hidden, cls, normalize, seed++);
    }
  }
}

// ---- Graph capture ------------------------------------------------------------

// The launchers enqueue on the given stream alone, without syncs or
// allocations: a capture of GELU then LayerNorm replays to the same results.
TEST(BertCudaKernelsTest, ReplayFromACapturedGraph) {
  INFER_SKIP_WITHOUT_GPU();
  constexpr int64_t kTokens = 21, kHidden = 768, kWidth = 3072;
  std::mt19937 rng(801);
  const std::vector<uint16_t> x_host = UniformHalf(kTokens * kHidden, -1.0f, 1.0f, rng);
  const std::vector<uint16_t> y_host = UniformHalf(kTokens * kHidden, -1.0f, 1.0f, rng);
  const std::vector<uint16_t> h_host = UniformHalf(kTokens * kWidth, -3.0f, 3.0f, rng);
  const std::vector<float> bias = Uniform(kHidden, -0.5f, 0.5f, rng);
  const std::vector<float> gelu_bias = Uniform(kWidth, -0.5f, 0.5f, rng);
  const std::vector<float> gamma = Uniform(kHidden, 0.5f, 1.5f, rng);
  const std::vector<float> beta = Uniform(kHidden, -0.5f, 0.5f, rng);

  std::vector<double> rows(kTokens * kHidden), want_h(kTokens * kWidth);
  for (int64_t i = 0; i < kTokens * kHidden; ++i) {
    rows[i] = H(x_host[i]) + H(y_host[i]) + bias[i % kHidden];
  }
  const std::vector<double> want_x = LayerNormReference(rows, kHidden, gamma, beta, kEps);
  for (int64_t i = 0; i < kTokens * kWidth; ++i) {
    const double v = H(h_host[i]) + gelu_bias[i % kWidth];
    want_h[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  }

  DeviceArray<uint16_t> x(x_host.size()), y(y_host.size()), h(h_host.size());
  DeviceArray<float> b(bias.size()), gb(gelu_bias.size()), g(gamma.size()), be(beta.size());
  INFER_ASSERT_CUDA(y.Upload(y_host));
  INFER_ASSERT_CUDA(b.Upload(bias));
  INFER_ASSERT_CUDA(gb.Upload(gelu_bias));
  INFER_ASSERT_CUDA(g.Upload(gamma));
  INFER_ASSERT_CUDA(be.Upload(beta));

  cudaStream_t stream = nullptr;
  INFER_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  INFER_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const cudaError_t gelu = cuda::LaunchBiasGelu(stream, AsHalf(h.get()), gb.get(), kTokens, kWidth);
  const cudaError_t norm = cuda::LaunchBiasResidualLayerNorm(
      stream, AsHalf(x.get()), AsHalf(y.get()), b.get(), g.get(), be.get(), kEps, kTokens, kHidden);
  const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
  EXPECT_EQ(gelu, cudaSuccess) << cudaGetErrorString(gelu);
  EXPECT_EQ(norm, cudaSuccess) << cudaGetErrorString(norm);
  ASSERT_EQ(captured, cudaSuccess) << cudaGetErrorString(captured);
  cudaGraphExec_t exec = nullptr;
  INFER_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    SCOPED_TRACE(::testing::Message() << "replay " << replay);
    INFER_ASSERT_CUDA(x.Upload(x_host));  // both kernels work in place
    INFER_ASSERT_CUDA(h.Upload(h_host));
    INFER_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
    INFER_ASSERT_CUDA(cudaStreamSynchronize(stream));
    std::vector<uint16_t> got;
    INFER_ASSERT_CUDA(x.Download(&got));
    ExpectHalfsNear(got, 0, want_x, kHidden);
    INFER_ASSERT_CUDA(h.Download(&got));
    ExpectHalfsNear(got, 0, want_h, kWidth);
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// ---- Without a GPU --------------------------------------------------------------

// Zero-size input: cudaSuccess without launching (null pointers are never
// touched).
TEST(BertCudaKernelsTest, NothingToDoIsSuccessWithoutLaunching) {
  EXPECT_EQ(cuda::LaunchBiasResidualLayerNorm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                              kEps, 0, 768),
            cudaSuccess);
  EXPECT_EQ(cuda::LaunchBiasResidualLayerNorm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                              kEps, 5, 0),
            cudaSuccess);
  EXPECT_EQ(cuda::LaunchEmbedLayerNorm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                       nullptr, nullptr, nullptr, kEps, 0, 768, nullptr),
            cudaSuccess);
  EXPECT_EQ(cuda::LaunchBiasGelu(nullptr, nullptr, nullptr, 0, 3072), cudaSuccess);
  EXPECT_EQ(cuda::LaunchBiasGelu(nullptr, nullptr, nullptr, 16, 0), cudaSuccess);
  EXPECT_EQ(cuda::LaunchPackedPool(nullptr, nullptr, nullptr, 0, 768, false, true, nullptr),
            cudaSuccess);
  EXPECT_EQ(cuda::LaunchPackedPool(nullptr, nullptr, nullptr, 3, 0, true, false, nullptr),
            cudaSuccess);
}

TEST(BertCudaKernelsTest, RejectsBadShapesWithoutLaunching) {
  EXPECT_EQ(cuda::LaunchBiasResidualLayerNorm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                              kEps, -1, 768),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchBiasResidualLayerNorm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                              kEps, 4, int64_t{1} << 20),
            cudaErrorInvalidValue);
  EXPECT_EQ(
      cuda::LaunchEmbedLayerNorm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                 nullptr, nullptr, kEps, 4, int64_t{1} << 20, nullptr),
      cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchBiasGelu(nullptr, nullptr, nullptr, -1, 3072), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchBiasGelu(nullptr, nullptr, nullptr, 16, -8), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchPackedPool(nullptr, nullptr, nullptr, -1, 768, false, true, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchPackedPool(nullptr, nullptr, nullptr, int64_t{1} << 31, 768, false, true,
                                   nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace infer
