#include "train/training_guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace deepnet::train {
namespace {

job::GuardConfig Config() {
  job::GuardConfig c;
  c.loss_window = 4;
  c.loss_spike_factor = 10.0;
  c.max_retries = 2;
  c.lr_factor = 0.5;
  c.update_bound = 2.0;
  c.plateau_window = 2;
  c.plateau_min_delta = 0.1;
  return c;
}

TEST(TrainingGuardTest, RunningMedianOfTheLastWindow) {
  TrainingGuard guard(Config());
  EXPECT_FALSE(guard.Median().has_value());
  guard.Accept(1, 5.0);
  EXPECT_DOUBLE_EQ(*guard.Median(), 5.0);
  guard.Accept(2, 1.0);
  EXPECT_DOUBLE_EQ(*guard.Median(), 3.0);  // Even count: mean of the middle two.
  guard.Accept(3, 9.0);
  EXPECT_DOUBLE_EQ(*guard.Median(), 5.0);
  guard.Accept(4, 2.0);
  guard.Accept(5, 3.0);  // Window 4: drops step 1's 5.0 -> {1, 9, 2, 3}.
  EXPECT_DOUBLE_EQ(*guard.Median(), 2.5);
  // A rollback to step 3 leaves {5, 1, 9}: steps before the window's start come back into it.
  guard.RolledBack(3);
  EXPECT_DOUBLE_EQ(*guard.Median(), 5.0);
}

TEST(TrainingGuardTest, NonFiniteLossAlwaysTriggers) {
  TrainingGuard guard(Config());
  auto t = guard.Check(1, std::numeric_limits<double>::quiet_NaN(), std::nullopt);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->kind, "nonfinite_loss");
  EXPECT_EQ(t->step, 1);
  EXPECT_EQ(guard.Check(2, std::numeric_limits<double>::infinity(), std::nullopt)->kind,
            "nonfinite_loss");
  EXPECT_THAT(t->Describe(), ::testing::HasSubstr("step 1: loss is nan"));
}

TEST(TrainingGuardTest, SpikeOverFactorTimesMedianOnceTheWindowIsFull) {
  TrainingGuard guard(Config());
  for (int s = 1; s <= 3; ++s) guard.Accept(s, 2.0);
  EXPECT_FALSE(guard.Check(4, 1000.0, std::nullopt).has_value());  // Window not full yet.
  guard.Accept(4, 2.0);
  EXPECT_FALSE(guard.Check(5, 20.0, std::nullopt).has_value());  // Exactly 10 x median.
  auto t = guard.Check(5, 20.5, std::nullopt);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->kind, "loss_spike");
  EXPECT_DOUBLE_EQ(t->threshold, 20.0);
  job::GuardConfig off = Config();
  off.loss_spike_factor = 0;
  TrainingGuard no_spikes(off);
  for (int s = 1; s <= 4; ++s) no_spikes.Accept(s, 2.0);
  EXPECT_FALSE(no_spikes.Check(5, 1e6, std::nullopt).has_value());
}

TEST(TrainingGuardTest, RelativeUpdateNormAboveTheBound) {
  TrainingGuard guard(Config());
  EXPECT_FALSE(guard.Check(1, 1.0, 2.0).has_value());
  EXPECT_FALSE(guard.Check(1, 1.0, std::nullopt).has_value());  // Not measured this step.
  auto t = guard.Check(1, 1.0, 2.5);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->kind, "update_norm");
  EXPECT_EQ(guard.Check(1, 1.0, std::nan(""))->kind, "update_norm");
  job::GuardConfig off = Config();
  off.update_bound = 0;
  EXPECT_FALSE(TrainingGuard(off).Check(1, 1.0, 1e9).has_value());
}

