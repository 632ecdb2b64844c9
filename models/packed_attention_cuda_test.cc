// LaunchPackedAttention against a double-precision reference on the host:
// ragged packed batches (empty rows, trailing empty rows, lengths on and
// around the 32-key halves, the 64-key tiles and both query tiles: 64, and
// 128 for head size 32 when max_len > 128), every supported head size, a
// sharp softmax whose maximum moves between key tiles, negative and zero
// scales, and replay from a captured CUDA graph with the offsets changed in
// place. LaunchPackedAttentionMasked likewise: grouped KV heads (down to one),
// causal and sliding-window masks (windows shorter and longer than a key
// tile, alone and with causality), MPNet-style relative biases. The argument
// checks run without a GPU.
#include "models/packed_attention_cuda.cuh"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "models/half.h"
#include "runtime/device.h"
#include "tests/testing/cuda_arrays.h"

namespace infer {
namespace {

using ::infer::testing::DeviceArray;

constexpr uint16_t kSentinel = 0xFFFF;  // an FP16 NaN: marks what the kernel must not write
constexpr double kTolerance = 2e-3;     // absolute, for outputs of magnitude ~1

// One packed batch: inputs in host memory.
struct Batch {
  std::vector<int32_t> lengths;  // per row; 0 for an empty row
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0.0f;
  std::vector<int32_t> offsets;  // [rows + 1]
  std::vector<uint16_t> qkv;     // FP16 bits, [tokens, hidden + 2 * kv_width]
  std::vector<float> bias;       // [hidden + 2 * kv_width]
  cuda::AttentionMask mask;      // its relative_bias points into `relative`
  std::vector<float> relative;   // [heads, 2 * relative_span - 1], or empty

  int64_t rows() const { return static_cast<int64_t>(lengths.size()); }
  int64_t tokens() const { return offsets.back(); }
  int64_t hidden() const { return heads * head_dim; }
  int64_t kv_width() const { return kv_heads * head_dim; }
  int64_t stride() const { return hidden() + 2 * kv_width(); }
  int64_t longest() const { return *std::max_element(lengths.begin(), lengths.end()); }
};

std::vector<int32_t> Offsets(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> offsets = {0};
  for (int32_t n : lengths) offsets.push_back(offsets.back() + n);
  return offsets;
}

// Random qkv in [-1, 1] and bias in [-0.5, 0.5]; scale = sharpness / sqrt(D).
// kv_heads 0: as many as heads.
Batch MakeBatch(std::vector<int32_t> lengths, int64_t heads, int64_t head_dim, float sharpness,
                uint32_t seed, int64_t kv_heads = 0) {
  Batch b;
  b.lengths = std::move(lengths);
  b.heads = heads;
  b.kv_heads = kv_heads > 0 ? kv_heads : heads;
  b.head_dim = head_dim;
  b.scale = sharpness / std::sqrt(static_cast<float>(head_dim));
  b.offsets = Offsets(b.lengths);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  b.qkv.resize(b.tokens() * b.stride());
  for (uint16_t& x : b.qkv) x = FloatToHalf(unit(rng));
  b.bias.resize(b.stride());
  for (float& x : b.bias) x = 0.5f * unit(rng);
  return b;
}

// ctx [tokens, hidden] in double from the operands as the contract defines
// them: each query element plus its bias in FP32, rounded to FP16; keys and
// values plus their bias exactly (the kernel drops the key bias, which shifts
// a query row's logits by one constant, and adds the value bias after the
// weighted sum).
// With b.mask: masked keys get weight 0, and the relative bias of key j for
// query i is added to the scaled score.
std::vector<double> Reference(const Batch& b) {
  const int64_t hidden = b.hidden(), dh = b.head_dim, group = b.heads / b.kv_heads;
  const cuda::AttentionMask& m = b.mask;
  auto operand = [&](int64_t token, int64_t col) {
    const float x = HalfToFloat(b.qkv[token * b.stride() + col]);
    if (col >= hidden) return static_cast<double>(x) + b.bias[col];
    return static_cast<double>(HalfToFloat(FloatToHalf(x + b.bias[col])));
  };
  std::vector<double> ctx(b.tokens() * hidden, 0.0);
  for (int64_t r = 0; r < b.rows(); ++r) {
    const int64_t begin = b.offsets[r], n = b.lengths[r];
    for (int64_t head = 0; head < b.heads; ++head) {
      const int64_t kvh = head / group;
      const int64_t qc = head * dh, kc = hidden + kvh * dh, vc = hidden + b.kv_width() + kvh * dh;
      for (int64_t i = 0; i < n; ++i) {
        std::vector<double> s(n);
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          const bool keep = (!m.causal || j <= i) && (m.window == 0 || std::abs(j - i) <= m.window);
          if (!keep) {
            s[j] = -INFINITY;
            continue;
          }
          double dot = 0.0;
          for (int64_t d = 0; d < dh; ++d) {
            dot += operand(begin + i, qc + d) * operand(begin + j, kc + d);
          }
          s[j] = dot * b.scale;
          if (!b.relative.empty()) {
            s[j] += b.relative[head * (2 * m.relative_span - 1) + j - i + m.relative_span - 1];
          }
          mx = std::max(mx, s[j]);
        }
        double sum = 0.0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t d = 0; d < dh; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < n; ++j) acc += s[j] * operand(begin + j, vc + d);
          ctx[(begin + i) * hidden + head * dh + d] = acc / sum;
        }
      }
    }
  }
  return ctx;
}

