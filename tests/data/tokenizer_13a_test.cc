#include "data/tokenizer_13a.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string Tok(std::string_view line) { return Tokenizer13a::TokenizeToString(line); }

TEST(Tokenizer13aTest, SeparatesAsciiPunctuation) {
  EXPECT_EQ(Tok("Hello, world!"), "Hello , world !");
  EXPECT_EQ(Tok("{a}|~[b]^_`c"), "{ a } | ~ [ b ] ^ _ ` c");
  EXPECT_EQ(Tok("it's 50% (beta) Ctrl+S a/b x_y $5 #1 @me"),
            "it's 50 % ( beta ) Ctrl + S a / b x _ y $ 5 # 1 @ me");
}

TEST(Tokenizer13aTest, KeepsPeriodAndCommaInsideNumbers) {
  EXPECT_EQ(Tok("1,000.50 and 3.14"), "1,000.50 and 3.14");
  EXPECT_EQ(Tok("3.14.15"), "3.14.15");
  EXPECT_EQ(Tok("v2.0"), "v2.0");
  // Split when the digit is only on one side.
  EXPECT_EQ(Tok("1."), "1 .");
  EXPECT_EQ(Tok(".5"), ". 5");
  EXPECT_EQ(Tok("a.1"), "a . 1");
  EXPECT_EQ(Tok("1.a"), "1 . a");
  EXPECT_EQ(Tok("1,a"), "1 , a");
  EXPECT_EQ(Tok(",1"), ", 1");
}

TEST(Tokenizer13aTest, SplitsPeriodsAndCommasBetweenNonDigits) {
  EXPECT_EQ(Tok("end."), "end .");
  EXPECT_EQ(Tok("e.g. U.S.A."), "e . g . U . S . A .");
  // Non-overlapping matches: the second '.' of "a..b" is split by the third rule.
  EXPECT_EQ(Tok("a..b"), "a . . b");
  EXPECT_EQ(Tok(".."), ". .");
  EXPECT_EQ(Tok("x,,y"), "x , , y");
}

TEST(Tokenizer13aTest, SplitsDashOnlyAfterADigit) {
  EXPECT_EQ(Tok("2-3"), "2 - 3");
  EXPECT_EQ(Tok("co-op -5 x-1"), "co-op -5 x-1");
  EXPECT_EQ(Tok("10--20"), "10 - -20");
}

TEST(Tokenizer13aTest, ReplacesEntitiesInOrderOnlyOnce) {
  EXPECT_EQ(Tok("&quot;q&quot;"), "\" q \"");
  EXPECT_EQ(Tok("a &amp; b"), "a & b");
  // &amp; is replaced after &quot; but before &lt; and &gt;.
  EXPECT_EQ(Tok("&amp;lt;tag&amp;gt;"), "< tag >");
  EXPECT_EQ(Tok("&amp;quot;"), "& quot ;");
  // Other entities and bare ampersands are just punctuation.
  EXPECT_EQ(Tok("&nbsp;"), "& nbsp ;");
  EXPECT_EQ(Tok("AT&T &amp"), "AT & T & amp");
}

TEST(Tokenizer13aTest, RemovesSkippedMarkerInOnePass) {
  EXPECT_EQ(Tok("a<skipped>b"), "ab");
  EXPECT_EQ(Tok("a<skip<skipped>ped>b"), "a < skipped > b");
  // The marker is removed before entities are decoded.
  EXPECT_EQ(Tok("&lt;skipped&gt;"), "< skipped >");
}

TEST(Tokenizer13aTest, JoinsHyphenatedLineBreaksAndNewlines) {
  EXPECT_EQ(Tok("a-\nb"), "ab");
  EXPECT_EQ(Tok("a\nb"), "a b");
  EXPECT_EQ(Tok("1-\n2"), "12");
}

TEST(Tokenizer13aTest, SplitsOnUnicodeWhitespace) {
  // U+00A0, U+3000, U+202F, tab, U+2009, U+0085, U+001C, U+1680, U+2028, U+205F.
  EXPECT_EQ(Tok("a\u00a0b\u3000c\u202fd\te\u2009f\u0085g\x1ch\u1680i\u2028j\u205fk"),
            "a b c d e f g h i j k");
  // U+200B (zero width space) and U+FEFF are not whitespace in Python.
  EXPECT_EQ(Tok("a\u200bb\ufeffc"), "a\u200bb\ufeffc");
  EXPECT_EQ(Tok("a.\u00a0"), "a .");
}

TEST(Tokenizer13aTest, LeavesNonAsciiPunctuationAlone) {
  EXPECT_EQ(Tok("\u00abguillemets\u00bb \u201cquoted\u201d \u2026"),
            "\u00abguillemets\u00bb \u201cquoted\u201d \u2026");
  EXPECT_EQ(Tok("\u65e5\u672c\u8a9e\u3002\u30c6\u30b9\u30c8\u3001"),
            "\u65e5\u672c\u8a9e\u3002\u30c6\u30b9\u30c8\u3001");
  // A multi-byte character before a period counts as one non-digit.
  EXPECT_EQ(Tok("Gr\u00f6\u00dfe. Gr\u00f6\u00dfe,x"), "Gr\u00f6\u00dfe . Gr\u00f6\u00dfe , x");
}

TEST(Tokenizer13aTest, EmptyAndBlankLinesHaveNoTokens) {
  Tokenizer13a tokenizer;
  EXPECT_THAT(tokenizer.Tokenize(""), IsEmpty());
  EXPECT_THAT(tokenizer.Tokenize(" \t\u3000 "), IsEmpty());
  EXPECT_EQ(Tok(""), "");
}

TEST(Tokenizer13aTest, ReusedTokenizerReturnsEachLinesTokens) {
  Tokenizer13a tokenizer;
  EXPECT_THAT(tokenizer.Tokenize("Hi, you."), ElementsAre("Hi", ",", "you", "."));
  EXPECT_THAT(tokenizer.Tokenize("x"), ElementsAre("x"));
  EXPECT_THAT(tokenizer.Tokenize("&amp;&amp;"), ElementsAre("&", "&"));
}

}  // namespace
}  // namespace deepnet::data
