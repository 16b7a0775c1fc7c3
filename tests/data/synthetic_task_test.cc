#include "data/synthetic_task.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace deepnet::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SyntheticTaskOptions Options(std::vector<std::string> languages, int64_t pairs, uint64_t seed) {
  SyntheticTaskOptions options;
  options.languages = std::move(languages);
  options.pairs_per_language = pairs;
  options.seed = seed;
  return options;
}

int64_t CountWords(const std::string& sentence) {
  return static_cast<int64_t>(
      std::vector<absl::string_view>(absl::StrSplit(sentence, ' ', absl::SkipEmpty())).size());
}

TEST(SyntheticTaskTest, ListsLanguagesInFixedOrder) {
  EXPECT_THAT(SyntheticLanguages(), ElementsAre("rev", "cap", "gr", "pig", "cp"));
}

TEST(SyntheticTaskTest, ReverseReversesWordOrder) {
  EXPECT_EQ(ApplySyntheticLanguage("rev", "a b c"), "c b a");
  EXPECT_EQ(ApplySyntheticLanguage("rev", "  the  quick dog "), "dog quick the");
  EXPECT_EQ(ApplySyntheticLanguage("rev", "alone"), "alone");
}

TEST(SyntheticTaskTest, CapCapitalisesEveryWord) {
  EXPECT_EQ(ApplySyntheticLanguage("cap", "a b c"), "A B C");
  EXPECT_EQ(ApplySyntheticLanguage("cap", "the quick Dog 2x"), "The Quick Dog 2x");
}

TEST(SyntheticTaskTest, GreekTransliteratesLettersOneToOne) {
  EXPECT_EQ(ApplySyntheticLanguage("gr", "a b c"), "α β ϲ");
  EXPECT_EQ(ApplySyntheticLanguage("gr", "hello world"), "ηελλο ωορλδ");
  EXPECT_EQ(ApplySyntheticLanguage("gr", "Quiz, 42!"), "Θυιζ, 42!");
  // One-to-one: the 26 letters give 26 different Greek letters.
  std::set<std::string> images;
  for (char c = 'a'; c <= 'z'; ++c) images.insert(ApplySyntheticLanguage("gr", std::string(1, c)));
  EXPECT_EQ(images.size(), 26u);
}

TEST(SyntheticTaskTest, PigLatinMovesLeadingConsonants) {
  EXPECT_EQ(ApplySyntheticLanguage("pig", "a b c"), "away bay cay");
  EXPECT_EQ(ApplySyntheticLanguage("pig", "the apple string my"), "ethay appleway ingstray myay");
}

TEST(SyntheticTaskTest, CopyIsTheIdentity) {
  EXPECT_EQ(ApplySyntheticLanguage("cp", "a b c"), "a b c");
  EXPECT_EQ(ApplySyntheticLanguage("cp", " spaced  out "), " spaced  out ");
}

TEST(SyntheticTaskTest, GeneratesInterleavedPairsForEveryLanguage) {
  const auto corpus = GenerateSyntheticCorpus(Options({}, 10, 7));
  ASSERT_EQ(corpus.size(), 50u);
  const std::vector<std::string> languages = SyntheticLanguages();
  for (size_t i = 0; i < corpus.size(); ++i) {
    const ParallelExample& example = corpus[i];
    EXPECT_EQ(example.src_lang, "en");
    EXPECT_EQ(example.tgt_lang, languages[i % languages.size()]);
    EXPECT_EQ(example.tgt, ApplySyntheticLanguage(example.tgt_lang, example.src));
    const int64_t words = CountWords(example.src);
    EXPECT_GE(words, 2);
    EXPECT_LE(words, 8);
    for (char c : example.src) EXPECT_TRUE(c == ' ' || (c >= 'a' && c <= 'z')) << example.src;
  }
}

TEST(SyntheticTaskTest, RespectsWordBoundsAndCoversThem) {
  SyntheticTaskOptions options = Options({"cp"}, 300, 3);
  options.min_words = 3;
  options.max_words = 5;
  std::set<int64_t> lengths;
  for (const ParallelExample& example : GenerateSyntheticCorpus(options)) {
    lengths.insert(CountWords(example.src));
  }
  EXPECT_THAT(lengths, ElementsAre(3, 4, 5));
}

TEST(SyntheticTaskTest, SameSeedGivesSameCorpusAndOtherSeedDiffers) {
  const auto a = GenerateSyntheticCorpus(Options({"rev", "pig"}, 50, 11));
  const auto b = GenerateSyntheticCorpus(Options({"rev", "pig"}, 50, 11));
  const auto c = GenerateSyntheticCorpus(Options({"rev", "pig"}, 50, 12));
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), c.size());
  int differing = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].src, b[i].src);
    EXPECT_EQ(a[i].tgt, b[i].tgt);
    if (a[i].src != c[i].src) ++differing;
  }
  EXPECT_GT(differing, 90);
}

TEST(SyntheticTaskTest, LanguageStreamDoesNotDependOnOtherLanguages) {
  const auto alone = GenerateSyntheticCorpus(Options({"gr"}, 20, 5));
  const auto all = GenerateSyntheticCorpus(Options({}, 20, 5));
  ASSERT_EQ(alone.size(), 20u);
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(alone[i].src, all[5 * i + 2].src);  // "gr" is third of five.
  }
}

// Golden values: they pin the generator (splitmix64, word list, range mapping) so the same
// options give the same corpus on every platform and compiler. If this fails after a
// deliberate change to the generator, every stored synthetic result is invalidated.
TEST(SyntheticTaskTest, GoldenFirstPairsAreStable) {
  const auto corpus = GenerateSyntheticCorpus(Options({"rev", "pig"}, 2, 1));
  ASSERT_EQ(corpus.size(), 4u);
  EXPECT_EQ(corpus[0].src, "black her be is");
  EXPECT_EQ(corpus[0].tgt, "is be her black");
  EXPECT_EQ(corpus[1].src, "or than slow it woman but over");
  EXPECT_EQ(corpus[1].tgt, "orway anthay owslay itway omanway utbay overway");
  EXPECT_EQ(corpus[2].src, "very we");
  EXPECT_EQ(corpus[3].tgt, "itycay armway");
}

TEST(SyntheticTaskTest, GenerateClampsInsteadOfFailing) {
  EXPECT_TRUE(GenerateSyntheticCorpus(Options({"rev"}, -3, 1)).empty());
  const auto known_only = GenerateSyntheticCorpus(Options({"xx", "cp"}, 4, 1));
  ASSERT_EQ(known_only.size(), 4u);
  for (const ParallelExample& example : known_only) EXPECT_EQ(example.tgt_lang, "cp");
  SyntheticTaskOptions inverted = Options({"cp"}, 20, 1);
  inverted.min_words = 4;
  inverted.max_words = 1;
  for (const ParallelExample& example : GenerateSyntheticCorpus(inverted)) {
    EXPECT_EQ(CountWords(example.src), 4);
  }
}

}  // namespace
}  // namespace deepnet::data
