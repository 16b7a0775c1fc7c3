#include "pipeline/pipeline_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

namespace deepnet::pipeline {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr ActionType kF = ActionType::kForward;
constexpr ActionType kB = ActionType::kBackward;
constexpr ActionType kSA = ActionType::kSendActivation;
constexpr ActionType kRA = ActionType::kRecvActivation;
constexpr ActionType kSG = ActionType::kSendGradient;
constexpr ActionType kRG = ActionType::kRecvGradient;

PipelineAction A(ActionType type, int mb, int peer = -1, int group = -1) {
  return PipelineAction{type, mb, peer, group};
}

PipelineSchedule Build(ScheduleKind kind, int stages, int micro_batches, bool grouped = true) {
  absl::StatusOr<PipelineSchedule> schedule = BuildSchedule(kind, stages, micro_batches, grouped);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return schedule.ok() ? *schedule : PipelineSchedule{};
}

std::string Format(const std::vector<PipelineAction>& list) {
  std::string text;
  for (const PipelineAction& a : list) {
    text += ToString(a.type) + "(" + std::to_string(a.micro_batch) + "," + std::to_string(a.peer) +
            "," + std::to_string(a.group) + ") ";
  }
  return text;
}

TEST(PipelineScheduleTest, ParsesAndPrintsKinds) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    absl::StatusOr<ScheduleKind> parsed = ParseSchedule(ToString(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(ParseSchedule("1F1B").value(), ScheduleKind::k1F1B);
  absl::StatusOr<ScheduleKind> bad = ParseSchedule("interleaved");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'interleaved'"));
  EXPECT_EQ(ToString(ActionType::kRecvGradient), "RecvGradient");
}

TEST(PipelineScheduleTest, RejectsNonPositiveSizes) {
  EXPECT_EQ(BuildSchedule(ScheduleKind::kGPipe, 0, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildSchedule(ScheduleKind::k1F1B, 2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(CheckSchedule(PipelineSchedule{}, 1).ok());
  EXPECT_FALSE(CheckSchedule(Build(ScheduleKind::kGPipe, 2, 2), 0).ok());
}

TEST(PipelineScheduleTest, ExactOneFOneBListsForTwoStagesThreeMicroBatches) {
  const PipelineSchedule s = Build(ScheduleKind::k1F1B, 2, 3, /*grouped=*/false);
  ASSERT_EQ(s.size(), 2u);
  const std::vector<PipelineAction> stage0 = {
      A(kF, 0), A(kSA, 0, 1), A(kF, 1),     A(kSA, 1, 1), A(kRG, 0, 1), A(kB, 0),
      A(kF, 2), A(kSA, 2, 1), A(kRG, 1, 1), A(kB, 1),     A(kRG, 2, 1), A(kB, 2)};
  const std::vector<PipelineAction> stage1 = {A(kRA, 0, 0), A(kF, 0), A(kB, 0), A(kSG, 0, 0),
                                              A(kRA, 1, 0), A(kF, 1), A(kB, 1), A(kSG, 1, 0),
                                              A(kRA, 2, 0), A(kF, 2), A(kB, 2), A(kSG, 2, 0)};
  EXPECT_EQ(s[0], stage0) << Format(s[0]);
  EXPECT_EQ(s[1], stage1) << Format(s[1]);
}

TEST(PipelineScheduleTest, ExactGPipeListsForTwoStagesThreeMicroBatches) {
  const PipelineSchedule s = Build(ScheduleKind::kGPipe, 2, 3, /*grouped=*/false);
  ASSERT_EQ(s.size(), 2u);
  const std::vector<PipelineAction> stage0 = {
      A(kF, 0),     A(kSA, 0, 1), A(kF, 1),     A(kSA, 1, 1), A(kF, 2),     A(kSA, 2, 1),
      A(kRG, 2, 1), A(kB, 2),     A(kRG, 1, 1), A(kB, 1),     A(kRG, 0, 1), A(kB, 0)};
  const std::vector<PipelineAction> stage1 = {
      A(kRA, 0, 0), A(kF, 0),     A(kRA, 1, 0), A(kF, 1),     A(kRA, 2, 0), A(kF, 2),
      A(kB, 2),     A(kSG, 2, 0), A(kB, 1),     A(kSG, 1, 0), A(kB, 0),     A(kSG, 0, 0)};
  EXPECT_EQ(s[0], stage0) << Format(s[0]);
  EXPECT_EQ(s[1], stage1) << Format(s[1]);
}

// Grouped 1F1B: the same order, and each send shares a group with the receive that follows it
// (activation j + 1 out with gradient j in on stage 0, gradient j out with activation j + 1 in
// on stage 1).
TEST(PipelineScheduleTest, ExactGroupedOneFOneBListsForTwoStagesThreeMicroBatches) {
  const PipelineSchedule s = Build(ScheduleKind::k1F1B, 2, 3);
  ASSERT_EQ(s.size(), 2u);
  const std::vector<PipelineAction> stage0 = {
      A(kF, 0), A(kSA, 0, 1, 0), A(kF, 1),        A(kSA, 1, 1, 1), A(kRG, 0, 1, 1), A(kB, 0),
      A(kF, 2), A(kSA, 2, 1, 2), A(kRG, 1, 1, 2), A(kB, 1),        A(kRG, 2, 1, 3), A(kB, 2)};
  const std::vector<PipelineAction> stage1 = {A(kRA, 0, 0, 0), A(kF, 0), A(kB, 0), A(kSG, 0, 0, 1),
                                              A(kRA, 1, 0, 1), A(kF, 1), A(kB, 1), A(kSG, 1, 0, 2),
                                              A(kRA, 2, 0, 2), A(kF, 2), A(kB, 2), A(kSG, 2, 0, 3)};
  EXPECT_EQ(s[0], stage0) << Format(s[0]);
  EXPECT_EQ(s[1], stage1) << Format(s[1]);
}

// Under rendezvous semantics (a send completes only when its receive is posted: NCCL,
// MPI_Ssend) the ungrouped 1F1B order deadlocks for every P >= 2 as soon as m >= 2: in the
// first steady tick stage P-2 waits in Send(activation 1) for stage P-1, which waits in
// Send(gradient 0) for stage P-2's Recv(gradient 0), posted only after that send. With m = 1
// there is no steady state and it completes. Grouped 1F1B and GPipe (either way) complete.
TEST(PipelineScheduleTest, RendezvousRejectsUngroupedOneFOneBAndAcceptsGrouped) {
  for (int p : {2, 4, 8}) {
    for (int m = 1; m <= 16; ++m) {
      SCOPED_TRACE("P=" + std::to_string(p) + " m=" + std::to_string(m));
      const absl::Status old_order =
          CheckSchedule(Build(ScheduleKind::k1F1B, p, m, /*grouped=*/false), m);
      if (m >= 2) {
        EXPECT_THAT(
            old_order.message(),
            AllOf(HasSubstr("deadlocks under rendezvous semantics"),
                  HasSubstr(absl::StrCat("stage ", p - 2)),
                  HasSubstr("SendActivation of micro-batch 1 to stage " + std::to_string(p - 1)),
                  HasSubstr("SendGradient of micro-batch 0 to stage " + std::to_string(p - 2))));
      } else {
        EXPECT_TRUE(old_order.ok()) << old_order;
      }
      EXPECT_TRUE(CheckSchedule(Build(ScheduleKind::k1F1B, p, m), m).ok())
          << CheckSchedule(Build(ScheduleKind::k1F1B, p, m), m);
      for (bool grouped : {true, false}) {
        EXPECT_TRUE(CheckSchedule(Build(ScheduleKind::kGPipe, p, m, grouped), m).ok())
            << CheckSchedule(Build(ScheduleKind::kGPipe, p, m, grouped), m);
      }
    }
  }
}

// A send and the receive it waits for, posted one after the other by both neighbours, is the
// classic exchange deadlock; posted as one group on one side suffices.
TEST(PipelineScheduleTest, RendezvousNeedsOnlyOneSideGrouped) {
  PipelineSchedule s = Build(ScheduleKind::k1F1B, 2, 2, /*grouped=*/false);
  ASSERT_FALSE(CheckSchedule(s, 2).ok());
  // Stage 0: F0 SA0 F1 SA1 RG0 B0 RG1 B1; group SA1 with RG0.
  s[0][3].group = 7;
  s[0][4].group = 7;
  EXPECT_TRUE(CheckSchedule(s, 2).ok()) << CheckSchedule(s, 2);
}

TEST(PipelineScheduleTest, RejectsMalformedGroups) {
  PipelineSchedule compute = Build(ScheduleKind::k1F1B, 2, 2);
  compute[0][0].group = 3;  // Forward of micro-batch 0.
  EXPECT_THAT(CheckSchedule(compute, 2).message(),
              AllOf(HasSubstr("stage 0 position 0"), HasSubstr("compute takes group -1")));
  PipelineSchedule apart = Build(ScheduleKind::k1F1B, 2, 2, /*grouped=*/false);
  apart[0][1].group = 5;  // SendActivation 0 ...
  apart[0][4].group = 5;  // ... and RecvGradient 0, with compute between them.
  EXPECT_THAT(CheckSchedule(apart, 2).message(),
              AllOf(HasSubstr("stage 0 position 4"), HasSubstr("not adjacent")));
}

// Every size in {1,2,3,4,8} stages x {1,2,4,8,16} micro-batches, both kinds.
class PipelineScheduleSizesTest
    : public ::testing::TestWithParam<std::tuple<ScheduleKind, int, int>> {};

TEST_P(PipelineScheduleSizesTest, PassesCheckerWithPredictedBubbleAndMemory) {
  const auto [kind, p, m] = GetParam();
  const PipelineSchedule schedule = Build(kind, p, m);
  ASSERT_EQ(static_cast<int>(schedule.size()), p);
  ASSERT_TRUE(CheckSchedule(schedule, m).ok()) << CheckSchedule(schedule, m);
  for (int s = 0; s < p; ++s) {
    const auto count = [&](ActionType t) {
      return std::count_if(schedule[s].begin(), schedule[s].end(),
                           [t](const PipelineAction& a) { return a.type == t; });
    };
    EXPECT_EQ(count(kF), m);
    EXPECT_EQ(count(kB), m);
    EXPECT_EQ(count(kRA), s > 0 ? m : 0) << "stage " << s;
    EXPECT_EQ(count(kSG), s > 0 ? m : 0) << "stage " << s;
    EXPECT_EQ(count(kSA), s < p - 1 ? m : 0) << "stage " << s;
    EXPECT_EQ(count(kRG), s < p - 1 ? m : 0) << "stage " << s;
  }

  // Balanced stages with backward = 2 x forward: every stage idles (P-1)/(m+P-1).
  absl::StatusOr<TimelineResult> timeline =
      SimulateSchedule(schedule, std::vector<StageCost>(p, StageCost{1.0, 2.0}));
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_DOUBLE_EQ(timeline->makespan, 3.0 * (m + p - 1));
  ASSERT_EQ(static_cast<int>(timeline->idle_fraction.size()), p);
  for (int s = 0; s < p; ++s) {
    EXPECT_DOUBLE_EQ(timeline->busy[s], 3.0 * m);
    EXPECT_NEAR(timeline->idle_fraction[s], PredictedBubbleFraction(p, m), 1e-12) << "stage " << s;
    const int expected_live = kind == ScheduleKind::kGPipe ? m : std::min(p - s, m);
    EXPECT_EQ(timeline->peak_live_micro_batches[s], expected_live) << "stage " << s;
  }
}

std::string SizeName(const ::testing::TestParamInfo<PipelineScheduleSizesTest::ParamType>& info) {
  const ScheduleKind kind = std::get<0>(info.param);
  return std::string(kind == ScheduleKind::kGPipe ? "GPipe" : "OneFOneB") + "_P" +
         std::to_string(std::get<1>(info.param)) + "_m" + std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    PipelineScheduleAllSizes, PipelineScheduleSizesTest,
    ::testing::Combine(::testing::Values(ScheduleKind::kGPipe, ScheduleKind::k1F1B),
                       ::testing::Values(1, 2, 3, 4, 8), ::testing::Values(1, 2, 4, 8, 16)),
    SizeName);

TEST(PipelineScheduleTest, PredictedBubbleFraction) {
  EXPECT_DOUBLE_EQ(PredictedBubbleFraction(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(PredictedBubbleFraction(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(PredictedBubbleFraction(8, 1), 7.0 / 8.0);
  EXPECT_TRUE(std::isnan(PredictedBubbleFraction(0, 8)));
}

TEST(PipelineScheduleTest, RejectsSwappedActivationReceives) {
  PipelineSchedule s = Build(ScheduleKind::k1F1B, 2, 3, /*grouped=*/false);
  ASSERT_EQ(s[1][0], A(kRA, 0, 0));
  ASSERT_EQ(s[1][4], A(kRA, 1, 0));
  std::swap(s[1][0], s[1][4]);
  const absl::Status status = CheckSchedule(s, 3);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("stage 1 position 0"), HasSubstr("RecvActivation of micro-batch 1"),
                    HasSubstr("is micro-batch 0")));
}

TEST(PipelineScheduleTest, RejectsSwappedGradientReceives) {
  PipelineSchedule s = Build(ScheduleKind::kGPipe, 3, 2, /*grouped=*/false);
  // Stage 1: RA0 F0 SA0 RA1 F1 SA1 RG1 B1 SG1 RG0 B0 SG0; receive gradient 0 first.
  ASSERT_EQ(s[1][6], A(kRG, 1, 2));
  ASSERT_EQ(s[1][9], A(kRG, 0, 2));
  std::swap(s[1][6], s[1][9]);
  const absl::Status status = CheckSchedule(s, 2);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("stage 1 position 6"),
                                      HasSubstr("RecvGradient of micro-batch 0 from stage 2")));
}

TEST(PipelineScheduleTest, RejectsMissingActivationSendAsDeadlock) {
  PipelineSchedule s = Build(ScheduleKind::kGPipe, 2, 3, /*grouped=*/false);
  ASSERT_EQ(s[0][5], A(kSA, 2, 1));
  s[0].erase(s[0].begin() + 5);
  const absl::Status status = CheckSchedule(s, 3);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("deadlocks"),
                    HasSubstr("stage 0 position 5 waits on RecvGradient of micro-batch 2"),
                    HasSubstr("stage 1 position 4 waits on RecvActivation of micro-batch 2")));
}

TEST(PipelineScheduleTest, RejectsMissingGradientSend) {
  PipelineSchedule s = Build(ScheduleKind::k1F1B, 2, 3, /*grouped=*/false);
  ASSERT_EQ(s[1][7], A(kSG, 1, 0));
  s[1].erase(s[1].begin() + 7);
  const absl::Status status = CheckSchedule(s, 3);
  // Stage 1's next gradient is micro-batch 2, so stage 0's receive of 1 can never match.
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("stage 0 position 8: RecvGradient of micro-batch 1 from stage 1"),
                    HasSubstr("is micro-batch 2")));
}

TEST(PipelineScheduleTest, RejectsExtraReceive) {
  PipelineSchedule s = Build(ScheduleKind::k1F1B, 3, 4);
  s[1].insert(s[1].begin() + 1, A(kRA, 0, 0));
  EXPECT_THAT(CheckSchedule(s, 4).message(),
              HasSubstr("stage 1 position 1: RecvActivation of micro-batch 0 from stage 0 is its "
                        "second"));
  PipelineSchedule tail = Build(ScheduleKind::kGPipe, 2, 2);
  tail[0].push_back(A(kRG, 1, 1));
  EXPECT_THAT(CheckSchedule(tail, 2).message(),
              HasSubstr("stage 0 position 8: RecvGradient of micro-batch 1"));
}

TEST(PipelineScheduleTest, RejectsWrongPeer) {
  PipelineSchedule s = Build(ScheduleKind::k1F1B, 3, 2, /*grouped=*/false);
  ASSERT_EQ(s[1][2], A(kSA, 0, 2));
  s[1][2].peer = 0;
  EXPECT_THAT(CheckSchedule(s, 2).message(),
              AllOf(HasSubstr("stage 1 position 2: SendActivation of micro-batch 0 to stage 0"),
                    HasSubstr("neighbour stage 2")));

  PipelineSchedule first = Build(ScheduleKind::kGPipe, 2, 1, /*grouped=*/false);
  first[0].insert(first[0].begin(), A(kRA, 0, 1));
  EXPECT_THAT(CheckSchedule(first, 1).message(), HasSubstr("stage 0 is the first stage"));

  PipelineSchedule last = Build(ScheduleKind::kGPipe, 2, 1, /*grouped=*/false);
  last[1].insert(last[1].begin() + 2, A(kSA, 0, 2));
  EXPECT_THAT(CheckSchedule(last, 1).message(), HasSubstr("stage 1 is the last stage"));

  PipelineSchedule compute = Build(ScheduleKind::kGPipe, 1, 1, /*grouped=*/false);
  compute[0][0].peer = 0;
  EXPECT_THAT(CheckSchedule(compute, 1).message(), HasSubstr("compute takes peer -1"));
}

TEST(PipelineScheduleTest, RejectsSendBeforeItsCompute) {
  PipelineSchedule s = Build(ScheduleKind::kGPipe, 2, 2);
  std::swap(s[0][0], s[0][1]);  // SendActivation(0) before Forward(0).
  EXPECT_THAT(CheckSchedule(s, 2).message(),
              HasSubstr("stage 0 position 0: SendActivation of micro-batch 0 to stage 1 comes "
                        "before the Forward that produces it"));
}

TEST(PipelineScheduleTest, RejectsForwardBeforeItsReceiveAndBackwardBeforeForward) {
  PipelineSchedule s = Build(ScheduleKind::kGPipe, 2, 2);
  std::swap(s[1][0], s[1][1]);
  EXPECT_THAT(CheckSchedule(s, 2).message(),
              HasSubstr("stage 1 position 0: Forward of micro-batch 0 comes before its "
                        "RecvActivation"));

  PipelineSchedule single = {{A(kB, 0), A(kF, 0)}};
  EXPECT_THAT(CheckSchedule(single, 1).message(),
              HasSubstr("stage 0 position 0: Backward of micro-batch 0 comes before its Forward"));
}

TEST(PipelineScheduleTest, RejectsMissingOrOutOfRangeMicroBatches) {
  PipelineSchedule s = Build(ScheduleKind::kGPipe, 1, 3);
  s[0].pop_back();  // Backward of micro-batch 0.
  EXPECT_THAT(CheckSchedule(s, 3).message(), HasSubstr("stage 0: micro-batch 0 has no Backward"));

  PipelineSchedule range = Build(ScheduleKind::k1F1B, 2, 2);
  EXPECT_THAT(CheckSchedule(range, 1).message(),
              HasSubstr("micro-batch 1: micro-batch outside [0, 1)"));
  EXPECT_THAT(CheckSchedule(range, 3).message(), HasSubstr("micro-batch 2 has no"));
}

TEST(PipelineScheduleTest, SimulatesHandComputedOneFOneBTimeline) {
  // P=2, m=3, F=1, B=2: stage 0 ends with B2 over [10, 12].
  const PipelineSchedule s = Build(ScheduleKind::k1F1B, 2, 3);
  absl::StatusOr<TimelineResult> t = SimulateSchedule(s, {{1.0, 2.0}, {1.0, 2.0}});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->makespan, 12.0);
  EXPECT_DOUBLE_EQ(t->idle_fraction[0], 0.25);
  EXPECT_EQ(t->peak_live_micro_batches, (std::vector<int>{2, 1}));
}