TEST(TrainingGuardTest, RollsBackToTheNewestOlderCheckpointThenFurtherThenFails) {
  TrainingGuard guard(Config());
  const std::vector<int64_t> steps = {3, 6, 9};
  GuardTrigger t{8, "nonfinite_loss", std::nan(""), std::nan("")};
  GuardDecision d = guard.Decide(t, steps);
  ASSERT_EQ(d.kind, GuardDecision::Kind::kRollback);
  EXPECT_EQ(d.target_step, 6);  // Step 9 is newer than the trigger.
  guard.RolledBack(6);
  EXPECT_EQ(guard.retries(), 1);
  EXPECT_DOUBLE_EQ(guard.lr_scale(), 0.5);
  // Again before a newer checkpoint was saved: step 6's state is suspect, go further back.
  t.step = 7;
  d = guard.Decide(t, {3, 6});
  ASSERT_EQ(d.kind, GuardDecision::Kind::kRollback);
  EXPECT_EQ(d.target_step, 3);
  guard.RolledBack(3);
  EXPECT_DOUBLE_EQ(guard.lr_scale(), 0.25);
  guard.CheckpointSaved(6);  // Trained past it: step 6 is trusted again.
  // Retries (2) used up: fail with the reason.
  t.step = 8;
  d = guard.Decide(t, {3, 6});
  EXPECT_EQ(d.kind, GuardDecision::Kind::kFail);
  EXPECT_EQ(d.reason, "guard: step 8: loss is nan; retries exhausted (2 of 2 rollbacks used)");
}

TEST(TrainingGuardTest, FailsWithoutACheckpointOrWhenTheActionIsFail) {
  TrainingGuard guard(Config());
  GuardTrigger t{4, "update_norm", 3.0, 2.0};
  GuardDecision d = guard.Decide(t, {});
  EXPECT_EQ(d.kind, GuardDecision::Kind::kFail);
  EXPECT_THAT(d.reason, ::testing::HasSubstr("no checkpoint before step 4"));
  EXPECT_EQ(guard.Decide(t, {4, 5}).kind, GuardDecision::Kind::kFail);  // None older than 4.
  job::GuardConfig fail = Config();
  fail.action = job::GuardAction::kFail;
  d = TrainingGuard(fail).Decide(t, {1, 2});
  EXPECT_EQ(d.kind, GuardDecision::Kind::kFail);
  EXPECT_THAT(d.reason, ::testing::HasSubstr("(guard.action is fail)"));
}

TEST(TrainingGuardTest, TroubleBackBeforeANewCheckpointWithNoOlderOneFails) {
  TrainingGuard guard(Config());
  GuardTrigger t{5, "nonfinite_loss", std::nan(""), std::nan("")};
  ASSERT_EQ(guard.Decide(t, {3}).target_step, 3);
  guard.RolledBack(3);
  const GuardDecision d = guard.Decide(t, {3});
  EXPECT_EQ(d.kind, GuardDecision::Kind::kFail);
  EXPECT_THAT(d.reason, ::testing::HasSubstr("no checkpoint before step 3 to roll back to (the "
                                             "rollback to step 3 did not get past the trouble"));
}

TEST(TrainingGuardTest, RollbackDropsLaterHistoryAndDecisionRoundTrips) {
  TrainingGuard guard(Config());
  for (int s = 1; s <= 4; ++s) guard.Accept(s, s == 4 ? 100.0 : 1.0);
  guard.RolledBack(3);
  EXPECT_DOUBLE_EQ(*guard.Median(), 1.0);  // Step 4's loss is gone.
  GuardDecision d;
  d.kind = GuardDecision::Kind::kRollback;
  d.target_step = 42;
  d.reason = "r";
  auto back = GuardDecision::FromJson(d.ToJson().dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, d.kind);
  EXPECT_EQ(back->target_step, 42);
  EXPECT_FALSE(GuardDecision::FromJson("{").ok());
}

TEST(TrainingGuardTest, StateSurvivesACheckpoint) {
  TrainingGuard guard(Config());
  guard.RolledBack(5);
  guard.Rewarm(7);
  TrainingGuard restored(Config());
  restored.RestoreState(guard.State());
  EXPECT_EQ(restored.retries(), 1);
  EXPECT_DOUBLE_EQ(restored.lr_scale(), 0.5);
  EXPECT_EQ(restored.warmup_from(), 7);
  restored.RestoreState(nlohmann::json{{"lr_scale", -3}, {"retries", "x"}});  // Ignored.
  EXPECT_DOUBLE_EQ(restored.lr_scale(), 0.5);
}

