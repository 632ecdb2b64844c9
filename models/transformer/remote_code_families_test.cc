// NomicBERT's and GTE's config.json (models/transformer/remote_code_families.cc)
// mapped to the description, as their authors' modelling code reads them,
// and what it computes that the description cannot refused by field.
#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "models/transformer/transformer_spec.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

absl::StatusOr<TransformerSpec> Parse(const std::string& text) {
  return ParseTransformerSpec(text, "config.json");
}

// `sizes` with `extra` fields is refused, the message containing `message`.
void ExpectRefused(const std::string& sizes, const std::string& extra, const std::string& message) {
  EXPECT_THAT(Parse("{" + sizes + ", " + extra + "}"),
              StatusIs(absl::StatusCode::kInvalidArgument, message))
      << extra;
}

// nomic-embed-text-v1.5's config.json as published (sizes and fields).
const char* kNomicV15 = R"({"model_type": "nomic_bert", "vocab_size": 30528,
    "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": 3072, "n_positions": 8192,
    "max_trained_positions": 2048, "type_vocab_size": 2, "pad_token_id": 0,
    "layer_norm_epsilon": 1e-12, "activation_function": "swiglu", "prenorm": false,
    "causal": false, "rotary_emb_fraction": 1.0, "rotary_emb_base": 1000,
    "rotary_emb_interleaved": false, "rotary_emb_scale_base": null,
    "rotary_scaling_factor": null, "qkv_proj_bias": false, "mlp_fc1_bias": false,
    "mlp_fc2_bias": false, "pad_vocab_size_multiple": 64})";

TEST(RemoteCodeFamiliesTest, NomicBertIsPostNormRotarySwiGlu) {
  auto s = Parse(kNomicV15);
  ASSERT_THAT(s, IsOk());
  EXPECT_FALSE(s->IsBertShaped());
  EXPECT_EQ(s->hidden_size, 768);
  EXPECT_EQ(s->num_layers, 12);
  EXPECT_EQ(s->head_dim, 64);
  EXPECT_EQ(s->intermediate_size, 3072);  // already a multiple of 256
  EXPECT_EQ(s->vocab_size, 30528);        // already a multiple of 64
  EXPECT_EQ(s->type_vocab_size, 2);
  EXPECT_TRUE(s->embed_norm && s->gated && !s->pre_norm && !s->final_norm && !s->causal);
  EXPECT_FALSE(s->absolute_positions);
  EXPECT_EQ(s->activation, ActivationKind::kSilu);
  EXPECT_EQ(s->rope_theta, std::vector<double>(12, 1000.0));
  EXPECT_DOUBLE_EQ(s->rope_linear_factor, 1.0);
  EXPECT_FALSE(s->qkv_bias || s->attn_out_bias || s->ffn_in_bias || s->ffn_out_bias);
  EXPECT_DOUBLE_EQ(s->norm_eps, 1e-12);
  // No NTK scaling asked for: positions up to n_positions, as the code
  // computes them.
  EXPECT_EQ(s->MaxSequenceLength(), 8192);
}

TEST(RemoteCodeFamiliesTest, NomicBertRoundsItsWidthsAsTheModelDoes) {
  auto s = Parse(R"({"model_type": "nomic_bert", "vocab_size": 1001, "n_embd": 64,
      "n_layer": 1, "n_head": 4, "n_inner": 100, "n_positions": 64,
      "activation_function": "geglu", "rotary_emb_fraction": 1.0,
      "pad_vocab_size_multiple": 8, "mlp_fc2_bias": false})");
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->intermediate_size, 256);  // gated: up to a multiple of 256
  EXPECT_EQ(s->vocab_size, 1008);
  EXPECT_EQ(s->activation, ActivationKind::kGelu);
  EXPECT_TRUE(s->gated && s->qkv_bias && s->ffn_in_bias && !s->ffn_out_bias);
  EXPECT_EQ(s->rope_theta, std::vector<double>(1, 10000.0));
  EXPECT_DOUBLE_EQ(s->norm_eps, 1e-5);  // GPT-2's default
  // n_inner absent: 8 · n_embd / 3 when gated (then rounded), 4 · n_embd
  // otherwise; every GELU name is the ungated erf GELU (the code passes
  // F.gelu whatever the name).
  auto gated = Parse(R"({"model_type": "nomic_bert", "vocab_size": 100, "n_embd": 768,
      "n_layer": 1, "n_head": 12, "n_positions": 64, "activation_function": "swiglu",
      "rotary_emb_fraction": 1.0})");
  ASSERT_THAT(gated, IsOk());
  EXPECT_EQ(gated->intermediate_size, 2048);
  auto plain = Parse(R"({"model_type": "nomic_bert", "vocab_size": 100, "n_embd": 64,
      "n_layer": 1, "n_head": 4, "n_positions": 64, "activation_function": "gelu_new",
      "rotary_emb_fraction": 1.0})");
  ASSERT_THAT(plain, IsOk());
  EXPECT_FALSE(plain->gated);
  EXPECT_EQ(plain->intermediate_size, 256);
  EXPECT_EQ(plain->activation, ActivationKind::kGelu);
}