TEST(PipelineScheduleTest, SimulatesUnbalancedStages) {
  // One micro-batch runs straight through: 1 + 2 forward, 4 + 2 backward.
  const PipelineSchedule s = Build(ScheduleKind::kGPipe, 2, 1);
  absl::StatusOr<TimelineResult> t = SimulateSchedule(s, {{1.0, 2.0}, {2.0, 4.0}});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->makespan, 9.0);
  EXPECT_EQ(t->busy, (std::vector<double>{3.0, 6.0}));
  EXPECT_DOUBLE_EQ(t->idle_fraction[0], 1.0 - 3.0 / 9.0);
  EXPECT_DOUBLE_EQ(t->idle_fraction[1], 1.0 - 6.0 / 9.0);

  // A slow last stage bounds 1F1B at m x its cost plus the fill and drain of the others.
  const PipelineSchedule deep = Build(ScheduleKind::k1F1B, 3, 8);
  absl::StatusOr<TimelineResult> slow =
      SimulateSchedule(deep, {{1.0, 2.0}, {1.0, 2.0}, {2.0, 4.0}});
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_GE(slow->makespan, 8 * 6.0 + 2 * 3.0);
  EXPECT_NEAR(slow->idle_fraction[2], 1.0 - 48.0 / slow->makespan, 1e-12);
}

TEST(PipelineScheduleTest, SimulateRejectsBadCostsAndBrokenSchedules) {
  const PipelineSchedule s = Build(ScheduleKind::kGPipe, 2, 2);
  EXPECT_THAT(SimulateSchedule(s, {{1.0, 2.0}}).status().message(),
              HasSubstr("1 entries for 2 stages"));
  EXPECT_THAT(SimulateSchedule(s, {{1.0, 2.0}, {-1.0, 2.0}}).status().message(),
              HasSubstr("stage 1"));
  PipelineSchedule broken = s;
  broken[0].erase(broken[0].begin() + 1);
  EXPECT_FALSE(SimulateSchedule(broken, {{1.0, 2.0}, {1.0, 2.0}}).ok());
}

}  // namespace
}  // namespace deepnet::pipeline
