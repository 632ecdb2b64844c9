// Each family's CPU encoder against transformers on the same weights: the
// fixtures in tests/fixtures/families (small random-weight checkpoints made
// and run by transformers' own classes, models/tools/make_family_fixtures.py)
// hold every input's last hidden states and pooled embedding. NomicBERT and
// GTE ("new"), whose reference is their authors' own modelling code, are
// made and run by a NumPy transcription of that code
// (models/tools/make_remote_code_fixtures.py), as is the GTE reranker.
//
// FP32: max abs error <= 1e-4 on the hidden states, cosine >= 0.9999 on the
// embeddings, for each input alone and for all of them in one batch (lengths
// 1 to the position table's longest, mixed). BERT's fixture adds (query,
// passage) pairs with token types 0 and 1, as a cross-encoder sees them.
// BF16 where the CPU computes it: cosine >= 0.999. Run under every
// ONEDNN_MAX_CPU_ISA cap (NUMERIC).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/checkpoint.h"
#include "models/transformer/encoder_cpu.h"
#include "models/transformer/transformer_weights.h"
#include "tests/testing/family_reference.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::ReadReference;
using ::infer::testing::Reference;

double MaxAbsDiff(const float* a, const float* b, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double{a[i]} - b[i]));
  return worst;
}

class FamiliesTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FamiliesTest, EachInputAloneMatchesTransformers) {
  const Reference r = ReadReference(GetParam());
  EncoderCpuOptions o;
  o.precision = Precision::kFp32;
  o.threads = 2;
  auto encoder = TransformerEncoderCpu::Load(r.dir, o);
  ASSERT_THAT(encoder, IsOk());
  const int64_t h = (*encoder)->spec().hidden_size;
  for (size_t i = 0; i < r.ids.size(); ++i) {
    const auto len = static_cast<int64_t>(r.ids[i].size());
    const std::vector<int64_t> mask(len, 1);
    auto hidden = (*encoder)->HiddenStates(r.ids[i], mask, 1, len, r.types[i]);
    ASSERT_THAT(hidden, IsOk());
    ASSERT_EQ(hidden->size(), r.hidden[i].size());
    EXPECT_LE(MaxAbsDiff(hidden->data(), r.hidden[i].data(), len * h), 1e-4)
        << GetParam() << " input " << i << " (" << len << " tokens)";
    auto embedding =
        (*encoder)->Encode(r.ids[i], mask, 1, len, /*normalize=*/true, r.pooling, r.types[i]);
    ASSERT_THAT(embedding, IsOk());
    EXPECT_GE(testing::Cosine(embedding->data(), r.embedding[i].data(), h), 0.9999)
        << GetParam() << " input " << i;
  }
}

// All inputs in one right-padded batch: lengths from 1 to the longest the
// position table allows, each row as if alone.
TEST_P(FamiliesTest, OneBatchOfMixedLengthsMatchesTransformers) {
  const Reference r = ReadReference(GetParam());
  EncoderCpuOptions o;
  o.precision = Precision::kFp32;
  o.threads = 2;
  auto encoder = TransformerEncoderCpu::Load(r.dir, o);
  ASSERT_THAT(encoder, IsOk());
  const int64_t h = (*encoder)->spec().hidden_size;
  const auto batch = static_cast<int64_t>(r.ids.size());
  int64_t seq = 0;
  for (const auto& ids : r.ids) seq = std::max<int64_t>(seq, static_cast<int64_t>(ids.size()));
  EXPECT_EQ(seq, (*encoder)->spec().MaxSequenceLength()) << "the fixture reaches the table's end";
  std::vector<int64_t> ids(batch * seq, 0), mask(batch * seq, 0), types(batch * seq, 0);
  for (int64_t b = 0; b < batch; ++b) {
    for (size_t s = 0; s < r.ids[b].size(); ++s) {
      ids[b * seq + s] = r.ids[b][s];
      mask[b * seq + s] = 1;
      if (!r.types[b].empty()) types[b * seq + s] = r.types[b][s];
    }
  }
  auto hidden = (*encoder)->HiddenStates(ids, mask, batch, seq, types);
  ASSERT_THAT(hidden, IsOk());
  int64_t row = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const auto len = static_cast<int64_t>(r.ids[b].size());
    EXPECT_LE(MaxAbsDiff(hidden->data() + row * h, r.hidden[b].data(), len * h), 1e-4)
        << GetParam() << " input " << b << " in the batch";
    row += len;
  }
  auto embeddings = (*encoder)->Encode(ids, mask, batch, seq, /*normalize=*/true, r.pooling, types);
  ASSERT_THAT(embeddings, IsOk());
  for (int64_t b = 0; b < batch; ++b) {
    EXPECT_GE(testing::Cosine(embeddings->data() + b * h, r.embedding[b].data(), h), 0.9999)
        << GetParam() << " input " << b << " in the batch";
  }
}