TEST(TrainingGuardTest, PlateauAfterWindowValidationsWithoutImprovement) {
  TrainingGuard guard(Config());  // window 2, min_delta 0.1
  EXPECT_FALSE(guard.Validation(1, 3.0));
  EXPECT_FALSE(guard.Validation(2, 2.95));  // Not better by more than 0.1.
  EXPECT_TRUE(guard.Validation(3, 2.92));
  EXPECT_TRUE(guard.plateaued());
  EXPECT_FALSE(guard.Validation(4, 2.5));  // Improvement clears the flag.
  EXPECT_FALSE(guard.plateaued());
  EXPECT_DOUBLE_EQ(*guard.best_valid(), 2.5);
  job::GuardConfig off = Config();
  off.plateau_window = 0;
  TrainingGuard never(off);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(never.Validation(i, 3.0));
}

TEST(TrainingGuardTest, FaultSpecForcesNanAndSpikesOnceOrRepeatedly) {
  auto fault = ParseGuardFault("nan@3, spike@5,update@7,nan@9..");
  ASSERT_TRUE(fault.ok()) << fault.status();
  auto run = [&](int64_t step) {
    StepMetrics m;
    m.step = step;
    m.loss = 2.0;
    (*fault)(&m);
    return m.loss;
  };
  EXPECT_EQ(run(2), 2.0);
  EXPECT_TRUE(std::isnan(run(3)));
  EXPECT_EQ(run(3), 2.0);  // Once only: the step run again after a rollback is clean.
  EXPECT_EQ(run(5), 2000.0);
  StepMetrics seventh;
  seventh.step = 7;
  (*fault)(&seventh);
  EXPECT_EQ(seventh.update_norm_relative, 1e6);
  EXPECT_TRUE(std::isnan(run(9)));
  EXPECT_TRUE(std::isnan(run(9)));
  EXPECT_TRUE(std::isnan(run(12)));
  for (const char* bad : {"nan", "boom@3", "nan@0", "spike@x"}) {
    EXPECT_FALSE(ParseGuardFault(bad).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseGuardFault("boom@3").status().message()),
              ::testing::HasSubstr("DEEPNET_GUARD_FAULT: 'boom@3'"));
}

TEST(TrainingGuardTest, FaultSpecCanKeepAnItemToOneRank) {
  auto on_rank = [](int rank) {
    auto fault = ParseGuardFault("nan@3:rank1,spike@4", rank);
    EXPECT_TRUE(fault.ok()) << fault.status();
    std::vector<double> losses;
    for (int64_t step : {3, 4}) {
      StepMetrics m;
      m.step = step;
      m.loss = 2.0;
      (*fault)(&m);
      losses.push_back(m.loss);
    }
    return losses;
  };
  const std::vector<double> rank0 = on_rank(0), rank1 = on_rank(1);
  EXPECT_EQ(rank0[0], 2.0);  // Not rank 0's item.
  EXPECT_TRUE(std::isnan(rank1[0]));
  EXPECT_EQ(rank0[1], 2000.0);  // Items without a rank apply everywhere.
  EXPECT_EQ(rank1[1], 2000.0);
  for (const char* bad : {"nan@3:rank", "nan@3:rank-1", "nan@3:rankx", "nan@x:rank1"}) {
    EXPECT_FALSE(ParseGuardFault(bad, 1).ok()) << bad;
  }
}

TEST(TrainingGuardTest, GuardFailureIsRecognisable) {
  EXPECT_TRUE(IsGuardFailure(GuardFailure("guard: x")));
  EXPECT_FALSE(IsGuardFailure(absl::InternalError("guard: x")));
}

}  // namespace
}  // namespace deepnet::train
