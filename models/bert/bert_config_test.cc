#include "models/bert/bert_config.h"

#include <string>

#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

class BertConfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    return dir_.Write(name, content);
  }
  ::infer::testing::TempDir dir_{std::string("bert_config_") +
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_F(BertConfigTest, ConfigIsCheckedFieldByField) {
  const std::string good = R"({"vocab_size": 100, "hidden_size": 8, "num_hidden_layers": 2,
      "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 32,
      "type_vocab_size": 2, "pad_token_id": 0, "layer_norm_eps": 1e-12, "hidden_act": "gelu"})";
  auto c = ReadBertConfig(Write("config.json", good));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->hidden_size, 8);
  EXPECT_EQ(c->num_attention_heads, 2);
  EXPECT_DOUBLE_EQ(c->layer_norm_eps, 1e-12);
  EXPECT_THAT(ReadBertConfig(Write("a.json", R"({"vocab_size": 100})")),
              StatusIs(kInvalid, "a.json: field 'hidden_size' must be a positive integer"));
  std::string heads = good;
  heads.replace(heads.find("\"num_attention_heads\": 2"), 24, "\"num_attention_heads\": 3");
  EXPECT_THAT(ReadBertConfig(Write("b.json", heads)),
              StatusIs(kInvalid, "hidden_size 8 is not divisible by num_attention_heads 3"));
  std::string act = good;
  act.replace(act.find("\"gelu\""), 6, "\"relu\"");
  EXPECT_THAT(ReadBertConfig(Write("c.json", act)),
              StatusIs(kInvalid, "field 'hidden_act' = 'relu'; supported: gelu"));
  EXPECT_THAT(ReadBertConfig(Write("d.json", "[1, 2]")), StatusIs(kInvalid, "not a JSON object"));
}

TEST_F(BertConfigTest, WrittenConfigReadsBack) {
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 12;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.intermediate_size = 24;
  c.max_position_embeddings = 64;
  c.pad_token_id = 1;
  c.layer_norm_eps = 1e-5;
  c.hidden_act = "gelu";
  const std::string path = (dir_.path() / "config.json").string();
  ASSERT_THAT(WriteBertConfig(path, c), IsOk());
  auto back = ReadBertConfig(path);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->vocab_size, 50);
  EXPECT_EQ(back->num_hidden_layers, 3);
  EXPECT_EQ(back->pad_token_id, 1);
  EXPECT_DOUBLE_EQ(back->layer_norm_eps, 1e-5);
}

TEST_F(BertConfigTest, ReadsTheRealMiniLmConfig) {
  const std::string dir = ::infer::testing::MiniLmDir();
  if (dir.empty()) GTEST_SKIP() << ::infer::testing::kNoMiniLm;
  auto c = ReadBertConfig(dir + "/config.json");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->hidden_size, 384);
  EXPECT_EQ(c->num_hidden_layers, 6);
  EXPECT_EQ(c->num_attention_heads, 12);
  EXPECT_EQ(c->intermediate_size, 1536);
}

}  // namespace
}  // namespace infer
