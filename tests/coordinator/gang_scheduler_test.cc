#include "coordinator/scheduler/gang_scheduler.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace deepnet::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::unique_ptr<GangScheduler> MakeScheduler(int max_overtakes = 0) {
  SchedulerOptions options;
  options.max_overtakes = max_overtakes;
  absl::StatusOr<std::unique_ptr<GangScheduler>> scheduler = GangScheduler::Create(options);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  return std::move(scheduler).value();
}

GangRequest Gang(const std::string& id, int64_t stages, int64_t dp, int priority = 0,
                 uint64_t seq = 0) {
  GangRequest r;
  r.job_id = id;
  r.pipeline_stages = stages;
  r.data_parallel = dp;
  r.priority = priority;
  r.submit_seq = seq;
  return r;
}

void AddWorkers(GangScheduler& s, int count, int slots, const std::string& prefix = "w") {
  for (int i = 0; i < count; ++i) ASSERT_TRUE(s.AddWorker(absl::StrCat(prefix, i), slots).ok());
}

std::vector<std::string> Ids(const std::vector<Placement>& placements) {
  std::vector<std::string> ids;
  for (const Placement& p : placements) ids.push_back(p.job_id);
  return ids;
}

// Worker of every rank of `stage`.
std::set<std::string> StageWorkers(const Placement& p, int64_t stage) {
  std::set<std::string> workers;
  for (int64_t r = 0; r < p.data_parallel; ++r) {
    workers.insert(p.ranks[stage * p.data_parallel + r].worker_id);
  }
  return workers;
}

// By value: callers pass the temporary that Pending() returns.
PendingJob PendingOf(const std::vector<PendingJob>& pending, const std::string& id) {
  for (const PendingJob& p : pending) {
    if (p.job_id == id) return p;
  }
  ADD_FAILURE() << "job " << id << " is not pending";
  return PendingJob{};
}

TEST(GangSchedulerTest, PlacesAllRanksOrNothing) {
  auto s = MakeScheduler();
  AddWorkers(*s, 2, 4);
  ASSERT_TRUE(s->Enqueue(Gang("big", 3, 3)).ok());  // 9 ranks, 8 slots.
  EXPECT_THAT(s->Schedule(), IsEmpty());
  EXPECT_EQ(s->free_slots(), 8);  // Nothing partially placed.
  EXPECT_FALSE(s->FindPlacement("big").has_value());

  ASSERT_TRUE(s->AddWorker("w2", 4).ok());
  const std::vector<Placement> placed = s->Schedule();
  ASSERT_THAT(Ids(placed), ElementsAre("big"));
  ASSERT_EQ(placed[0].ranks.size(), 9u);
  std::set<std::pair<std::string, int>> slots;
  for (const RankSlot& r : placed[0].ranks) slots.insert({r.worker_id, r.slot});
  EXPECT_EQ(slots.size(), 9u);
  EXPECT_EQ(s->free_slots(), 3);
  EXPECT_EQ(s->queued_jobs(), 0u);
  EXPECT_EQ(s->placed_jobs(), 1u);
}

TEST(GangSchedulerTest, KeepsEachStageGroupOnOneWorker) {
  auto s = MakeScheduler();
  AddWorkers(*s, 3, 3);  // 9 slots; a 3x2 gang fits 2+2+2 but not 3+3.
  ASSERT_TRUE(s->Enqueue(Gang("j", 3, 2)).ok());
  const std::vector<Placement> placed = s->Schedule();
  ASSERT_EQ(placed.size(), 1u);
  std::set<std::string> used;
  for (int64_t stage = 0; stage < 3; ++stage) {
    const std::set<std::string> workers = StageWorkers(placed[0], stage);
    EXPECT_EQ(workers.size(), 1u) << "stage " << stage;
    used.insert(workers.begin(), workers.end());
  }
  EXPECT_EQ(used.size(), 3u);
}