// Every element of `got` (FP16 bits, [tokens, hidden]) within kTolerance of
// `want`; NaN (a token the kernel skipped) fails.
void ExpectNear(const std::vector<uint16_t>& got, const std::vector<double>& want, int64_t hidden) {
  ASSERT_GE(got.size(), want.size());
  double max_error = 0.0;
  int64_t bad = 0, first_bad = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = std::abs(static_cast<double>(HalfToFloat(got[i])) - want[i]);
    if (!(error <= kTolerance)) {
      if (bad++ == 0) first_bad = static_cast<int64_t>(i);
    }
    if (error > max_error || std::isnan(error)) max_error = error;
  }
  EXPECT_EQ(bad, 0) << "first at token " << first_bad / hidden << ", column " << first_bad % hidden
                    << ": got " << HalfToFloat(got[first_bad]) << ", want " << want[first_bad];
  EXPECT_LT(max_error, kTolerance);
}

// A batch's kernel inputs on the device.
struct Inputs {
  explicit Inputs(const Batch& b)
      : qkv(b.qkv.size()), bias(b.bias.size()), offsets(b.offsets.size()) {}
  // Allocation status, then the three copies; the first error.
  cudaError_t Upload(const Batch& b) {
    for (cudaError_t e : {qkv.status(), bias.status(), offsets.status()}) {
      if (e != cudaSuccess) return e;
    }
    cudaError_t e = qkv.Upload(b.qkv);
    if (e == cudaSuccess) e = bias.Upload(b.bias);
    if (e == cudaSuccess) e = offsets.Upload(b.offsets);
    return e;
  }
  DeviceArray<uint16_t> qkv;
  DeviceArray<float> bias;
  DeviceArray<int32_t> offsets;
};