TEST_P(FamiliesTest, Bf16MatchesTransformers) {
  const Reference r = ReadReference(GetParam());
  EncoderCpuOptions o;
  o.precision = Precision::kBf16;
  auto encoder = TransformerEncoderCpu::Load(r.dir, o);
  if (!encoder.ok() && encoder.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "this CPU has no BF16 matmul: " << encoder.status();
  }
  ASSERT_THAT(encoder, IsOk());
  const int64_t h = (*encoder)->spec().hidden_size;
  for (size_t i = 0; i < r.ids.size(); ++i) {
    const auto len = static_cast<int64_t>(r.ids[i].size());
    auto embedding = (*encoder)->Encode(r.ids[i], std::vector<int64_t>(len, 1), 1, len,
                                        /*normalize=*/true, r.pooling, r.types[i]);
    ASSERT_THAT(embedding, IsOk());
    EXPECT_GE(testing::Cosine(embedding->data(), r.embedding[i].data(), h), 0.999)
        << GetParam() << " input " << i;
  }
}

// INT8 on every family's blocks (gated FFNs, grouped KV heads, rotary
// positions, relative biases): within the reduced-precision gate's floor
// (cosine >= 0.97 each, 0.99 on average) of transformers' FP32 embeddings,
// batch-invariant or not.
TEST_P(FamiliesTest, Int8StaysCloseToTransformers) {
  const Reference r = ReadReference(GetParam());
  for (const bool invariant : {false, true}) {
    EncoderCpuOptions o;
    o.precision = Precision::kInt8;
    o.batch_invariant = invariant;
    auto encoder = TransformerEncoderCpu::Load(r.dir, o);
    ASSERT_THAT(encoder, IsOk());
    const int64_t h = (*encoder)->spec().hidden_size;
    double mean = 0;
    for (size_t i = 0; i < r.ids.size(); ++i) {
      const auto len = static_cast<int64_t>(r.ids[i].size());
      auto embedding = (*encoder)->Encode(r.ids[i], std::vector<int64_t>(len, 1), 1, len,
                                          /*normalize=*/true, r.pooling, r.types[i]);
      ASSERT_THAT(embedding, IsOk());
      const double c = testing::Cosine(embedding->data(), r.embedding[i].data(), h);
      EXPECT_GE(c, 0.97) << GetParam() << " input " << i << " invariant " << invariant;
      mean += c / static_cast<double>(r.ids.size());
    }
    EXPECT_GE(mean, 0.99) << GetParam() << " invariant " << invariant;
  }
}

// Batch-invariant mode computes the same hidden states (to FP32 rounding).
TEST_P(FamiliesTest, BatchInvariantModeMatchesTransformers) {
  const Reference r = ReadReference(GetParam());
  EncoderCpuOptions o;
  o.precision = Precision::kFp32;
  o.batch_invariant = true;
  auto encoder = TransformerEncoderCpu::Load(r.dir, o);
  ASSERT_THAT(encoder, IsOk());
  const int64_t h = (*encoder)->spec().hidden_size;
  for (size_t i = 0; i < r.ids.size(); ++i) {
    const auto len = static_cast<int64_t>(r.ids[i].size());
    auto hidden =
        (*encoder)->HiddenStates(r.ids[i], std::vector<int64_t>(len, 1), 1, len, r.types[i]);
    ASSERT_THAT(hidden, IsOk());
    EXPECT_LE(MaxAbsDiff(hidden->data(), r.hidden[i].data(), len * h), 1e-4)
        << GetParam() << " input " << i;
  }
}

