// HfTokenizer's loading (what it refuses, and how it says so), its handling
// of hostile text, and the offset rules of NormalizedString. Identity with
// Hugging Face's outputs on real and trained files is checked by
// tests/integration/test_tokenizer_oracle.py.
#include "models/text/hf_tokenizer.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/reference_data.h"

namespace infer::text {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A small BERT-style tokenizer.json.
std::string BertJson(const std::string& normalizer = R"({"type": "BertNormalizer"})",
                     const std::string& pre = R"({"type": "BertPreTokenizer"})") {
  return R"({"version": "1.0", "added_tokens": [
      {"id": 0, "content": "[PAD]", "special": true, "normalized": false},
      {"id": 1, "content": "[UNK]", "special": true, "normalized": false},
      {"id": 2, "content": "[CLS]", "special": true, "normalized": false},
      {"id": 3, "content": "[SEP]", "special": true, "normalized": false}],
    "normalizer": )" +
         normalizer + R"(, "pre_tokenizer": )" + pre + R"(,
    "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100,
              "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "world": 5,
                        "!": 6, "he": 7, "##llo": 8, "a": 9, "##a": 10, "cafe": 11}}})";
}

std::unique_ptr<HfTokenizer> Load(const std::string& json) {
  auto t = HfTokenizer::FromJson(json, "test.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(HfTokenizerTest, EncodesWithSpecialTokensAndOffsets) {
  auto t = Load(BertJson());
  ASSERT_NE(t, nullptr);
  auto e = t->Encode("Hello  WORLD!", std::nullopt, EncodeOptions{});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->ids, ElementsAre(2, 4, 5, 6, 3));
  EXPECT_EQ(e->offsets[1], (Offsets{0, 5}));
  EXPECT_EQ(e->offsets[2], (Offsets{7, 12}));
  EXPECT_EQ(e->offsets[3], (Offsets{12, 13}));
  EXPECT_EQ(t->pad_id(), 0);
  EXPECT_EQ(t->vocab_size(), 12);
}

// The post-processor's special ids are the file's own: vocab_size covers
// them, so a model can refuse a tokenizer whose ids its table lacks.
TEST(HfTokenizerTest, VocabSizeCoversEveryIdEncodeGives) {
  std::string json = BertJson();
  const std::string cls = R"("cls": ["[CLS]", 2])";
  json.replace(json.find(cls), cls.size(), R"("cls": ["[CLS]", 50])");
  auto t = Load(json);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab_size(), 51);
  auto e = t->Encode("hello", std::nullopt, EncodeOptions{});
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(50, 4, 3));
}

TEST(HfTokenizerTest, OffsetsPointIntoTheTextAsSent) {
  auto t = Load(BertJson());
  ASSERT_NE(t, nullptr);
  // "Café" decomposed and stripped of its accent is "cafe": its offsets
  // still cover the original 5 bytes (the é is two), or 4 characters.
  EncodeOptions bytes;
  auto e = t->Encode("Caf\xC3\xA9!", std::nullopt, bytes);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->ids, ElementsAre(2, 11, 6, 3));
  EXPECT_EQ(e->offsets[1], (Offsets{0, 5}));
  EncodeOptions chars;
  chars.char_offsets = true;
  e = t->Encode("Caf\xC3\xA9!", std::nullopt, chars);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->offsets[1], (Offsets{0, 4}));
  EXPECT_EQ(e->offsets[2], (Offsets{4, 5}));
}

