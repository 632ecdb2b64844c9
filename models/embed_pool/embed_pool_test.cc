#include "models/embed_pool/embed_pool.h"

#include <cmath>
#include <cstring>
#include <random>

#include "tests/testing/float_tolerance.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;

EmbedPoolOptions Small() {
  EmbedPoolOptions o;
  o.name = "ep";
  o.vocab_size = 50;
  o.hidden_size = 8;
  o.embedding_size = 6;
  o.max_sequence_length = 16;
  o.seed = 7;
  return o;
}

InferRequest Ids(const std::vector<std::vector<int64_t>>& rows) {
  InferRequest r;
  r.model_name = "ep";
  Tensor t;
  t.name = "input_ids";
  t.dtype = DataType::kInt64;
  t.shape = {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())};
  for (const auto& row : rows) {
    t.data.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(int64_t));
  }
  r.inputs.push_back(std::move(t));
  return r;
}

// The model's math written as plain loops, independent of BLAS and kernels.
std::vector<float> Reference(const EmbedPoolOptions& o, const std::vector<int64_t>& seq) {
  const EmbedPoolModel::HostWeights w = EmbedPoolModel::GenerateWeights(o);
  std::vector<double> acc(o.embedding_size, 0.0);
  int tokens = 0;
  for (int64_t id : seq) {
    if (id == o.pad_id) continue;
    ++tokens;
    for (int64_t d = 0; d < o.embedding_size; ++d) {
      double y = w.bias[d];
      for (int64_t h = 0; h < o.hidden_size; ++h) {
        y += double{w.table[id * o.hidden_size + h]} * w.dense[h * o.embedding_size + d];
      }
      acc[d] += std::tanh(y);
    }
  }
  std::vector<float> out(o.embedding_size);
  for (int64_t d = 0; d < o.embedding_size; ++d) {
    out[d] = tokens ? static_cast<float>(acc[d] / tokens) : 0.0f;
  }
  return out;
}

std::vector<float> Row(const InferResponse& r, int64_t row) {
  const Tensor& t = r.outputs.at(0);
  return std::vector<float>(t.as<float>() + row * t.shape[1],
                            t.as<float>() + (row + 1) * t.shape[1]);
}

std::vector<InferResponse> ExecuteAll(Model& model, const TestDevice& device,
                                      std::vector<InferRequest>& requests) {
  std::vector<const InferRequest*> in;
  std::vector<InferResponse> out(requests.size());
  std::vector<InferResponse*> out_ptrs;
  for (size_t i = 0; i < requests.size(); ++i) {
    in.push_back(&requests[i]);
    out_ptrs.push_back(&out[i]);
  }
  absl::Status s = RunBatch(model, device.device.get(), device.stream.get(), in, out_ptrs);
  EXPECT_THAT(s, IsOk());
  return out;
}

std::vector<std::string> Devices() {
  std::vector<std::string> specs = {"cpu"};
  if (ProbeCuda().device_count > 0) specs.push_back("cuda:0");
  return specs;
}

