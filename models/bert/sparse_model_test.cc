// The served model's SPLADE and per-token outputs, on the CPU and (where one
// is present) a GPU: sparse vectors of the
// SparseEncoder fixtures (tests/fixtures/sparse, made by
// models/tools/make_family_fixtures.py --sparse with sentence-transformers'
// SparseEncoder: max and sum pooling, log1p once and twice, a tied and an
// untied decoder) against SparseEncoder.encode, and token_embeddings of the
// BERT family fixture against transformers' last hidden states. The GPU
// tests skip, with the reason, where there is none.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/bert/bert_model.h"
#include "models/checkpoint.h"
#include "models/precision.h"
#include "runtime/device.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensors.h"
#include "tests/testing/test_device.h"

namespace infer {
namespace {

using ::infer::testing::FindOutput;
using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
using ::infer::testing::TestDevice;

// A fixture's model on a device: the CPU in FP32, or "cuda:0" in FP16.
class Harness {
 public:
  // `graphs`: CUDA graphs for small batches, as served (a GPU only).
  explicit Harness(const std::string& fixture, const std::string& device = "cpu",
                   bool graphs = true)
      : dir_(::infer::testing::FixturePath(fixture)), cpu_(device == "cpu"), graphs_(graphs) {
    auto d = TestDevice::Create(device);
    EXPECT_THAT(d, IsOk());
    if (d.ok()) device_ = *std::move(d);
  }

  // `precision`: the CPU's FP32 or the GPU's FP16 unless named, unchecked
  // by the quality gate when named.
  absl::StatusOr<std::unique_ptr<BertModel>> Load(BertModelOptions o = {},
                                                  std::optional<Precision> precision = {}) {
    o.checkpoint_dir = dir_;
    o.precision = precision.value_or(cpu_ ? Precision::kFp32 : Precision::kFp16);
    o.precision_gate = !precision.has_value();
    o.graphs.enabled = graphs_;
    return BertModel::Create(o, device_->context());
  }

  // Admits each request as the engine does, runs them as one batch.
  std::vector<InferResponse> Run(BertModel& m, std::vector<InferRequest> requests) {
    std::vector<const InferRequest*> in;
    for (InferRequest& r : requests) {
      absl::Status s = ValidateRequestAgainstSpec(m.spec(), r);
      if (s.ok()) s = m.Preprocess(&r);
      if (s.ok()) s = m.ValidateRequest(r);
      EXPECT_THAT(s, IsOk());
      in.push_back(&r);
    }
    std::vector<InferResponse> out(requests.size());
    std::vector<InferResponse*> res;
    for (InferResponse& r : out) res.push_back(&r);
    EXPECT_THAT(RunBatch(m, device_->device.get(), device_->stream.get(), in, res), IsOk());
    return out;
  }

  const std::string& dir() const { return dir_; }
  CachingAllocator* allocator() const { return device_->allocator.get(); }

