#include "models/transformer/transformer_spec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

absl::StatusOr<TransformerSpec> Parse(const std::string& text) {
  return ParseTransformerSpec(text, "config.json");
}

TEST(TransformerSpecTest, BertIsBertShapedWithItsPositionTable) {
  auto s = Parse(R"({"model_type": "bert", "vocab_size": 100, "hidden_size": 32,
      "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
      "max_position_embeddings": 512})");
  ASSERT_THAT(s, IsOk());
  EXPECT_TRUE(s->IsBertShaped());
  EXPECT_EQ(s->head_dim, 8);
  EXPECT_EQ(s->type_vocab_size, 2);
  EXPECT_EQ(s->MaxSequenceLength(), 512);
  EXPECT_DOUBLE_EQ(s->norm_eps, 1e-12);
}

// DistilBERT names its sizes its own way (dim, n_layers, n_heads,
// hidden_dim; transformers' attribute_map), has no token types and no
// position offset, and its classifier's dense layer is followed by ReLU.
TEST(TransformerSpecTest, DistilBertIsBertShapedUnderItsOwnNames) {
  auto s = Parse(R"({"model_type": "distilbert", "vocab_size": 100, "dim": 32, "n_layers": 3,
      "n_heads": 4, "hidden_dim": 64, "max_position_embeddings": 512, "activation": "gelu",
      "pad_token_id": 0, "architectures": ["DistilBertForSequenceClassification"],
      "id2label": {"0": "NEGATIVE", "1": "POSITIVE"}})");
  ASSERT_THAT(s, IsOk());
  EXPECT_TRUE(s->IsBertShaped());
  EXPECT_EQ(s->hidden_size, 32);
  EXPECT_EQ(s->num_layers, 3);
  EXPECT_EQ(s->num_heads, 4);
  EXPECT_EQ(s->head_dim, 8);
  EXPECT_EQ(s->intermediate_size, 64);
  EXPECT_EQ(s->type_vocab_size, 0);
  EXPECT_EQ(s->position_offset, 0);
  EXPECT_EQ(s->MaxSequenceLength(), 512);
  EXPECT_DOUBLE_EQ(s->norm_eps, 1e-12);
  EXPECT_EQ(s->labels, (std::vector<std::string>{"NEGATIVE", "POSITIVE"}));
  EXPECT_EQ(s->classifier_activation, TransformerSpec::HeadActivation::kRelu);
  // Errors name DistilBERT's fields.
  EXPECT_THAT(Parse(R"({"model_type": "distilbert", "vocab_size": 100, "dim": 30, "n_layers": 1,
      "n_heads": 4, "hidden_dim": 64, "max_position_embeddings": 8})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "config.json: dim 30 is not divisible by n_heads 4"));
  EXPECT_THAT(Parse(R"({"model_type": "distilbert", "vocab_size": 100, "hidden_size": 32,
      "n_layers": 1, "n_heads": 4, "hidden_dim": 64, "max_position_embeddings": 8})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "config.json: field 'dim' must be a positive integer"));
  EXPECT_THAT(Parse(R"({"model_type": "distilbert", "vocab_size": 100, "dim": 32, "n_layers": 1,
      "n_heads": 4, "hidden_dim": 64, "max_position_embeddings": 8, "activation": "relu"})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "config.json: field 'activation' = 'relu'; supported: gelu, gelu_new, "
                       "gelu_pytorch_tanh, silu"));
}

// Which id RoBERTa's position ids skip, as transformers' embeddings take it:
// config.pad_token_id for roberta, xlm-roberta and camembert (1 when the
// config names none, their config classes' default); 1 for mpnet whatever
// pad_token_id says; none for bert.
TEST(TransformerSpecTest, PositionPaddingIdIsTransformersPaddingIdx) {
  const std::string sizes = R"("vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 1,
      "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 40)";
  struct Case {
    std::string type, pad;
    int64_t padding_id;
  };
  for (const Case& c : std::vector<Case>{{"roberta", R"(, "pad_token_id": 3)", 3},
                                         {"xlm-roberta", R"(, "pad_token_id": 0)", 0},
                                         {"camembert", R"(, "pad_token_id": 5)", 5},
                                         {"roberta", "", 1},
                                         {"mpnet", R"(, "pad_token_id": 0)", 1},
                                         {"mpnet", R"(, "pad_token_id": 7)", 1},
                                         {"bert", R"(, "pad_token_id": 3)", -1}}) {
    auto s = Parse(absl::StrCat(R"({"model_type": ")", c.type, R"(", )", sizes, c.pad, "}"));
    ASSERT_THAT(s, IsOk()) << c.type << c.pad;
    EXPECT_EQ(s->position_padding_id, c.padding_id) << c.type << c.pad;
    EXPECT_EQ(s->position_offset, c.padding_id + 1) << c.type << c.pad;
    EXPECT_EQ(s->MaxSequenceLength(), 40 - (c.padding_id + 1)) << c.type << c.pad;
  }
}

