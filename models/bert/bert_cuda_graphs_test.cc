// CUDA Graphs of the CUDA BERT encoder (models/bert/bert_cuda_graphs.h): the shape
// classes (no GPU needed), and on a GPU, a graph-replaying encoder against
// one launching kernel by kernel on the same weights. Covered: ragged batches
// with empty rows, every class's first batch (eager, then captured) and
// later ones (replayed with new contents), batches past max_tokens (eager),
// two streams replaying the shared buffers back to back, the bytes held, and
// the FFN's bias + GELU in cuBLASLt's epilogue against the GELU kernel.
#include "models/bert/bert_cuda_graphs.h"

#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_gen.h"
#include "models/transformer/encoder_cuda.h"
#include "models/transformer/load_encoder.h"
#include "runtime/compute_stream.h"
#include "tests/testing/cuda_arrays.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::DeviceArray;
using ::infer::testing::IsOk;
using ::infer::testing::TestDevice;

TEST(GraphClassTest, PowersOfTwoFromTheMinimumCappedAtTheMaximum) {
  EXPECT_EQ(GraphClass(1, 16, 2048), 16);
  EXPECT_EQ(GraphClass(16, 16, 2048), 16);
  EXPECT_EQ(GraphClass(17, 16, 2048), 32);
  EXPECT_EQ(GraphClass(1025, 16, 2048), 2048);
  EXPECT_EQ(GraphClass(2048, 16, 2048), 2048);
  EXPECT_EQ(GraphClass(2049, 16, 2048), 0);
  EXPECT_EQ(GraphClass(1, 1, 64), 1);
  EXPECT_EQ(GraphClass(3, 1, 64), 4);
  // A maximum that is no power of two is a class of its own.
  EXPECT_EQ(GraphClass(600, 16, 1000), 1000);
  EXPECT_EQ(GraphClass(1000, 16, 1000), 1000);
  EXPECT_EQ(GraphClass(500, 16, 1000), 512);
}

// One packed batch in device memory, and room for its embeddings.
class DeviceBatch {
 public:
  DeviceBatch(const std::vector<int>& lengths, int64_t vocab, std::mt19937* rng) {
    int64_t seq = 1;
    for (int n : lengths) seq = std::max<int64_t>(seq, n);
    const auto rows = static_cast<int64_t>(lengths.size());
    std::vector<int64_t> ids(rows * seq, 0), mask(rows * seq, 0);
    std::uniform_int_distribution<int64_t> id(1, vocab - 1);
    for (int64_t r = 0; r < rows; ++r) {
      for (int t = 0; t < lengths[r]; ++t) {
        ids[r * seq + t] = id(*rng);
        mask[r * seq + t] = 1;
      }
    }
    host_ = std::make_unique<PackedSequences>(ids.data(), mask.data(), rows, seq);
    const PackedSequencesView h = host_->view();
    const PackedLayout layout{h.rows, h.tokens};
    // The packed buffer is contiguous from h.ids: ids, positions, offsets.
    input_ = std::make_unique<DeviceArray<int32_t>>(layout.bytes() / sizeof(int32_t));
    ok_ = input_->Upload(std::vector<int32_t>(h.ids, h.ids + input_->size())) == cudaSuccess;
    view_ = layout.View(input_->get(), h.host_offsets, h.longest, h.width);
  }
  bool ok() const { return ok_; }
  const PackedSequencesView& view() const { return view_; }

 private:
  std::unique_ptr<PackedSequences> host_;
  std::unique_ptr<DeviceArray<int32_t>> input_;
  bool ok_ = false;
  PackedSequencesView view_;
};

class BertCudaGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    INFER_SKIP_WITHOUT_GPU();
    auto d = TestDevice::Create("cuda:0");
    ASSERT_THAT(d, IsOk());
    device_ = *std::move(d);
    dir_ = absl::StrCat(::testing::TempDir(), "/bert_cuda_graphs_test_", getpid());
    BertGenOptions g;
    g.config = *BertPreset("tiny");
    g.config.hidden_size = 128;  // head size 32
    g.config.num_attention_heads = 4;
    g.config.intermediate_size = 512;
    g.config.max_position_embeddings = 512;
    g.config.vocab_size = 1000;
    ASSERT_THAT(GenerateBertCheckpoint(dir_, g), IsOk());
    hidden_ = g.config.hidden_size;
    vocab_ = g.config.vocab_size;
    EncoderOptions o;
    o.graphs.enabled = false;
    auto eager = LoadEncoder(dir_, device_->context(), o);
    ASSERT_THAT(eager, IsOk());
    eager_ = *std::move(eager);
    o.graphs.enabled = true;
    o.graphs.max_tokens = kMaxTokens;
    auto graphed = LoadEncoder(dir_, device_->context(), o);
    ASSERT_THAT(graphed, IsOk());
    graphed_ = *std::move(graphed);
    for (ComputeStream* s : {&a_, &b_}) {
      auto made = ComputeStream::Create(device_->device.get(), device_->allocator.get());
      ASSERT_THAT(made, IsOk());
      *s = *std::move(made);
    }
  }

  const BertCudaGraphs& graphs() const {
    return *static_cast<const TransformerEncoderCuda&>(*graphed_).graphs();
  }

  // Enqueues `batch` on `stream` through `encoder` into a new output buffer.
  float* Enqueue(const TransformerEncoder& encoder, const DeviceBatch& batch, Stream* stream) {
    outputs_.push_back(std::make_unique<DeviceArray<float>>(batch.view().rows * hidden_));
    float* out = outputs_.back()->get();
    EXPECT_EQ(outputs_.back()->status(), cudaSuccess);
    EXPECT_THAT(encoder.Encode(stream, batch.view(), Pooling::kMean, true, out), IsOk());
    return out;
  }

  std::vector<float> Download(const float* out, int64_t rows) {
    EXPECT_THAT(device_->device->SynchronizeStream(a_.get()), IsOk());
    EXPECT_THAT(device_->device->SynchronizeStream(b_.get()), IsOk());
    std::vector<float> host(rows * hidden_);
    EXPECT_EQ(cudaMemcpy(host.data(), out, host.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

  // The graph-replaying encoder's embeddings equal the eager one's (FP16
  // activations; the padded GEMMs may pick other cuBLAS kernels, so not
  // bit for bit), and an empty row's is zero in both.
  void ExpectSame(const std::vector<float>& graphed, const std::vector<float>& eager,
                  const std::string& what) {
    ASSERT_EQ(graphed.size(), eager.size()) << what;
    for (size_t i = 0; i < graphed.size(); ++i) {
      ASSERT_TRUE(std::isfinite(graphed[i])) << what << " element " << i;
      ASSERT_NEAR(graphed[i], eager[i], 2e-3) << what << " element " << i;
    }
  }

  static constexpr int64_t kMaxTokens = 256;
  std::unique_ptr<TestDevice> device_;
  std::string dir_;
  int64_t hidden_ = 0, vocab_ = 0;
  std::unique_ptr<TransformerEncoder> eager_, graphed_;
  ComputeStream a_, b_;
  std::vector<std::unique_ptr<DeviceArray<float>>> outputs_;
};

TEST_F(BertCudaGraphsTest, ReplaysMatchKernelByKernelForEveryClassAndBeyond) {
  std::mt19937 rng(7);
  const std::vector<std::vector<int>> shapes = {
      {5},                                    // 1 row, 16-token class
      {5, 7, 0, 3},                           // an empty row, 4 rows
      {16},                                   // exactly a class
      {17, 1},                                // just past one
      {64, 64, 64, 64},                       // exactly max_tokens
      {30, 2, 9, 0, 0, 40, 11, 3, 8, 1, 12},  // 11 rows: class 16
      {200, 100},                             // 300 tokens: past max_tokens, eager
  };
  // Each shape twice, with other ids the second time: a capture, then a replay.
  for (int round = 0; round < 2; ++round) {
    for (const std::vector<int>& lengths : shapes) {
      DeviceBatch batch(lengths, vocab_, &rng);
      ASSERT_TRUE(batch.ok());
      const float* g = Enqueue(*graphed_, batch, a_.get());
      const float* e = Enqueue(*eager_, batch, a_.get());
      const int64_t rows = batch.view().rows;
      ExpectSame(
          Download(g, rows), Download(e, rows),
          absl::StrCat("round ", round, ", ", rows, " rows, ", batch.view().tokens, " tokens"));
    }
  }
  const BertCudaGraphs::Stats s = graphs().stats();
  EXPECT_EQ(s.capture_failures, 0);
  // Six shapes within max_tokens fall in five (rows, tokens) classes
  // ({5} and {16} share one): five captured, each run eagerly once first.
  EXPECT_EQ(s.captured, 5);
  EXPECT_EQ(s.eager, 5);
  EXPECT_EQ(s.replays, 2 * 6 - 5);
}

TEST_F(BertCudaGraphsTest, TwoStreamsReplayingBackToBackDoNotShareResults) {
  std::mt19937 rng(11);
  std::vector<std::unique_ptr<DeviceBatch>> batches;
  for (int i = 0; i < 8; ++i) {
    batches.push_back(
        std::make_unique<DeviceBatch>(std::vector<int>{9 + i, 20 - i, 4}, vocab_, &rng));
    ASSERT_TRUE(batches.back()->ok());
  }
  // Enqueue everything before waiting for anything: replays on a_ and b_
  // alternate over the same graph buffers.
  std::vector<const float*> graphed;
  for (size_t i = 0; i < batches.size(); ++i) {
    graphed.push_back(Enqueue(*graphed_, *batches[i], i % 2 == 0 ? a_.get() : b_.get()));
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    const float* e = Enqueue(*eager_, *batches[i], a_.get());
    ExpectSame(Download(graphed[i], 3), Download(e, 3), absl::StrCat("batch ", i));
  }
  EXPECT_GE(graphs().stats().replays, 7);
}

// The FFN's bias + GELU in cuBLASLt's epilogue (models/cuda_lt_linear.h),
// kernel by kernel and replayed in graphs, against cublasGemmEx followed by
// the erf GELU kernel, on the same weights and batches: the epilogue's GELU
// form is not documented, and the difference must stay within FP16's.
TEST_F(BertCudaGraphsTest, CublasLtEpiloguesMatchTheGeluKernel) {
  EncoderOptions o;
  o.cublaslt_epilogues = true;
  o.graphs.enabled = false;
  auto fused = LoadEncoder(dir_, device_->context(), o);
  ASSERT_THAT(fused, IsOk());
  EXPECT_THAT((*fused)->Implementation(), ::testing::HasSubstr("cuBLASLt"));
  // The FP16 copy of each layer's FFN bias is counted with the weights.
  EXPECT_GT((*fused)->WeightBytes(), eager_->WeightBytes());
  o.graphs.enabled = true;
  o.graphs.max_tokens = kMaxTokens;
  auto fused_graphed = LoadEncoder(dir_, device_->context(), o);
  ASSERT_THAT(fused_graphed, IsOk());
  std::mt19937 rng(13);
  const std::vector<std::vector<int>> shapes = {{1}, {5, 7, 0, 3}, {64, 64, 64, 64}, {200, 100}};
  for (int round = 0; round < 2; ++round) {  // a capture, then a replay
    for (const std::vector<int>& lengths : shapes) {
      DeviceBatch batch(lengths, vocab_, &rng);
      ASSERT_TRUE(batch.ok());
      const float* e = Enqueue(*eager_, batch, a_.get());
      const float* f = Enqueue(**fused, batch, a_.get());
      const float* g = Enqueue(**fused_graphed, batch, b_.get());
      const int64_t rows = batch.view().rows;
      const std::string what = absl::StrCat("round ", round, ", ", batch.view().tokens, " tokens");
      const std::vector<float> reference = Download(e, rows);
      ExpectSame(Download(f, rows), reference, "cuBLASLt, " + what);
      ExpectSame(Download(g, rows), reference, "cuBLASLt in a graph, " + what);
    }
  }
  const BertCudaGraphs* graphs =
      static_cast<const TransformerEncoderCuda&>(**fused_graphed).graphs();
  ASSERT_NE(graphs, nullptr);
  EXPECT_EQ(graphs->stats().capture_failures, 0);
  EXPECT_GE(graphs->stats().replays, 3);
}

TEST_F(BertCudaGraphsTest, TheBuffersAreHeldFromTheAllocatorAndCounted) {
  EXPECT_EQ(eager_->ResidentBytes(), 0);
  // x, ctx and work ([tokens, max(3 * hidden, intermediate) = 512]) FP16
  // for kMaxTokens; the input, output and a GEMM workspace come on top.
  const int64_t activations = kMaxTokens * (2 * hidden_ + 512) * 2;
  EXPECT_GT(graphed_->ResidentBytes(), activations);
  EXPECT_LE(graphed_->ResidentBytes(), device_->allocator->stats().allocated_bytes);
  EncoderOptions o;
  o.graphs.max_tokens = 0;
  EXPECT_THAT(LoadEncoder(dir_, device_->context(), o),
              ::infer::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                         "CUDA graphs for batches of up to 0 tokens"));
}

}  // namespace
}  // namespace infer