// [CLS] and last-token pooling compute the last layer for the pooled token
// alone (encoder_cpu.h, Keep): each row still equals transformers' hidden
// state at that token, whatever the fixture's own pooling, in a batch of
// every input with an empty row among them; in batch-invariant mode too,
// where each row also has the bits it has alone and the bits of the pass
// that computes every token.
TEST_P(FamiliesTest, ThePooledTokenAloneInTheLastLayerMatchesTransformers) {
  const Reference r = ReadReference(GetParam());
  for (bool invariant : {false, true}) {
    EncoderCpuOptions o;
    o.precision = Precision::kFp32;
    o.threads = 2;
    o.batch_invariant = invariant;
    auto encoder = TransformerEncoderCpu::Load(r.dir, o);
    ASSERT_THAT(encoder, IsOk());
    const int64_t h = (*encoder)->spec().hidden_size;
    // The inputs, right-padded, with an empty row after the first.
    std::vector<std::vector<int64_t>> rows_ids = r.ids, rows_types = r.types;
    rows_ids.insert(rows_ids.begin() + 1, std::vector<int64_t>());
    rows_types.insert(rows_types.begin() + 1, std::vector<int64_t>());
    const auto batch = static_cast<int64_t>(rows_ids.size());
    int64_t seq = 0;
    for (const auto& ids : rows_ids) seq = std::max<int64_t>(seq, static_cast<int64_t>(ids.size()));
    std::vector<int64_t> ids(batch * seq, 0), mask(batch * seq, 0), types(batch * seq, 0);
    for (int64_t b = 0; b < batch; ++b) {
      for (size_t t = 0; t < rows_ids[b].size(); ++t) {
        ids[b * seq + t] = rows_ids[b][t];
        mask[b * seq + t] = 1;
        if (!rows_types[b].empty()) types[b * seq + t] = rows_types[b][t];
      }
    }
    // Every token's last state, from the pass that computes them all.
    auto every_token = (*encoder)->HiddenStates(ids, mask, batch, seq, types);
    ASSERT_THAT(every_token, IsOk());
    std::vector<int64_t> row_start(batch + 1, 0);
    for (int64_t b = 0; b < batch; ++b) {
      row_start[b + 1] = row_start[b] + static_cast<int64_t>(rows_ids[b].size());
    }
    for (Pooling pooling : {Pooling::kCls, Pooling::kLastToken}) {
      auto got = (*encoder)->Encode(ids, mask, batch, seq, /*normalize=*/false, pooling, types);
      ASSERT_THAT(got, IsOk());
      for (int64_t b = 0, input = 0; b < batch; ++b) {
        const float* row = got->data() + b * h;
        if (rows_ids[b].empty()) {
          EXPECT_EQ(*std::max_element(row, row + h), 0.0f);
          EXPECT_EQ(*std::min_element(row, row + h), 0.0f);
          continue;
        }
        const auto len = static_cast<int64_t>(rows_ids[b].size());
        const int64_t token = pooling == Pooling::kCls ? 0 : len - 1;
        EXPECT_LE(MaxAbsDiff(row, r.hidden[input].data() + token * h, h), 1e-4)
            << GetParam() << " input " << input << ", " << PoolingName(pooling)
            << (invariant ? ", batch-invariant" : "");
        if (invariant) {
          auto alone = (*encoder)->Encode(rows_ids[b], std::vector<int64_t>(len, 1), 1, len,
                                          /*normalize=*/false, pooling, rows_types[b]);
          ASSERT_THAT(alone, IsOk());
          EXPECT_EQ(*alone, std::vector<float>(row, row + h))
              << GetParam() << " input " << input << " alone, " << PoolingName(pooling);
          // The same bits as the pass that computes every token (what a batch
          // runs when one of its requests asks for token states).
          const float* full = every_token->data() + (row_start[b] + token) * h;
          EXPECT_EQ(std::vector<float>(full, full + h), std::vector<float>(row, row + h))
              << GetParam() << " input " << input << ", every token computed, "
              << PoolingName(pooling);
        }
        ++input;
      }
    }
  }
}

