// The job's `guard:` section (job::GuardConfig): parsing, errors naming the field, the dump.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "job/job_config.h"

namespace deepnet::job {
namespace {

using ::testing::HasSubstr;

std::string GuardParseError(const std::string& yaml) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(yaml, {}, "job.yaml");
  EXPECT_FALSE(config.ok()) << yaml;
  return config.ok() ? "" : std::string(config.status().message());
}

TEST(GuardConfigTest, DefaultsAndAutoFollowsTheNorm) {
  const JobConfig c;
  EXPECT_EQ(ToString(c.guard.enabled), "auto");
  EXPECT_EQ(ToString(c.guard.action), "rollback");
  EXPECT_EQ(c.guard.max_retries, 3);
  EXPECT_TRUE(c.guard.skip_batches);
  EXPECT_DOUBLE_EQ(c.guard.lr_factor, 0.5);
  EXPECT_DOUBLE_EQ(c.guard.loss_spike_factor, 10.0);
  EXPECT_EQ(c.guard.loss_window, 50);
  EXPECT_DOUBLE_EQ(c.guard.update_bound, 0.0);
  EXPECT_EQ(c.guard.plateau_window, 5);
  EXPECT_DOUBLE_EQ(c.guard.plateau_min_delta, 0.01);
  EXPECT_EQ(ToString(c.guard.plateau_action), "none");
  EXPECT_TRUE(GuardEnabled(c));  // model.norm defaults to deepnorm.
  JobConfig post = c;
  post.model.norm(model::NormVariant::kPostLn);
  EXPECT_FALSE(GuardEnabled(post));
  post.guard.enabled = GuardSwitch::kTrue;
  EXPECT_TRUE(GuardEnabled(post));
  JobConfig off = c;
  off.guard.enabled = GuardSwitch::kFalse;
  EXPECT_FALSE(GuardEnabled(off));
}

TEST(GuardConfigTest, ParsesEveryFieldAndRoundTripsThroughTheDump) {
  absl::StatusOr<JobConfig> c = ParseJobConfig(
      "guard:\n  enabled: true\n  action: fail\n  max_retries: 7\n  skip_batches: false\n"
      "  lr_factor: 0.25\n  loss_spike_factor: 4\n  loss_window: 9\n  update_bound: 1.5\n"
      "  plateau_window: 0\n  plateau_min_delta: 0.5\n  plateau_action: rewarm\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(ToString(c->guard.enabled), "true");
  EXPECT_EQ(ToString(c->guard.action), "fail");
  EXPECT_EQ(c->guard.max_retries, 7);
  EXPECT_FALSE(c->guard.skip_batches);
  EXPECT_DOUBLE_EQ(c->guard.lr_factor, 0.25);
  EXPECT_DOUBLE_EQ(c->guard.loss_spike_factor, 4);
  EXPECT_EQ(c->guard.loss_window, 9);
  EXPECT_DOUBLE_EQ(c->guard.update_bound, 1.5);
  EXPECT_EQ(c->guard.plateau_window, 0);
  EXPECT_DOUBLE_EQ(c->guard.plateau_min_delta, 0.5);
  EXPECT_EQ(ToString(c->guard.plateau_action), "rewarm");
  const std::string dumped = DumpJobConfig(*c);
  EXPECT_THAT(dumped, HasSubstr("guard:"));
  absl::StatusOr<JobConfig> again = ParseJobConfig(dumped, {}, "dump");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << dumped;
  EXPECT_EQ(ToString(again->guard.enabled), "true");
  EXPECT_EQ(ToString(again->guard.plateau_action), "rewarm");
  EXPECT_DOUBLE_EQ(again->guard.update_bound, 1.5);
  EXPECT_EQ(DumpJobConfig(*again), dumped);
  // The override syntax reaches the section too.
  absl::StatusOr<JobConfig> o = ParseJobConfig("", {"guard.enabled=false", "guard.max_retries=0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(ToString(o->guard.enabled), "false");
  EXPECT_EQ(o->guard.max_retries, 0);
}

TEST(GuardConfigTest, BadValuesNameTheField) {
  EXPECT_THAT(GuardParseError("guard:\n  enabled: maybe\n"),
              HasSubstr("guard.enabled: must be one of auto, true, false (got 'maybe')"));
  EXPECT_THAT(GuardParseError("guard:\n  action: pray\n"),
              HasSubstr("guard.action: must be one of"));
  EXPECT_THAT(GuardParseError("guard:\n  plateau_action: stop\n"),
              HasSubstr("guard.plateau_action: must be one of none, rewarm"));
  EXPECT_THAT(GuardParseError("guard:\n  max_retries: -1\n"),
              HasSubstr("guard.max_retries: must be in [0, 1000] (got -1)"));
  EXPECT_THAT(GuardParseError("guard:\n  loss_window: 0\n"),
              HasSubstr("guard.loss_window: must be in [1,"));
  EXPECT_THAT(GuardParseError("guard:\n  plateau_window: -2\n"), HasSubstr("guard.plateau_window"));
  EXPECT_THAT(GuardParseError("guard:\n  lr_factor: 0\n"),
              HasSubstr("guard.lr_factor: must be in (0, 1]"));
  EXPECT_THAT(GuardParseError("guard:\n  lr_factor: 1.5\n"), HasSubstr("guard.lr_factor"));
  EXPECT_THAT(GuardParseError("guard:\n  loss_spike_factor: 0.5\n"),
              HasSubstr("guard.loss_spike_factor: must be 0 (off) or in (1,"));
  EXPECT_THAT(GuardParseError("guard:\n  update_bound: -1\n"), HasSubstr("guard.update_bound"));
  EXPECT_THAT(GuardParseError("guard:\n  update_bound: .nan\n"), HasSubstr("guard.update_bound"));
  EXPECT_THAT(GuardParseError("guard:\n  plateau_min_delta: -0.1\n"),
              HasSubstr("guard.plateau_min_delta"));
  EXPECT_THAT(GuardParseError("guard:\n  skip_batches: maybe\n"), HasSubstr("guard.skip_batches"));
  EXPECT_THAT(GuardParseError("guard:\n  retries: 3\n"), HasSubstr("guard.retries: unknown key"));
}

}  // namespace
}  // namespace deepnet::job
