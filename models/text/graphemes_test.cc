// GraphemeEnd on one example of each rule of UAX #29. The expected clusters
// are those of the `regex` package's \X at Unicode 17.0 (the version
// make_unicode_tables.py reads); test_tokenizer_codespace.py compares the
// segmentation with `tokenizers` itself, through a Precompiled normalizer.
#include "models/text/graphemes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace infer::text {
namespace {

std::vector<size_t> Clusters(const std::string& s) {
  std::vector<size_t> sizes;
  for (size_t at = 0; at < s.size();) {
    const size_t end = GraphemeEnd(s, at);
    EXPECT_GT(end, at);
    sizes.push_back(end - at);
    at = end;
  }
  return sizes;
}

TEST(GraphemesTest, EachRule) {
  struct Case {
    const char* name;
    std::string text;
    std::vector<size_t> sizes;  // bytes of each cluster
  };
  const Case cases[] = {
      {"GB3 CR LF", "\r\n", {2}},
      {"GB4 after a control", "\x7f\xcc\x88", {1, 2}},
      {"GB9 extend",
       "a\xcc\x88"
       "b",
       {3, 1}},
      {"GB6 L V T", "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8x", {9, 1}},
      {"GB7 LV T T", "\xea\xb0\x80\xe1\x86\xa8\xe1\x86\xa8", {9}},
      {"GB8 LVT no V", "\xea\xb0\x81\xe1\x85\xa1", {3, 3}},
      {"GB11 ZWJ emoji", "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbbx", {11, 1}},
      {"GB12 flag pairs", "\xf0\x9f\x87\xaf\xf0\x9f\x87\xb5\xf0\x9f\x87\xba", {8, 4}},
      {"GB9c conjunct", "\xe0\xa4\x95\xe0\xa5\x8d\xe0\xa4\xb7x", {9, 1}},
      {"GB9c through ZWJ", "\xe0\xa4\x95\xe2\x80\x8d\xe0\xa5\x8d\xe0\xa4\xb7", {12}},
      {"GB9c not after a vowel sign's linker run",
       "\xe0\xa4\x95\xe0\xa4\xbf\xe0\xa5\x8d\xe0\xa4\xb7",
       {9, 3}},
      {"GB9b prepend",
       "\xd8\x80"
       "a",
       {3}},
      {"GB9a spacing mark",
       "a\xe0\xa4\x83"
       "b",
       {4, 1}},
      {"GB9 emoji modifier", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd!", {8, 1}},
      {"Unicode 17.0 mark", "O\xcc\x87\xe1\xab\x9dx", {6, 1}},
      {"unassigned in 17.0",
       "a\xe1\xab\xac"
       "b",
       {1, 3, 1}},
      {"prepend then consonant", "\xe0\xb5\x8e\xe0\xb4\x95", {6}},
  };
  for (const Case& c : cases) EXPECT_EQ(Clusters(c.text), c.sizes) << c.name;
}

}  // namespace
}  // namespace infer::text