// Runs the kernel on `b` (grid sized from max_len, at least the longest row)
// and checks ctx against the reference, and that the guard row after the
// last token is untouched.
void RunAndCheck(const Batch& b, int64_t max_len, bool masked_entry = false) {
  const int64_t hidden = b.hidden(), tokens = b.tokens();
  Inputs in(b);
  DeviceArray<uint16_t> ctx((tokens + 1) * hidden);
  INFER_ASSERT_CUDA(in.Upload(b));
  INFER_ASSERT_CUDA(ctx.status());
  auto& [qkv, bias, offsets] = in;
  INFER_ASSERT_CUDA(cudaMemset(ctx.get(), 0xFF, (tokens + 1) * hidden * sizeof(uint16_t)));
  DeviceArray<float> relative(std::max<size_t>(b.relative.size(), 1));
  INFER_ASSERT_CUDA(relative.Upload(b.relative));
  cuda::AttentionMask mask = b.mask;
  mask.relative_bias = b.relative.empty() ? nullptr : relative.get();
  const auto* q = reinterpret_cast<const __half*>(qkv.get());
  auto* out = reinterpret_cast<__half*>(ctx.get());
  INFER_ASSERT_CUDA(
      masked_entry ? cuda::LaunchPackedAttentionMasked(nullptr, q, bias.get(), offsets.get(),
                                                       b.rows(), max_len, b.heads, b.kv_heads,
                                                       b.head_dim, b.scale, mask, out)
                   : cuda::LaunchPackedAttention(nullptr, q, bias.get(), offsets.get(), b.rows(),
                                                 max_len, b.heads, b.head_dim, b.scale, out));
  INFER_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got;
  INFER_ASSERT_CUDA(ctx.Download(&got));
  ExpectNear(got, Reference(b), hidden);
  for (int64_t i = tokens * hidden; i < (tokens + 1) * hidden; ++i) {
    ASSERT_EQ(got[i], kSentinel) << "wrote past the last token at column " << i % hidden;
  }
}

TEST(PackedAttentionTest, SupportsHeadDims32To128) {
  EXPECT_TRUE(cuda::PackedAttentionSupports(32));
  EXPECT_TRUE(cuda::PackedAttentionSupports(64));
  EXPECT_TRUE(cuda::PackedAttentionSupports(128));
  EXPECT_FALSE(cuda::PackedAttentionSupports(0));
  EXPECT_FALSE(cuda::PackedAttentionSupports(16));
  EXPECT_FALSE(cuda::PackedAttentionSupports(48));
  EXPECT_FALSE(cuda::PackedAttentionSupports(256));
}

