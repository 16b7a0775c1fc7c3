#include "data/plural_forms.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace deepnet::data {
namespace {

using ::testing::HasSubstr;

// Form indices of `header` for each n.
std::vector<int> Forms(const std::string& header, const std::vector<uint64_t>& ns) {
  absl::StatusOr<PluralRule> rule = PluralRule::ParseHeader(header);
  EXPECT_TRUE(rule.ok()) << rule.status();
  std::vector<int> forms;
  if (!rule.ok()) return forms;
  for (uint64_t n : ns) {
    absl::StatusOr<int> form = rule->FormIndex(n);
    EXPECT_TRUE(form.ok()) << header << " n=" << n << ": " << form.status();
    forms.push_back(form.ok() ? *form : -1);
  }
  return forms;
}

uint64_t Eval(const std::string& expression, uint64_t n) {
  absl::StatusOr<PluralRule> rule = PluralRule::Parse(expression, 16);
  EXPECT_TRUE(rule.ok()) << expression << ": " << rule.status();
  if (!rule.ok()) return ~uint64_t{0};
  absl::StatusOr<uint64_t> value = rule->Evaluate(n);
  EXPECT_TRUE(value.ok()) << expression << ": " << value.status();
  return value.ok() ? *value : ~uint64_t{0};
}

// The rules below are the ones the languages' catalogues in /usr/share/locale declare.
TEST(PluralFormsTest, EnglishAndGermanic) {
  EXPECT_EQ(Forms("nplurals=2; plural=(n != 1);", {0, 1, 2, 5}), (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(PluralRule::Germanic().nplurals(), 2);
  EXPECT_EQ(*PluralRule::Germanic().FormIndex(1), 0);
  EXPECT_EQ(*PluralRule::Germanic().FormIndex(5), 1);
}

TEST(PluralFormsTest, French) {
  EXPECT_EQ(Forms("nplurals=2; plural=(n > 1);", {0, 1, 2, 5}), (std::vector<int>{0, 0, 1, 1}));
}

TEST(PluralFormsTest, Japanese) {
  EXPECT_EQ(Forms("nplurals=1; plural=0;", {0, 1, 5, 100}), (std::vector<int>{0, 0, 0, 0}));
}

TEST(PluralFormsTest, Russian) {
  const std::string ru =
      "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && "
      "(n%100<10 || n%100>=20) ? 1 : 2);";
  EXPECT_EQ(Forms(ru, {1, 2, 5, 11, 12, 21, 22, 25, 111, 0}),
            (std::vector<int>{0, 1, 2, 2, 2, 0, 1, 2, 2, 2}));
}

TEST(PluralFormsTest, Polish) {
  const std::string pl =
      "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);";
  EXPECT_EQ(Forms(pl, {1, 2, 5, 12, 21, 22, 0}), (std::vector<int>{0, 1, 2, 2, 2, 1, 2}));
}

TEST(PluralFormsTest, Arabic) {
  const std::string ar =
      "nplurals=6; plural=n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3 : "
      "n%100>=11 ? 4 : 5;";
  EXPECT_EQ(Forms(ar, {0, 1, 2, 5, 11, 99, 100, 103}), (std::vector<int>{0, 1, 2, 3, 4, 4, 5, 3}));
}

TEST(PluralFormsTest, HeaderVariantsFoundInRealCatalogues) {
  // No spaces, no final ';', a doubled field name, junk after the ';', and ";;".
  EXPECT_EQ(Forms("nplurals=2;plural=(n!=1)", {1, 5}), (std::vector<int>{0, 1}));
  EXPECT_EQ(Forms("Plural-Forms: nplurals=2; plural=n != 1;", {1, 5}), (std::vector<int>{0, 1}));
  EXPECT_EQ(Forms("nplurals=2; plural=(n!=1);\\n", {1, 5}), (std::vector<int>{0, 1}));
  EXPECT_EQ(Forms("nplurals=3; plural=(n==1 ? 0 : n==2 ? 1 : 2);;", {1, 2, 5}),
            (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(Forms("nplurals= 2; plural= n>1", {1, 5}), (std::vector<int>{0, 1}));
}

TEST(PluralFormsTest, FollowsCPrecedenceAndAssociativity) {
  EXPECT_EQ(Eval("n + 2 * 3", 1), 7u);
  EXPECT_EQ(Eval("(n + 2) * 3", 1), 9u);
  EXPECT_EQ(Eval("10 - 3 - 2", 0), 5u);
  EXPECT_EQ(Eval("100 / 10 / 5", 0), 2u);
  EXPECT_EQ(Eval("17 % 5 * 2", 0), 4u);
  EXPECT_EQ(Eval("1 ? 2 : 3 ? 4 : 5", 0), 2u);
  EXPECT_EQ(Eval("0 ? 2 : 0 ? 4 : 5", 0), 5u);
  EXPECT_EQ(Eval("n < 2 == 1", 1), 1u);
  EXPECT_EQ(Eval("n <= 1 && n >= 1 || 0", 1), 1u);
  EXPECT_EQ(Eval("1 || 0 && 0", 0), 1u);  // && binds tighter than ||.
  EXPECT_EQ(Eval("!n", 0), 1u);
  EXPECT_EQ(Eval("!!n", 7), 1u);
  EXPECT_EQ(Eval("!n + 1", 0), 2u);
  EXPECT_EQ(Eval("n != 1", 1), 0u);
  EXPECT_EQ(Eval("n - 2", 1), ~uint64_t{0});  // Unsigned, as in gettext.
}

TEST(PluralFormsTest, ShortCircuitsAroundDivisionByZero) {
  EXPECT_EQ(Eval("n || 1 / 0", 1), 1u);
  EXPECT_EQ(Eval("n && 1 / 0", 0), 0u);
  EXPECT_EQ(Eval("n ? 10 / n : 7", 0), 7u);
}

TEST(PluralFormsTest, DivisionByZeroIsAnError) {
  for (const char* expression : {"n / 0", "n % 0", "n % (n - 1)", "0 || 1 / (n - n)"}) {
    absl::StatusOr<PluralRule> rule = PluralRule::Parse(expression, 2);
    ASSERT_TRUE(rule.ok()) << expression;
    const absl::Status status = rule->FormIndex(1).status();
    EXPECT_THAT(std::string(status.message()), HasSubstr("divides by zero")) << expression;
  }
}

TEST(PluralFormsTest, FormIndexOutOfRangeIsAnError) {
  absl::StatusOr<PluralRule> rule = PluralRule::ParseHeader("nplurals=2; plural=n;");
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(*rule->FormIndex(1), 1);
  EXPECT_TRUE(absl::IsOutOfRange(rule->FormIndex(5).status()));
}

TEST(PluralFormsTest, RejectsMalformedExpressions) {
  const std::string deep_parens = std::string(100, '(') + "n" + std::string(100, ')');
  std::string long_chain = "n";
  for (int i = 0; i < 100; ++i) long_chain += "+n";
  const char* cases[] = {
      "",      "n +",   "(n",    "n)",  "n ? 1", "n ? 1 :", "n ! 1", "x",
      "n = 1", "n & 1", "n | 1", "1 2", "-n",    "n >> 1",  "n % ",  "99999999999999999999999"};
  for (const char* expression : cases) {
    const absl::Status status = PluralRule::Parse(expression, 2).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << "\"" << expression << "\"";
    EXPECT_THAT(std::string(status.message()), HasSubstr("plural expression")) << expression;
  }
  for (const std::string& expression :
       {deep_parens, long_chain, std::string(200, '!') + "n", std::string(2000, ' ') + "n"}) {
    const absl::Status status = PluralRule::Parse(expression, 2).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << expression.substr(0, 20);
  }
  // Legal nesting well inside the limit still parses.
  EXPECT_EQ(Eval(std::string(20, '(') + "n" + std::string(20, ')'), 3), 3u);
}

TEST(PluralFormsTest, RejectsMalformedHeaders) {
  struct Case {
    const char* header;
    const char* reason;
  };
  const Case cases[] = {
      {"", "lacks nplurals="},
      {"nplurals=2;", "lacks plural="},
      {"nplural=1; plural=0;", "lacks nplurals="},
      {"nplurals=INTEGER; plural=EXPRESSION;", "is not an integer"},
      {"nplurals=0; plural=0;", "is not an integer in [1, 16]"},
      {"nplurals=17; plural=0;", "is not an integer in [1, 16]"},
      {"nplurals=99999; plural=0;", "is not an integer"},
      {"nplurals=2; plural=;", "unexpected end"},
      {"nplurals=2; plural=n ! 1;", "unexpected text"},
  };
  for (const Case& c : cases) {
    const absl::Status status = PluralRule::ParseHeader(c.header).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << c.header;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.reason)) << c.header;
  }
}

}  // namespace
}  // namespace deepnet::data