// Split patterns match with Oniguruma's classes, as `tokenizers` does, not
// PCRE2's: U+1C89 is a letter (Unicode 16.0), U+180E is not \s, \h is a
// hexadecimal digit. Each piece is one [UNK]; its offsets show the split.
TEST(HfTokenizerTest, SplitPatternsUseOnigurumasClasses) {
  struct Case {
    const char* pattern;
    const char* behavior;
    std::string text;
    std::vector<Offsets> pieces;
  };
  const Case cases[] = {
      {R"(\\p{L}+)", "Isolated", "x\u1c89 \u180e", {{0, 2}, {2, 4}}},
      {R"(\\s+)", "Removed", "a\u180eb c", {{0, 3}, {4, 5}}},
      {R"(\\h+)", "Isolated", "ff\tx", {{0, 2}, {2, 4}}},
      {R"([^\\s\\p{L}]+)", "Isolated", "a\U0001e5d0\u2028!", {{0, 3}, {3, 4}}},
  };
  for (const Case& c : cases) {
    auto t = Load(BertJson(
        "null", absl::StrCat(R"({"type": "Split", "pattern": {"Regex": ")", c.pattern,
                             R"("}, "behavior": ")", c.behavior, R"(", "invert": false})")));
    ASSERT_NE(t, nullptr) << c.pattern;
    EncodeOptions chars;
    chars.char_offsets = true;
    chars.add_special_tokens = false;
    auto e = t->Encode(c.text, std::nullopt, chars);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->offsets, c.pieces) << c.pattern;
  }
}

TEST(HfTokenizerTest, RefusesInvalidUtf8) {
  auto t = Load(BertJson());
  ASSERT_NE(t, nullptr);
  for (std::string bad : {std::string("a\xFF"), std::string("\xC3"), std::string("\xED\xA0\x80"),
                          std::string("\xC0\xAF")}) {
    auto e = t->Encode(bad, std::nullopt, EncodeOptions{});
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(HfTokenizerTest, TruncationThatCannotBeMetIsRefused) {
  auto t = Load(BertJson());
  ASSERT_NE(t, nullptr);
  EncodeOptions o;
  o.truncation = Truncation{2, TruncationStrategy::kLongestFirst, false};
  auto e = t->Encode("hello", std::string("world"), o);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("special tokens"));
  o.truncation = Truncation{3, TruncationStrategy::kOnlySecond, false};
  e = t->Encode("hello world", std::nullopt, o);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  o.truncation = Truncation{4, TruncationStrategy::kLongestFirst, true};
  e = t->Encode("hello world ! hello", std::nullopt, o);
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 6, 4, 3));  // the last two words, left truncation
}

TEST(HfTokenizerTest, UnknownComponentsAreRefusedByName) {
  struct Case {
    std::string json;
    std::string says;
  };
  const Case cases[] = {
      {BertJson(R"({"type": "Wobble"})"), "normalizer type \"Wobble\""},
      {BertJson(R"({"type": "BertNormalizer"})", R"({"type": "UnicodeScripts"})"),
       "pre_tokenizer type \"UnicodeScripts\""},
      {BertJson(R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nope"}]})"),
       "\"Nope\""},
      {BertJson(R"({"no_type": 1})"), "has no \"type\""},
      {BertJson(R"({"type": "Replace", "pattern": {"Regex": "(unclosed"}, "content": ""})"),
       "does not compile"},
      {BertJson(R"({"type": "BertNormalizer", "lowercase": "yes"})"), "\"lowercase\""},
  };
  for (const Case& c : cases) {
    auto t = HfTokenizer::FromJson(c.json, "model/tokenizer.json");
    ASSERT_FALSE(t.ok()) << c.says;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr("model/tokenizer.json"));
    EXPECT_THAT(t.status().message(), HasSubstr(c.says));
  }
}