// None of these launch, so they need no GPU.
TEST(PackedAttentionTest, RejectsBadArgumentsWithoutLaunching) {
  auto launch = [](int64_t rows, int64_t max_len, int64_t heads, int64_t head_dim,
                   const __half* qkv = nullptr) {
    return cuda::LaunchPackedAttention(nullptr, qkv, nullptr, nullptr, rows, max_len, heads,
                                       head_dim, 0.125f, nullptr);
  };
  EXPECT_EQ(launch(1, 1, 1, 48), cudaErrorInvalidValue);
  EXPECT_EQ(launch(1, 1, 1, 256), cudaErrorInvalidValue);
  EXPECT_EQ(launch(0, 0, 1, 256), cudaErrorInvalidValue);
  EXPECT_EQ(launch(1, 1, 0, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(-1, 1, 1, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(1, -1, 1, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(65536, 1, 1, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(1, 1, 65536, 64), cudaErrorInvalidValue);
  EXPECT_EQ(launch(1, int64_t{1} << 32, 1, 64), cudaErrorInvalidValue);
  alignas(16) static const uint16_t kBuffer[16] = {};
  EXPECT_EQ(launch(1, 1, 1, 64, reinterpret_cast<const __half*>(kBuffer + 1)),
            cudaErrorInvalidValue);
}

TEST(PackedAttentionTest, NothingToDoIsSuccessWithoutLaunching) {
  EXPECT_EQ(cuda::LaunchPackedAttention(nullptr, nullptr, nullptr, nullptr, 0, 16, 2, 64, 0.125f,
                                        nullptr),
            cudaSuccess);
  EXPECT_EQ(
      cuda::LaunchPackedAttention(nullptr, nullptr, nullptr, nullptr, 3, 0, 2, 64, 0.125f, nullptr),
      cudaSuccess);
}

TEST(PackedAttentionTest, MatchesReferenceOnRaggedBatches) {
  INFER_SKIP_WITHOUT_GPU();
  // Empty rows in the middle and at the end; lengths on and around the
  // 64-token tiles; one sequence spanning four key tiles.
  const std::vector<int32_t> lengths = {1, 7, 64, 65, 130, 0, 200, 0};
  struct Shape {
    int64_t heads, head_dim;
  };
  uint32_t seed = 1;
  for (const Shape& s : {Shape{4, 32}, Shape{3, 64}, Shape{2, 128}}) {
    SCOPED_TRACE(::testing::Message() << "heads " << s.heads << ", head_dim " << s.head_dim);
    const Batch b = MakeBatch(lengths, s.heads, s.head_dim, 2.5f, seed++);
    RunAndCheck(b, b.longest());
  }
}

// Short sentences (max_len 64): lengths on and around the 32-key halves a
// partial tile skips, one whole tile; a negative scale, and scale 0 (equal
// weights).
TEST(PackedAttentionTest, MatchesReferenceOnShortSequences) {
  INFER_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> lengths = {1, 16, 17, 31, 32, 33, 0, 48, 63, 64, 5, 0};
  struct Shape {
    int64_t heads, head_dim;
    float sharpness;
  };
  uint32_t seed = 41;
  for (const Shape& s : {Shape{4, 32, 2.5f}, Shape{3, 64, 2.5f}, Shape{2, 128, 2.5f},
                         Shape{2, 64, -3.0f}, Shape{2, 32, 0.0f}}) {
    SCOPED_TRACE(::testing::Message() << "heads " << s.heads << ", head_dim " << s.head_dim
                                      << ", sharpness " << s.sharpness);
    const Batch b = MakeBatch(lengths, s.heads, s.head_dim, s.sharpness, seed++);
    RunAndCheck(b, 64);
  }
}

// max_len > 128: for head size 32, 128-query blocks (two 16-row m-tiles per
// warp) while most rows are short: rows shorter than one m-tile, ending
// inside a warp's second m-tile, on and around 64 and 128 queries.
TEST(PackedAttentionTest, LargeQueryTileWithMostlyShortRows) {
  INFER_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> lengths = {3, 20, 0, 127, 9, 128, 129, 12, 0, 64, 65, 40, 0};
  uint32_t seed = 51;
  for (int64_t head_dim : {32, 64, 128}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim);
    const Batch b = MakeBatch(lengths, 2, head_dim, 2.5f, seed++);
    RunAndCheck(b, b.longest());
  }
}

TEST(PackedAttentionTest, GridLargerThanTheLongestSequence) {
  INFER_SKIP_WITHOUT_GPU();
  const Batch b = MakeBatch({33, 5, 0, 0}, 2, 64, 2.5f, 11);
  RunAndCheck(b, 300);  // blocks past every sequence's end exit at once
}

// Logits with a spread (standard deviation) of ~4.5: the running maximum moves between key tiles,
// so the rescaling of O and l decides the result.
TEST(PackedAttentionTest, SharpSoftmaxAcrossKeyTiles) {
  INFER_SKIP_WITHOUT_GPU();
  uint32_t seed = 21;
  for (int64_t head_dim : {32, 64, 128}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim);
    const Batch b = MakeBatch({300, 129, 2}, 2, head_dim, 12.0f, seed++);
    RunAndCheck(b, b.longest());
  }
}

// The general entry point: grouped KV heads, then masks and biases, on
// ragged batches reaching over several key tiles, every head size.
TEST(PackedAttentionMaskedTest, GroupedKvHeadsMatchTheReference) {
  INFER_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> lengths = {1, 7, 64, 65, 0, 200, 0};
  uint32_t seed = 61;
  for (int64_t head_dim : {32, 64, 128}) {
    for (int64_t kv_heads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << ", kv_heads " << kv_heads);
      RunAndCheck(MakeBatch(lengths, 4, head_dim, 2.5f, seed++, kv_heads), 200, true);
    }
  }
}

TEST(PackedAttentionMaskedTest, CausalAndWindowMasksMatchTheReference) {
  INFER_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> lengths = {1, 2, 63, 64, 65, 0, 130, 257, 0};
  struct Case {
    bool causal;
    int window;
  };
  uint32_t seed = 71;
  for (int64_t head_dim : {32, 64, 128}) {
    for (const Case& c : {Case{true, 0}, Case{false, 8}, Case{false, 64}, Case{false, 100},
                          Case{true, 5}, Case{true, 70}}) {
      SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << ", causal " << c.causal
                                        << ", window " << c.window);
      Batch b = MakeBatch(lengths, 4, head_dim, 6.0f, seed++, 2);
      b.mask.causal = c.causal;
      b.mask.window = c.window;
      RunAndCheck(b, b.longest(), true);
    }
  }
}

