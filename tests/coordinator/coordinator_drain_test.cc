// A worker that is shutting down (WorkerDraining): the coordinator shows it DRAINING at once,
// places nothing on it (neither a new job nor the restart of a job it held), restarts the jobs
// it held elsewhere without counting it against max_restarts, leaves stopping its trainers to
// the worker (no cancellation with the coordinator's shorter grace), and says in the rank's
// exit event whether the stopped state is in a checkpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "coordinator/core/coordinator.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace deepnet::coordinator {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::Worker;

using namespace std::chrono_literals;

WorkerState StateOf(Coordinator& c, const std::string& id) {
  for (const WorkerView& w : c.ListWorkers()) {
    if (w.id == id) return w.state;
  }
  return WorkerState::kLost;
}

void StoppedExit(Coordinator& c, const Worker& w, int code, StopCheckpoint checkpoint,
                 int64_t checkpoint_step) {
  const AssignmentCommand& a = w.sink->assignments.back();
  for (const RankAssignmentData& r : a.ranks) {
    TrainerExitReport exit{a.job_id, a.attempt, r.rank, code, 0, "stopped", true};
    exit.checkpoint = checkpoint;
    exit.checkpoint_step = checkpoint_step;
    ASSERT_TRUE(c.OnTrainerExit(w.id, w.epoch, exit).ok());
  }
}

TEST_F(CoordinatorTest, DrainingWorkerRestartsItsJobElsewhereUncountedAndGetsNoAttempt) {
  Worker a = AddWorker("a", 1);
  Worker b = AddWorker("b", 1);
  Worker c = AddWorker("c", 1);
  // max_restarts 0: a drained restart must not need one.
  const std::string id = Submit(JobYaml(2, 1, "{max_restarts: 0}"));
  coordinator_->Tick();
  std::vector<Worker*> holders, idle;
  for (Worker* w : {&a, &b, &c}) (w->sink->assignments.empty() ? idle : holders).push_back(w);
  ASSERT_EQ(holders.size(), 2u);
  ASSERT_EQ(idle.size(), 1u);
  for (Worker* w : holders) Running(*w);
  ASSERT_EQ(State(id), JobState::kRunning);
  Worker& drainer = *holders[0];
  Worker& peer = *holders[1];

  ASSERT_TRUE(coordinator_->OnDraining(drainer.id, drainer.epoch, "signal 15 (SIGTERM)", 30s).ok());
  EXPECT_EQ(StateOf(*coordinator_, drainer.id), WorkerState::kDraining);
  EXPECT_EQ(StateOf(*coordinator_, peer.id), WorkerState::kReady);
  const JobView recovering = *coordinator_->GetJob(id);
  EXPECT_EQ(recovering.record.state, JobState::kRecovering);
  EXPECT_EQ(recovering.record.last_recovery_cause, RecoveryCause::kWorkerDrained);
  EXPECT_THAT(recovering.record.state_reason, HasSubstr("shutting down"));
  // The peer's rank is told to stop; the draining worker stops its own with its own grace.
  ASSERT_EQ(peer.sink->cancellations.size(), 1u);
  EXPECT_TRUE(drainer.sink->cancellations.empty());
  // The worker's grace (30 s) outlasts the coordinator's stop timeout (2 s): still waiting.
  const auto until = std::chrono::steady_clock::now() + 2200ms;
  while (std::chrono::steady_clock::now() < until) {
    for (Worker* w : {&a, &b, &c}) {
      std::vector<TaskReport> tasks;
      if (!w->sink->assignments.empty()) {
        const AssignmentCommand& cmd = w->sink->assignments.back();
        for (const RankAssignmentData& r : cmd.ranks) {
          tasks.push_back({cmd.job_id, cmd.attempt, r.rank, TaskPhase::kStopping, 100 + r.rank, 0,
                           r.slot_index});
        }
      }
      ASSERT_TRUE(coordinator_->OnHeartbeat(w->id, w->epoch, tasks).ok());
    }
    coordinator_->Tick();
    std::this_thread::sleep_for(40ms);
  }
  EXPECT_EQ(State(id), JobState::kRecovering);

  StoppedExit(*coordinator_, drainer, 143, StopCheckpoint::kSaved, 12);
  StoppedExit(*coordinator_, peer, 143, StopCheckpoint::kSaved, 12);
  coordinator_->Tick();
  const JobView restarted = *coordinator_->GetJob(id);
  EXPECT_EQ(restarted.record.state, JobState::kStarting);
  EXPECT_EQ(restarted.record.attempt, 2);
  EXPECT_EQ(restarted.record.restarts, 0);  // not counted
  // Attempt 2 went to the two workers that are not shutting down.
  EXPECT_EQ(drainer.sink->assignments.size(), 1u);
  ASSERT_FALSE(peer.sink->assignments.empty());
  EXPECT_EQ(peer.sink->assignments.back().attempt, 2);
  ASSERT_FALSE(idle[0]->sink->assignments.empty());
  EXPECT_EQ(idle[0]->sink->assignments.back().attempt, 2);

  bool described = false;
  for (const JobEventView& e : Events(id)) {
    if (e.type == EventType::kRankExited && e.worker_id == drainer.id) {
      EXPECT_THAT(e.message, HasSubstr("stopped with its state in the checkpoint of step 12"));
      described = true;
    }
  }
  EXPECT_TRUE(described);
}

