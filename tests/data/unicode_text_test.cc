#include "data/unicode_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(UnicodeTextTest, WhitespaceIsExactlyPythonsSet) {
  const std::vector<char32_t> spaces = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x1C,
                                        0x1D,   0x1E,   0x1F,   0x20,   0x85,   0xA0,
                                        0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  for (char32_t c : spaces) EXPECT_TRUE(IsPythonWhitespace(c)) << std::hex << c;
  for (char32_t c = 0x2000; c <= 0x200A; ++c) EXPECT_TRUE(IsPythonWhitespace(c)) << std::hex << c;
  int count = 0;
  for (char32_t c = 0; c < 0x110000; ++c) count += IsPythonWhitespace(c);
  EXPECT_EQ(count, 29);  // len([c for c in range(0x110000) if chr(c).isspace()]) in Python 3.
  for (char32_t c : {0x08, 0x200B, 0x180E, 0xFEFF, 0x2060, 0x00}) {
    EXPECT_FALSE(IsPythonWhitespace(c)) << std::hex << c;
  }
}

TEST(UnicodeTextTest, DecodesUtf8AndEscapesInvalidBytes) {
  char32_t c;
  EXPECT_EQ(DecodeUtf8("\u00e9", 0, &c), 2u);
  EXPECT_EQ(c, 0xE9u);
  EXPECT_EQ(DecodeUtf8("\u3000", 0, &c), 3u);
  EXPECT_EQ(c, 0x3000u);
  EXPECT_EQ(DecodeUtf8("\U0001F600", 0, &c), 4u);
  EXPECT_EQ(c, 0x1F600u);
  // Overlong, surrogate, stray continuation and truncated sequences: one escaped byte each.
  for (std::string_view bad :
       {"\xC0\xAF", "\xED\xA0\x80", "\x80", "\xE2\x82", "\xF4\x90\x80\x80"}) {
    EXPECT_EQ(DecodeUtf8(bad, 0, &c), 1u);
    EXPECT_EQ(c, 0xDC00u + static_cast<unsigned char>(bad[0]));
  }
}

TEST(UnicodeTextTest, FindsFirstInvalidByte) {
  EXPECT_EQ(FindInvalidUtf8("plain \u00e9\u3000\U0001F600"), std::nullopt);
  EXPECT_EQ(FindInvalidUtf8(std::string("ab\xFF") + "cd"), std::optional<size_t>(2));
  EXPECT_EQ(FindInvalidUtf8("\u00e9\xE2\x82"), std::optional<size_t>(2));
}

TEST(UnicodeTextTest, RStripsUnicodeWhitespaceOnly) {
  EXPECT_EQ(RStripPythonWhitespace("a b \t\u00a0\u3000\r"), "a b");
  EXPECT_EQ(RStripPythonWhitespace("a\u200b"), "a\u200b");
  EXPECT_EQ(RStripPythonWhitespace(" \u2028 "), "");
  EXPECT_EQ(RStripPythonWhitespace("\u00e9"), "\u00e9");
  EXPECT_EQ(RStripPythonWhitespace("x\xA0"), "x\xA0");  // A lone 0xA0 byte is not U+00A0.
}

TEST(UnicodeTextTest, SplitsLikePythonStrSplit) {
  std::vector<std::string_view> tokens;
  SplitPythonWhitespace("  a\u00a0b\u3000\u3000c\u200bd  ", &tokens);
  EXPECT_THAT(tokens, ElementsAre("a", "b", "c\u200bd"));
  tokens.clear();
  SplitPythonWhitespace(" \t ", &tokens);
  EXPECT_THAT(tokens, IsEmpty());
}

TEST(UnicodeTextTest, SplitsFileIntoLinesLikeSacrebleu) {
  EXPECT_THAT(SplitScoringLines(""), IsEmpty());
  EXPECT_THAT(SplitScoringLines("a\n"), ElementsAre("a"));
  EXPECT_THAT(SplitScoringLines("a"), ElementsAre("a"));
  EXPECT_THAT(SplitScoringLines("a\n\nb"), ElementsAre("a", "", "b"));
  EXPECT_THAT(SplitScoringLines("a\n\n"), ElementsAre("a", ""));
  EXPECT_THAT(SplitScoringLines("\n"), ElementsAre(""));
  // '\r' is an ordinary character (later stripped as whitespace), not a line break.
  EXPECT_THAT(SplitScoringLines("a\r\nb\rc\n"), ElementsAre("a\r", "b\rc"));
}

}  // namespace
}  // namespace deepnet::data
