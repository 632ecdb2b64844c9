// The CUDA encoder (models/transformer/encoder_cuda.h) on every family's
// fixture with heads of 32, the smallest its attention takes
// (tests/fixtures/families-cuda, transformers' own outputs; see
// tests/testing/family_reference.h) in FP16: cosine >= 0.999 to
// transformers' pooled, normalised embedding for every input, all inputs in
// one packed batch (lengths 1 to the position table's longest, mixed), kernel
// by kernel and replayed in CUDA graphs; each input alone too. The fixtures
// cover grouped KV heads (down to one), causal and sliding-window masks
// (windows shorter than the longest input), rotary positions with a θ per
// layer type, Q/K norms, RMSNorm, LayerNorm without β, gated FFNs, MPNet's
// relative bias and last-token pooling; every token's last hidden state
// (EncodeWithStates); and FP8 where the GPU has it. Each
// kernel-by-kernel batch also
// checks the memory model: the allocator's peak during Encode against
// PeakBytes (never below, at most 25% above). Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "models/packed_sequences.h"
#include "models/transformer/load_encoder.h"
#include "runtime/caching_allocator.h"
#include "runtime/compute_stream.h"
#include "tests/testing/cuda_arrays.h"
#include "tests/testing/family_reference.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::DeviceArray;
using ::infer::testing::IsOk;
using ::infer::testing::ReadReference;
using ::infer::testing::Reference;
using ::infer::testing::TestDevice;

class CudaFamiliesTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    INFER_SKIP_WITHOUT_GPU();
    auto d = TestDevice::Create("cuda:0");
    ASSERT_THAT(d, IsOk());
    device_ = *std::move(d);
    auto s = ComputeStream::Create(device_->device.get(), device_->allocator.get());
    ASSERT_THAT(s, IsOk());
    stream_ = *std::move(s);
  }

  // Encodes inputs `which` of `r` as one packed batch; returns [n, hidden].
  // With `states`, through EncodeWithStates, and its [tokens, hidden] there.
  std::vector<float> EncodeBatch(const TransformerEncoder& encoder, const Reference& r,
                                 const std::vector<size_t>& which,
                                 std::vector<float>* states = nullptr) {
    int64_t seq = 1;
    for (size_t i : which) seq = std::max<int64_t>(seq, static_cast<int64_t>(r.ids[i].size()));
    const auto rows = static_cast<int64_t>(which.size());
    std::vector<int64_t> ids(rows * seq, 0), mask(rows * seq, 0), types(rows * seq, 0);
    for (int64_t b = 0; b < rows; ++b) {
      const size_t i = which[b];
      for (size_t t = 0; t < r.ids[i].size(); ++t) {
        ids[b * seq + t] = r.ids[i][t];
        mask[b * seq + t] = 1;
        if (!r.types[i].empty()) types[b * seq + t] = r.types[i][t];
      }
    }
    // Packed as the served model packs (BertModel::Prepare).
    const PackedSequences host(ids.data(), mask.data(), rows, seq, types.data(),
                               encoder.spec().position_padding_id);
    const PackedSequencesView h = host.view();
    const PackedLayout layout{h.rows, h.tokens, /*with_types=*/true};
    DeviceArray<int32_t> input(layout.bytes() / sizeof(int32_t));
    EXPECT_EQ(input.Upload(std::vector<int32_t>(h.ids, h.ids + input.size())), cudaSuccess);
    const PackedSequencesView view = layout.View(input.get(), h.host_offsets, h.longest, h.width);
    const int64_t hidden = encoder.spec().hidden_size;
    DeviceArray<float> out(rows * hidden);
    CachingAllocator* alloc = device_->allocator.get();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const int64_t before = alloc->stats().allocated_bytes;
    alloc->ResetPeak();
    DeviceArray<float> token_states(states != nullptr ? h.tokens * hidden : 0);
    if (states != nullptr) {
      EXPECT_THAT(encoder.EncodeWithStates(stream_.get(), view, r.pooling, /*normalize=*/true,
                                           out.get(), token_states.get()),
                  IsOk());
    } else {
      EXPECT_THAT(encoder.Encode(stream_.get(), view, r.pooling, /*normalize=*/true, out.get()),
                  IsOk());
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const int64_t measured = alloc->stats().peak_allocated_bytes - before;
    const int64_t predicted = encoder.PeakBytes({h.rows, h.tokens, h.longest});
    EXPECT_GE(predicted, measured) << h.rows << " rows, " << h.tokens << " tokens";
    if (predicted > 0) {  // 0: a batch a graph replays, in buffers held from load
      EXPECT_LE(predicted, measured + measured / 4) << h.rows << " rows, " << h.tokens << " tokens";
    }
    std::vector<float> result;
    EXPECT_EQ(out.Download(&result), cudaSuccess);
    if (states != nullptr) EXPECT_EQ(token_states.Download(states), cudaSuccess);
    return result;
  }

  // The fixture's FP16 encoder, with CUDA graphs covering every batch here
  // or none.
  absl::StatusOr<std::unique_ptr<TransformerEncoder>> Load(const Reference& r, bool graphs) {
    EncoderOptions o;
    o.graphs.enabled = graphs;
    o.graphs.max_tokens = 4096;
    return LoadEncoder(r.dir, device_->context(), o);
  }
  // The indices of every input of `r`.
  static std::vector<size_t> Every(const Reference& r) {
    std::vector<size_t> all(r.ids.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }

  std::unique_ptr<TestDevice> device_;
  ComputeStream stream_;
};

TEST_P(CudaFamiliesTest, EveryInputMatchesTransformersInFp16) {
  const Reference r = ReadReference(GetParam());
  for (const bool graphs : {false, true}) {
    auto encoder = Load(r, graphs);
    ASSERT_THAT(encoder, IsOk()) << GetParam();
    const int64_t h = (*encoder)->spec().hidden_size;
    const std::vector<size_t> all = Every(r);
    // Twice with graphs: the first batch of a class captures, the second replays.
    for (int pass = 0; pass < (graphs ? 2 : 1); ++pass) {
      const std::vector<float> batch = EncodeBatch(**encoder, r, all);
      ASSERT_EQ(batch.size(), all.size() * h);
      double lowest = 1;
      for (size_t i = 0; i < all.size(); ++i) {
        const double c = testing::Cosine(batch.data() + i * h, r.embedding[i].data(), h);
        lowest = std::min(lowest, c);
        EXPECT_GE(c, 0.999) << GetParam() << " input " << i << " (" << r.ids[i].size()
                            << " tokens) in the batch, graphs " << graphs << ", pass " << pass;
      }
      // The figure itself, for the record (FP16 on these small models is
      // expected near 1 - 1e-5; a masking error shows as far less).
      std::printf("%s FP16, graphs %d, pass %d: lowest cosine to transformers %.6f\n", GetParam(),
                  graphs ? 1 : 0, pass, lowest);
    }
    for (size_t i = 0; i < all.size(); ++i) {
      const std::vector<float> alone = EncodeBatch(**encoder, r, {i});
      ASSERT_EQ(alone.size(), static_cast<size_t>(h));
      EXPECT_GE(testing::Cosine(alone.data(), r.embedding[i].data(), h), 0.999)
          << GetParam() << " input " << i << " alone, graphs " << graphs;
    }
  }
}

// Every token's last hidden state (TEI's /embed_all), kernel by kernel and
// replayed in CUDA graphs: cosine >= 0.999 to transformers' last_hidden_state
// for every token of every input, the states in packed order; the pooled
// rows of the same pass as Encode's.
TEST_P(CudaFamiliesTest, TokenStatesMatchTransformersInFp16) {
  const Reference r = ReadReference(GetParam());
  for (const bool graphs : {false, true}) {
    auto encoder = Load(r, graphs);
    ASSERT_THAT(encoder, IsOk()) << GetParam();
    ASSERT_TRUE((*encoder)->HasTokenStates());
    const int64_t h = (*encoder)->spec().hidden_size;
    const std::vector<size_t> all = Every(r);
    for (int pass = 0; pass < (graphs ? 2 : 1); ++pass) {
      std::vector<float> states;
      const std::vector<float> pooled = EncodeBatch(**encoder, r, all, &states);
      // The same pass's pooled rows (normalised): as Encode's, to FP16's
      // rounding (a graph's first batch runs eagerly, later ones replay).
      const std::vector<float> plain = EncodeBatch(**encoder, r, all);
      ASSERT_EQ(pooled.size(), plain.size());
      for (size_t k = 0; k < plain.size(); ++k) {
        ASSERT_NEAR(pooled[k], plain[k], 2e-3) << GetParam() << " value " << k;
      }
      size_t token = 0;
      double lowest = 1;
      for (size_t i = 0; i < all.size(); ++i) {
        ASSERT_EQ(r.hidden[i].size(), r.ids[i].size() * h);
        for (size_t t = 0; t < r.ids[i].size(); ++t, ++token) {
          ASSERT_LE((token + 1) * h, states.size());
          const double c =
              testing::Cosine(states.data() + token * h, r.hidden[i].data() + t * h, h);
          lowest = std::min(lowest, c);
          EXPECT_GE(c, 0.999) << GetParam() << " input " << i << " token " << t << ", graphs "
                              << graphs << ", pass " << pass;
        }
      }
      EXPECT_EQ(states.size(), token * h);
      std::printf("%s FP16 token states, graphs %d, pass %d: lowest cosine %.6f\n", GetParam(),
                  graphs ? 1 : 0, pass, lowest);
    }
  }
}

// FP8 (E4M3 linears, per-channel and per-token scales) on GPUs that have
// it, held to the INT8 CPU encoder's bounds: every input's cosine to
// transformers >= 0.97, the mean >= 0.99; elsewhere the load is refused
// naming the compute capability.
TEST_P(CudaFamiliesTest, Fp8StaysCloseToTransformers) {
  const Reference r = ReadReference(GetParam());
  EncoderOptions o;
  o.precision = Precision::kFp8;
  o.graphs.enabled = false;
  auto encoder = LoadEncoder(r.dir, device_->context(), o);
  if (device_->device->info().compute_capability < kMinFp8ComputeCapability) {
    EXPECT_EQ(encoder.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(encoder.status().message(), ::testing::HasSubstr("compute capability"));
    GTEST_SKIP() << "no FP8 tensor cores: " << device_->device->info().name;
  }
  ASSERT_THAT(encoder, IsOk()) << GetParam();
  EXPECT_EQ((*encoder)->precision(), Precision::kFp8);
  const int64_t h = (*encoder)->spec().hidden_size;
  const std::vector<size_t> all = Every(r);
  const std::vector<float> batch = EncodeBatch(**encoder, r, all);
  ASSERT_EQ(batch.size(), all.size() * h);
  double mean = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const double c = testing::Cosine(batch.data() + i * h, r.embedding[i].data(), h);
    EXPECT_GE(c, 0.97) << GetParam() << " input " << i;
    mean += c / static_cast<double>(all.size());
  }
  EXPECT_GE(mean, 0.99) << GetParam();
  std::printf("%s FP8: mean cosine to transformers %.5f\n", GetParam(), mean);
}

INSTANTIATE_TEST_SUITE_P(Families, CudaFamiliesTest,
                         ::testing::Values("families-cuda/xlm-roberta", "families-cuda/mpnet",
                                           "families-cuda/modernbert", "families-cuda/qwen3",
                                           "families-cuda/bert", "families-cuda/qwen2",
                                           "families-cuda/llama", "families-cuda/mistral",
                                           "families-cuda/distilbert", "families-cuda/nomic_bert",
                                           "families-cuda/new", "families-cuda/nomic_bert-native",
                                           "families-cuda/gte", "families-cuda/roberta",
                                           "families-cuda/camembert", "families-cuda/qwen2-scaled",
                                           "families-cuda/xlm-roberta-pad3",
                                           "families-cuda/mpnet-pad0"),
                         testing::FamilyTestName);

}  // namespace
}  // namespace infer