// A fresh temporary folder holding the checkpoint folder `src`'s config.json
// and tokenizer.json, for a test to write that checkpoint's tensors into in
// another layout.
std::filesystem::path TempFolderWithConfig(const std::string& src, const std::string& prefix) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / (prefix + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json"}) fs::copy(src + "/" + f, dir / f);
  return dir;
}

// A checkpoint split into shards (model.safetensors.index.json, as the
// hub stores large models) loads to the same weights.
TEST(ShardedCheckpointTest, ShardsLoadAsOneFile) {
  namespace fs = std::filesystem;
  const std::string src = testing::FixturePath("families/qwen3");
  const fs::path dir = TempFolderWithConfig(src, "sharded_");
  auto tensors = ReadSafetensors(src + "/model.safetensors");
  ASSERT_THAT(tensors, IsOk());
  std::map<std::string, CheckpointTensor> shard[2];
  nlohmann::json index = {{"metadata", nlohmann::json::object()},
                          {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (auto& [name, t] : *tensors) {
    const std::string file = absl::StrCat("model-0000", i % 2 + 1, "-of-00002.safetensors");
    index["weight_map"][name] = file;
    shard[i++ % 2][name] = t;
  }
  ASSERT_THAT(
      WriteSafetensors((dir / "model-00001-of-00002.safetensors").string(), shard[0], "F32"),
      IsOk());
  ASSERT_THAT(
      WriteSafetensors((dir / "model-00002-of-00002.safetensors").string(), shard[1], "F32"),
      IsOk());
  std::ofstream((dir / "model.safetensors.index.json").string()) << index.dump();
  auto one = LoadTransformerWeights(src);
  auto sharded = LoadTransformerWeights(dir.string());
  ASSERT_THAT(one, IsOk());
  ASSERT_THAT(sharded, IsOk());
  EXPECT_EQ(sharded->ParameterCount(), one->ParameterCount());
  EXPECT_EQ(sharded->layers[1].ffn_in.w, one->layers[1].ffn_in.w);
  EXPECT_EQ(sharded->final_norm.gamma, one->final_norm.gamma);
  // A shard name that leaves the folder is refused.
  index["weight_map"]["norm.weight"] = "../model.safetensors";
  std::ofstream((dir / "model.safetensors.index.json").string(), std::ios::trunc) << index.dump();
  EXPECT_THAT(LoadTransformerWeights(dir.string()),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, "is not a file name"));
  fs::remove_all(dir);
}

// A checkpoint converted from the original TensorFlow BERT stores its
// LayerNorms as gamma and beta (as SPLADE-tiny's does); transformers renames
// them at load, and so does the loader.
TEST(LegacyCheckpointTest, GammaAndBetaLoadAsWeightAndBias) {
  namespace fs = std::filesystem;
  const std::string src = testing::FixturePath("sparse/bert-splade");
  const fs::path dir = TempFolderWithConfig(src, "legacy_");
  auto tensors = ReadSafetensors(src + "/model.safetensors");
  ASSERT_THAT(tensors, IsOk());
  std::map<std::string, CheckpointTensor> legacy;
  int renamed = 0;
  for (auto& [name, t] : *tensors) {
    std::string n = name;
    if (absl::EndsWith(n, "LayerNorm.weight")) {
      n = absl::StrCat(n.substr(0, n.size() - 6), "gamma");
      ++renamed;
    } else if (absl::EndsWith(n, "LayerNorm.bias")) {
      n = absl::StrCat(n.substr(0, n.size() - 4), "beta");
    }
    legacy[n] = t;
  }
  EXPECT_EQ(renamed, 2 * 2 + 1 + 1);  // 2 per layer, the embeddings', the MLM head's
  ASSERT_THAT(WriteSafetensors((dir / "model.safetensors").string(), legacy, "F32"), IsOk());
  auto modern = LoadTransformerWeights(src, /*masked_lm_head=*/true);
  auto old = LoadTransformerWeights(dir.string(), /*masked_lm_head=*/true);
  ASSERT_THAT(modern, IsOk());
  ASSERT_THAT(old, IsOk());
  EXPECT_EQ(old->ParameterCount(), modern->ParameterCount());
  EXPECT_EQ(old->embed_norm.gamma, modern->embed_norm.gamma);
  EXPECT_EQ(old->embed_norm.beta, modern->embed_norm.beta);
  EXPECT_EQ(old->layers[1].attn_norm.beta, modern->layers[1].attn_norm.beta);
  EXPECT_EQ(old->layers[1].ffn_norm.gamma, modern->layers[1].ffn_norm.gamma);
  EXPECT_EQ(old->masked_lm.norm.gamma, modern->masked_lm.norm.gamma);
  fs::remove_all(dir);
}

// A Qwen2 config written before transformers had layer_types (most of the
// hub's gte-Qwen2 and Qwen2 configs): the windows come from
// max_window_layers on, as transformers derives layer_types. The
// qwen2-scaled fixture (max_window_layers 1, a window of 16 over inputs of
// up to 96 tokens) without its layer_types matches transformers as it is;
// without use_sliding_window, the same config is computed with no window,
// which must differ, or the check would not tell.
TEST(OlderQwenConfigTest, WindowsFromMaxWindowLayersMatchTransformers) {
  namespace fs = std::filesystem;
  const Reference r = ReadReference("qwen2-scaled");
  const fs::path dir = fs::path(::testing::TempDir()) / ("qwen2_old_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(r.dir, dir, fs::copy_options::recursive);
  auto text = ReadCheckpointFile((dir / "config.json").string());
  ASSERT_THAT(text, IsOk());
  nlohmann::json config = nlohmann::json::parse(*text);
  ASSERT_EQ(config["layer_types"], nlohmann::json({"full_attention", "sliding_attention"}));
  ASSERT_EQ(config["max_window_layers"], 1);
  config.erase("layer_types");
  auto hidden_of_longest = [&](const nlohmann::json& c) -> std::pair<double, int64_t> {
    std::ofstream((dir / "config.json").string(), std::ios::trunc) << c.dump();
    EncoderCpuOptions o;
    o.precision = Precision::kFp32;
    o.threads = 2;
    auto encoder = TransformerEncoderCpu::Load(dir.string(), o);
    EXPECT_THAT(encoder, IsOk());
    if (!encoder.ok()) return {1e9, 0};
    size_t longest = 0;
    for (size_t i = 1; i < r.ids.size(); ++i) {
      if (r.ids[i].size() > r.ids[longest].size()) longest = i;
    }
    const auto len = static_cast<int64_t>(r.ids[longest].size());
    auto hidden = (*encoder)->HiddenStates(r.ids[longest], std::vector<int64_t>(len, 1), 1, len,
                                           r.types[longest]);
    EXPECT_THAT(hidden, IsOk());
    if (!hidden.ok()) return {1e9, 0};
    const int64_t h = (*encoder)->spec().hidden_size;
    return {MaxAbsDiff(hidden->data(), r.hidden[longest].data(), len * h), len};
  };
  const auto [windowed, len] = hidden_of_longest(config);
  EXPECT_GT(len, 16) << "the longest input must exceed the window";
  EXPECT_LE(windowed, 1e-4);
  config["use_sliding_window"] = false;
  EXPECT_GT(hidden_of_longest(config).first, 1e-3) << "the window does not change the output";
  fs::remove_all(dir);
}

// Sequence-classification checkpoints (tests/fixtures/classifiers, made by
// make_family_fixtures.py --classifiers): the head's logits on (query,
// passage) pairs, each alone and all in one padded batch, within 1e-4 of
// transformers' *ForSequenceClassification.
class ClassifierTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ClassifierTest, LogitsMatchTransformers) {
  const std::string dir = testing::FixturePath(std::string("classifiers/") + GetParam());
  auto text = ReadCheckpointFile(dir + "/reference.json");
  ASSERT_THAT(text, IsOk());
  const nlohmann::json j = nlohmann::json::parse(*text);
  auto tensors = ReadSafetensors(dir + "/reference.safetensors");
  ASSERT_THAT(tensors, IsOk());
  EncoderCpuOptions o;
  o.precision = Precision::kFp32;
  o.threads = 2;
  auto encoder = TransformerEncoderCpu::Load(dir, o);
  ASSERT_THAT(encoder, IsOk());
  EXPECT_EQ((*encoder)->spec().labels, j["labels"].get<std::vector<std::string>>());
  const auto labels = static_cast<int64_t>((*encoder)->spec().labels.size());
  // Segment ids go in where the model has a token-type table (DistilBERT's
  // tokenizer gives them, and its model takes none).
  const bool with_types = (*encoder)->spec().type_vocab_size > 0;
  const size_t n = j["inputs"].size();
  ASSERT_GE(n, 3u);
  int64_t seq = 0;
  for (const auto& in : j["inputs"]) seq = std::max<int64_t>(seq, in["ids"].size());
  std::vector<int64_t> ids(n * seq, 0), types(n * seq, 0), mask(n * seq, 0);
  for (size_t i = 0; i < n; ++i) {
    const auto one_ids = j["inputs"][i]["ids"].get<std::vector<int64_t>>();
    const auto one_types = j["inputs"][i]["types"].get<std::vector<int64_t>>();
    const auto len = static_cast<int64_t>(one_ids.size());
    const std::vector<float>& want = (*tensors)["logits_" + std::to_string(i)].values;
    ASSERT_EQ(static_cast<int64_t>(want.size()), labels);
    auto alone = (*encoder)->Classify(one_ids, std::vector<int64_t>(len, 1), 1, len,
                                      with_types ? one_types : std::vector<int64_t>());
    ASSERT_THAT(alone, IsOk());
    EXPECT_LE(MaxAbsDiff(alone->data(), want.data(), labels), 1e-4) << GetParam() << " pair " << i;
    for (int64_t t = 0; t < len; ++t) {
      ids[i * seq + t] = one_ids[t];
      types[i * seq + t] = one_types[t];
      mask[i * seq + t] = 1;
    }
  }
  auto batched = (*encoder)->Classify(ids, mask, static_cast<int64_t>(n), seq,
                                      with_types ? types : std::vector<int64_t>());
  ASSERT_THAT(batched, IsOk());
  for (size_t i = 0; i < n; ++i) {
    const std::vector<float>& want = (*tensors)["logits_" + std::to_string(i)].values;
    EXPECT_LE(MaxAbsDiff(batched->data() + i * labels, want.data(), labels), 1e-4)
        << GetParam() << " pair " << i << " in the batch";
  }
}

TEST(ClassifierTest, AnEmbeddingCheckpointHasNoHead) {
  EncoderCpuOptions o;
  o.precision = Precision::kFp32;
  auto encoder = TransformerEncoderCpu::Load(testing::FixturePath("families/bert"), o);
  ASSERT_THAT(encoder, IsOk());
  EXPECT_TRUE((*encoder)->spec().labels.empty());
  EXPECT_THAT(
      (*encoder)->Classify({5}, {1}, 1, 1),
      testing::StatusIs(absl::StatusCode::kFailedPrecondition, "without a classification head"));
}

INSTANTIATE_TEST_SUITE_P(Classifiers, ClassifierTest,
                         ::testing::Values("bert-reranker", "xlm-roberta-classifier",
                                           "distilbert-classifier", "gte-reranker",
                                           "mpnet-reranker", "modernbert-classifier",
                                           "gte-native-reranker", "qwen3-reranker"),
                         testing::FamilyTestName);

INSTANTIATE_TEST_SUITE_P(Families, FamiliesTest,
                         ::testing::Values("xlm-roberta", "mpnet", "modernbert", "qwen3", "bert",
                                           "qwen2", "llama", "mistral", "distilbert", "nomic_bert",
                                           "new", "nomic_bert-native", "gte", "roberta",
                                           "camembert", "qwen2-scaled", "xlm-roberta-pad3",
                                           "mpnet-pad0"),
                         testing::FamilyTestName);

// The CUDA encoder's fixtures (heads of 32; Qwen3's query width past its
// hidden size), checked on the CPU too, so that a GPU failure on them is the
// CUDA path's and not the fixture's.
INSTANTIATE_TEST_SUITE_P(CudaFixtures, FamiliesTest,
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