TEST(TransformerSpecTest, FixtureFamiliesMapToTheirBlocks) {
  auto read = [](const std::string& family) {
    return ReadTransformerSpec(testing::FixturePath("families/" + family + "/config.json"));
  };
  auto xlmr = read("xlm-roberta");
  ASSERT_THAT(xlmr, IsOk());
  EXPECT_TRUE(xlmr->IsBertShaped());
  EXPECT_EQ(xlmr->position_offset, 2);  // pad_token_id 1, plus one
  EXPECT_EQ(xlmr->MaxSequenceLength(), 64);
  EXPECT_EQ(xlmr->type_vocab_size, 1);

  auto mpnet = read("mpnet");
  ASSERT_THAT(mpnet, IsOk());
  EXPECT_FALSE(mpnet->IsBertShaped());
  EXPECT_EQ(mpnet->relative_buckets, 32);
  EXPECT_EQ(mpnet->type_vocab_size, 0);

  auto modern = read("modernbert");
  ASSERT_THAT(modern, IsOk());
  EXPECT_TRUE(modern->pre_norm && modern->final_norm && modern->gated && !modern->norm_bias);
  EXPECT_FALSE(modern->first_attn_norm);
  EXPECT_FALSE(modern->qkv_bias || modern->ffn_in_bias || modern->ffn_out_bias);
  EXPECT_EQ(modern->window, (std::vector<int64_t>{0, 8, 8}));  // local_attention 16, halved
  EXPECT_EQ(modern->rope_theta, (std::vector<double>{160000.0, 10000.0, 10000.0}));
  EXPECT_EQ(modern->MaxSequenceLength(), 128);

  auto qwen = read("qwen3");
  ASSERT_THAT(qwen, IsOk());
  EXPECT_TRUE(qwen->causal && qwen->qk_norm && qwen->gated);
  EXPECT_EQ(qwen->norm, NormKind::kRmsNorm);
  EXPECT_EQ(qwen->activation, ActivationKind::kSilu);
  EXPECT_EQ(qwen->num_kv_heads, 1);
  EXPECT_EQ(qwen->head_dim, 16);
  EXPECT_EQ(qwen->rope_theta, (std::vector<double>{1e6, 1e6}));
  EXPECT_NE(qwen->Describe().find("(1 KV)"), std::string::npos) << qwen->Describe();
}

