#include "models/text/wordpiece.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/testing/reference_data.h"
#include "tests/testing/status_matchers.h"

namespace infer {
namespace {

using ::infer::testing::IsOk;
using ::infer::testing::StatusIs;

std::unique_ptr<WordPieceTokenizer> Tiny() {
  // id: 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP], 4 the, 5 un, 6 ##aff, 7 ##able,
  // 8 ",", 9 "!", 10 cafe, 11 東, 12 京, 13 run, 14 ##ning, 15 ".", 16 a
  auto t = WordPieceTokenizer::FromVocab(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "un", "##aff", "##able", ",", "!", "cafe", "東",
       "京", "run", "##ning", ".", "a"},
      {.lower_case = true, .max_chars_per_word = 10});
  EXPECT_THAT(t, IsOk());
  return *std::move(t);
}

std::vector<int64_t> Encode(const WordPieceTokenizer& t, absl::string_view s) {
  auto ids = t.Encode(s);
  EXPECT_THAT(ids, IsOk());
  return ids.ok() ? *ids : std::vector<int64_t>{};
}

TEST(WordPieceTest, GreedyLongestMatchWithContinuations) {
  auto t = Tiny();
  EXPECT_EQ(Encode(*t, "unaffable"), (std::vector<int64_t>{2, 5, 6, 7, 3}));
  EXPECT_EQ(Encode(*t, "running"), (std::vector<int64_t>{2, 13, 14, 3}));
  EXPECT_EQ(Encode(*t, ""), (std::vector<int64_t>{2, 3}));
}

TEST(WordPieceTest, PunctuationSplitsAndCaseFolds) {
  auto t = Tiny();
  EXPECT_EQ(Encode(*t, "THE,the!"), (std::vector<int64_t>{2, 4, 8, 4, 9, 3}));
  EXPECT_EQ(*t->BasicTokenize("Hello,World!  a.b"),
            (std::vector<std::string>{"hello", ",", "world", "!", "a", ".", "b"}));
  EXPECT_EQ(*t->BasicTokenize("“quoted” — dash…"),
            (std::vector<std::string>{"“", "quoted", "”", "—", "dash", "…"}));
}

TEST(WordPieceTest, AccentsAreStrippedAndCjkIsSplit) {
  auto t = Tiny();
  EXPECT_EQ(Encode(*t, "Café"), (std::vector<int64_t>{2, 10, 3}));
  EXPECT_EQ(Encode(*t, "CAFE\xcc\x81"), (std::vector<int64_t>{2, 10, 3}))  // e + combining acute
      << "combining marks are dropped";
  EXPECT_EQ(Encode(*t, "東京"), (std::vector<int64_t>{2, 11, 12, 3}));
  EXPECT_EQ(*t->BasicTokenize("Zürich İstanbul Øre ß"),
            (std::vector<std::string>{"zurich", "istanbul", "øre", "ß"}));
}

TEST(WordPieceTest, UnknownAndOverlongWordsAreUnk) {
  auto t = Tiny();
  EXPECT_EQ(Encode(*t, "xyz"), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(Encode(*t, "unxyz"), (std::vector<int64_t>{2, 1, 3})) << "no partial pieces";
  EXPECT_EQ(Encode(*t, "unaffableable"), (std::vector<int64_t>{2, 1, 3})) << "over 10 characters";
}

TEST(WordPieceTest, ControlCharactersAndWhitespace) {
  auto t = Tiny();
  EXPECT_EQ(*t->BasicTokenize("a\tb\nc\r\x01"
                              "d\xc2\xa0"
                              "e\xe2\x80\x8b"
                              "f"),
            (std::vector<std::string>{"a", "b", "c", "d", "ef"}));
}

TEST(WordPieceTest, InvalidUtf8IsRefused) {
  auto t = Tiny();
  EXPECT_THAT(t->Encode("ok \xff bad"),
              StatusIs(absl::StatusCode::kInvalidArgument, "not valid UTF-8"));
  EXPECT_THAT(t->Encode("\xc3"), StatusIs(absl::StatusCode::kInvalidArgument, "UTF-8"));
  EXPECT_THAT(t->Encode("\xed\xa0\x80"), StatusIs(absl::StatusCode::kInvalidArgument, "UTF-8"))
      << "surrogates";
  EXPECT_THAT(t->Encode("\xc0\xaf"), StatusIs(absl::StatusCode::kInvalidArgument, "UTF-8"))
      << "overlong";
}

TEST(WordPieceTest, VocabularyMustHaveTheSpecialTokens) {
  EXPECT_THAT(WordPieceTokenizer::FromVocab({"[PAD]", "[UNK]", "[CLS]"}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "no [SEP] token"));
  EXPECT_THAT(WordPieceTokenizer::FromVocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "a"}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "'a' repeats at line 6"));
  EXPECT_THAT(WordPieceTokenizer::FromVocabFile("/nonexistent/vocab.txt", {}),
              StatusIs(absl::StatusCode::kNotFound, "cannot read vocabulary"));
}

// Agreement with Hugging Face's BertTokenizer on all-MiniLM-L6-v2's real
// vocab.txt, over sentences with punctuation, accents, CJK, emoji, URLs,
// unknown and very long words (fixture made by the reference tokenizer).
TEST(WordPieceTest, AgreesWithTheReferenceOnTheRealVocabulary) {
  if (::infer::testing::MiniLmDir().empty()) GTEST_SKIP() << ::infer::testing::kNoMiniLm;
  auto t = WordPieceTokenizer::FromVocabFile(::infer::testing::MiniLmDir() + "/vocab.txt", {});
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ((*t)->vocab_size(), 30522);
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
    std::vector<int64_t> want;
    for (absl::string_view id : absl::StrSplit(line.substr(tab + 1), ' ')) {
      int64_t v = 0;
      ASSERT_TRUE(absl::SimpleAtoi(id, &v)) << line;
      want.push_back(v);
    }
    EXPECT_EQ(Encode(**t, sentence), want) << sentence;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace infer