TEST(GangSchedulerTest, CoLocatesNeighbouringStages) {
  auto s = MakeScheduler();
  AddWorkers(*s, 4, 8);
  ASSERT_TRUE(s->Enqueue(Gang("j", 4, 4)).ok());  // 16 ranks: two workers, two stages each.
  const std::vector<Placement> placed = s->Schedule();
  ASSERT_EQ(placed.size(), 1u);
  const Placement& p = placed[0];
  EXPECT_EQ(StageWorkers(p, 0), StageWorkers(p, 1));
  EXPECT_EQ(StageWorkers(p, 2), StageWorkers(p, 3));
  EXPECT_NE(StageWorkers(p, 1), StageWorkers(p, 2));
  for (int64_t stage = 0; stage < 4; ++stage) EXPECT_EQ(StageWorkers(p, stage).size(), 1u);

  ASSERT_TRUE(s->Enqueue(Gang("small", 2, 2)).ok());  // Fits whole on one worker.
  const std::vector<Placement> second = s->Schedule();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(StageWorkers(second[0], 0), StageWorkers(second[0], 1));
}

TEST(GangSchedulerTest, PrefersTheSmallestWorkerThatFits) {
  auto s = MakeScheduler();
  ASSERT_TRUE(s->AddWorker("big", 8).ok());
  ASSERT_TRUE(s->AddWorker("small", 4).ok());
  ASSERT_TRUE(s->Enqueue(Gang("j", 1, 4)).ok());
  const std::vector<Placement> placed = s->Schedule();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(StageWorkers(placed[0], 0), std::set<std::string>{"small"});
  EXPECT_EQ(s->FindWorker("big")->free_slots, 8);  // The large block stays whole.
}

TEST(GangSchedulerTest, SplitsGroupsAcrossWorkersOnlyWhenNoWorkerHoldsOne) {
  auto s = MakeScheduler();
  AddWorkers(*s, 4, 4);
  ASSERT_TRUE(s->Enqueue(Gang("wide", 2, 8)).ok());  // A group of 8 on 4-slot workers.
  const std::vector<Placement> placed = s->Schedule();
  ASSERT_EQ(placed.size(), 1u);
  const Placement& p = placed[0];
  // Rank order packing: each stage spans exactly two workers, and no worker serves two stages.
  EXPECT_EQ(StageWorkers(p, 0).size(), 2u);
  EXPECT_EQ(StageWorkers(p, 1).size(), 2u);
  for (int r = 0; r < 16; r += 4) {
    for (int k = 1; k < 4; ++k) EXPECT_EQ(p.ranks[r + k].worker_id, p.ranks[r].worker_id);
  }
}

TEST(GangSchedulerTest, PlacesByPriorityThenSubmitOrder) {
  auto s = MakeScheduler();
  ASSERT_TRUE(s->Enqueue(Gang("low", 1, 1, /*priority=*/0, /*seq=*/1)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("high-late", 1, 1, 5, 4)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("high-early", 1, 1, 5, 2)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("mid", 1, 1, 3, 3)).ok());
  AddWorkers(*s, 1, 3);
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("high-early", "high-late", "mid"));
  ASSERT_TRUE(s->Release("mid").ok());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("low"));
}

TEST(GangSchedulerTest, StrictOrderHoldsSmallJobsBehindABlockedHead) {
  auto s = MakeScheduler();
  AddWorkers(*s, 2, 8);
  ASSERT_TRUE(s->Enqueue(Gang("running", 1, 10, 9, 0)).ok());
  ASSERT_THAT(Ids(s->Schedule()), ElementsAre("running"));
  ASSERT_TRUE(s->Enqueue(Gang("head", 2, 4, 5, 1)).ok());   // 8 ranks, 6 free.
  ASSERT_TRUE(s->Enqueue(Gang("small", 1, 2, 1, 2)).ok());  // Fits, but behind the head.
  EXPECT_THAT(s->Schedule(), IsEmpty());
  const std::vector<PendingJob> pending = s->Pending();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].job_id, "head");
  EXPECT_EQ(pending[0].code, PendingCode::kInsufficientSlots);
  EXPECT_EQ(pending[1].job_id, "small");
  EXPECT_EQ(pending[1].queue_position, 1);
  EXPECT_EQ(pending[1].code, PendingCode::kBehindJob);
  EXPECT_EQ(pending[1].blocking_job_id, "head");
  EXPECT_THAT(pending[1].reason, HasSubstr("waiting behind higher-priority job head"));

  ASSERT_TRUE(s->Release("running").ok());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("head", "small"));
}