// Hub configs written before transformers 5 name θ and the window their
// own way.
TEST(TransformerSpecTest, OlderConfigFieldsAreRead) {
  auto modern = Parse(R"({"model_type": "modernbert", "vocab_size": 50368, "hidden_size": 768,
      "num_hidden_layers": 4, "num_attention_heads": 12, "intermediate_size": 1152,
      "max_position_embeddings": 8192, "global_attn_every_n_layers": 3, "local_attention": 128,
      "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "pad_token_id": 50283})");
  ASSERT_THAT(modern, IsOk());
  EXPECT_EQ(modern->window, (std::vector<int64_t>{0, 64, 64, 0}));
  EXPECT_EQ(modern->rope_theta, (std::vector<double>{160000.0, 10000.0, 10000.0, 160000.0}));
  auto mistral = Parse(R"({"model_type": "mistral", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
      "intermediate_size": 128, "max_position_embeddings": 4096, "sliding_window": 4096,
      "rope_theta": 10000.0, "rms_norm_eps": 1e-5})");
  ASSERT_THAT(mistral, IsOk());
  EXPECT_EQ(mistral->window, (std::vector<int64_t>{4095, 4095}));
  EXPECT_FALSE(mistral->qk_norm);
  auto qwen2 = Parse(R"({"model_type": "qwen2", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
      "intermediate_size": 128, "max_position_embeddings": 1024,
      "rope_scaling": {"type": "linear", "factor": 2.0}})");
  ASSERT_THAT(qwen2, IsOk());
  EXPECT_TRUE(qwen2->qkv_bias);
  EXPECT_FALSE(qwen2->attn_out_bias);
  EXPECT_DOUBLE_EQ(qwen2->rope_linear_factor, 2.0);
  // Qwen's windows without layer_types: from max_window_layers on (as
  // transformers derives layer_types), and only with use_sliding_window.
  const std::string windowed = R"("model_type": "qwen2", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
      "intermediate_size": 128, "max_position_embeddings": 1024, "sliding_window": 16)";
  auto from_two = Parse(
      absl::StrCat("{", windowed, R"(, "use_sliding_window": true, "max_window_layers": 2})"));
  ASSERT_THAT(from_two, IsOk());
  EXPECT_EQ(from_two->window, (std::vector<int64_t>{0, 0, 15, 15}));
  auto unused = Parse(absl::StrCat("{", windowed, R"(, "max_window_layers": 2})"));
  ASSERT_THAT(unused, IsOk());
  EXPECT_EQ(unused->window, (std::vector<int64_t>{0, 0, 0, 0}));
  auto past_the_layers = Parse(absl::StrCat("{", windowed, R"(, "use_sliding_window": true})"));
  ASSERT_THAT(past_the_layers, IsOk());  // the default, 28, is past the 4 layers
  EXPECT_EQ(past_the_layers->window, (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(TransformerSpecTest, ClassificationLabelsComeFromTheArchitecture) {
  const std::string base = R"("model_type": "xlm-roberta", "vocab_size": 100,
      "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
      "intermediate_size": 64, "max_position_embeddings": 66)";
  auto plain = Parse("{" + base + R"(, "architectures": ["XLMRobertaModel"]})");
  ASSERT_THAT(plain, IsOk());
  EXPECT_TRUE(plain->labels.empty());
  auto named = Parse("{" + base + R"(, "architectures": ["XLMRobertaForSequenceClassification"],
      "id2label": {"1": "yes", "0": "no"}})");
  ASSERT_THAT(named, IsOk());
  EXPECT_EQ(named->labels, (std::vector<std::string>{"no", "yes"}));
  EXPECT_NE(named->Describe().find("classification head, 2 labels"), std::string::npos);
  auto counted = Parse("{" + base + R"(, "architectures": ["BertForSequenceClassification"],
      "num_labels": 3})");
  ASSERT_THAT(counted, IsOk());
  EXPECT_EQ(counted->labels, (std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"}));
  EXPECT_THAT(Parse("{" + base + R"(, "architectures": ["BertForSequenceClassification"],
      "id2label": {"0": "a", "2": "c"}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "id 1 is not"));
  EXPECT_THAT(Parse("{" + base + R"(, "architectures": ["BertForSequenceClassification"],
      "num_labels": 100000000})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "'num_labels' is over 65536"));
  EXPECT_FALSE(counted->multi_label);
  auto multi = Parse("{" + base + R"(, "architectures": ["BertForSequenceClassification"],
      "num_labels": 3, "problem_type": "multi_label_classification"})");
  ASSERT_THAT(multi, IsOk());
  EXPECT_TRUE(multi->multi_label);
  EXPECT_THAT(Parse("{" + base + R"(, "architectures": ["BertForSequenceClassification"],
      "problem_type": "ranking"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "'problem_type' must be"));
}