 private:
  std::string dir_;
  bool cpu_ = true;
  bool graphs_ = true;
  std::unique_ptr<TestDevice> device_;
};

InferRequest TextRequest(const std::vector<std::string>& texts,
                         std::vector<std::string> outputs = {}) {
  InferRequest r;
  r.inputs.push_back(::infer::testing::TextTensor(texts));
  r.requested_outputs = std::move(outputs);
  return r;
}

class SparseModelTest : public ::testing::TestWithParam<const char*> {};

// `fixture`'s texts served on `device` against SparseEncoder.encode: every
// term within `tolerance` · max(1, value), and each text's count of terms
// within `count_slack` · (its count) + 2 of the reference's (terms near zero
// may fall either side of it).
void ExpectSparseMatches(const std::string& fixture, const std::string& device, double tolerance,
                         double count_slack, bool graphs = true) {
  Harness h(fixture, device, graphs);
  auto m = h.Load();
  ASSERT_THAT(m, IsOk());
  const ModelSpec& spec = (*m)->spec();
  EXPECT_EQ(spec.pooling, "splade");
  ASSERT_EQ(spec.outputs.size(), 3u);
  EXPECT_EQ(spec.outputs[0].name, "sparse_counts");
  auto text = ReadCheckpointFile(h.dir() + "/reference.json");
  auto ref = ReadSafetensors(h.dir() + "/reference.safetensors");
  ASSERT_THAT(text, IsOk());
  ASSERT_THAT(ref, IsOk());
  const auto texts = nlohmann::json::parse(*text)["texts"].get<std::vector<std::string>>();
  // All texts three times in one request (over 256 tokens: several of the
  // head's chunks, a text across two), and the first two again alone: a
  // text's vector does not depend on its batch-mates. Twice: on a GPU the
  // first batch of a graph's class runs eagerly, the second replays.
  std::vector<std::string> thrice;
  for (int k = 0; k < 3; ++k) thrice.insert(thrice.end(), texts.begin(), texts.end());
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(absl::StrCat(fixture, " on ", device, ", graphs ", graphs, ", pass ", pass));
    std::vector<InferResponse> out =
        h.Run(**m, {TextRequest(thrice), TextRequest({texts[1]}), TextRequest({texts[0]})});
    const Tensor* counts = FindOutput(out[0], "sparse_counts");
    const Tensor* indices = FindOutput(out[0], "sparse_indices");
    const Tensor* values = FindOutput(out[0], "sparse_values");
    ASSERT_TRUE(counts != nullptr && indices != nullptr && values != nullptr);
    ASSERT_EQ(counts->shape, std::vector<int64_t>{static_cast<int64_t>(thrice.size())});
    ASSERT_EQ(indices->shape, values->shape);
    int64_t at = 0;
    for (size_t i = 0; i < thrice.size(); ++i) {
      const std::vector<float>& want = (*ref)["sparse_" + std::to_string(i % texts.size())].values;
      std::vector<float> got(want.size(), 0.0f);
      const int64_t n = counts->as<int64_t>()[i];
      ASSERT_LE(at + n, indices->shape[0]);
      for (int64_t k = at; k < at + n; ++k) {
        const int64_t j = indices->as<int64_t>()[k];
        ASSERT_TRUE(j >= 0 && j < static_cast<int64_t>(want.size())) << j;
        if (k > at) EXPECT_LT(indices->as<int64_t>()[k - 1], j) << "ascending";
        EXPECT_GT(values->as<float>()[k], 0.0f);
        got[j] = values->as<float>()[k];
      }
      at += n;
      int64_t want_nonzero = 0;
      for (size_t j = 0; j < want.size(); ++j) {
        want_nonzero += want[j] > 0;
        EXPECT_NEAR(got[j], want[j], tolerance * std::max(1.0f, want[j]))
            << thrice[i] << " (copy " << i / texts.size() << ") term " << j;
      }
      EXPECT_NEAR(static_cast<double>(n), static_cast<double>(want_nonzero),
                  2.0 + count_slack * static_cast<double>(want_nonzero))
          << thrice[i];
      EXPECT_GT(n, 0) << thrice[i];
    }
    EXPECT_EQ(at, indices->shape[0]);
    for (int alone : {1, 2}) {
      const Tensor* c = FindOutput(out[alone], "sparse_counts");
      ASSERT_NE(c, nullptr);
      const int64_t i = alone == 1 ? 1 : 0;
      const auto batched = static_cast<double>(counts->as<int64_t>()[i]);
      EXPECT_NEAR(static_cast<double>(c->as<int64_t>()[0]), batched, count_slack * batched);
    }
  }
}

// Within 2e-4 of SparseEncoder's FP32 values: the CPU encoder's 1e-4 on
// these fixtures' hidden states (transformer_families_test.cc), through a
// 32-wide head whose log1p does not enlarge differences; the same count of
// terms batched and alone.
TEST_P(SparseModelTest, MatchesSparseEncoder) {
  ExpectSparseMatches(std::string("sparse/") + GetParam(), "cpu", 2e-4, 0.0);
}

// On a GPU, in FP16 (the head's GEMMs too, into FP32 logits): each term
// within 2e-2 · max(1, value), as the FP16 classifiers' logits are held
// (classifier_model_test.cc), and the counts within 5% + 2; with CUDA graphs
// (as served) and without.
TEST_P(SparseModelTest, OnAGpuMatchesSparseEncoderInFp16) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  for (const bool graphs : {true, false}) {
    ExpectSparseMatches(std::string("sparse/") + GetParam(), "cuda:0", 2e-2, 0.05, graphs);
  }
}