// With rotary_scaling_factor the code rescales θ from a batch's padded
// length past max_trained_positions: served only up to there.
TEST(RemoteCodeFamiliesTest, NomicBertWithDynamicNtkStopsWhereScalingWouldStart) {
  std::string config = kNomicV15;
  const std::string unscaled = R"("rotary_scaling_factor": null)";
  config.replace(config.find(unscaled), unscaled.size(), R"("rotary_scaling_factor": 2.0)");
  auto s = Parse(config);
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->MaxSequenceLength(), 2048);
}

TEST(RemoteCodeFamiliesTest, NomicBertRefusesWhatItCannotComputeNamingTheField) {
  const std::string sizes = R"("model_type": "nomic_bert", "vocab_size": 100, "n_embd": 64,
      "n_layer": 1, "n_head": 4, "n_positions": 64)";
  auto refused = [&](const std::string& extra, const std::string& message) {
    ExpectRefused(sizes, extra, message);
  };
  refused(R"("activation_function": "swiglu")", "field 'rotary_emb_fraction': must be 1");
  refused(R"("rotary_emb_fraction": 0.5)", "field 'rotary_emb_fraction'");
  refused(R"("rotary_emb_fraction": 1.0, "activation_function": "glu")",
          "field 'activation_function': 'glu'");
  refused(R"("rotary_emb_fraction": 1.0, "prenorm": true)", "field 'prenorm'");
  refused(R"("rotary_emb_fraction": 1.0, "rotary_emb_interleaved": true)",
          "field 'rotary_emb_interleaved'");
  refused(R"("rotary_emb_fraction": 1.0, "rotary_emb_scale_base": 512)",
          "field 'rotary_emb_scale_base'");
  refused(R"("rotary_emb_fraction": 1.0, "num_heads_kv": 2)", "field 'num_heads_kv'");
  refused(R"("rotary_emb_fraction": 1.0, "moe_every_n_layers": 2, "num_experts": 8)",
          "field 'moe_every_n_layers': mixture-of-experts");
  refused(R"("rotary_emb_fraction": 1.0, "n_head": 5)", "n_embd 64 is not divisible by n_head 5");
  refused(R"("rotary_emb_fraction": 1.0, "architectures": ["NomicBertForSequenceClassification"])",
          "classifier is not supported");
}

// gte-base-en-v1.5's config.json as published (sizes and fields).
const char* kGteBase = R"({"model_type": "new", "vocab_size": 30528, "hidden_size": 768,
    "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
    "hidden_act": "gelu", "max_position_embeddings": 8192, "type_vocab_size": 0,
    "layer_norm_type": "layer_norm", "layer_norm_eps": 1e-12, "pad_token_id": 0,
    "position_embedding_type": "rope", "rope_theta": 500000,
    "rope_scaling": {"factor": 2.0, "type": "ntk"}, "pack_qkv": true,
    "unpad_inputs": false, "use_memory_efficient_attention": false,
    "architectures": ["NewModel"]})";

TEST(RemoteCodeFamiliesTest, GteIsPostNormRotaryGeGluWithFixedNtk) {
  auto s = Parse(kGteBase);
  ASSERT_THAT(s, IsOk());
  EXPECT_FALSE(s->IsBertShaped());
  EXPECT_EQ(s->head_dim, 64);
  EXPECT_EQ(s->type_vocab_size, 0);
  EXPECT_TRUE(s->embed_norm && s->gated && !s->pre_norm && !s->absolute_positions);
  EXPECT_EQ(s->activation, ActivationKind::kGelu);
  EXPECT_TRUE(s->qkv_bias && s->attn_out_bias && !s->ffn_in_bias && s->ffn_out_bias);
  // NTK by 2: θ · 2, positions divided by 2^(2/64).
  EXPECT_EQ(s->rope_theta, std::vector<double>(12, 1e6));
  EXPECT_DOUBLE_EQ(s->rope_linear_factor, std::pow(2.0, 2.0 / 64));
  EXPECT_EQ(s->MaxSequenceLength(), 8192);
  EXPECT_TRUE(s->labels.empty());
  // Without rope_scaling: plain θ; the classifier's labels.
  auto reranker = Parse(R"({"model_type": "new", "vocab_size": 100, "hidden_size": 32,
      "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 64,
      "max_position_embeddings": 64, "architectures": ["NewForSequenceClassification"],
      "num_labels": 1})");
  ASSERT_THAT(reranker, IsOk());
  EXPECT_EQ(reranker->rope_theta, std::vector<double>(1, 10000.0));
  EXPECT_DOUBLE_EQ(reranker->rope_linear_factor, 1.0);
  EXPECT_EQ(reranker->type_vocab_size, 1);
  EXPECT_EQ(reranker->labels, std::vector<std::string>{"LABEL_0"});
}

