// The coordinator core driven directly (no gRPC): fake worker sessions record the commands it
// sends; the test plays the workers' part (heartbeats, exits, metrics) and calls Tick().
#include "coordinator/core/coordinator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "coordinator/store/in_memory_job_store.h"
#include "coordinator/store/sqlite_job_store.h"
#include "tests/coordinator/coordinator_fixture.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;

using testing::CoordinatorTest;
using testing::FakeSink;
using testing::JobYaml;
using testing::Worker;

TEST_F(CoordinatorTest, GangRunsToSuccessAndFreesItsSlots) {
  Worker a = AddWorker("a", 2);
  Worker b = AddWorker("b", 2);
  const std::string id = Submit(JobYaml(2, 2, ""));
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  ASSERT_EQ(a.sink->assignments.size() + b.sink->assignments.size(), 2u);
  // One stage's data-parallel group per worker.
  EXPECT_EQ(a.sink->assignments[0].ranks.size(), 2u);
  EXPECT_EQ(a.sink->assignments[0].world_size, 4);
  EXPECT_EQ(a.sink->assignments[0].attempt, 1);
  EXPECT_EQ(a.sink->assignments[0].rendezvous_address, "127.0.0.1:1");
  // stage = rank / data_parallel (2 here).
  EXPECT_EQ(a.sink->assignments[0].ranks[0].rank / 2, a.sink->assignments[0].ranks[1].rank / 2);
  EXPECT_EQ(coordinator_->GetJob(id)->placement.size(), 4u);
  Running(a);
  EXPECT_EQ(State(id), JobState::kStarting);
  Running(b);
  EXPECT_EQ(State(id), JobState::kRunning);
  MetricReport report{id, 1, 0, {}, {5}};
  report.points.push_back({5, 2.5, 2.4, 1e-3, 0.7, 1000, 0.01, 0, 0, 0});
  ASSERT_TRUE(coordinator_->OnMetrics("a", a.epoch, report).ok());
  EXPECT_EQ(coordinator_->GetJob(id)->record.last_step, 5);
  EXPECT_EQ(coordinator_->GetJob(id)->latest_checkpoint_step, 5);
  Exit(a, 0);
  EXPECT_EQ(State(id), JobState::kRunning);  // waits for every rank
  Exit(b, 0);
  EXPECT_EQ(State(id), JobState::kSucceeded);
  EXPECT_EQ(store_.Get(id)->last_step, 5);  // stored with the final state
  // Slots are free again: a second 4-rank job starts at once.
  const std::string next = Submit(JobYaml(2, 2, ""));
  coordinator_->Tick();
  EXPECT_EQ(State(next), JobState::kStarting);
  // Events: every transition, the placement and the checkpoint, in order, with attempts.
  std::vector<JobState> states;
  bool saw_checkpoint = false;
  for (const JobEventView& e : Events(id)) {
    if (e.type == EventType::kStateChanged) states.push_back(e.to_state);
    if (e.type == EventType::kCheckpointSaved) saw_checkpoint = e.checkpoint_step == 5;
    if (e.type == EventType::kPlaced) {
      EXPECT_EQ(e.attempt, 1);
    }
  }
  EXPECT_EQ(states, (std::vector<JobState>{JobState::kQueued, JobState::kPlacing,
                                           JobState::kStarting, JobState::kRunning,
                                           JobState::kSucceeded}));
  EXPECT_TRUE(saw_checkpoint);
}