TEST(GangSchedulerTest, BoundedOvertakingLetsLaterJobsPassAtMostTheLimit) {
  auto s = MakeScheduler(/*max_overtakes=*/2);
  AddWorkers(*s, 1, 4);
  ASSERT_TRUE(s->Enqueue(Gang("running", 1, 2, 9, 0)).ok());
  ASSERT_THAT(Ids(s->Schedule()), ElementsAre("running"));
  ASSERT_TRUE(s->Enqueue(Gang("head", 1, 4, 5, 1)).ok());  // Needs 4, 2 free.
  ASSERT_TRUE(s->Enqueue(Gang("a", 1, 1, 0, 2)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("b", 1, 1, 0, 3)).ok());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("a", "b"));  // Two overtakes: the limit.
  ASSERT_TRUE(s->Release("a").ok());
  ASSERT_TRUE(s->Enqueue(Gang("c", 1, 1, 0, 4)).ok());
  EXPECT_THAT(s->Schedule(), IsEmpty());  // A free slot, but the head may not be passed again.
  const PendingJob c = PendingOf(s->Pending(), "c");
  EXPECT_EQ(c.code, PendingCode::kBehindJob);
  EXPECT_EQ(c.blocking_job_id, "head");
  EXPECT_THAT(c.reason, HasSubstr("overtaken 2 times, the limit"));
  EXPECT_THAT(PendingOf(s->Pending(), "head").reason, HasSubstr("overtaken 2 of at most 2"));

  ASSERT_TRUE(s->Release("running").ok());
  ASSERT_TRUE(s->Release("b").ok());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("head"));
  ASSERT_TRUE(s->Release("head").ok());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("c"));
}

TEST(GangSchedulerTest, PendingReasonsNameSlotsFreeAndLargestWorker) {
  auto s = MakeScheduler();
  AddWorkers(*s, 16, 8);  // 128 slots.
  ASSERT_TRUE(s->Enqueue(Gang("running", 4, 8, 9, 0)).ok());
  ASSERT_THAT(Ids(s->Schedule()), ElementsAre("running"));
  ASSERT_TRUE(s->Enqueue(Gang("j-12", 16, 8, 5, 1)).ok());   // 128 > 96 free.
  ASSERT_TRUE(s->Enqueue(Gang("huge", 13, 10, 7, 2)).ok());  // 130 > 128 ever.
  ASSERT_TRUE(s->Enqueue(Gang("tiny", 1, 1, 0, 3)).ok());
  EXPECT_THAT(s->Schedule(), IsEmpty());
  const std::vector<PendingJob> pending = s->Pending();
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[0].job_id, "huge");
  EXPECT_EQ(pending[0].code, PendingCode::kExceedsRegistered);
  EXPECT_EQ(pending[0].reason,
            "waiting for workers to join: needs 130 slots (13 pipeline stages x 10 "
            "data-parallel); 16 workers ready with 128 slots, 96 free");
  EXPECT_EQ(pending[1].job_id, "j-12");
  EXPECT_EQ(pending[1].code, PendingCode::kInsufficientSlots);
  EXPECT_EQ(pending[1].reason,
            "waiting for free slots: needs 128 slots (16 pipeline stages x 8 data-parallel); 16 "
            "workers ready with 128 slots, 96 free (largest free worker has 8)");
  EXPECT_EQ(pending[2].code, PendingCode::kBehindJob);
  EXPECT_EQ(pending[2].reason,
            "waiting behind higher-priority job j-12 (priority 5), which needs 128 slots (16 "
            "pipeline stages x 8 data-parallel) (strict queue order); this job fits: needs 1 "
            "slot (1 pipeline stage x 1 data-parallel), 96 free");
}