TEST_P(SparseModelTest, RefusesEmbeddingOptions) {
  Harness h(std::string("sparse/") + GetParam());
  auto m = h.Load();
  ASSERT_THAT(m, IsOk());
  InferRequest r = TextRequest({"a"});
  r.normalize = true;
  EXPECT_THAT(ValidateRequestAgainstSpec((*m)->spec(), r),
              StatusIs(absl::StatusCode::kInvalidArgument, ""));
  r.normalize.reset();
  r.requested_outputs = {"embedding"};
  EXPECT_THAT(ValidateRequestAgainstSpec((*m)->spec(), r),
              StatusIs(absl::StatusCode::kInvalidArgument, ""));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SparseModelTest,
                         ::testing::Values("bert-splade", "xlm-roberta-splade",
                                           "distilbert-splade"));

TEST(SparseModel, MeanPoolingNamedServesTheEncoderAsAnEmbedder) {
  Harness h("sparse/bert-splade");
  BertModelOptions o;
  o.pooling = Pooling::kMean;
  auto m = h.Load(o);
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ((*m)->spec().outputs[0].name, "embedding");
}

// A SPLADE model in INT8 on the CPU is gated on what it serves, its sparse
// vectors (models/transformer/precision_gate.h), and says so: in its
// description where it passes (the fixture does: cosine min 0.9991, top-10
// 0.950 with VNNI; 0.9976 and 0.927 under the AVX2 and SSE4.1 caps), in
// the refusal where it would not.
TEST(SparseModel, Int8IsGatedOnItsSparseVectors) {
  Harness h("sparse/bert-splade");
  BertModelOptions o;
  o.checkpoint_dir = h.dir();
  o.precision = Precision::kInt8;
  auto device = TestDevice::Create("cpu");
  ASSERT_THAT(device, IsOk());
  auto m = BertModel::Create(o, (*device)->context());
  const std::string said = m.ok() ? (*m)->spec().description : std::string(m.status().message());
  EXPECT_THAT(said, ::testing::HasSubstr("1050 texts: sparse vectors' cosine mean"));
  EXPECT_THAT(said, ::testing::HasSubstr("top-10 neighbours by dot product"));
  if (m.ok()) EXPECT_THAT(said, ::testing::HasSubstr("int8 against fp32"));
}

TEST(SparseModel, SpladeNeedsAMaskedLmHead) {
  Harness h("families/bert");  // a BertModel checkpoint: no head
  BertModelOptions o;
  o.splade = true;
  EXPECT_THAT(h.Load(o).status(), StatusIs(absl::StatusCode::kInvalidArgument, "masked-LM"));
}

