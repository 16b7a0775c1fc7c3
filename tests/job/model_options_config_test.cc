// model.init and model.positions: parsing, defaults and the errors naming them.
#include <gtest/gtest.h>

#include <string>

#include "job/job_config.h"

namespace deepnet::job {
namespace {

absl::StatusOr<JobConfig> Parse(const std::string& yaml) {
  return ParseJobConfig(yaml, {}, "job.yaml");
}

TEST(ModelOptionsConfigTest, DefaultsAreThePaperInitAndSinusoidalPositions) {
  auto config = Parse("model:\n  d_model: 64\n  heads: 2\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.init(), model::InitScheme::kPaper);
  EXPECT_EQ(config->model.positions(), model::PositionKind::kSinusoidal);
}

TEST(ModelOptionsConfigTest, ParsesBothValues) {
  auto config = Parse("model:\n  init: scaled_default\n  positions: learned\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.init(), model::InitScheme::kScaledDefault);
  EXPECT_EQ(config->model.positions(), model::PositionKind::kLearned);
  auto paper = Parse("model:\n  init: paper\n  positions: sinusoidal\n");
  ASSERT_TRUE(paper.ok()) << paper.status();
  EXPECT_EQ(paper->model.init(), model::InitScheme::kPaper);
}

TEST(ModelOptionsConfigTest, BadValuesNameTheFieldAndTheAllowedValues) {
  auto init = Parse("model:\n  init: xavier\n");
  ASSERT_FALSE(init.ok());
  EXPECT_EQ(init.status().message(),
            "job.yaml: model.init: must be one of paper, scaled_default (got 'xavier')");
  auto positions = Parse("model:\n  positions: rotary\n");
  ASSERT_FALSE(positions.ok());
  EXPECT_EQ(positions.status().message(),
            "job.yaml: model.positions: must be one of sinusoidal, learned (got 'rotary')");
}

TEST(ModelOptionsConfigTest, OverridesReachTheFields) {
  auto config =
      ParseJobConfig("", {"model.init=scaled_default", "model.positions=learned"}, "job.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.init(), model::InitScheme::kScaledDefault);
  EXPECT_EQ(config->model.positions(), model::PositionKind::kLearned);
}

TEST(RandomTokensConfigTest, ParsesTheSectionAndTheSource) {
  auto config = Parse(
      "data:\n  source: random_tokens\n  random_tokens: {vocab_size: 100, pairs: 50, "
      "min_len: 2, max_len: 9, target: reverse, seed: 4}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  const RandomTokensConfig& r = config->data.random_tokens;
  EXPECT_EQ(ToString(config->data.source), "random_tokens");
  EXPECT_EQ(r.vocab_size, 100);
  EXPECT_EQ(r.pairs, 50);
  EXPECT_EQ(r.min_len, 2);
  EXPECT_EQ(r.max_len, 9);
  EXPECT_EQ(ToString(r.target), "reverse");
  EXPECT_EQ(r.seed, 4u);
  EXPECT_TRUE(ValidateRandomTokens(RandomTokensConfig{}).ok());
}

TEST(RandomTokensConfigTest, EveryBadFieldIsNamedWithItsRange) {
  const std::pair<const char*, const char*> cases[] = {
      {"vocab_size: 0", "data.random_tokens.vocab_size: must be in [2, 1048576] (got 0)"},
      {"vocab_size: 2000000",
       "data.random_tokens.vocab_size: must be in [2, 1048576] (got 2000000)"},
      {"pairs: 0", "data.random_tokens.pairs: must be in [1, 10000000] (got 0)"},
      {"min_len: 0", "data.random_tokens.min_len: must be in [1, 4096] (got 0)"},
      {"max_len: 3", "data.random_tokens.max_len: must be in [4, 4096] (got 3)"},
      {"target: sort", "data.random_tokens.target: must be one of copy, reverse (got 'sort')"},
  };
  for (const auto& [field, message] : cases) {
    auto config =
        Parse(std::string("data:\n  source: random_tokens\n  random_tokens: {") + field + "}\n");
    ASSERT_FALSE(config.ok()) << field;
    EXPECT_EQ(config.status().message(), std::string("job.yaml: ") + message);
  }
}

TEST(RandomTokensConfigTest, LongestSourceMustFitDataMaxLen) {
  auto config =
      Parse("data:\n  source: random_tokens\n  max_len: 20\n  random_tokens: {max_len: 19}\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "job.yaml: data.random_tokens.max_len: must be <= data.max_len - 2 (tag and EOS): "
            "19 + 2 > 20");
  EXPECT_TRUE(Parse("data:\n  source: random_tokens\n  max_len: 20\n  random_tokens: "
                    "{max_len: 18}\n")
                  .ok());
}

}  // namespace
}  // namespace deepnet::job