TEST(GangSchedulerTest, PendingReasonCountsWorkersThatAreNotReady) {
  auto s = MakeScheduler();
  ASSERT_TRUE(s->Enqueue(Gang("job", 2, 2)).ok());
  EXPECT_EQ(s->Pending()[0].reason,
            "waiting for workers to join: needs 4 slots (2 pipeline stages x 2 data-parallel); "
            "no worker is registered");
  AddWorkers(*s, 3, 2);
  ASSERT_TRUE(s->UpdateWorkerState("w0", WorkerState::kDraining).ok());
  ASSERT_TRUE(s->UpdateWorkerState("w1", WorkerState::kLost).ok());
  EXPECT_EQ(s->Pending()[0].code, PendingCode::kExceedsRegistered);
  EXPECT_EQ(s->Pending()[0].reason,
            "waiting for workers to join: needs 4 slots (2 pipeline stages x 2 data-parallel); "
            "1 worker ready with 2 slots, 2 free (1 draining, 1 lost)");
  ASSERT_TRUE(s->UpdateWorkerState("w2", WorkerState::kDraining).ok());
  EXPECT_THAT(s->Pending()[0].reason, HasSubstr("; no worker is ready (2 draining, 1 lost)"));
  ASSERT_TRUE(s->UpdateWorkerState("w0", WorkerState::kReady).ok());
  ASSERT_TRUE(s->UpdateWorkerState("w2", WorkerState::kReady).ok());
  EXPECT_EQ(s->Pending()[0].code, PendingCode::kSchedulable);
  EXPECT_THAT(s->Pending()[0].reason, HasSubstr("fits: needs 4 slots"));
}

TEST(GangSchedulerTest, PendingSaysSchedulableBeforeSchedulingRuns) {
  auto s = MakeScheduler();
  AddWorkers(*s, 1, 4);
  ASSERT_TRUE(s->Enqueue(Gang("a", 1, 3)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("b", 1, 3, 0, 1)).ok());
  const std::vector<PendingJob> pending = s->Pending();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].code, PendingCode::kSchedulable);
  EXPECT_EQ(pending[1].code, PendingCode::kInsufficientSlots);  // After a takes 3 of 4.
  EXPECT_THAT(pending[1].reason, HasSubstr("1 worker ready with 4 slots, 1 free"));
}

TEST(GangSchedulerTest, JobLargerThanReadyWorkersDoesNotBlockTheQueue) {
  auto s = MakeScheduler();
  AddWorkers(*s, 2, 4);
  ASSERT_TRUE(s->Enqueue(Gang("too-big", 3, 3, 9, 0)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("fits", 1, 2, 0, 1)).ok());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("fits"));
  EXPECT_EQ(PendingOf(s->Pending(), "too-big").code, PendingCode::kExceedsRegistered);
}

TEST(GangSchedulerTest, RanksGoOnlyToSlotsWithEnoughMemory) {
  auto s = MakeScheduler();
  ASSERT_TRUE(s->AddWorker("small", 4, 100).ok());
  ASSERT_TRUE(s->AddWorker("big", 2, 1000).ok());
  GangRequest a = Gang("a", 1, 2, 0, 0), b = Gang("b", 1, 2, 0, 1), huge = Gang("huge", 1, 1, 9, 2);
  a.memory_per_rank_bytes = b.memory_per_rank_bytes = 500;
  huge.memory_per_rank_bytes = 5000;
  huge.memory_biggest_part = "activations";
  for (const GangRequest& r : {a, b, huge}) ASSERT_TRUE(s->Enqueue(r).ok());
  // huge fits no slot and blocks nothing; a takes both large slots; b waits for them although
  // "small" has 4 free slots.
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("a"));
  const std::optional<Placement> placed = s->FindPlacement("a");
  ASSERT_TRUE(placed.has_value());
  for (const RankSlot& rank : placed->ranks) EXPECT_EQ(rank.worker_id, "big");
  const PendingJob waits = PendingOf(s->Pending(), "b");
  EXPECT_EQ(waits.code, PendingCode::kInsufficientSlots);
  const PendingJob too_big = PendingOf(s->Pending(), "huge");
  EXPECT_EQ(too_big.code, PendingCode::kExceedsSlotMemory);
  EXPECT_THAT(too_big.reason, HasSubstr("each rank needs an estimated 4.88 KiB (biggest part: "
                                        "activations), but the largest slot of the ready workers "
                                        "has 1000 B"));
  // A job of unknown memory (0) may use any slot.
  ASSERT_TRUE(s->Enqueue(Gang("any", 1, 4, 0, 3)).ok());
  EXPECT_THAT(Ids(s->Schedule()), IsEmpty());  // strict order: b is first and does not fit
}