// token_embeddings: every real token's last hidden state, as transformers'
// last_hidden_state gives it (1e-4, as transformer_families_test.cc),
// given only to the request that names it; token_counts per text.
// The served per-token outputs of `fixture`'s texts on `device` against
// transformers' last hidden states: each value within `tolerance` on the
// CPU (FP32); on a GPU (FP16) each token's cosine >= 0.999, as the CUDA
// encoder's own test holds them.
void ExpectTokenStatesMatch(const std::string& fixture, const std::string& device, double tolerance,
                            bool graphs = true) {
  Harness h(fixture, device, graphs);
  auto m = h.Load();
  ASSERT_THAT(m, IsOk());
  const ModelSpec& spec = (*m)->spec();
  ASSERT_EQ(spec.outputs.size(), 3u);
  EXPECT_TRUE(spec.outputs[1].on_request);
  auto text = ReadCheckpointFile(h.dir() + "/reference.json");
  auto ref = ReadSafetensors(h.dir() + "/reference.safetensors");
  ASSERT_THAT(text, IsOk());
  ASSERT_THAT(ref, IsOk());
  const nlohmann::json j = nlohmann::json::parse(*text);
  std::vector<std::string> texts;
  std::vector<size_t> index;
  for (size_t i = 0; i < j["inputs"].size() && texts.size() < 3; ++i) {
    if (!j["inputs"][i]["text"].is_string()) continue;
    texts.push_back(j["inputs"][i]["text"]);
    index.push_back(i);
  }
  const int64_t hidden = spec.outputs[1].shape[1];
  // Twice: on a GPU the first batch of a graph's class runs eagerly, the
  // second replays.
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(absl::StrCat(fixture, " on ", device, ", graphs ", graphs, ", pass ", pass));
    std::vector<InferResponse> out = h.Run(
        **m, {TextRequest({texts[0]}), TextRequest(texts, {"token_embeddings", "token_counts"}),
              TextRequest({texts[1]}, {"embedding", "token_counts"})});
    // The first names nothing: its embedding alone.
    ASSERT_EQ(out[0].outputs.size(), 1u);
    EXPECT_EQ(out[0].outputs[0].name, "embedding");
    const Tensor* states = FindOutput(out[1], "token_embeddings");
    const Tensor* counts = FindOutput(out[1], "token_counts");
    ASSERT_TRUE(states != nullptr && counts != nullptr);
    int64_t row = 0;
    for (size_t t = 0; t < texts.size(); ++t) {
      const std::vector<float>& want = (*ref)["hidden_" + std::to_string(index[t])].values;
      const auto n = static_cast<int64_t>(want.size()) / hidden;
      ASSERT_EQ(counts->as<int64_t>()[t], n) << texts[t];
      for (int64_t k = 0; k < n; ++k) {
        const float* got = states->as<float>() + (row + k) * hidden;
        const float* ref_row = want.data() + k * hidden;
        if (device == "cpu") {
          for (int64_t d = 0; d < hidden; ++d) {
            ASSERT_NEAR(got[d], ref_row[d], tolerance) << texts[t] << " token " << k << " " << d;
          }
        } else {
          EXPECT_GE(::infer::testing::Cosine(got, ref_row, hidden), 0.999)
              << texts[t] << " token " << k;
        }
      }
      row += n;
    }
    EXPECT_EQ(states->shape, (std::vector<int64_t>{row, hidden}));
    const Tensor* c2 = FindOutput(out[2], "token_counts");
    ASSERT_NE(c2, nullptr);
    EXPECT_EQ(c2->as<int64_t>()[0], counts->as<int64_t>()[1]);
  }
  // A request whose every sequence is empty (its mask all 0): zero rows,
  // no states, a count of 0 each.
  InferRequest empty;
  empty.inputs.push_back(::infer::testing::Int64Matrix("input_ids", {5, 6, 7, 8}, 2));
  empty.inputs.push_back(::infer::testing::Int64Matrix("attention_mask", {0, 0, 0, 0}, 2));
  empty.requested_outputs = {"embedding", "token_embeddings", "token_counts"};
  std::vector<InferResponse> out = h.Run(**m, {std::move(empty)});
  const Tensor* embedding = FindOutput(out[0], "embedding");
  ASSERT_NE(embedding, nullptr);
  for (int64_t k = 0; k < 2 * spec.outputs[0].shape[1]; ++k) {
    ASSERT_EQ(embedding->as<float>()[k], 0.0f) << k;
  }
  const Tensor* states = FindOutput(out[0], "token_embeddings");
  const Tensor* counts = FindOutput(out[0], "token_counts");
  ASSERT_TRUE(states != nullptr && counts != nullptr);
  EXPECT_EQ(states->shape, (std::vector<int64_t>{0, hidden}));
  EXPECT_EQ(counts->as<int64_t>()[0], 0);
  EXPECT_EQ(counts->as<int64_t>()[1], 0);
}

TEST(TokenEmbeddings, MatchTransformersHiddenStates) {
  ExpectTokenStatesMatch("families/bert", "cpu", 1e-4);
}

// The memory model against the allocator's measured peak, as
// bert_model_test.cc checks it for embeddings: never below, at most 25%
// above, for SPLADE (every token's state, the chunk of vocabulary-wide
// logits, the [rows, vocab] result: texts long enough for several chunks)
// and for embeddings with the per-token outputs asked for.
void ExpectPeakBounded(const std::string& fixture, std::vector<std::string> outputs,
                       const std::string& device = "cpu", std::optional<Precision> precision = {}) {
  Harness h(fixture, device);
  auto m = h.Load({}, precision);
  ASSERT_THAT(m, IsOk());
  const TransformerSpec& c = (*m)->encoder().spec();
  CachingAllocator* alloc = h.allocator();
  std::mt19937 rng(3);
  for (int64_t rows : {1, 8, 32}) {
    for (int64_t len : {int64_t{2}, int64_t{40}, (*m)->spec().max_sequence_length}) {
      alloc->EmptyCache();
      const int64_t weights = alloc->stats().allocated_bytes;
      alloc->ResetPeak();
      InferRequest r;
      std::vector<int64_t> ids(rows * len), mask(rows * len, 0);
      int64_t real = 0;
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t n = i == 0 ? len : 1 + rng() % len;
        for (int64_t t = 0; t < len; ++t) {
          ids[i * len + t] = 5 + rng() % (c.vocab_size - 5);
          mask[i * len + t] = t < n;
        }
        real += n;
      }
      r.inputs.push_back(::infer::testing::Int64Matrix("input_ids", ids, rows));
      r.inputs.push_back(::infer::testing::Int64Matrix("attention_mask", mask, rows));
      r.requested_outputs = outputs;
      std::vector<InferResponse> out = h.Run(**m, {std::move(r)});
      ASSERT_FALSE(out[0].outputs.empty());
      const int64_t measured = alloc->stats().peak_allocated_bytes - weights;
      const int64_t predicted = (*m)->PeakBytes({rows, real, len, outputs.empty() ? 0 : real});
      const std::string shape = absl::StrCat(fixture, " ", rows, "x", len, " (", real, " tokens)");
      EXPECT_GE(predicted, measured) << shape;
      EXPECT_LE(predicted, measured + measured / 4) << shape;
    }
  }
}

