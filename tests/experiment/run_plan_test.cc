#include "experiment/run_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace deepnet::experiment {
namespace {

using ::testing::HasSubstr;

SweepSpec TinySpec() {
  SweepSpec spec;
  spec.job_yaml = "model: {d_model: 16, heads: 2, ffn_dim: 32}\ntrain: {max_steps: 3, seed: 5}\n";
  spec.job_source = "job.yaml";
  spec.set = {"train.log_every=1"};
  spec.axes = {{"model.norm", {"post_ln", "deepnorm"}}, {"depth", {"1", "2", "3"}}};
  return spec;
}

TEST(RunPlanTest, CartesianProductWithStableIds) {
  auto plan = ExpandPlan(TinySpec());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 6u);
  EXPECT_EQ((*plan)[0].id, "norm-post_ln_depth-1");
  EXPECT_EQ((*plan)[1].id, "norm-post_ln_depth-2");  // The last axis varies fastest.
  EXPECT_EQ((*plan)[5].id, "norm-deepnorm_depth-3");
  EXPECT_EQ((*plan)[4].overrides,
            (std::vector<std::string>{"train.log_every=1", "model.norm=deepnorm",
                                      "model.encoder_layers=2", "model.decoder_layers=2"}));
  EXPECT_THAT((*plan)[4].config_yaml, HasSubstr("encoder_layers: 2"));
  EXPECT_THAT((*plan)[4].config_yaml, HasSubstr("norm: deepnorm"));
  EXPECT_EQ((*plan)[4].seed, 5u);
  EXPECT_EQ((*plan)[4].max_steps, 3);
  auto again = ExpandPlan(TinySpec());
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < plan->size(); ++i) EXPECT_EQ((*plan)[i].id, (*again)[i].id);
}

TEST(RunPlanTest, NoAxesIsOneRun) {
  SweepSpec spec = TinySpec();
  spec.axes.clear();
  auto plan = ExpandPlan(spec);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ((*plan)[0].id, "run");
}

TEST(RunPlanTest, SharedShortNamesUseTheWholeKeyAndIdsStayUnique) {
  SweepSpec spec = TinySpec();
  spec.axes = {{"model.dropout", {"0.1"}}, {"data.dropout", {"0"}}};
  spec.job_yaml = "{}";
  // data.dropout is no job field: the error names the run and the field.
  auto bad = ExpandPlan(spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("run model.dropout-0.1_data.dropout-0"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("data.dropout"));
  spec.axes = {{"name", {}}};
  spec.axes = {{"scheduling.team", {"a/b", "a_b"}}};
  auto plan = ExpandPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::set<std::string> ids;
  for (const auto& run : *plan) ids.insert(run.id);
  EXPECT_EQ(ids.size(), 2u);
}

TEST(RunPlanTest, BadAxisValueNamesRunAndField) {
  SweepSpec spec = TinySpec();
  spec.axes = {{"model.norm", {"post_ln", "bogus"}}};
  auto plan = ExpandPlan(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("run norm-bogus"));
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("model.norm"));
}

}  // namespace
}  // namespace deepnet::experiment
