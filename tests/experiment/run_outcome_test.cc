#include "experiment/run_outcome.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace deepnet::experiment {
namespace {

using ::testing::HasSubstr;

TrainLog Log(const std::vector<std::string>& lines) {
  TrainLog log;
  for (const auto& line : lines) log.AddLine(line);
  return log;
}

const std::string kStop =
    R"j({"event":"stop","message":"step 20 (max_steps) after 00:03; 0 of 20 steps waited for data (0.0 s)"})j";

TEST(TrainLogTest, ReadsStepValidProbeAndStopLines) {
  TrainLog log = Log({"[threads] not json", R"({"event":"valid","step":0,"loss":5.5})",
                      R"({"event":"step","step":1,"loss":5.9,"update_norm":0.5})",
                      R"({"event":"step","step":2,"loss":5.0,"update_norm":null})",
                      R"({"event":"valid","step":2,"loss":4.5})", kStop, "{broken"});
  EXPECT_EQ(log.last_step, 2);
  EXPECT_EQ(log.stop_reason, "max_steps");
  ASSERT_EQ(log.valid.size(), 2u);
  EXPECT_EQ(log.valid[1], std::make_pair(int64_t{2}, 4.5));
  ASSERT_EQ(log.probe.size(), 1u);
  EXPECT_EQ(log.probe[0]["update_norm"], 0.5);
  EXPECT_FALSE(log.non_finite_loss);
}

TEST(TrainLogTest, ProbeLinesReplaceStepUpdateNorms) {
  TrainLog log = Log(
      {R"({"event":"step","step":1,"loss":5.9,"update_norm":0.5})",
       R"({"event":"probe","step":1,"update_norm":0.5,"f0_norm":10,"update_norm_relative":0.05,"logits_update_norm":1})",
       R"({"event":"step","step":2,"loss":5.9,"update_norm":0.7})",
       R"({"event":"probe","step":2,"update_norm":0.7,"f0_norm":10,"update_norm_relative":0.07})",
       R"({"event":"diagnostics","step":2,"layers":[]})"});
  ASSERT_EQ(log.probe.size(), 2u);
  EXPECT_EQ(log.probe[0]["update_norm_relative"], 0.05);
  EXPECT_EQ(log.probe[0]["logits_update_norm"], 1);
  EXPECT_EQ(log.probe[1]["step"], 2);
  EXPECT_EQ(log.diagnostics_lines, 1);
  ASSERT_EQ(log.diagnostics.size(), 1u);
  EXPECT_EQ(log.diagnostics[0]["step"], 2);
}

TEST(TrainLogTest, GuardAndPlateauLinesAreKept) {
  TrainLog log =
      Log({R"({"event":"guard","step":7,"action":"rollback","reason":"spike","to_step":5})",
           R"({"event":"guard","step":9,"action":"rollback","reason":"nan"})",
           R"({"event":"plateau","step":400,"window":200})"});
  EXPECT_EQ(log.guard_rollbacks, 2);
  EXPECT_FALSE(log.guard_failed);
  EXPECT_TRUE(log.plateau_event);
  ASSERT_EQ(log.guard_events.size(), 3u);
  EXPECT_EQ(log.guard_events[0]["to_step"], 5);
  EXPECT_EQ(log.guard_events[2]["kind"], "plateau");
}

TEST(ClassifyTest, OkPlateauDivergedFailedBudget) {
  const PlateauRule rule;
  RunEnd ok_end;
  TrainLog trained =
      Log({R"({"event":"valid","step":0,"loss":5.5})", R"({"event":"valid","step":500,"loss":2.0})",
           R"({"event":"valid","step":1000,"loss":0.8})", kStop});
  EXPECT_EQ(Classify(trained, ok_end, rule).status, "ok");

  TrainLog stuck = Log({R"({"event":"valid","step":0,"loss":5.5})",
                        R"({"event":"valid","step":500,"loss":3.52})",
                        R"({"event":"valid","step":1000,"loss":3.5})", kStop});
  Verdict v = Classify(stuck, ok_end, rule);
  EXPECT_EQ(v.status, "plateau");
  EXPECT_THAT(v.reason, HasSubstr("3.5"));

  // High but still falling fast over the last half: not a plateau.
  TrainLog falling =
      Log({R"({"event":"valid","step":0,"loss":5.5})", R"({"event":"valid","step":500,"loss":4.5})",
           R"({"event":"valid","step":1000,"loss":3.5})", kStop});
  EXPECT_EQ(Classify(falling, ok_end, rule).status, "ok");

  TrainLog flagged = Log({R"({"event":"plateau","step":400,"window":200})", kStop});
  EXPECT_EQ(Classify(flagged, ok_end, rule).status, "plateau");

  RunEnd crashed;
  crashed.exit_code = 1;
  crashed.stderr_tail = "deepnet train: step 7: loss is nan (diverged); last checkpoint: \n";
  EXPECT_EQ(Classify(Log({}), crashed, rule).status, "diverged");
  EXPECT_EQ(Classify(Log({R"({"event":"step","step":3,"loss":null})"}), ok_end, rule).status,
            "diverged");
  EXPECT_EQ(
      Classify(Log({R"({"event":"guard","step":9,"action":"fail","reason":"retries ran out"})"}),
               crashed, rule)
          .status,
      "diverged");
  RunEnd bad;
  bad.exit_code = 2;
  bad.stderr_tail = "deepnet train: model.norm: unknown\n";
  v = Classify(Log({}), bad, rule);
  EXPECT_EQ(v.status, "failed");
  EXPECT_THAT(v.reason, HasSubstr("exit code 2: deepnet train: model.norm"));

  RunEnd cut;
  cut.killed_for_budget = true;
  cut.exit_code = 143;
  EXPECT_EQ(Classify(Log({}), cut, rule).status, "budget");
  EXPECT_EQ(Classify(Log({R"({"event":"stop","message":"step 4 (max_minutes) after 01:00"})"}),
                     ok_end, rule)
                .status,
            "budget");
}

TEST(ClassifyTest, PlateauRuleEdges) {
  PlateauRule rule;
  EXPECT_FALSE(IsPlateau({}, rule));
  EXPECT_FALSE(IsPlateau({{100, 3.5}}, rule));
  // Two points: the fraction of the first alone.
  EXPECT_TRUE(IsPlateau({{0, 5.5}, {100, 4.5}}, rule));
  EXPECT_FALSE(IsPlateau({{0, 5.5}, {100, 2.0}}, rule));
  // More: the yardstick is the first point after step 0, not the init-dependent baseline.
  EXPECT_TRUE(IsPlateau({{0, 7.0}, {100, 3.6}, {200, 3.55}, {300, 3.5}}, rule));
  EXPECT_FALSE(IsPlateau({{0, 6.0}, {100, 3.6}, {200, 2.0}, {300, 1.7}}, rule));
  rule.fraction = 0.9;
  EXPECT_FALSE(IsPlateau({{0, 5.5}, {100, 4.5}}, rule));
}

}  // namespace
}  // namespace deepnet::experiment