TEST(EmbedPoolTest, SpecDeclaresInputsAndOutputs) {
  auto device = TestDevice::Create("cpu");
  auto model = EmbedPoolModel::Create(Small(), (*device)->context());
  ASSERT_TRUE(model.ok());
  const ModelSpec& s = (*model)->spec();
  EXPECT_EQ(s.name, "ep");
  ASSERT_EQ(s.inputs.size(), 1u);
  EXPECT_EQ(s.inputs[0].name, "input_ids");
  EXPECT_EQ(s.inputs[0].dtype, DataType::kInt64);
  EXPECT_EQ(s.inputs[0].shape, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(s.outputs[0].shape, (std::vector<int64_t>{-1, 6}));
}

TEST(EmbedPoolTest, MatchesNaiveReferenceOnEveryDevice) {
  for (const std::string& spec : Devices()) {
    SCOPED_TRACE(spec);
    auto device = TestDevice::Create(spec);
    ASSERT_TRUE(device.ok());
    auto model = EmbedPoolModel::Create(Small(), (*device)->context());
    ASSERT_TRUE(model.ok()) << model.status();
    const std::vector<std::vector<int64_t>> rows = {{3, 9, 27, 0, 0}, {1, 2, 3, 4, 5}};
    std::vector<InferRequest> requests = {Ids(rows)};
    std::vector<InferResponse> out = ExecuteAll(**model, **device, requests);
    ASSERT_EQ(out[0].outputs.size(), 1u);
    EXPECT_EQ(out[0].outputs[0].shape, (std::vector<int64_t>{2, 6}));
    for (int r = 0; r < 2; ++r) {
      const std::vector<float> want = Reference(Small(), rows[r]);
      const std::vector<float> got = Row(out[0], r);
      for (int d = 0; d < 6; ++d) EXPECT_NEAR(got[d], want[d], 1e-5) << r << "," << d;
    }
  }
}

TEST(EmbedPoolTest, BatchMatesAndPaddingDoNotChangeAnEmbedding) {
  auto device = TestDevice::Create("cpu");
  auto model = EmbedPoolModel::Create(Small(), (*device)->context());
  ASSERT_TRUE(model.ok());
  std::vector<InferRequest> alone = {Ids({{5, 6, 7}})};
  const std::vector<float> solo = Row(ExecuteAll(**model, **device, alone)[0], 0);
  // Same sequence batched with a longer one (so it is padded to 9 tokens).
  std::vector<InferRequest> together = {Ids({{11, 12, 13, 14, 15, 16, 17, 18, 19}}),
                                        Ids({{5, 6, 7}})};
  const std::vector<float> batched = Row(ExecuteAll(**model, **device, together)[1], 0);
  // Equal but for the order of the GEMM's sums, which oneDNN may change
  // with the row count (tests/testing/float_tolerance.h).
  const double tol = testing::EmbedPoolReorderTolerance(Small(), {5, 6, 7});
  EXPECT_LT(tol, 1e-5);
  for (int d = 0; d < 6; ++d) EXPECT_NEAR(batched[d], solo[d], tol);
}

TEST(EmbedPoolTest, AllPaddingGivesZeros) {
  auto device = TestDevice::Create("cpu");
  auto model = EmbedPoolModel::Create(Small(), (*device)->context());
  std::vector<InferRequest> r = {Ids({{0, 0, 0}})};
  for (float v : Row(ExecuteAll(**model, **device, r)[0], 0)) EXPECT_EQ(v, 0.0f);
}

TEST(EmbedPoolTest, SameSeedSameWeights) {
  EXPECT_EQ(EmbedPoolModel::GenerateWeights(Small()).dense,
            EmbedPoolModel::GenerateWeights(Small()).dense);
  EmbedPoolOptions other = Small();
  other.seed = 8;
  EXPECT_NE(EmbedPoolModel::GenerateWeights(Small()).dense,
            EmbedPoolModel::GenerateWeights(other).dense);
}

TEST(EmbedPoolTest, RejectsOutOfRangeIdsAndLongSequences) {
  auto device = TestDevice::Create("cpu");
  auto model = EmbedPoolModel::Create(Small(), (*device)->context());
  EXPECT_THAT((*model)->ValidateRequest(Ids({{1, 50}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "token id 50 at flat index 1; model 'ep' accepts ids in [0, 50)"));
  EXPECT_THAT((*model)->ValidateRequest(Ids({{-3}})),
              StatusIs(absl::StatusCode::kInvalidArgument, "token id -3"));
  EXPECT_THAT((*model)->ValidateRequest(Ids({std::vector<int64_t>(17, 1)})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "input 'input_ids' has 17 tokens; model 'ep' allows 16"));
  EXPECT_THAT((*model)->ValidateRequest(Ids({std::vector<int64_t>(16, 1)})), IsOk());
}

TEST(EmbedPoolTest, CreateRejectsBadOptions) {
  auto device = TestDevice::Create("cpu");
  EmbedPoolOptions o = Small();
  o.hidden_size = 0;
  EXPECT_THAT(EmbedPoolModel::Create(o, (*device)->context()),
              StatusIs(absl::StatusCode::kInvalidArgument, "hidden_size must be >= 1"));
  o = Small();
  o.pad_id = 50;
  EXPECT_THAT(EmbedPoolModel::Create(o, (*device)->context()),
              StatusIs(absl::StatusCode::kInvalidArgument, "pad_id 50 is outside [0, 50)"));
}

// The memory model that admission relies on, against the allocator's
// measured peak for a grid of shapes: never below, at most 25% above.
TEST(EmbedPoolTest, MemoryModelBoundsTheMeasuredPeak) {
  auto device = TestDevice::Create("cpu");
  ASSERT_TRUE(device.ok());
  EmbedPoolOptions o;  // the served defaults
  auto model = EmbedPoolModel::Create(o, (*device)->context());
  ASSERT_TRUE(model.ok());
  CachingAllocator* alloc = (*device)->allocator.get();
  EXPECT_EQ((*model)->WeightBytes(), alloc->stats().allocated_bytes);
  for (int64_t rows : {1, 4, 16, 32}) {
    for (int64_t len : {1, 7, 64, 300, 512}) {
      alloc->EmptyCache();
      const int64_t weights = alloc->stats().allocated_bytes;
      alloc->ResetPeak();
      std::vector<InferRequest> requests = {
          Ids(std::vector<std::vector<int64_t>>(rows, std::vector<int64_t>(len, 5)))};
      ExecuteAll(**model, **device, requests);
      const int64_t measured = alloc->stats().peak_allocated_bytes - weights;
      const int64_t predicted = (*model)->PeakBytes({rows, rows * len, len});
      EXPECT_GE(predicted, measured) << rows << "x" << len;
      EXPECT_LE(predicted, measured + measured / 4) << rows << "x" << len;
    }
  }
}

TEST(EmbedPoolTest, GpuMatchesCpu) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  EmbedPoolOptions o;  // the served defaults
  auto cpu = TestDevice::Create("cpu");
  auto gpu = TestDevice::Create("cuda:0");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu_model = EmbedPoolModel::Create(o, (*cpu)->context());
  auto gpu_model = EmbedPoolModel::Create(o, (*gpu)->context());
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.status();
  std::mt19937 rng(3);
  std::vector<std::vector<int64_t>> rows(32, std::vector<int64_t>(128));
  for (auto& row : rows) {
    for (auto& id : row) id = rng() % o.vocab_size;
    row.resize(64 + rng() % 64, 0);
    row.resize(128, 0);
  }
  std::vector<InferRequest> a = {Ids(rows)}, b = {Ids(rows)};
  const InferResponse ca = ExecuteAll(**cpu_model, **cpu, a)[0];
  const InferResponse gb = ExecuteAll(**gpu_model, **gpu, b)[0];
  for (int r = 0; r < 32; ++r) {
    const auto x = Row(ca, r), y = Row(gb, r);
    double dot = 0, nx = 0, ny = 0;
    for (size_t d = 0; d < x.size(); ++d) {
      dot += x[d] * y[d];
      nx += x[d] * x[d];
      ny += y[d] * y[d];
      EXPECT_NEAR(x[d], y[d], 1e-4);
    }
    EXPECT_GE(dot / std::sqrt(nx * ny), 0.9999) << r;
  }
}

}  // namespace
}  // namespace infer
