// SimulateStep (pipeline/step_simulator.h): the engine's schedule replayed with transfer times.
#include "pipeline/step_simulator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepnet::pipeline {
namespace {

StepSimulationInput Balanced(ScheduleKind kind, int p, int m, double f, double b) {
  StepSimulationInput in;
  in.schedule = *BuildSchedule(kind, p, m);
  in.costs.assign(p, StageCost{f, b});
  in.boundary_bytes.assign(p, 0.0);
  return in;
}

TEST(StepSimulatorTest, BalancedStagesIdleAsTheLiteraturePredicts) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    for (auto [p, m] : std::vector<std::pair<int, int>>{{1, 4}, {2, 4}, {4, 8}, {8, 64}}) {
      SCOPED_TRACE(ToString(kind) + " P=" + std::to_string(p) + " m=" + std::to_string(m));
      auto sim = SimulateStep(Balanced(kind, p, m, 1.0, 2.0));
      ASSERT_TRUE(sim.ok()) << sim.status();
      EXPECT_DOUBLE_EQ(sim->step_s, 3.0 * (m + p - 1));
      for (int s = 0; s < p; ++s) {
        EXPECT_NEAR(sim->bubble[s], PredictedBubbleFraction(p, m), 1e-12) << s;
        EXPECT_DOUBLE_EQ(sim->compute_s[s], 3.0 * m);
      }
      // 1F1B holds at most P - s micro-batches on stage s; GPipe all of them.
      const int expected_live = kind == ScheduleKind::kGPipe ? m : std::min(m, p);
      EXPECT_EQ(sim->peak_live_micro_batches[0], expected_live);
    }
  }
}

TEST(StepSimulatorTest, TransfersWaitForBothEndsAndTakeTheLinksTime) {
  // P = 2, one micro-batch. Stage 0: F (0-1), its group {send activation, receive gradient}
  // completes when the gradient arrives; stage 1: receive (done 1 + 0.5), F, B (to 4.5), send
  // the gradient (done 5.0); stage 0's backward runs 5.0-7.0.
  StepSimulationInput in = Balanced(ScheduleKind::k1F1B, 2, 1, 1.0, 2.0);
  in.link.latency_s = 0.5;
  auto sim = SimulateStep(in);
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_DOUBLE_EQ(sim->step_s, 7.0);
  EXPECT_DOUBLE_EQ(sim->finish_s[1], 5.0);
  // Bandwidth: 1e6 bytes at 1e6 bytes/s adds a second to each transfer.
  in.link.latency_s = 0.0;
  in.link.bytes_per_s = 1e6;
  in.boundary_bytes = {1e6};
  sim = SimulateStep(in);
  ASSERT_TRUE(sim.ok());
  EXPECT_DOUBLE_EQ(sim->step_s, 3.0 + 2.0 + 3.0);
  // A reduction after the last backward ends the step later.
  in.reduction_s = {0.25, 4.0};
  sim = SimulateStep(in);
  ASSERT_TRUE(sim.ok());
  EXPECT_DOUBLE_EQ(sim->step_s, std::max(8.0 + 0.25, sim->finish_s[1] + 4.0));
}

TEST(StepSimulatorTest, TheSlowestStageSetsThePace) {
  StepSimulationInput in = Balanced(ScheduleKind::k1F1B, 4, 16, 1.0, 2.0);
  in.costs[2] = StageCost{2.0, 4.0};
  auto sim = SimulateStep(in);
  ASSERT_TRUE(sim.ok());
  // At least the slow stage's own work plus the fill and drain of the others.
  EXPECT_GE(sim->step_s, 6.0 * 16);
  EXPECT_LT(sim->bubble[2], sim->bubble[0]);
}

TEST(StepSimulatorTest, UngroupedOneFOneBDeadlocksUnderRendezvous) {
  StepSimulationInput in;
  in.schedule = *BuildSchedule(ScheduleKind::k1F1B, 2, 4, /*group_transfers=*/false);
  in.costs.assign(2, StageCost{});
  in.boundary_bytes = {0.0};
  auto sim = SimulateStep(in);
  ASSERT_FALSE(sim.ok());
  EXPECT_NE(std::string(sim.status().message()).find("deadlocks"), std::string::npos)
      << sim.status();
}

TEST(StepSimulatorTest, BadInputIsNamed) {
  StepSimulationInput in = Balanced(ScheduleKind::kGPipe, 2, 2, 1.0, 2.0);
  in.costs.pop_back();
  EXPECT_FALSE(SimulateStep(in).ok());
  in = Balanced(ScheduleKind::kGPipe, 2, 2, 1.0, -1.0);
  EXPECT_NE(std::string(SimulateStep(in).status().message()).find("stage 0"), std::string::npos);
  in = Balanced(ScheduleKind::kGPipe, 2, 2, 1.0, 2.0);
  in.link.latency_s = -1.0;
  EXPECT_FALSE(SimulateStep(in).ok());
  in = Balanced(ScheduleKind::kGPipe, 2, 2, 1.0, 2.0);
  in.reduction_s = {1.0};
  EXPECT_FALSE(SimulateStep(in).ok());
}

}  // namespace
}  // namespace deepnet::pipeline
