#include "models/text/load_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace infer::text {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

// A fresh folder under the test's temporary directory, of this process's own
// (CTest runs each test case as a process of its own, in parallel).
std::string Folder(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/load_tokenizer_test_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return ::infer::testing::RemoveAtExit(dir);
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// id: 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP], 4 the, 5 un, 6 ##aff, 7 ##able,
// 8 ",", 9 "!", 10 cafe, 11 東, 12 京, 13 run, 14 ##ning, 15 ".", 16 a, 17 The
const char kTinyVocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nun\n##aff\n##able\n,\n!\ncafe\n東\n京\nrun\n##ning\n."
    "\na\nThe\n";

std::vector<int32_t> Ids(const Tokenizer& t, absl::string_view text) {
  auto ids = t.EncodeIds(text, std::nullopt);
  EXPECT_THAT(ids, IsOk());
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

class VocabTxtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = Folder("tiny");
    Write(dir + "/vocab.txt", kTinyVocab);
    auto t = LoadFolderTokenizer(dir);
    ASSERT_THAT(t, IsOk());
    EXPECT_EQ(t->source, dir + "/vocab.txt");
    tokenizer_ = std::move(t->tokenizer);
  }
  std::unique_ptr<HfTokenizer> tokenizer_;
};

TEST_F(VocabTxtTest, GreedyLongestMatchWithContinuations) {
  EXPECT_EQ(Ids(*tokenizer_, "unaffable"), (std::vector<int32_t>{2, 5, 6, 7, 3}));
  EXPECT_EQ(Ids(*tokenizer_, "running"), (std::vector<int32_t>{2, 13, 14, 3}));
  EXPECT_EQ(Ids(*tokenizer_, ""), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tokenizer_->pad_id(), 0);
  EXPECT_EQ(tokenizer_->vocab_size(), 18);
}

TEST_F(VocabTxtTest, LowerCasesStripsAccentsAndSplitsPunctuationAndCjk) {
  EXPECT_EQ(Ids(*tokenizer_, "THE,the!"), (std::vector<int32_t>{2, 4, 8, 4, 9, 3}));
  EXPECT_EQ(Ids(*tokenizer_, "Café"), (std::vector<int32_t>{2, 10, 3}));
  EXPECT_EQ(Ids(*tokenizer_, "CAFE\xcc\x81"), (std::vector<int32_t>{2, 10, 3}))
      << "combining marks are dropped";
  EXPECT_EQ(Ids(*tokenizer_, "東京"), (std::vector<int32_t>{2, 11, 12, 3}));
  // Control characters vanish, other whitespace splits.
  EXPECT_EQ(Ids(*tokenizer_, "the\x01the\tcafe"), (std::vector<int32_t>{2, 1, 10, 3}));
}

// Hugging Face's classes: an unassigned code point is not a control
// character (BertNormalizer keeps it, so the word is unknown), and U+180E (a
// space once, a format character now) is removed, joining the words.
TEST_F(VocabTxtTest, UnassignedCodePointsAreKeptAsTokenizersKeepsThem) {
  EXPECT_EQ(Ids(*tokenizer_, "the \u05eb"), (std::vector<int32_t>{2, 4, 1, 3}));
  EXPECT_EQ(Ids(*tokenizer_, "a\u0e73"), (std::vector<int32_t>{2, 1, 3}));
  EXPECT_EQ(Ids(*tokenizer_, "the\u180ethe"), (std::vector<int32_t>{2, 1, 3}));  // "thethe"
  EXPECT_EQ(Ids(*tokenizer_, "\U000e0001the"), (std::vector<int32_t>{2, 4, 3}))
      << "a format character (Cf) is removed";
}