TEST(HfTokenizerTest, MalformedModelsAreRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"model": {"type": "Unigram", "vocab": []}})", "empty"},
      {R"({"model": {"type": "Unigram", "vocab": [["a", -1.0]]}})", "unk_id"},
      {R"({"model": {"type": "Unigram", "unk_id": 0, "vocab": [["a", "x"]]}})", "[piece, score]"},
      {R"({"model": {"type": "WordLevel", "vocab": {}}})", "model type \"WordLevel\""},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
       "not in the vocabulary"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["ab"]}})",
       "not two tokens"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}})", "dropout"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})", "two tokens"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 99999999}, "merges": []}})", "outside"},
      {R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})", "unk_token"},
      {R"({"model": {"type": "WordPiece", "vocab": [1, 2]}})", "\"vocab\""},
      {R"({"normalizer": null})", "no \"model\""},
      {R"([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])",
       "deeper"},
      {"{\"model\": ", "not valid JSON"},
  };
  for (const auto& [json, says] : cases) {
    auto t = HfTokenizer::FromJson(json, "t.json");
    ASSERT_FALSE(t.ok()) << json;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(t.status().message(), HasSubstr(says)) << json;
  }
  EXPECT_EQ(HfTokenizer::FromFile("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(HfTokenizerTest, PathologicalTextEncodes) {
  auto t = Load(BertJson());
  ASSERT_NE(t, nullptr);
  // 100,000 characters without a space: one word, longer than
  // max_input_chars_per_word, so one [UNK] (the longest-match search is
  // bounded by the longest vocabulary token, not the word).
  auto e = t->Encode(std::string(100000, 'a'), std::nullopt, EncodeOptions{});
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 1, 3));
  // A base letter under 50,000 combining marks: normalisation sorts and
  // strips them without a quadratic step.
  std::string marks = "a";
  for (int i = 0; i < 50000; ++i) marks += i % 2 ? "\xCC\x81" : "\xCC\xA3";  // U+0301, U+0323
  e = t->Encode(marks, std::nullopt, EncodeOptions{});
  ASSERT_TRUE(e.ok());
  EXPECT_THAT(e->ids, ElementsAre(2, 9, 3));
}

// Rust's String::from_utf8_lossy: one U+FFFD per maximal invalid subpart.
TEST(DecodersTest, LossyUtf8ReplacesMaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(Utf8Lossy("a\xF0\x9F\x98"
                      "b"),
            "a" + r + "b");                         // a cut 4-byte sequence
  EXPECT_EQ(Utf8Lossy("\xC0\x80"), r + r);          // never a lead byte
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), r + r + r);  // a surrogate
  EXPECT_EQ(Utf8Lossy("\xE2\x82\xAC\xE2\x82"), "\xE2\x82\xAC" + r);
  EXPECT_EQ(Utf8Lossy("\xF4\x90\x80\x80"), r + r + r + r);  // past U+10FFFF
}

