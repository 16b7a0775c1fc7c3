#include "data/bleu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/data/scoring_golden.h"

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

BleuScore Bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  absl::StatusOr<BleuScore> bleu = CorpusBleu(hyps, refs);
  EXPECT_TRUE(bleu.ok()) << bleu.status();
  return bleu.ok() ? *bleu : BleuScore();
}

TEST(BleuTest, MatchesSacrebleuGoldenVectors) {
  const std::vector<testing::GoldenCase> cases = testing::LoadGoldenCases();
  ASSERT_GE(cases.size(), 6u) << "expected the 6 golden cases of " << testing::GoldenDir();
  for (const testing::GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.hyps.size(), c.refs.size());
    EXPECT_NEAR(Bleu(c.hyps, c.refs).score, c.bleu, 1e-4);
  }
}

TEST(BleuTest, GoldenCase00Statistics) {
  // Counts from sacreBLEU for case00 (BLEU.corpus_score(...).counts etc.).
  const std::vector<testing::GoldenCase> cases = testing::LoadGoldenCases();
  ASSERT_FALSE(cases.empty());
  ASSERT_EQ(cases[0].name, "case00");
  const BleuScore bleu = Bleu(cases[0].hyps, cases[0].refs);
  EXPECT_THAT(bleu.counts, ElementsAre(570, 479, 415, 359));
  EXPECT_THAT(bleu.totals, ElementsAre(627, 574, 525, 478));
  EXPECT_EQ(bleu.sys_len, 627);
  EXPECT_EQ(bleu.ref_len, 724);
  EXPECT_EQ(FormatBleu(bleu),
            "BLEU = 70.18 90.9/83.4/79.0/75.1 (BP = 0.857 ratio = 0.866 hyp_len = 627 "
            "ref_len = 724)");
}

TEST(BleuTest, IdenticalCorpusScores100) {
  const std::vector<std::string> lines = {"The cat sat on the mat.", "It was, in 2-3 ways, odd!",
                                          "", "x y z w v"};
  const BleuScore bleu = Bleu(lines, lines);
  EXPECT_DOUBLE_EQ(bleu.score, 100.0);
  EXPECT_DOUBLE_EQ(bleu.bp, 1.0);
  EXPECT_THAT(bleu.precisions, ElementsAre(100.0, 100.0, 100.0, 100.0));
  EXPECT_EQ(bleu.counts, bleu.totals);
}

TEST(BleuTest, DisjointCorpusScoresZeroWithoutSmoothing) {
  const BleuScore bleu = Bleu({"completely different words here"}, {"nothing matches at all"});
  EXPECT_EQ(bleu.score, 0.0);
  EXPECT_THAT(bleu.counts, ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(bleu.totals, ElementsAre(4, 3, 2, 1));
  // sacreBLEU skips smoothing when nothing matched: every precision stays 0.
  EXPECT_THAT(bleu.precisions, ElementsAre(0.0, 0.0, 0.0, 0.0));
  EXPECT_EQ(FormatBleu(bleu),
            "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)");
}

TEST(BleuTest, BrevityPenaltyByHand) {
  // hyp "a b c d" against "a b c d e f g h": every hyp n-gram matches, so each precision is
  // 100 and BLEU = BP = exp(1 - 8/4) = exp(-1).
  const BleuScore bleu = Bleu({"a b c d"}, {"a b c d e f g h"});
  EXPECT_EQ(bleu.sys_len, 4);
  EXPECT_EQ(bleu.ref_len, 8);
  EXPECT_NEAR(bleu.bp, std::exp(-1.0), 1e-15);
  EXPECT_NEAR(bleu.score, 100.0 * std::exp(-1.0), 1e-12);
  EXPECT_DOUBLE_EQ(bleu.ratio(), 0.5);
  // A longer hypothesis is not penalised.
  EXPECT_DOUBLE_EQ(Bleu({"a b c d e f g h"}, {"a b c d"}).bp, 1.0);
}

TEST(BleuTest, ClipsRepeatedNgramsToReferenceCounts) {
  // "the" x4 against one "the": 1 of 4 unigrams matches; no bigram matches.
  const BleuScore bleu = Bleu({"the the the the"}, {"the cat"});
  EXPECT_THAT(bleu.counts, ElementsAre(1, 0, 0, 0));
  EXPECT_THAT(bleu.totals, ElementsAre(4, 3, 2, 1));
}

TEST(BleuTest, ExpSmoothingDoublesAtEachZeroOrder) {
  // Orders 2 and 4 have no match: 100/(2*10) and 100/(4*8).
  const BleuScore bleu = BleuFromStatistics({5, 0, 3, 0}, {11, 10, 9, 8}, 11, 11);
  EXPECT_DOUBLE_EQ(bleu.precisions[0], 100.0 * 5 / 11);
  EXPECT_DOUBLE_EQ(bleu.precisions[1], 100.0 / 20);
  EXPECT_DOUBLE_EQ(bleu.precisions[2], 100.0 * 3 / 9);
  EXPECT_DOUBLE_EQ(bleu.precisions[3], 100.0 / 32);
  const double expected = std::exp(
      (std::log(100.0 * 5 / 11) + std::log(5.0) + std::log(100.0 / 3) + std::log(100.0 / 32)) / 4);
  EXPECT_NEAR(bleu.score, expected, 1e-12);
}

TEST(BleuTest, OrderWithoutHypothesisNgramsGivesZero) {
  // Three-token hypotheses have no 4-grams: BLEU is 0 although lower orders match.
  const BleuScore bleu = Bleu({"a b c"}, {"a b c"});
  EXPECT_THAT(bleu.totals, ElementsAre(3, 2, 1, 0));
  EXPECT_EQ(bleu.score, 0.0);
  EXPECT_THAT(bleu.precisions, ElementsAre(100.0, 100.0, 100.0, 0.0));
}

TEST(BleuTest, EmptyHypothesisAndReferenceLines) {
  const BleuScore bleu = Bleu({"", "a b c d"}, {"x y", "a b c d"});
  EXPECT_EQ(bleu.sys_len, 4);
  EXPECT_EQ(bleu.ref_len, 6);
  EXPECT_NEAR(bleu.score, 100.0 * std::exp(1.0 - 6.0 / 4.0), 1e-12);
  // Empty hypotheses against a non-empty corpus: BP is 0.
  EXPECT_EQ(Bleu({"", ""}, {"a", "b"}).bp, 0.0);
}

TEST(BleuTest, TokenizesAndRightStripsBeforeCounting) {
  // "world!" and "world !" tokenize alike; trailing U+3000 and tab are stripped.
  const BleuScore bleu =
      Bleu({"Hello, world! How are you?\u3000\t"}, {"Hello , world ! How are you ?"});
  EXPECT_DOUBLE_EQ(bleu.score, 100.0);
  EXPECT_EQ(bleu.sys_len, 8);
}

TEST(BleuTest, MismatchedLineCountsAreAnError) {
  absl::StatusOr<BleuScore> bleu = CorpusBleu({"a", "b"}, {"a"});
  ASSERT_FALSE(bleu.ok());
  EXPECT_EQ(bleu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bleu.status().message()), HasSubstr("2 hypothesis lines but 1"));
}

TEST(BleuTest, SignatureNamesTheSacrebleuSettings) {
  EXPECT_THAT(std::string(kBleuSignature),
              HasSubstr("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"));
}

}  // namespace
}  // namespace deepnet::data
