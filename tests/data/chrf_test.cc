#include "data/chrf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/data/scoring_golden.h"

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ChrfScore Chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  absl::StatusOr<ChrfScore> chrf = CorpusChrf(hyps, refs);
  EXPECT_TRUE(chrf.ok()) << chrf.status();
  return chrf.ok() ? *chrf : ChrfScore();
}

TEST(ChrfTest, MatchesSacrebleuGoldenVectors) {
  const std::vector<testing::GoldenCase> cases = testing::LoadGoldenCases();
  ASSERT_GE(cases.size(), 6u) << "expected the 6 golden cases of " << testing::GoldenDir();
  for (const testing::GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.hyps.size(), c.refs.size());
    EXPECT_NEAR(Chrf(c.hyps, c.refs).score, c.chrf2, 1e-4);
  }
}

TEST(ChrfTest, IdenticalCorpusScores100) {
  const std::vector<std::string> lines = {"Gr\u00f6\u00dfe \u3000 matters.", "a", ""};
  EXPECT_DOUBLE_EQ(Chrf(lines, lines).score, 100.0);
}

TEST(ChrfTest, CountsCodePointNgramsWithoutWhitespace) {
  // "ab c" -> "abc": 3 unigrams, 2 bigrams, 1 trigram; "é" is one character.
  const ChrfScore chrf = Chrf({"ab c"}, {"a\u00e9"});
  EXPECT_THAT(chrf.hyp_ngrams, ElementsAre(3, 2, 0, 0, 0, 0));  // No ref trigram: not counted.
  EXPECT_THAT(chrf.ref_ngrams, ElementsAre(2, 1, 0, 0, 0, 0));
  EXPECT_THAT(chrf.matches, ElementsAre(1, 0, 0, 0, 0, 0));
  // Orders 1 and 2 are effective: P = (1/3 + 0) / 2, R = (1/2 + 0) / 2.
  const double p = 1.0 / 6, r = 1.0 / 4;
  EXPECT_NEAR(chrf.score, 100 * 5 * p * r / (4 * p + r), 1e-12);
}

TEST(ChrfTest, ClipsRepeatedNgrams) {
  const ChrfScore chrf = Chrf({"aaaa"}, {"aa"});
  EXPECT_EQ(chrf.matches[0], 2);  // min(4, 2)
  EXPECT_EQ(chrf.matches[1], 1);  // "aa": min(3, 1)
  EXPECT_EQ(chrf.hyp_ngrams[2], 0);
}

TEST(ChrfTest, EmptyReferenceContributesNoHypothesisNgrams) {
  const ChrfScore with_empty = Chrf({"abc", "zzzzzz"}, {"abc", ""});
  const ChrfScore alone = Chrf({"abc"}, {"abc"});
  EXPECT_EQ(with_empty.hyp_ngrams, alone.hyp_ngrams);
  EXPECT_DOUBLE_EQ(with_empty.score, 100.0);
}

TEST(ChrfTest, NothingToCompareScoresZero) {
  EXPECT_EQ(Chrf({""}, {""}).score, 0.0);
  EXPECT_EQ(Chrf({"abc"}, {"xyz"}).score, 0.0);
}

TEST(ChrfTest, AggregatesStatisticsOverTheCorpusNotScores) {
  // The segments alone score 100 and 0; the corpus score comes from the summed counts instead.
  const ChrfScore chrf = Chrf({"ab", "cdef"}, {"ab", "wxyz"});
  EXPECT_THAT(chrf.hyp_ngrams, ElementsAre(6, 4, 2, 1, 0, 0));  // "ab" has no ref trigram.
  EXPECT_THAT(chrf.ref_ngrams, ElementsAre(6, 4, 2, 1, 0, 0));
  EXPECT_THAT(chrf.matches, ElementsAre(2, 1, 0, 0, 0, 0));
  // Four effective orders; P = R, so F2 = P.
  const double p = (2.0 / 6 + 1.0 / 4 + 0 + 0) / 4;
  EXPECT_NEAR(chrf.score, 100 * p, 1e-12);
  EXPECT_EQ(FormatChrf(chrf), "chrF2 = 14.58");
}

TEST(ChrfTest, MismatchedLineCountsAreAnError) {
  absl::StatusOr<ChrfScore> chrf = CorpusChrf({"a"}, {});
  ASSERT_FALSE(chrf.ok());
  EXPECT_EQ(chrf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(chrf.status().message()), HasSubstr("1 hypothesis lines but 0"));
}

}  // namespace
}  // namespace deepnet::data