TEST(SparseModel, MemoryModelBoundsTheMeasuredPeak) {
  ExpectPeakBounded("sparse/bert-splade", {});
  ExpectPeakBounded("sparse/xlm-roberta-splade", {});
  ExpectPeakBounded("sparse/distilbert-splade", {});
}

// The same with the SPLADE head in INT8 (the decoder's codes and int32
// sums per chunk row) and BF16 (the chunk's BF16 states), where the CPU
// computes BF16.
TEST(SparseModel, InReducedPrecisionsTheMemoryModelBoundsTheMeasuredPeak) {
  ExpectPeakBounded("sparse/bert-splade", {}, "cpu", Precision::kInt8);
  ExpectPeakBounded("sparse/xlm-roberta-splade", {}, "cpu", Precision::kInt8);
  if (!CpuHasNativeBf16()) GTEST_SKIP() << "this CPU has no native BF16 (INT8 ran)";
  ExpectPeakBounded("sparse/bert-splade", {}, "cpu", Precision::kBf16);
}

TEST(SparseModel, OnAGpuTheMemoryModelBoundsTheMeasuredPeak) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  ExpectPeakBounded("sparse/bert-splade", {}, "cuda:0");
  ExpectPeakBounded("sparse/xlm-roberta-splade", {}, "cuda:0");
}

// With and without the per-token outputs asked for: a batch that asks for
// none is not charged for every token's state (BatchShape::state_tokens).
TEST(TokenEmbeddings, MemoryModelBoundsTheMeasuredPeak) {
  ExpectPeakBounded("families/bert", {"token_embeddings", "token_counts"});
  ExpectPeakBounded("families/bert", {});
  // The states' block is the difference, and only where asked.
  Harness h("families/bert");
  auto m = h.Load();
  ASSERT_THAT(m, IsOk());
  const int64_t hidden = (*m)->encoder().spec().hidden_size;
  const BatchShape plain{8, 200, 40}, asked{8, 200, 40, 30};
  EXPECT_EQ((*m)->PeakBytes(asked) - (*m)->PeakBytes(plain),
            CachingAllocator::BlockBytes(200 * hidden * 4));
  InferRequest r = TextRequest({"a b", "c"}, {"token_counts"});
  ASSERT_THAT((*m)->Preprocess(&r), IsOk());
  EXPECT_EQ((*m)->StateTokens(r), (*m)->RealTokens(r));
  r.requested_outputs = {"embedding"};
  EXPECT_EQ((*m)->StateTokens(r), 0);
}

// On a GPU (FP16): the BERT path and a pre-norm family of the general path
// (its states in another buffer), with CUDA graphs (as served: these batches
// replay one) and without; and the memory model.
TEST(TokenEmbeddings, ServedOnAGpuTheyMatchTransformersInFp16) {
  const CudaAvailability cuda = ProbeCuda();
  if (cuda.device_count == 0) GTEST_SKIP() << "no GPU: " << cuda.reason;
  for (const char* fixture : {"families-cuda/bert", "families-cuda/qwen3"}) {
    SCOPED_TRACE(fixture);
    ExpectTokenStatesMatch(fixture, "cuda:0", 0, /*graphs=*/true);
    ExpectTokenStatesMatch(fixture, "cuda:0", 0, /*graphs=*/false);
    ExpectPeakBounded(fixture, {"token_embeddings", "token_counts"}, "cuda:0");
    ExpectPeakBounded(fixture, {}, "cuda:0");
  }
}

}  // namespace
}  // namespace infer
