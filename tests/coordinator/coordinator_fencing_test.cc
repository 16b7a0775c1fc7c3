// A worker cut off from the coordinator (a partition, a stopped or killed daemon): the job is
// restarted elsewhere as a new attempt, the worker is told to stop the stale attempt's tasks
// before anything else when it comes back, and the loss is recorded as WORKER_LOST.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "coordinator/auth/trainer_credentials.h"
#include "coordinator/core/coordinator.h"
#include "tests/coordinator/coordinator_fixture.h"
#include "tests/file_text.h"
#include "tests/temp_dir.h"

namespace deepnet::coordinator {
namespace {

using testing::CoordinatorTest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::Worker;

class CoordinatorFencingTest : public CoordinatorTest {
 protected:
  // Ticks with `alive` heartbeating until `silent`'s lease has run out.
  void LetLeaseRunOut(const Worker& alive) {
    for (int i = 0; i < 6; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ASSERT_TRUE(coordinator_->OnHeartbeat(alive.id, alive.epoch, {}).ok());
      coordinator_->Tick();
    }
  }
};

// Each assignment names the job by its uid (id and creation time, which a reused id cannot
// match) and gives each rank a credential for that attempt's rendezvous scope only (issue 25,
// items 1 and 5).
TEST_F(CoordinatorFencingTest, AssignmentsCarryTheJobUidAndOneCredentialPerRank) {
  const TrainerCredentials credentials("fencing-test-key");
  options_.trainer_credentials = &credentials;
  Make();
  Worker a = AddWorker("a", 2);
  const std::string id = Submit(JobYaml(2, 1, ""));
  coordinator_->Tick();
  ASSERT_EQ(a.sink->assignments.size(), 1u);
  const AssignmentCommand& first = a.sink->assignments.back();
  const JobRecord record = coordinator_->GetJob(id)->record;
  EXPECT_EQ(first.job_uid, id + "@" + std::to_string(record.created_ms));
  ASSERT_EQ(first.ranks.size(), 2u);
  for (const RankAssignmentData& rank : first.ranks) {
    absl::StatusOr<TrainerGrant> grant = credentials.Verify(rank.rendezvous_credential);
    ASSERT_TRUE(grant.ok()) << grant.status();
    EXPECT_EQ(grant->job_id, id);
    EXPECT_EQ(grant->attempt, 1);
    EXPECT_EQ(grant->rank, rank.rank);
  }
  EXPECT_NE(first.ranks[0].rendezvous_credential, first.ranks[1].rendezvous_credential);
}

TEST_F(CoordinatorFencingTest, ReconnectingWorkerStopsStaleAttemptsBeforeAnythingElse) {
  Worker a = AddWorker("a", 1);
  Worker b = AddWorker("b", 1);
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  Worker& holder = a.sink->assignments.empty() ? b : a;
  Worker& other = a.sink->assignments.empty() ? a : b;
  Running(holder);
  ASSERT_EQ(State(id), JobState::kRunning);

  // The holder is cut off (its trainer keeps running): the job restarts on the other worker.
  LetLeaseRunOut(other);
  ASSERT_EQ(coordinator_->GetJob(id)->record.attempt, 2);
  ASSERT_EQ(other.sink->assignments.back().attempt, 2);
  // A second job waits for a free slot, which the holder's return will offer.
  const std::string second = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  ASSERT_EQ(State(second), JobState::kQueued);

  // The holder comes back, still listing attempt 1's task: the registration answer names it.
  Registration reg;
  reg.worker_name = holder.id;
  reg.slots.push_back({0, false, -1});
  reg.running_tasks.push_back({id, 1, 0, TaskPhase::kRunning, 100, 7, 0});
  absl::StatusOr<RegistrationResult> result = coordinator_->Register(reg);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->stale_tasks.size(), 1u);
  EXPECT_EQ(result->stale_tasks[0].job_id, id);
  EXPECT_EQ(result->stale_tasks[0].attempt, 1);
  EXPECT_THAT(result->stale_tasks[0].reason, HasSubstr("not part of a live attempt"));
  // Nothing is placed on it before its session opens ...
  coordinator_->Tick();
  EXPECT_EQ(State(second), JobState::kQueued);
  // ... and the session's first command stops the stale task; the new job comes after it.
  Worker back{holder.id, result->epoch, std::make_shared<testing::FakeSink>(),
              result->session_secret};
  ASSERT_TRUE(coordinator_->AttachSession(back.id, back.epoch, back.secret, back.sink).ok());
  coordinator_->Tick();
  EXPECT_THAT(back.sink->order, ElementsAre(absl::StrCat("cancel ", id, " attempt 1"),
                                            absl::StrCat("assign ", second, " attempt 1")));
  // The stale task's exit report changes nothing for the job's attempt 2.
  ASSERT_TRUE(
      coordinator_->OnTrainerExit(back.id, back.epoch, {id, 1, 0, 77, 0, "fenced out", true}).ok());
  EXPECT_EQ(coordinator_->GetJob(id)->record.attempt, 2);
  EXPECT_EQ(coordinator_->GetJob(id)->record.restarts, 1);
}

TEST_F(CoordinatorFencingTest, FencedOutCurrentAttemptFailsWithoutRestarts) {
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  Running(a);
  // The newest attempt itself is fenced out: another job owns its checkpoint folder.
  ASSERT_TRUE(
      coordinator_
          ->OnTrainerExit(a.id, a.epoch,
                          {id, 1, 0, 77, 0,
                           "deepnet train: fenced out: the folder belongs to job j-9\n", false})
          .ok());
  coordinator_->Tick();
  absl::StatusOr<JobView> job = coordinator_->GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->record.state, JobState::kFailed);
  EXPECT_EQ(job->record.restarts, 0);
  EXPECT_EQ(job->record.attempt, 1);
  EXPECT_THAT(job->record.state_reason, HasSubstr("fenced by another job"));
  EXPECT_THAT(job->record.state_reason, HasSubstr("belongs to job j-9"));
}