TEST(GangSchedulerTest, CheckGangFitsClusterNamesTheFields) {
  EXPECT_TRUE(CheckGangFitsCluster(2, 2, 4).ok());
  EXPECT_THAT(std::string(CheckGangFitsCluster(0, 2, 4).message()),
              HasSubstr("parallel.pipeline_stages must be positive, got 0"));
  EXPECT_THAT(std::string(CheckGangFitsCluster(2, -1, 4).message()),
              HasSubstr("parallel.data_parallel must be positive, got -1"));
  const absl::Status huge = CheckGangFitsCluster(int64_t{1} << 40, int64_t{1} << 40, 4096);
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(huge.message()), HasSubstr("more than 2^63"));
  EXPECT_FALSE(CheckGangFitsCluster(1, 1, 0).ok());  // No workers registered yet.
}

TEST(GangSchedulerTest, EnqueueRejectsBadSizesAndDuplicateIds) {
  auto s = MakeScheduler();
  EXPECT_THAT(std::string(s->Enqueue(Gang("j", 0, 1)).message()),
              HasSubstr("parallel.pipeline_stages must be positive"));
  EXPECT_THAT(std::string(s->Enqueue(Gang("j", 1, 0)).message()),
              HasSubstr("parallel.data_parallel must be positive"));
  EXPECT_EQ(s->Enqueue(Gang("j", int64_t{1} << 40, 1 << 20)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Enqueue(Gang("", 1, 1)).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(s->Enqueue(Gang("j", 1, 1)).ok());
  EXPECT_EQ(s->Enqueue(Gang("j", 1, 1)).code(), absl::StatusCode::kAlreadyExists);
  AddWorkers(*s, 1, 1);
  ASSERT_EQ(s->Schedule().size(), 1u);
  EXPECT_EQ(s->Enqueue(Gang("j", 1, 1)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(GangScheduler::Create(SchedulerOptions{-1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GangSchedulerTest, ReleaseFreesSlotsAndTheNextJobIsPlaced) {
  auto s = MakeScheduler();
  AddWorkers(*s, 2, 4);
  ASSERT_TRUE(s->Enqueue(Gang("first", 2, 4, 0, 0)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("second", 4, 2, 0, 1)).ok());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("first"));
  EXPECT_EQ(s->free_slots(), 0);
  EXPECT_EQ(s->Release("second").code(), absl::StatusCode::kNotFound);  // Queued, not placed.
  ASSERT_TRUE(s->Release("first").ok());
  EXPECT_EQ(s->free_slots(), 8);
  EXPECT_FALSE(s->FindPlacement("first").has_value());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("second"));
  EXPECT_EQ(s->Release("first").code(), absl::StatusCode::kNotFound);
}

TEST(GangSchedulerTest, LostWorkerReportsAffectedJobsAndRanks) {
  auto s = MakeScheduler();
  AddWorkers(*s, 2, 4);
  ASSERT_TRUE(s->Enqueue(Gang("a", 2, 2, 0, 0)).ok());  // One worker, ranks 0..3.
  ASSERT_TRUE(s->Enqueue(Gang("b", 1, 2, 0, 1)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("c", 1, 2, 0, 2)).ok());
  ASSERT_EQ(s->Schedule().size(), 3u);
  const std::string a_worker = s->FindPlacement("a")->ranks[0].worker_id;

  absl::StatusOr<std::vector<LostRanks>> lost = s->UpdateWorkerState(a_worker, WorkerState::kLost);
  ASSERT_TRUE(lost.ok()) << lost.status();
  ASSERT_EQ(lost->size(), 1u);
  EXPECT_EQ((*lost)[0].job_id, "a");
  EXPECT_THAT((*lost)[0].ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(s->FindPlacement("a")->ranks[2].worker_id, "");
  EXPECT_EQ(s->FindWorker(a_worker)->free_slots, 0);
  EXPECT_EQ(s->ready_slots(), 4);
  ASSERT_TRUE(s->Release("a").ok());  // Frees nothing on the lost worker.
  EXPECT_EQ(s->free_slots(), 0);

  const std::string other = a_worker == "w0" ? "w1" : "w0";
  lost = s->RemoveWorker(other);
  ASSERT_TRUE(lost.ok());
  ASSERT_EQ(lost->size(), 2u);
  EXPECT_EQ((*lost)[0].job_id, "b");
  EXPECT_EQ((*lost)[1].job_id, "c");
  EXPECT_FALSE(s->FindWorker(other).has_value());
  EXPECT_EQ(s->RemoveWorker(other).status().code(), absl::StatusCode::kNotFound);

  // The lost worker comes back empty and takes new work.
  ASSERT_TRUE(s->UpdateWorkerState(a_worker, WorkerState::kReady).ok());
  EXPECT_EQ(s->free_slots(), 4);
}

TEST(GangSchedulerTest, DrainingWorkerKeepsRanksButTakesNoNewOnes) {
  auto s = MakeScheduler();
  AddWorkers(*s, 1, 4);
  ASSERT_TRUE(s->Enqueue(Gang("a", 1, 2, 0, 0)).ok());
  ASSERT_EQ(s->Schedule().size(), 1u);
  absl::StatusOr<std::vector<LostRanks>> lost = s->UpdateWorkerState("w0", WorkerState::kDraining);
  ASSERT_TRUE(lost.ok());
  EXPECT_THAT(*lost, IsEmpty());
  ASSERT_TRUE(s->Enqueue(Gang("b", 1, 1, 0, 1)).ok());
  EXPECT_THAT(s->Schedule(), IsEmpty());
  EXPECT_EQ(PendingOf(s->Pending(), "b").code, PendingCode::kExceedsRegistered);
  ASSERT_TRUE(s->Release("a").ok());
  EXPECT_EQ(s->FindWorker("w0")->free_slots, 4);
  ASSERT_TRUE(s->UpdateWorkerState("w0", WorkerState::kReady).ok());
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("b"));
}

TEST(GangSchedulerTest, CancelRemovesAQueuedJob) {
  auto s = MakeScheduler();
  ASSERT_TRUE(s->Enqueue(Gang("a", 1, 1, 0, 0)).ok());
  ASSERT_TRUE(s->Enqueue(Gang("b", 1, 1, 0, 1)).ok());
  ASSERT_TRUE(s->Cancel("a").ok());
  EXPECT_EQ(s->Cancel("a").code(), absl::StatusCode::kNotFound);
  AddWorkers(*s, 1, 4);
  EXPECT_THAT(Ids(s->Schedule()), ElementsAre("b"));
  EXPECT_EQ(s->Cancel("b").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(s->Enqueue(Gang("a", 1, 1, 0, 2)).ok());  // The id is free again.
}

Placement Manual(const std::string& id, int64_t stages, int64_t dp, std::vector<RankSlot> ranks) {
  Placement p;
  p.job_id = id;
  p.pipeline_stages = stages;
  p.data_parallel = dp;
  p.ranks = std::move(ranks);
  return p;
}

TEST(GangSchedulerTest, RestorePlacementReadoptsRunningRanks) {
  auto s = MakeScheduler();
  AddWorkers(*s, 2, 2);
  ASSERT_TRUE(s->RestorePlacement(Manual("old", 2, 1, {{"w0", 1}, {"w1", 0}})).ok());
  EXPECT_EQ(s->free_slots(), 2);
  EXPECT_EQ(s->FindPlacement("old")->ranks[1].worker_id, "w1");

  // Failures hold nothing.
  const absl::Status held = s->RestorePlacement(Manual("x", 1, 2, {{"w0", 0}, {"w0", 1}}));
  EXPECT_EQ(held.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(held.message()), HasSubstr("rank 1: slot 1 of worker w0 is held"));
  EXPECT_THAT(std::string(s->RestorePlacement(Manual("x", 1, 2, {{"w0", 0}, {"w0", 0}})).message()),
              HasSubstr("also given to rank 0"));
  EXPECT_THAT(std::string(s->RestorePlacement(Manual("x", 1, 1, {{"w9", 0}})).message()),
              HasSubstr("rank 0: unknown worker 'w9'"));
  EXPECT_THAT(std::string(s->RestorePlacement(Manual("x", 1, 1, {{"w0", 2}})).message()),
              HasSubstr("out of range"));
  EXPECT_THAT(std::string(s->RestorePlacement(Manual("x", 2, 1, {{"w0", 0}})).message()),
              HasSubstr("1 ranks placed, but 2 x 1 = 2 expected"));
  EXPECT_EQ(s->RestorePlacement(Manual("old", 1, 1, {{"w0", 0}})).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s->free_slots(), 2);

  ASSERT_TRUE(s->Enqueue(Gang("new", 1, 2)).ok());
  const std::vector<Placement> placed = s->Schedule();
  ASSERT_EQ(placed.size(), 1u);
  std::set<std::pair<std::string, int>> slots;
  for (const RankSlot& r : placed[0].ranks) slots.insert({r.worker_id, r.slot});
  EXPECT_EQ(slots, (std::set<std::pair<std::string, int>>{{"w0", 0}, {"w1", 1}}));
  ASSERT_TRUE(s->Release("old").ok());
  EXPECT_EQ(s->free_slots(), 2);
}

TEST(GangSchedulerTest, WorkerRegistrationErrors) {
  auto s = MakeScheduler();
  EXPECT_EQ(s->AddWorker("", 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->AddWorker("w", 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->AddWorker("w", 1 << 20).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(s->AddWorker("w", 2).ok());
  EXPECT_EQ(s->AddWorker("w", 2).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s->UpdateWorkerState("x", WorkerState::kReady).status().code(),
            absl::StatusCode::kNotFound);
}

// Random workloads: every placement has exactly P x D distinct slots on ready workers, no slot is
// held twice, free counts agree with the placements, and after Schedule() no queued job is
// schedulable (the pass reached its fixpoint).
class GangSchedulerPropertyTest : public ::testing::TestWithParam<int> {};

TEST_P(GangSchedulerPropertyTest, RandomOperationsNeverDoubleBookSlots) {
  std::mt19937 rng(1234 + GetParam());
  auto s = MakeScheduler(/*max_overtakes=*/GetParam() % 3);
  std::map<std::string, int> slots;  // Live (ready or draining) workers.
  std::map<std::string, WorkerState> state;
  std::set<std::string> queued;
  std::map<std::string, Placement> placed;
  int next_worker = 0;
  int next_job = 0;
  int placements = 0;   // Over the run, so the test shows the workload did exercise placement,
  int lost_events = 0;  // worker loss and blocked jobs.
  int blocked_checks = 0;
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  for (int step = 0; step < 600; ++step) {
    const int op = uniform(0, 99);
    if (op < 10 || slots.empty()) {
      const std::string id = absl::StrCat("w", next_worker++);
      const int n = uniform(1, 8);
      ASSERT_TRUE(s->AddWorker(id, n).ok());
      slots[id] = n;
      state[id] = WorkerState::kReady;
    } else if (op < 16) {
      auto it = std::next(state.begin(), uniform(0, static_cast<int>(state.size()) - 1));
      const WorkerState next = static_cast<WorkerState>(uniform(0, 2));
      absl::StatusOr<std::vector<LostRanks>> lost = s->UpdateWorkerState(it->first, next);
      ASSERT_TRUE(lost.ok());
      if (next != WorkerState::kLost || it->second == WorkerState::kLost) {
        EXPECT_THAT(*lost, IsEmpty());
      }
      for (const LostRanks& l : *lost) {
        ++lost_events;
        for (int r : l.ranks) EXPECT_EQ(placed.at(l.job_id).ranks[r].worker_id, it->first);
        placed[l.job_id] = *s->FindPlacement(l.job_id);
      }
      it->second = next;
    } else if (op < 19) {
      auto it = std::next(state.begin(), uniform(0, static_cast<int>(state.size()) - 1));
      absl::StatusOr<std::vector<LostRanks>> lost = s->RemoveWorker(it->first);
      ASSERT_TRUE(lost.ok());
      for (const LostRanks& l : *lost) placed[l.job_id] = *s->FindPlacement(l.job_id);
      slots.erase(it->first);
      state.erase(it);
    } else if (op < 60) {
      const std::string id = absl::StrCat("j", next_job++);
      ASSERT_TRUE(s->Enqueue(Gang(id, uniform(1, 4), uniform(1, 4), uniform(0, 2), step)).ok());
      queued.insert(id);
    } else if (op < 85 && !placed.empty()) {
      auto it = std::next(placed.begin(), uniform(0, static_cast<int>(placed.size()) - 1));
      ASSERT_TRUE(s->Release(it->first).ok());
      placed.erase(it);
    } else if (!queued.empty()) {
      auto it = std::next(queued.begin(), uniform(0, static_cast<int>(queued.size()) - 1));
      ASSERT_TRUE(s->Cancel(*it).ok());
      queued.erase(it);
    }

    for (const Placement& p : s->Schedule()) {
      ASSERT_EQ(queued.erase(p.job_id), 1u) << p.job_id;
      ASSERT_EQ(p.ranks.size(), static_cast<size_t>(p.pipeline_stages * p.data_parallel));
      std::set<std::pair<std::string, int>> distinct;
      for (const RankSlot& r : p.ranks) {
        ASSERT_EQ(state.at(r.worker_id), WorkerState::kReady) << p.job_id;
        ASSERT_GE(r.slot, 0);
        ASSERT_LT(r.slot, slots.at(r.worker_id));
        distinct.insert({r.worker_id, r.slot});
      }
      ASSERT_EQ(distinct.size(), p.ranks.size()) << p.job_id;
      placed[p.job_id] = p;
      ++placements;
    }

    // Global: no slot held twice; per-worker free counts match the placements.
    std::map<std::pair<std::string, int>, std::string> holder;
    std::map<std::string, int> used;
    for (const auto& [id, p] : placed) {
      for (const RankSlot& r : p.ranks) {
        if (r.worker_id.empty()) continue;  // Lost rank.
        const auto [it, fresh] = holder.emplace(std::make_pair(r.worker_id, r.slot), id);
        ASSERT_TRUE(fresh) << "slot " << r.worker_id << "/" << r.slot << " held by " << id
                           << " and " << it->second;
        ++used[r.worker_id];
      }
    }
    int64_t free_ready = 0;
    for (const WorkerInfo& w : s->Workers()) {
      ASSERT_EQ(w.slots, slots.at(w.id));
      ASSERT_EQ(w.state, state.at(w.id));
      if (w.state == WorkerState::kLost) {
        ASSERT_EQ(used[w.id], 0);
        continue;
      }
      ASSERT_EQ(w.free_slots + used[w.id], w.slots) << w.id;
      if (w.state == WorkerState::kReady) free_ready += w.free_slots;
    }
    ASSERT_EQ(s->free_slots(), free_ready);
    ASSERT_EQ(s->queued_jobs(), queued.size());
    ASSERT_EQ(s->placed_jobs(), placed.size());
    for (const PendingJob& p : s->Pending()) {
      ASSERT_NE(p.code, PendingCode::kSchedulable) << p.job_id << ": " << p.reason;
      ASSERT_EQ(queued.count(p.job_id), 1u);
      ++blocked_checks;
    }
  }
  EXPECT_GT(placements, 100);
  EXPECT_GT(lost_events, 0);
  EXPECT_GT(blocked_checks, 100);
}

INSTANTIATE_TEST_SUITE_P(Seeds, GangSchedulerPropertyTest, ::testing::Range(0, 6));

}  // namespace
}  // namespace deepnet::coordinator