TEST_F(CoordinatorTest, NothingIsPlacedOnADrainingWorker) {
  Worker a = AddWorker("a", 2);
  ASSERT_TRUE(coordinator_->OnDraining(a.id, a.epoch, "signal 15 (SIGTERM)", 5s).ok());
  const std::string id = Submit(JobYaml(1, 1, ""));
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_TRUE(a.sink->assignments.empty());
  // Its session breaking and re-attaching does not make it ready again.
  coordinator_->DetachSession(a.id, a.epoch, a.sink.get());
  ASSERT_TRUE(coordinator_->AttachSession(a.id, a.epoch, a.secret, a.sink).ok());
  coordinator_->Tick();
  EXPECT_EQ(StateOf(*coordinator_, a.id), WorkerState::kDraining);
  EXPECT_TRUE(a.sink->assignments.empty());
  // Nor does a registration that says it is still shutting down.
  Registration again;
  again.worker_name = "a";
  again.slots = {{0, false, -1, 0}, {1, false, -1, 0}};
  again.draining = true;
  absl::StatusOr<RegistrationResult> r = coordinator_->Register(again);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(coordinator_->AttachSession(a.id, r->epoch, r->session_secret, a.sink).ok());
  coordinator_->Tick();
  EXPECT_EQ(StateOf(*coordinator_, a.id), WorkerState::kDraining);
  EXPECT_EQ(State(id), JobState::kQueued);
  // A new daemon under the same name (no draining flag) is ready and gets the job.
  again.draining = false;
  r = coordinator_->Register(again);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(coordinator_->AttachSession(a.id, r->epoch, r->session_secret, a.sink).ok());
  coordinator_->Tick();
  EXPECT_EQ(StateOf(*coordinator_, a.id), WorkerState::kReady);
  EXPECT_EQ(State(id), JobState::kStarting);
}

TEST_F(CoordinatorTest, ARankKilledAfterTheGraceIsDescribedAsLostWork) {
  Worker a = AddWorker("a", 1);
  const std::string id = Submit(JobYaml(1, 1, "{max_restarts: 0}"));
  coordinator_->Tick();
  Running(a);
  ASSERT_TRUE(coordinator_->OnDraining(a.id, a.epoch, "signal 15 (SIGTERM)", 1s).ok());
  const AssignmentCommand& cmd = a.sink->assignments.back();
  TrainerExitReport killed{cmd.job_id, 1, 0, 0, 9, "", true};
  killed.checkpoint = StopCheckpoint::kNotSaved;
  killed.checkpoint_step = 8;
  ASSERT_TRUE(coordinator_->OnTrainerExit(a.id, a.epoch, killed).ok());
  coordinator_->Tick();
  // Back to placing, with nowhere to go (its only worker is draining): not failed.
  const JobView job = *coordinator_->GetJob(id);
  EXPECT_NE(job.record.state, JobState::kFailed);
  EXPECT_EQ(job.record.restarts, 0);
  bool described = false;
  for (const JobEventView& e : Events(id)) {
    if (e.type == EventType::kRankExited) {
      EXPECT_THAT(e.message, HasSubstr("killed before it wrote a checkpoint"));
      EXPECT_THAT(e.message, HasSubstr("the newest checkpoint is step 8"));
      described = true;
    }
  }
  EXPECT_TRUE(described);
}

TEST_F(CoordinatorTest, AnAssignmentRefusedByADrainingWorkerIsNoFailureOfTheJob) {
  Worker a = AddWorker("a", 1);
  Worker b = AddWorker("b", 1);
  const std::string id = Submit(JobYaml(1, 1, "{max_restarts: 0}"));
  coordinator_->Tick();
  Worker& holder = a.sink->assignments.empty() ? b : a;
  ASSERT_TRUE(coordinator_->OnDraining(holder.id, holder.epoch, "signal 2 (SIGINT)", 1s).ok());
  // The assignment crossed the drain on the wire: the worker refuses it.
  ASSERT_TRUE(coordinator_
                  ->OnAssignmentRefused(holder.id, holder.epoch, id, 1,
                                        "the worker is shutting down and starts no new trainers")
                  .ok());
  coordinator_->Tick();
  const JobView job = *coordinator_->GetJob(id);
  EXPECT_EQ(job.record.last_recovery_cause, RecoveryCause::kWorkerDrained);
  EXPECT_EQ(job.record.state, JobState::kStarting);
  EXPECT_EQ(job.record.attempt, 2);
  EXPECT_EQ(holder.sink->assignments.size(), 1u);
}

}  // namespace
}  // namespace deepnet::coordinator