TEST_F(VocabTxtTest, SpecialTokensTemplateAndDecode) {
  auto e = tokenizer_->Encode("the", absl::string_view("cafe!"), EncodeOptions{});
  ASSERT_THAT(e, IsOk());
  EXPECT_EQ(e->ids, (std::vector<int32_t>{2, 4, 3, 10, 9, 3}));
  EXPECT_EQ(e->type_ids, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(e->special_tokens_mask, (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  // Typed out, a special token is the token itself (an added token).
  EXPECT_EQ(Ids(*tokenizer_, "[SEP]the"), (std::vector<int32_t>{2, 3, 4, 3}));
  EXPECT_EQ(tokenizer_->Decode({2, 5, 6, 7, 8, 13, 14, 3}, true), "unaffable, running");
}

TEST(VocabTxtOptionsTest, TokenizerConfigSetsCaseAndMaxLength) {
  const std::string dir = Folder("cased");
  Write(dir + "/vocab.txt", kTinyVocab);
  Write(dir + "/tokenizer_config.json", R"({"do_lower_case": false, "model_max_length": 128})");
  auto t = LoadFolderTokenizer(dir);
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(Ids(*t->tokenizer, "The the THE"), (std::vector<int32_t>{2, 17, 4, 1, 3}));
  EXPECT_EQ(t->model_max_length, 128);
  // transformers' "no limit" is no limit.
  Write(dir + "/tokenizer_config.json", R"({"model_max_length": 1000000000000000019884624838656})");
  t = LoadFolderTokenizer(dir);
  ASSERT_THAT(t, IsOk());
  EXPECT_FALSE(t->model_max_length.has_value());
  Write(dir + "/tokenizer_config.json", R"({"do_lower_case": "yes"})");
  EXPECT_THAT(LoadFolderTokenizer(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, "\"do_lower_case\" is not a boolean"));
}

TEST(VocabTxtOptionsTest, MalformedVocabulariesAreRefused) {
  const std::string dir = Folder("bad");
  EXPECT_THAT(LoadFolderTokenizer(dir),
              StatusIs(absl::StatusCode::kNotFound, "neither tokenizer.json nor vocab.txt"));
  Write(dir + "/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n");
  EXPECT_THAT(LoadFolderTokenizer(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, "no [SEP] token"));
  Write(dir + "/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\na\na\n");
  EXPECT_THAT(LoadFolderTokenizer(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, "token \"a\" repeats at line 6"));
  Write(dir + "/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n\xff\n");
  EXPECT_THAT(LoadFolderTokenizer(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, "line 5 is not valid UTF-8"));
  // A tokenizer.json wins over vocab.txt, and its errors name it.
  Write(dir + "/tokenizer.json", "{}");
  EXPECT_THAT(LoadFolderTokenizer(dir),
              StatusIs(absl::StatusCode::kInvalidArgument, "tokenizer.json: no \"model\""));
}

// all-MiniLM-L6-v2's real vocab.txt against Hugging Face's BertTokenizer
// (the fixture), over sentences with punctuation, accents, CJK, emoji, URLs,
// unknown and very long words; and its tokenizer.json gives the same ids.
TEST(VocabTxtOptionsTest, AgreesWithTheReferenceOnTheRealVocabulary) {
  const std::string minilm = ::infer::testing::MiniLmDir();
  if (minilm.empty()) GTEST_SKIP() << ::infer::testing::kNoMiniLm;
  const std::string dir = Folder("minilm");
  std::filesystem::copy_file(minilm + "/vocab.txt", dir + "/vocab.txt");
  auto from_vocab = LoadFolderTokenizer(dir);
  ASSERT_THAT(from_vocab, IsOk());
  auto from_json = LoadFolderTokenizer(minilm);
  ASSERT_THAT(from_json, IsOk());
  EXPECT_EQ(from_json->source, minilm + "/tokenizer.json");
  EXPECT_EQ(from_vocab->tokenizer->vocab_size(), 30522);
  std::ifstream in(::infer::testing::FixturePath("wordpiece_minilm.tsv"));
  ASSERT_TRUE(in.good());
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.rfind('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const std::string sentence =
        absl::StrReplaceAll(line.substr(0, tab), {{"\\t", "\t"}, {"\\n", "\n"}});
    std::vector<int32_t> want;
    for (absl::string_view id : absl::StrSplit(line.substr(tab + 1), ' ')) {
      int32_t v = 0;
      ASSERT_TRUE(absl::SimpleAtoi(id, &v)) << line;
      want.push_back(v);
    }
    EXPECT_EQ(Ids(*from_vocab->tokenizer, sentence), want) << sentence;
    EXPECT_EQ(Ids(*from_json->tokenizer, sentence), want) << sentence;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

// The family fixtures (tests/fixtures/families, made by transformers with
// models/tools/make_family_fixtures.py): each folder's tokenizer gives the
// ids transformers' models were run on.
TEST(FamilyFixturesTest, FolderTokenizersGiveTheRecordedIds) {
  for (const char* family : {"xlm-roberta", "mpnet", "modernbert", "qwen3", "bert", "qwen2",
                             "llama", "mistral", "distilbert", "nomic_bert", "new",
                             "nomic_bert-native", "gte", "roberta", "camembert", "qwen2-scaled"}) {
    const std::string dir = ::infer::testing::FixturePath(std::string("families/") + family);
    auto t = LoadFolderTokenizer(dir);
    ASSERT_THAT(t, IsOk()) << family;
    EXPECT_EQ(t->source, dir + "/tokenizer.json");
    std::ifstream in(dir + "/reference.json");
    ASSERT_TRUE(in.good()) << dir;
    const nlohmann::json ref = nlohmann::json::parse(in);
    int checked = 0;
    for (const nlohmann::json& input : ref["inputs"]) {
      if (input.contains("pair")) {  // a (query, passage) pair: ids and segment ids
        auto e = t->tokenizer->Encode(input["pair"][0].get<std::string>(),
                                      input["pair"][1].get<std::string>(), EncodeOptions());
        ASSERT_THAT(e, IsOk());
        EXPECT_EQ(e->ids, input["ids"].get<std::vector<int32_t>>()) << family << ": pair";
        EXPECT_EQ(e->type_ids, input["types"].get<std::vector<int32_t>>()) << family << ": pair";
        continue;
      }
      if (input["text"].is_null()) continue;
      EXPECT_EQ(Ids(*t->tokenizer, input["text"].get<std::string>()),
                input["ids"].get<std::vector<int32_t>>())
          << family << ": " << input["text"];
      ++checked;
    }
    EXPECT_GE(checked, 5) << family;
  }
}

}  // namespace
}  // namespace infer::text