// transformers 5's own classes (NomicBertConfig, GteConfig: model_type gte)
// write BERT's field names and rope_parameters; their save_pretrained keeps
// the original tensor names.
TEST(RemoteCodeFamiliesTest, TransformersOwnConfigsAreRead) {
  auto nomic = Parse(R"({"model_type": "nomic_bert", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
      "max_position_embeddings": 2048, "hidden_act": "silu", "layer_norm_eps": 1e-12,
      "type_vocab_size": 2, "rope_parameters": {"rope_theta": 1000.0, "rope_type": "default"}})");
  ASSERT_THAT(nomic, IsOk());
  EXPECT_EQ(nomic->intermediate_size, 128);  // as written: no rounding here
  EXPECT_TRUE(nomic->gated && nomic->embed_norm && !nomic->pre_norm);
  EXPECT_EQ(nomic->activation, ActivationKind::kSilu);
  EXPECT_FALSE(nomic->qkv_bias || nomic->attn_out_bias || nomic->ffn_in_bias ||
               nomic->ffn_out_bias);
  EXPECT_EQ(nomic->rope_theta, std::vector<double>(2, 1000.0));
  EXPECT_EQ(nomic->MaxSequenceLength(), 2048);
  auto gte = Parse(R"({"model_type": "gte", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128,
      "max_position_embeddings": 8192, "hidden_act": "gelu", "type_vocab_size": 1,
      "rope_parameters": {"rope_theta": 160000.0, "rope_type": "default"}})");
  ASSERT_THAT(gte, IsOk());
  EXPECT_EQ(gte->rope_theta, std::vector<double>(1, 160000.0));
  EXPECT_DOUBLE_EQ(gte->rope_linear_factor, 1.0);
  EXPECT_TRUE(gte->gated && gte->qkv_bias && !gte->ffn_in_bias && gte->ffn_out_bias);
  // Linear scaling, as the other families read it.
  auto linear = Parse(R"({"model_type": "new", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128,
      "max_position_embeddings": 64, "rope_scaling": {"type": "linear", "factor": 2.0}})");
  ASSERT_THAT(linear, IsOk());
  EXPECT_DOUBLE_EQ(linear->rope_linear_factor, 2.0);
}

TEST(RemoteCodeFamiliesTest, GteRefusesWhatItCannotComputeNamingTheField) {
  const std::string sizes = R"("model_type": "new", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128,
      "max_position_embeddings": 64)";
  auto refused = [&](const std::string& extra, const std::string& message) {
    ExpectRefused(sizes, extra, message);
  };
  refused(R"("position_embedding_type": "absolute")", "field 'position_embedding_type'");
  refused(R"("layer_norm_type": "rms_norm")", "field 'layer_norm_type'");
  refused(R"("logn_attention_scale": true)", "field 'logn_attention_scale'");
  refused(R"("rope_scaling": {"type": "ntk", "factor": 2.0, "mixed_b": 0.8})", "mixed_b");
  refused(R"("rope_scaling": {"type": "yarn", "factor": 2.0})", "rope type 'yarn'");
  refused(R"("rope_scaling": {"type": "ntk"})", "factor must be a positive number");
  refused(R"("rope_scaling": 3)", "rope parameters must be an object");
  refused(R"("hidden_act": "relu")", "field 'hidden_act' = 'relu'");
}

// The committed fixtures' configs, as the fixture script writes them.
TEST(RemoteCodeFamiliesTest, FixturesMapToTheirBlocks) {
  auto nomic = ReadTransformerSpec(testing::FixturePath("families/nomic_bert/config.json"));
  ASSERT_THAT(nomic, IsOk());
  EXPECT_EQ(nomic->intermediate_size, 256);  // n_inner 100, rounded
  EXPECT_TRUE(!nomic->qkv_bias && !nomic->ffn_in_bias && nomic->ffn_out_bias);
  EXPECT_EQ(nomic->vocab_size % 8, 0);
  auto gte = ReadTransformerSpec(testing::FixturePath("families/new/config.json"));
  ASSERT_THAT(gte, IsOk());
  EXPECT_EQ(gte->rope_theta, std::vector<double>(2, 1e6));
  EXPECT_NE(gte->Describe().find("rotary positions"), std::string::npos) << gte->Describe();
}

}  // namespace
}  // namespace infer