TEST_F(CoordinatorFencingTest, RegistrationOfALiveAttemptStopsNothing) {
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  Running(a);
  Registration reg;
  reg.worker_name = "a";
  reg.slots.push_back({0, false, -1});
  reg.running_tasks.push_back({id, 1, 0, TaskPhase::kRunning, 100, 7, 0});
  absl::StatusOr<RegistrationResult> result = coordinator_->Register(reg);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->stale_tasks.empty());
  EXPECT_EQ(State(id), JobState::kRunning);
}

TEST_F(CoordinatorFencingTest, KilledWorkerDaemonIsRecordedAsWorkerLost) {
  std::unique_ptr<CoordinatorMetrics> metrics = *CoordinatorMetrics::Create("", 100);
  metrics_ = metrics.get();
  Make();
  Worker a = AddWorker("a", 1);
  Worker b = AddWorker("b", 1);
  const std::string id = Submit(JobYaml(2, 1, ""));
  coordinator_->Tick();
  Running(a);
  Running(b);
  ASSERT_EQ(State(id), JobState::kRunning);
  // kill -9 of a's daemon: its session ends at once, its trainers die with it and report
  // nothing; b's rank then fails on its dead peer and reports first.
  coordinator_->DetachSession(a.id, a.epoch, a.sink.get());
  Exit(b, 1);
  const JobView job = *coordinator_->GetJob(id);
  EXPECT_EQ(job.record.state, JobState::kRecovering);
  EXPECT_EQ(job.record.last_recovery_cause, RecoveryCause::kWorkerLost);
  EXPECT_THAT(job.record.state_reason,
              HasSubstr("worker a holding ranks of the job is unreachable"));
  // Its lease runs out; the job restarts and the metric counts a worker loss.
  for (int i = 0; i < 8 && coordinator_->GetJob(id)->record.restarts < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(coordinator_->OnHeartbeat(b.id, b.epoch, {}).ok());
    coordinator_->Tick();
  }
  EXPECT_EQ(coordinator_->GetJob(id)->record.restarts, 1);
  EXPECT_THAT(metrics->Serialize(),
              HasSubstr("deepnet_job_restarts_total{cause=\"worker_lost\"} 1"));
  EXPECT_THAT(metrics->Serialize(),
              HasSubstr("deepnet_job_restarts_total{cause=\"worker_exit\"} 0"));
  coordinator_.reset();
  metrics_ = nullptr;
}

TEST_F(CoordinatorFencingTest, RankFailureWithEveryWorkerReachableStaysARankExit) {
  Worker a = AddWorker("a", 1);
  Worker b = AddWorker("b", 1);
  const std::string id = Submit(JobYaml(2, 1, ""));
  coordinator_->Tick();
  Running(a);
  Running(b);
  Exit(b, 1);
  EXPECT_EQ(coordinator_->GetJob(id)->record.last_recovery_cause, RecoveryCause::kWorkerExit);
}

// The reasons of every move of the job to `to`, one a line.
std::string StateMessages(const std::vector<JobEventView>& events, JobState to) {
  std::string out;
  for (const JobEventView& e : events) {
    if (e.type == EventType::kStateChanged && e.to_state == to) out += e.message + "\n";
  }
  return out;
}

TEST_F(CoordinatorFencingTest, RestartAnnouncesTheStepTheNewAttemptLoadsAndHearsItBack) {
  deepnet::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  for (const char* step : {"step_000000010", "step_000000020"}) {
    std::filesystem::create_directories(dir + "/" + step);
    deepnet::testing::WriteText(dir + "/" + step + "/MANIFEST.json", "{}");
  }
  // Step 20 was reported, but `latest` names 10 (say 20's pointer update never happened):
  // the trainer loads 10, so 10 is what the restart announces.
  deepnet::testing::WriteText(dir + "/latest", "step_000000010\n");
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(absl::StrCat(JobYaml(1, 1, ""), "checkpoint: {dir: ", dir, "}\n"));
  coordinator_->Tick();
  Running(a);
  MetricReport report;
  report.job_id = id;
  report.attempt = 1;
  report.checkpoint_steps = {10, 20};
  ASSERT_TRUE(coordinator_->OnMetrics("a", a.epoch, report).ok());
  EXPECT_EQ(coordinator_->GetJob(id)->latest_checkpoint_step, 20);
  Exit(a, 1);
  coordinator_->Tick();
  ASSERT_EQ(coordinator_->GetJob(id)->record.attempt, 2);
  EXPECT_THAT(StateMessages(Events(id), JobState::kPlacing),
              HasSubstr("from the latest checkpoint (step 10)"));
  // The new attempt's trainer says where it started; the running state records it.
  ASSERT_TRUE(
      coordinator_->OnHeartbeat("a", a.epoch, {{id, 2, 0, TaskPhase::kRunning, 200, 10, 0, 10}})
          .ok());
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_THAT(StateMessages(Events(id), JobState::kRunning),
              HasSubstr("resumed from checkpoint step 10"));
}

}  // namespace
}  // namespace deepnet::coordinator