// ModernBERT's head (classifier_pooling, classifier_activation,
// classifier_bias, then a LayerNorm), MPNet's (RoBERTa's) and the
// decoders' (`score` on the last token) are read. (NomicBERT's, whose head
// is not, is refused: remote_code_families_test.)
TEST(TransformerSpecTest, EachFamilysClassifierIsReadOrRefused) {
  const std::string modernbert = R"("model_type": "modernbert", "vocab_size": 100,
      "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 1,
      "intermediate_size": 64, "max_position_embeddings": 64,
      "architectures": ["ModernBertForSequenceClassification"])";
  auto cls = Parse("{" + modernbert + "}");
  ASSERT_THAT(cls, IsOk());
  EXPECT_EQ(cls->labels, (std::vector<std::string>{"LABEL_0", "LABEL_1"}));
  EXPECT_EQ(cls->classifier_pooling, TransformerSpec::HeadPooling::kFirst);
  EXPECT_EQ(cls->classifier_activation, TransformerSpec::HeadActivation::kGelu);
  EXPECT_FALSE(cls->classifier_dense_bias);
  EXPECT_TRUE(cls->classifier_norm);
  auto mean = Parse("{" + modernbert + R"(, "classifier_pooling": "mean",
      "classifier_activation": "tanh", "classifier_bias": true})");
  ASSERT_THAT(mean, IsOk());
  EXPECT_EQ(mean->classifier_pooling, TransformerSpec::HeadPooling::kMean);
  EXPECT_EQ(mean->classifier_activation, TransformerSpec::HeadActivation::kTanh);
  EXPECT_TRUE(mean->classifier_dense_bias);
  EXPECT_THAT(Parse("{" + modernbert + R"(, "classifier_pooling": "max"})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "field 'classifier_pooling' = 'max'; supported: cls, mean"));
  EXPECT_THAT(Parse("{" + modernbert + R"(, "classifier_activation": "silu"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "field 'classifier_activation'"));
  auto mpnet = Parse(R"({"model_type": "mpnet", "vocab_size": 100, "hidden_size": 32,
      "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 64,
      "max_position_embeddings": 66, "pad_token_id": 1, "num_labels": 1,
      "architectures": ["MPNetForSequenceClassification"]})");
  ASSERT_THAT(mpnet, IsOk());
  EXPECT_EQ(mpnet->labels.size(), 1u);
  EXPECT_EQ(mpnet->classifier_activation, TransformerSpec::HeadActivation::kTanh);
  EXPECT_FALSE(mpnet->classifier_norm);
  // The decoders' head: `score` alone on the last token that is not padding
  // (where the config names a pad token).
  const std::string qwen3 = R"("model_type": "qwen3", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
      "intermediate_size": 128, "max_position_embeddings": 64,
      "architectures": ["Qwen3ForSequenceClassification"], "num_labels": 1)";
  auto decoder = Parse("{" + qwen3 + R"(, "pad_token_id": 7})");
  ASSERT_THAT(decoder, IsOk());
  EXPECT_EQ(decoder->labels.size(), 1u);
  EXPECT_EQ(decoder->classifier_pooling, TransformerSpec::HeadPooling::kLast);
  EXPECT_FALSE(decoder->classifier_dense);
  EXPECT_TRUE(decoder->classifier_skips_pad);
  auto no_pad = Parse("{" + qwen3 + R"(, "pad_token_id": null})");
  ASSERT_THAT(no_pad, IsOk());
  EXPECT_FALSE(no_pad->classifier_skips_pad);
}

TEST(TransformerSpecTest, BadConfigsAreRefusedNamingTheField) {
  EXPECT_THAT(
      Parse(R"({"model_type": "gpt2", "vocab_size": 10})"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "model_type 'gpt2' is not supported; supported: bert, camembert, distilbert, gte, "
               "llama, mistral, modernbert, mpnet, new, nomic_bert, qwen2, qwen3, roberta, "
               "xlm-roberta"));
  const std::string sizes = R"("vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 1,
      "intermediate_size": 128, "max_position_embeddings": 64)";
  EXPECT_THAT(Parse(R"({"model_type": "bert", "num_attention_heads": 5, )" + sizes + "}"),
              StatusIs(absl::StatusCode::kInvalidArgument, "not divisible"));
  EXPECT_THAT(Parse(R"({"model_type": "llama", "num_attention_heads": 4,
                        "num_key_value_heads": 3, )" +
                    sizes + "}"),
              StatusIs(absl::StatusCode::kInvalidArgument, "num_key_value_heads"));
  EXPECT_THAT(Parse(R"({"model_type": "qwen3", "num_attention_heads": 4,
                        "rope_scaling": {"rope_type": "yarn", "factor": 4.0}, )" +
                    sizes + "}"),
              StatusIs(absl::StatusCode::kInvalidArgument, "rope type 'yarn'"));
  EXPECT_THAT(Parse(R"({"model_type": "bert", "num_attention_heads": 4,
                        "hidden_act": "relu6", )" +
                    sizes + "}"),
              StatusIs(absl::StatusCode::kInvalidArgument, "hidden_act"));
  EXPECT_THAT(Parse(R"({"model_type": "xlm-roberta", "num_attention_heads": 4,
                        "pad_token_id": 63, )" +
                    sizes + "}"),
              StatusIs(absl::StatusCode::kInvalidArgument, "leaves no position"));
  EXPECT_THAT(Parse(R"({"model_type": "mpnet", "num_attention_heads": 4,
                        "relative_attention_num_buckets": 16, )" +
                    sizes + "}"),
              StatusIs(absl::StatusCode::kInvalidArgument, "32"));
  EXPECT_THAT(Parse("[1, 2]"), StatusIs(absl::StatusCode::kInvalidArgument, ""));
  EXPECT_THAT(Parse("{"), StatusIs(absl::StatusCode::kInvalidArgument, ""));
}

}  // namespace
}  // namespace infer