TEST(DecodersTest, DecodeRunsTheFilesDecoder) {
  std::string json = BertJson();
  json.insert(json.rfind('}'), R"(, "decoder": {"type": "WordPiece", "prefix": "##"})");
  auto t = Load(json);
  ASSERT_NE(t, nullptr);
  // [CLS] he ##llo world ! [SEP], 99 unknown to the tokenizer.
  EXPECT_EQ(t->Decode({2, 7, 8, 5, 6, 99, 3}, true), "hello world!");
  EXPECT_EQ(t->Decode({2, 7, 8, 3}, false), "[CLS] hello [SEP]");
  auto bad = HfTokenizer::FromJson(
      BertJson().insert(BertJson().rfind('}'), R"(, "decoder": {"type": "CTC"})"), "t.json");
  EXPECT_THAT(bad.status().message(), HasSubstr("decoder type \"CTC\""));
}

TEST(NormalizedStringTest, TransformKeepsAlignments) {
  NormalizedString s("ab");
  // "ab" -> "xyb": x replaces a, y is inserted (shares a's range).
  s.Transform({{U'x', 0}, {U'y', 1}, {U'b', 0}}, 0);
  EXPECT_EQ(s.get(), "xyb");
  EXPECT_EQ(*s.ToOriginal(0, 1), (Offsets{0, 1}));
  EXPECT_EQ(*s.ToOriginal(1, 2), (Offsets{0, 1}));
  EXPECT_EQ(*s.ToOriginal(2, 3), (Offsets{1, 2}));
  // Removing: "xyb" keeps only "b" (two removed before it).
  s.Transform({{U'b', 0}}, 2);
  EXPECT_EQ(s.get(), "b");
  EXPECT_EQ(*s.ToOriginal(0, 1), (Offsets{1, 2}));
}

TEST(NormalizedStringTest, SplitBehaviors) {
  NormalizedString s("the-final--countdown");
  auto dash = FindCharMatches(s.get(), [](char32_t c) { return c == U'-'; });
  auto words = [](const std::vector<NormalizedString>& v) {
    std::vector<std::string> out;
    for (const auto& p : v) out.push_back(p.get());
    return out;
  };
  EXPECT_THAT(words(s.Split(dash, SplitBehavior::kRemoved)),
              ElementsAre("the", "final", "countdown"));
  EXPECT_THAT(words(s.Split(dash, SplitBehavior::kIsolated)),
              ElementsAre("the", "-", "final", "-", "-", "countdown"));
  EXPECT_THAT(words(s.Split(dash, SplitBehavior::kMergedWithPrevious)),
              ElementsAre("the-", "final-", "-", "countdown"));
  EXPECT_THAT(words(s.Split(dash, SplitBehavior::kMergedWithNext)),
              ElementsAre("the", "-final", "-", "-countdown"));
  EXPECT_THAT(words(s.Split(dash, SplitBehavior::kContiguous)),
              ElementsAre("the", "-", "final", "--", "countdown"));
  // A piece knows where it starts in the whole text.
  auto pieces = s.Split(dash, SplitBehavior::kRemoved);
  EXPECT_EQ(*pieces[2].ToOriginal(0, 9), (Offsets{11, 20}));
}

// EncodePairIds is Encode's ids and type ids for every pair, with the first
// text tokenized once: on the committed WordPiece (BertProcessing) and
// Unigram (RobertaProcessing) files, untruncated and truncated longest_first
// from either side, to lengths that cut the first text, the second, or both.
TEST(HfTokenizerTest, EncodePairIdsIsEncodePerPair) {
  for (const char* dir : {"classifiers/bert-reranker", "classifiers/xlm-roberta-classifier"}) {
    auto t = HfTokenizer::FromFile(testing::FixturePath(std::string(dir) + "/tokenizer.json"));
    ASSERT_TRUE(t.ok()) << t.status();
    const std::string first = "what does the man play on the street, and why?";
    const std::vector<absl::string_view> seconds = {
        "A man is playing a guitar.", "x", "",
        "Ein Mann spielt Gitarre, und die Straße ist laut! Ein Mann spielt Gitarre."};
    std::vector<std::optional<Truncation>> cuts = {std::nullopt};
    for (size_t length : {5u, 9u, 14u, 20u, 64u}) {
      for (bool left : {false, true}) cuts.push_back(Truncation{length, {}, left});
    }
    for (const std::optional<Truncation>& cut : cuts) {
      auto pairs = (*t)->EncodePairIds(first, seconds, cut);
      ASSERT_TRUE(pairs.ok()) << pairs.status();
      ASSERT_EQ(pairs->size(), seconds.size());
      for (size_t i = 0; i < seconds.size(); ++i) {
        EncodeOptions o;
        o.truncation = cut;
        auto want = (*t)->Encode(first, seconds[i], o);
        ASSERT_TRUE(want.ok()) << want.status();
        const std::string what =
            std::string(dir) + " pair " + std::to_string(i) + " cut " +
            (cut ? std::to_string(cut->max_length) + (cut->left ? "L" : "R") : "none");
        EXPECT_EQ((*pairs)[i].ids, want->ids) << what;
        EXPECT_EQ((*pairs)[i].type_ids, want->type_ids) << what;
      }
    }
    EXPECT_FALSE((*t)->EncodePairIds(first, {"\xff"}, std::nullopt).ok());
    EXPECT_FALSE((*t)->EncodePairIds(first, {"a"}, Truncation{1, {}, false}).ok());
  }
}

}  // namespace
}  // namespace infer::text
