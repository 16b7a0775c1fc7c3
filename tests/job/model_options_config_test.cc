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

}  // namespace
}  // namespace deepnet::job
