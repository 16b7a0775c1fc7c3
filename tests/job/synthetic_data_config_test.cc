#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "job/job_config.h"

namespace deepnet::job {
namespace {

using ::testing::HasSubstr;

// data.synthetic with the given languages, pairs and seed.
SyntheticDataConfig SyntheticOptions(std::vector<std::string> languages, int64_t pairs,
                                     uint64_t seed) {
  SyntheticDataConfig options;
  options.languages = std::move(languages);
  options.pairs_per_language = pairs;
  options.seed = seed;
  return options;
}

TEST(SyntheticDataConfigTest, AcceptsDefaultsAndKnownLanguages) {
  EXPECT_TRUE(ValidateSyntheticData(SyntheticDataConfig{}).ok());
  EXPECT_TRUE(
      ValidateSyntheticData(SyntheticOptions({"rev", "cap", "gr", "pig", "cp"}, 1, 0)).ok());
}

TEST(SyntheticDataConfigTest, NamesUnknownLanguage) {
  const absl::Status status = ValidateSyntheticData(SyntheticOptions({"rev", "xx"}, 10, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "languages: unknown language 'xx' (allowed: rev, cap, gr, pig, cp)");
}

TEST(SyntheticDataConfigTest, RejectsDuplicateLanguage) {
  const absl::Status status = ValidateSyntheticData(SyntheticOptions({"rev", "cp", "rev"}, 10, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("languages: 'rev'"));
}

TEST(SyntheticDataConfigTest, NamesPairsPerLanguage) {
  const absl::Status status = ValidateSyntheticData(SyntheticOptions({}, 0, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "pairs_per_language: must be > 0 (got 0)");
}

TEST(SyntheticDataConfigTest, NamesWordBounds) {
  SyntheticDataConfig zero = SyntheticOptions({}, 1, 1);
  zero.min_words = 0;
  EXPECT_EQ(ValidateSyntheticData(zero).message(), "min_words: must be >= 1 (got 0)");

  SyntheticDataConfig inverted = SyntheticOptions({}, 1, 1);
  inverted.min_words = 5;
  inverted.max_words = 4;
  const absl::Status status = ValidateSyntheticData(inverted);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("min_words/max_words:"));
  EXPECT_THAT(status.message(), HasSubstr("5 > 4"));
}

}  // namespace
}  // namespace deepnet::job