TEST(PackedAttentionMaskedTest, RelativeBiasMatchesTheReference) {
  INFER_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> lengths = {1, 30, 0, 64, 129};
  uint32_t seed = 81;
  for (int64_t head_dim : {32, 64, 128}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim);
    Batch b = MakeBatch(lengths, 3, head_dim, 2.5f, seed++);
    b.mask.relative_span = 130;
    b.relative.resize(b.heads * (2 * b.mask.relative_span - 1));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> bias(-2.0f, 2.0f);
    for (float& x : b.relative) x = bias(rng);
    RunAndCheck(b, b.longest(), true);
  }
}

TEST(PackedAttentionMaskedTest, RejectsBadArgumentsWithoutLaunching) {
  auto launch = [](int64_t heads, int64_t kv_heads, const cuda::AttentionMask& mask) {
    return cuda::LaunchPackedAttentionMasked(nullptr, nullptr, nullptr, nullptr, 1, 16, heads,
                                             kv_heads, 64, 0.125f, mask, nullptr);
  };
  EXPECT_EQ(launch(4, 3, {}), cudaErrorInvalidValue);  // heads not a multiple of kv_heads
  EXPECT_EQ(launch(4, 0, {}), cudaErrorInvalidValue);
  cuda::AttentionMask negative;
  negative.window = -1;
  EXPECT_EQ(launch(4, 4, negative), cudaErrorInvalidValue);
  static const float kTable[1] = {};
  cuda::AttentionMask short_span;
  short_span.relative_bias = kTable;
  short_span.relative_span = 15;  // below max_len 16
  EXPECT_EQ(launch(4, 4, short_span), cudaErrorInvalidValue);
}

// Captured once, replayed with the offsets rewritten in place (same tokens,
// other lengths, trailing empty rows): the graph reads them at run time.
TEST(PackedAttentionTest, ReplaysFromACapturedGraph) {
  INFER_SKIP_WITHOUT_GPU();
  Batch b = MakeBatch({30, 70, 0}, 2, 64, 2.5f, 31);
  const int64_t hidden = b.hidden(), tokens = b.tokens(), max_len = 128;
  Inputs in(b);
  DeviceArray<uint16_t> ctx(tokens * hidden);
  INFER_ASSERT_CUDA(in.Upload(b));
  INFER_ASSERT_CUDA(ctx.status());
  auto& [qkv, bias, offsets] = in;

  cudaStream_t stream = nullptr;
  INFER_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  INFER_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const cudaError_t launched = cuda::LaunchPackedAttention(
      stream, reinterpret_cast<const __half*>(qkv.get()), bias.get(), offsets.get(), b.rows(),
      max_len, b.heads, b.head_dim, b.scale, reinterpret_cast<__half*>(ctx.get()));
  const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
  EXPECT_EQ(launched, cudaSuccess) << cudaGetErrorString(launched);
  ASSERT_EQ(captured, cudaSuccess) << cudaGetErrorString(captured);
  cudaGraphExec_t exec = nullptr;
  INFER_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  for (const std::vector<int32_t>& lengths :
       {std::vector<int32_t>{30, 70, 0}, std::vector<int32_t>{100, 0, 0}}) {
    SCOPED_TRACE(::testing::Message() << "first length " << lengths[0]);
    b.lengths = lengths;
    b.offsets = Offsets(lengths);
    INFER_ASSERT_CUDA(offsets.Upload(b.offsets));
    INFER_ASSERT_CUDA(cudaMemset(ctx.get(), 0xFF, tokens * hidden * sizeof(uint16_t)));
    INFER_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
    INFER_ASSERT_CUDA(cudaStreamSynchronize(stream));
    std::vector<uint16_t> got;
    INFER_ASSERT_CUDA(ctx.Download(&got));
    ExpectNear(got, Reference(b), hidden);
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace infer