TEST_F(CoordinatorTest, RankFailureStopsTheGangAndRestartsItUntilRestartsRunOut) {
  Worker a = AddWorker("a", 1);
  Worker b = AddWorker("b", 1);
  const std::string id = Submit(JobYaml(2, 1, "{max_restarts: 1}"));
  coordinator_->Tick();
  Running(a);
  Running(b);
  ASSERT_EQ(State(id), JobState::kRunning);
  Exit(a, 1);
  EXPECT_EQ(State(id), JobState::kRecovering);
  EXPECT_EQ(coordinator_->GetJob(id)->record.last_recovery_cause, RecoveryCause::kWorkerExit);
  EXPECT_THAT(coordinator_->GetJob(id)->record.state_reason, HasSubstr("exited with code 1"));
  // The surviving rank is told to stop; the failed one is not.
  ASSERT_EQ(b.sink->cancellations.size(), 1u);
  EXPECT_EQ(b.sink->cancellations[0].attempt, 1);
  EXPECT_TRUE(a.sink->cancellations.empty());
  Exit(b, 143);  // SIGTERM'ed trainer
  // Restart: placed again as attempt 2.
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_EQ(coordinator_->GetJob(id)->record.attempt, 2);
  EXPECT_EQ(coordinator_->GetJob(id)->record.restarts, 1);
  EXPECT_EQ(a.sink->assignments.back().attempt, 2);
  // A late exit report of attempt 1 changes nothing.
  ASSERT_TRUE(coordinator_->OnTrainerExit("a", a.epoch, {id, 1, 0, 9, 0, "", false}).ok());
  EXPECT_EQ(State(id), JobState::kStarting);
  Running(a);
  Running(b);
  Exit(b, 0, 9);  // killed by SIGKILL
  Exit(a, 143);
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_THAT(coordinator_->GetJob(id)->record.state_reason, HasSubstr("max_restarts 1"));
}

TEST_F(CoordinatorTest, LostWorkerRecoversTheJobOnTheRemainingCapacity) {
  Worker a = AddWorker("a", 2);
  Worker b = AddWorker("b", 2);
  const std::string id = Submit(JobYaml(2, 1, ""));
  coordinator_->Tick();
  Worker& holder = a.sink->assignments.empty() ? b : a;
  Worker& other = a.sink->assignments.empty() ? a : b;
  Running(holder);
  ASSERT_EQ(State(id), JobState::kRunning);
  // The holder stops heartbeating; the other keeps going.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(coordinator_->OnHeartbeat(other.id, other.epoch, {}).ok());
    coordinator_->Tick();
  }
  EXPECT_TRUE(holder.sink->closed.has_value());
  const JobView job = *coordinator_->GetJob(id);
  EXPECT_EQ(job.record.last_recovery_cause, RecoveryCause::kWorkerLost);
  EXPECT_EQ(job.record.attempt, 2);
  EXPECT_EQ(job.record.state, JobState::kStarting);
  ASSERT_FALSE(other.sink->assignments.empty());
  EXPECT_EQ(other.sink->assignments.back().attempt, 2);
  // The lost worker's stale epoch is refused.
  EXPECT_EQ(coordinator_->OnHeartbeat(holder.id, holder.epoch, {}).code(),
            absl::StatusCode::kAborted);
}

