#include "runtime/quote.h"

#include <string>

#include "gtest/gtest.h"

namespace infer {
namespace {

TEST(QuoteTest, AShortStringIsQuotedWhole) {
  EXPECT_EQ(Quote("minilm"), "'minilm'");
  EXPECT_EQ(Quote(""), "''");
  EXPECT_EQ(Quote(std::string(kQuotePrefixBytes, 'a')),
            "'" + std::string(kQuotePrefixBytes, 'a') + "'");
}

TEST(QuoteTest, ALongStringKeepsAPrefixAndStatesItsLength) {
  const std::string s(1 << 20, 'a');
  EXPECT_EQ(Quote(s), "'" + std::string(kQuotePrefixBytes, 'a') + "…' (1048576 bytes)");
}

TEST(QuoteTest, TheCutNeverSplitsAUtf8Character) {
  // 63 ASCII bytes, then a 3-byte character straddling byte 64.
  const std::string s = std::string(kQuotePrefixBytes - 1, 'x') + "\xE4\xB8\xAD" + "tail";
  EXPECT_EQ(Quote(s), "'" + std::string(kQuotePrefixBytes - 1, 'x') + "…' (" +
                          std::to_string(s.size()) + " bytes)");
  // A whole character that fits is kept.
  const std::string t = std::string(kQuotePrefixBytes - 3, 'x') + "\xE4\xB8\xAD" + "tail";
  EXPECT_EQ(Quote(t), "'" + std::string(kQuotePrefixBytes - 3, 'x') + "\xE4\xB8\xAD…' (" +
                          std::to_string(t.size()) + " bytes)");
}

TEST(QuoteTest, ControlCharactersQuotesAndInvalidUtf8AreEscaped) {
  EXPECT_EQ(Quote("a\nb'c\\"), "'a\\nb\\'c\\\\'");
  EXPECT_EQ(Quote(std::string("\x00\xff\x7f", 3)), "'\\x00\\xff\\x7f'");
  // A stray continuation byte, a truncated sequence and an overlong form.
  EXPECT_EQ(Quote("\x80 \xE4\xB8 \xC0\xAF"), "'\\x80 \\xe4\\xb8 \\xc0\\xaf'");
  // Valid UTF-8 (CJK, combining marks, emoji) is kept.
  EXPECT_EQ(Quote("\xE4\xB8\xAD e\xCC\x81 \xF0\x9F\x98\x80"),
            "'\xE4\xB8\xAD e\xCC\x81 \xF0\x9F\x98\x80'");
}

TEST(QuoteTest, TheQuotedFormIsBoundedWhateverTheInput) {
  // Every byte escaped to four characters is the worst case.
  const std::string s(1 << 16, '\x01');
  EXPECT_LE(Quote(s).size(), 4 * kQuotePrefixBytes + 32);
}

TEST(BoundedMessageTest, AShortMessageIsKeptALongOneIsCutWithinTheLimit) {
  EXPECT_EQ(BoundedMessage("unknown model 'x'"), "unknown model 'x'");
  const std::string fits(kMaxStatusMessageBytes, 'm');
  EXPECT_EQ(BoundedMessage(fits), fits);
  const std::string cut = BoundedMessage(std::string(1 << 20, 'm'));
  EXPECT_LE(cut.size(), kMaxStatusMessageBytes);
  const std::string tail = "… (1048576 bytes, cut)";
  EXPECT_EQ(cut.substr(cut.size() - tail.size()), tail);
  EXPECT_EQ(cut.find_first_not_of('m'), cut.size() - tail.size());
}

}  // namespace
}  // namespace infer