TEST_F(CoordinatorTest, CancelStopsRanksThenEndsCancelled) {
  Worker a = AddWorker("a", 2);
  const std::string running = Submit(JobYaml(2, 1, ""));
  const std::string queued = Submit(JobYaml(2, 1, ""));
  coordinator_->Tick();
  Running(a);
  ASSERT_EQ(State(running), JobState::kRunning);
  ASSERT_EQ(State(queued), JobState::kQueued);
  EXPECT_THAT(coordinator_->GetJob(queued)->record.state_reason, HasSubstr("2"));
  ASSERT_TRUE(coordinator_->Cancel(queued, "not needed").ok());
  EXPECT_EQ(State(queued), JobState::kCancelled);
  ASSERT_TRUE(coordinator_->Cancel(running, "").ok());
  ASSERT_EQ(a.sink->cancellations.size(), 1u);
  EXPECT_EQ(a.sink->cancellations[0].job_id, running);
  EXPECT_EQ(State(running), JobState::kRunning);  // until the ranks are gone
  Exit(a, 143);
  EXPECT_EQ(State(running), JobState::kCancelled);
  EXPECT_TRUE(coordinator_->Cancel(running, "").ok());  // no-op
  const std::string done = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  Running(a);
  Exit(a, 0);
  ASSERT_EQ(State(done), JobState::kSucceeded);
  EXPECT_EQ(coordinator_->Cancel(done, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_->Cancel("j-999999", "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorTest, RanksThatNeverReportTheirExitAreGivenUpAfterTheStopTimeout) {
  options_.stop_timeout = std::chrono::milliseconds(100);
  Make();
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  Running(a);
  ASSERT_TRUE(coordinator_->Cancel(id, "").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_TRUE(coordinator_->OnHeartbeat("a", a.epoch, {}).ok());
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kCancelled);
}

TEST_F(CoordinatorTest, PendingReasonsAreShownButNotWrittenOnEveryPass) {
  Worker a = AddWorker("a", 2);
  const std::string running = Submit(JobYaml(2, 1, ""));
  const std::string id = Submit(JobYaml(2, 1, ""));
  coordinator_->Tick();
  coordinator_->Tick();
  EXPECT_EQ(State(running), JobState::kStarting);
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_THAT(coordinator_->GetJob(id)->record.state_reason, HasSubstr("needs 2"));
  EXPECT_EQ(store_.Get(id)->version, 1);  // only the submit was written
}

TEST_F(CoordinatorTest, IdempotentSubmitReturnsTheFirstJob) {
  AddWorker("a", 1);
  const std::string yaml = JobYaml(1, 1, "");
  const std::string first = Submit(yaml, "key-1");
  absl::StatusOr<SubmitResultData> again =
      coordinator_->Submit({"alice", "key-1", yaml, *coordinator_->ParseSpec(yaml)});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.record.id, first);
  const std::string other = JobYaml(1, 1, "{priority: 3}");
  EXPECT_EQ(coordinator_->Submit({"alice", "key-1", other, *coordinator_->ParseSpec(other)})
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  // Keys are per user.
  absl::StatusOr<SubmitResultData> bob =
      coordinator_->Submit({"bob", "key-1", yaml, *coordinator_->ParseSpec(yaml)});
  ASSERT_TRUE(bob.ok());
  EXPECT_TRUE(bob->created);
}

TEST_F(CoordinatorTest, ReRegistrationFencesTheOldSessionAndKeepsListedRanks) {
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  Running(a);
  ASSERT_EQ(State(id), JobState::kRunning);
  // The stream broke; the worker registers again listing its running task.
  Worker again = AddWorker("a", 1, {{id, 1, 0, TaskPhase::kRunning, 100, 3, 0}});
  EXPECT_GT(again.epoch, a.epoch);
  EXPECT_TRUE(a.sink->closed.has_value());
  EXPECT_EQ(coordinator_->OnHeartbeat("a", a.epoch, {}).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_TRUE(again.sink->cancellations.empty());
  // Registering without the rank (the daemon restarted) loses it: the job is restarted.
  AddWorker("a", 1);
  EXPECT_EQ(coordinator_->GetJob(id)->record.last_recovery_cause, RecoveryCause::kWorkerLost);
  EXPECT_EQ(coordinator_->GetJob(id)->record.restarts, 1);
  EXPECT_EQ(State(id), JobState::kPlacing);
}

TEST_F(CoordinatorTest, TasksOfDeadAttemptsAreCancelled) {
  Worker a = AddWorker("a", 1, {{"j-000077", 3, 0, TaskPhase::kRunning, 100, 0, 0}});
  ASSERT_EQ(a.sink->cancellations.size(), 1u);  // queued until the session opened
  EXPECT_EQ(a.sink->cancellations[0].job_id, "j-000077");
  EXPECT_EQ(a.sink->cancellations[0].attempt, 3);
}

TEST_F(CoordinatorTest, HangAndStartTimeoutsRestartTheJob) {
  Worker a = AddWorker("a", 1);
  const std::string hung = Submit(JobYaml(1, 1, "{hang_timeout_s: 0.1, max_restarts: 0}"));
  coordinator_->Tick();
  Running(a);
  ASSERT_EQ(State(hung), JobState::kRunning);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_TRUE(coordinator_->OnHeartbeat("a", a.epoch, {}).ok());
  coordinator_->Tick();
  EXPECT_EQ(State(hung), JobState::kRecovering);
  EXPECT_EQ(coordinator_->GetJob(hung)->record.last_recovery_cause, RecoveryCause::kHang);
  bool saw_hang = false;
  for (const JobEventView& e : Events(hung)) saw_hang |= e.type == EventType::kHangDetected;
  EXPECT_TRUE(saw_hang);
  Exit(a, 143);
  EXPECT_EQ(State(hung), JobState::kFailed);

  const std::string slow = Submit(JobYaml(1, 1, "{start_timeout_s: 0.1, max_restarts: 0}"));
  coordinator_->Tick();
  ASSERT_EQ(State(slow), JobState::kStarting);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_TRUE(coordinator_->OnHeartbeat("a", a.epoch, {}).ok());
  coordinator_->Tick();
  EXPECT_EQ(coordinator_->GetJob(slow)->record.last_recovery_cause, RecoveryCause::kStartTimeout);
}

TEST_F(CoordinatorTest, MetricPointsReplayFromAStepThenStreamLive) {
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  Running(a);
  MetricReport report{id, 1, 0, {}, {}};
  for (int step = 1; step <= 5; ++step) report.points.push_back({step, 3.0 - step * 0.1});
  ASSERT_TRUE(coordinator_->OnMetrics("a", a.epoch, report).ok());
  int64_t cursor = *coordinator_->PointCursor(id, 3, false);
  PointBatch batch = *coordinator_->WaitPoints(id, cursor, absl::ZeroDuration());
  ASSERT_EQ(batch.points.size(), 3u);
  EXPECT_EQ(batch.points[0].step, 3);
  EXPECT_EQ(batch.points[0].attempt, 1);
  const int64_t live = *coordinator_->PointCursor(id, 0, true);
  std::thread reporter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    MetricReport more{id, 1, 0, {{6, 2.0}}, {}};
    EXPECT_TRUE(coordinator_->OnMetrics("a", a.epoch, more).ok());
  });
  batch = *coordinator_->WaitPoints(id, live, absl::Seconds(30));
  reporter.join();
  ASSERT_EQ(batch.points.size(), 1u);
  EXPECT_EQ(batch.points[0].step, 6);
}

TEST(CoordinatorRestartTest, ReattachesToRunningRanksOrRestartsWhenTheyDoNotReturn) {
  testing::TempDir dir;
  JobStoreOptions store_options;
  store_options.path = dir / "jobs.db";
  std::unique_ptr<SqliteJobStore> store = *SqliteJobStore::Open(store_options);
  std::unique_ptr<WorkerEpochStore> epochs = *WorkerEpochStore::Open(dir / "jobs.db");
  RendezvousStore rendezvous;
  CoordinatorOptions options;
  options.heartbeat_interval = std::chrono::milliseconds(1000);
  options.reattach_window = std::chrono::milliseconds(200);
  options.rendezvous_address = "127.0.0.1:1";
  options.spec_check.check_paths = false;
  const std::string yaml = JobYaml(2, 1, "");
  std::string kept, lost;
  int64_t old_epoch = 0;
  {
    auto first = *Coordinator::Create(options, store.get(), epochs.get(), &rendezvous, nullptr);
    Registration reg{"w", {}, {{0, false, -1}, {1, false, -1}, {2, false, -1}, {3, false, -1}}, {}};
    absl::StatusOr<RegistrationResult> registered = first->Register(reg);
    ASSERT_TRUE(registered.ok()) << registered.status();
    old_epoch = registered->epoch;
    ASSERT_TRUE(first->AttachSession("w", old_epoch, registered->session_secret,
                                     std::make_shared<FakeSink>())
                    .ok());
    kept = first->Submit({"alice", "", yaml, *first->ParseSpec(yaml)})->job.record.id;
    lost = first->Submit({"alice", "", yaml, *first->ParseSpec(yaml)})->job.record.id;
    first->Tick();
    std::vector<TaskReport> tasks;
    for (const JobView& job : {*first->GetJob(kept), *first->GetJob(lost)}) {
      for (const RankView& r : job.placement) {
        tasks.push_back({job.record.id, 1, r.rank, TaskPhase::kRunning, 1, 0, r.slot});
      }
    }
    ASSERT_TRUE(first->OnHeartbeat("w", old_epoch, tasks).ok());
    ASSERT_EQ(first->GetJob(kept)->record.state, JobState::kRunning);
    ASSERT_EQ(first->GetJob(lost)->record.state, JobState::kRunning);
  }
  // A new coordinator on the same database: the worker re-registers listing only `kept`'s ranks.
  auto second = *Coordinator::Create(options, store.get(), epochs.get(), &rendezvous, nullptr);
  ASSERT_EQ(second->GetJob(kept)->record.state, JobState::kRunning);
  Registration reg{"w", {}, {{0, false, -1}, {1, false, -1}, {2, false, -1}, {3, false, -1}}, {}};
  for (const RankView& r : second->GetJob(kept)->placement) (void)r;
  reg.running_tasks = {{kept, 1, 0, TaskPhase::kRunning, 1, 0, 0},
                       {kept, 1, 1, TaskPhase::kRunning, 1, 0, 1}};
  absl::StatusOr<RegistrationResult> r = second->Register(reg);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->epoch, old_epoch);  // epochs survive the restart
  auto sink = std::make_shared<FakeSink>();
  ASSERT_TRUE(second->AttachSession("w", r->epoch, r->session_secret, sink).ok());
  EXPECT_EQ(second->GetJob(kept)->placement.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  ASSERT_TRUE(second->OnHeartbeat("w", r->epoch, reg.running_tasks).ok());
  second->Tick();
  EXPECT_EQ(second->GetJob(kept)->record.state, JobState::kRunning);
  EXPECT_EQ(second->GetJob(kept)->record.attempt, 1);  // not restarted
  // `lost`'s ranks finished while the coordinator was away: had their exits been reported
  // in the window, it would have succeeded (see the next test); here they never were.
  const JobView relaunched = *second->GetJob(lost);
  EXPECT_EQ(relaunched.record.last_recovery_cause, RecoveryCause::kWorkerLost);
  EXPECT_EQ(relaunched.record.attempt, 2);
  ASSERT_FALSE(sink->assignments.empty());
  EXPECT_EQ(sink->assignments.back().job_id, lost);
}

TEST(CoordinatorRestartTest, RanksThatFinishedWhileTheCoordinatorWasAwayCompleteTheJob) {
  InMemoryJobStore store;
  std::unique_ptr<WorkerEpochStore> epochs = *WorkerEpochStore::Open("");
  RendezvousStore rendezvous;
  CoordinatorOptions options;
  options.reattach_window = std::chrono::milliseconds(60000);
  options.rendezvous_address = "127.0.0.1:1";
  options.spec_check.check_paths = false;
  const std::string yaml = JobYaml(2, 1, "");
  std::string id;
  Registration reg{"w", {}, {{0, false, -1}, {1, false, -1}}, {}};
  {
    auto first = *Coordinator::Create(options, &store, epochs.get(), &rendezvous, nullptr);
    absl::StatusOr<RegistrationResult> registered = first->Register(reg);
    ASSERT_TRUE(registered.ok()) << registered.status();
    ASSERT_TRUE(first->AttachSession("w", registered->epoch, registered->session_secret,
                                     std::make_shared<FakeSink>())
                    .ok());
    id = first->Submit({"alice", "", yaml, *first->ParseSpec(yaml)})->job.record.id;
    first->Tick();
    ASSERT_TRUE(first->OnHeartbeat("w", registered->epoch,
                                   {{id, 1, 0, TaskPhase::kRunning, 1, 0, 0},
                                    {id, 1, 1, TaskPhase::kRunning, 1, 0, 1}})
                    .ok());
    ASSERT_EQ(first->GetJob(id)->record.state, JobState::kRunning);
  }
  auto second = *Coordinator::Create(options, &store, epochs.get(), &rendezvous, nullptr);
  // Rank 0 still runs; rank 1 finished while the coordinator was down (its exit comes late).
  reg.running_tasks = {{id, 1, 0, TaskPhase::kRunning, 1, 0, 0}};
  absl::StatusOr<RegistrationResult> registered = second->Register(reg);
  ASSERT_TRUE(registered.ok()) << registered.status();
  const int64_t epoch = registered->epoch;
  ASSERT_TRUE(
      second->AttachSession("w", epoch, registered->session_secret, std::make_shared<FakeSink>())
          .ok());
  EXPECT_EQ(second->GetJob(id)->record.state, JobState::kRunning);
  ASSERT_TRUE(second->OnTrainerExit("w", epoch, {id, 1, 1, 0, 0, "", false}).ok());
  EXPECT_EQ(second->GetJob(id)->record.state, JobState::kRunning);  // re-adopted, rank 0 runs
  ASSERT_TRUE(second->OnTrainerExit("w", epoch, {id, 1, 0, 0, 0, "", false}).ok());
  EXPECT_EQ(second->GetJob(id)->record.state, JobState::kSucceeded);
  EXPECT_EQ(second->GetJob(id)->record.attempt, 1);
}

}  // namespace
}  // namespace deepnet::coordinator
