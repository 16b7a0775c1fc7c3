// Worker reports are checked against the placement (issue 25, item 2): points, checkpoints,
// guard events, exits and task listings of a rank count only from the worker that holds it,
// also while the coordinator reattaches after a restart, and a report's counts are bounded.
// A second worker with the worker credential is the attacker here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"

#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_run.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace deepnet::coordinator {
namespace {

using testing::CoordinatorTest;
using testing::JobYaml;
using testing::Worker;

class CoordinatorReportsTest : public CoordinatorTest {
 protected:
  // A 2x2 job RUNNING on a and b (two ranks each).
  std::string RunningJob() {
    a_ = AddWorker("a", 2);
    b_ = AddWorker("b", 2);
    const std::string id = Submit(JobYaml(2, 2, ""));
    coordinator_->Tick();
    Running(a_);
    Running(b_);
    EXPECT_EQ(State(id), JobState::kRunning);
    return id;
  }
  static int FirstRankOf(const Worker& w) { return w.sink->assignments.back().ranks[0].rank; }
  static MetricReport Report(const std::string& id, int rank, int64_t step, double loss) {
    MetricReport report{id, 1, rank, {}, {}};
    MetricPoint point;
    point.step = step;
    point.loss = loss;
    report.points.push_back(point);
    return report;
  }
  // Lets `wait` pass while `w` keeps its lease (heartbeats) and the coordinator ticks; with
  // `until`, goes on (at most 60 s more) until it holds, ticking once more after it does.
  void Pass(const Worker& w, std::chrono::milliseconds wait,
            const std::function<bool()>& until = nullptr) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < start + wait ||
           (until && !until() && std::chrono::steady_clock::now() < start + wait +
                                                                    std::chrono::seconds(60))) {
      ASSERT_TRUE(coordinator_->OnHeartbeat(w.id, w.epoch, {}).ok());
      coordinator_->Tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  int CheckpointEvents(const std::string& id) {
    int n = 0;
    for (const JobEventView& e : Events(id)) n += e.type == EventType::kCheckpointSaved ? 1 : 0;
    return n;
  }

  Worker a_;
  Worker b_;
};

TEST_F(CoordinatorReportsTest, AnotherWorkersPointsAndCheckpointsForARankAreIgnored) {
  const std::string id = RunningJob();
  Worker intruder = AddWorker("c", 1);
  MetricReport forged = Report(id, FirstRankOf(a_), 999, 12345);
  forged.checkpoint_steps = {100, 200, 300};
  ASSERT_TRUE(coordinator_->OnMetrics("c", intruder.epoch, forged).ok());
  // b holds ranks of the job, but not a's.
  ASSERT_TRUE(coordinator_->OnMetrics("b", b_.epoch, forged).ok());
  const absl::StatusOr<JobView> job = coordinator_->GetJob(id);
  EXPECT_EQ(job->record.last_step, 0);
  EXPECT_EQ(job->latest_checkpoint_step, 0);
  EXPECT_EQ(CheckpointEvents(id), 0);
  EXPECT_TRUE(coordinator_->WaitPoints(id, 0, absl::ZeroDuration())->points.empty());
  // The holder's report counts.
  MetricReport own = Report(id, FirstRankOf(a_), 7, 2.5);
  own.checkpoint_steps = {5};
  ASSERT_TRUE(coordinator_->OnMetrics("a", a_.epoch, own).ok());
  EXPECT_EQ(coordinator_->GetJob(id)->record.last_step, 7);
  EXPECT_EQ(coordinator_->GetJob(id)->latest_checkpoint_step, 5);
}

TEST_F(CoordinatorReportsTest, AForgedCleanExitOfAnotherWorkersRankIsIgnored) {
  const std::string id = RunningJob();
  Worker intruder = AddWorker("c", 1);
  for (const Worker* holder : {&a_, &b_}) {
    for (const RankAssignmentData& r : holder->sink->assignments.back().ranks) {
      ASSERT_TRUE(
          coordinator_->OnTrainerExit("c", intruder.epoch, {id, 1, r.rank, 0, 0, "", false}).ok());
    }
  }
  EXPECT_EQ(State(id), JobState::kRunning);
}

TEST_F(CoordinatorReportsTest, ACheckpointStepCountsOnceAndAReportAddsABoundedNumber) {
  const std::string id = RunningJob();
  MetricReport report = Report(id, FirstRankOf(a_), 10, 2.0);
  report.checkpoint_steps = {10, 10, 10};
  ASSERT_TRUE(coordinator_->OnMetrics("a", a_.epoch, report).ok());
  ASSERT_TRUE(coordinator_->OnMetrics("a", a_.epoch, report).ok());
  EXPECT_EQ(CheckpointEvents(id), 1);
  MetricReport flood = Report(id, FirstRankOf(a_), 11, 2.0);
  for (int64_t step = 1000; step < 2000; ++step) flood.checkpoint_steps.push_back(step);
  ASSERT_TRUE(coordinator_->OnMetrics("a", a_.epoch, flood).ok());
  EXPECT_EQ(CheckpointEvents(id), 1 + static_cast<int>(JobRun::kMaxCheckpointsPerReport));
}

// After a restart the coordinator knows the placement from the attempt's PLACED event: a worker
// that lists or exits ranks it never held neither re-adopts the job nor ends it.
TEST_F(CoordinatorReportsTest, AfterARestartOnlyTheHoldersCanReportTheRanks) {
  options_.reattach_window = std::chrono::milliseconds(60000);
  Make();
  const std::string id = RunningJob();
  std::vector<TaskReport> a_tasks, b_tasks, all;
  for (auto [w, tasks] : {std::pair{&a_, &a_tasks}, std::pair{&b_, &b_tasks}}) {
    for (const RankAssignmentData& r : w->sink->assignments.back().ranks) {
      tasks->push_back({id, 1, r.rank, TaskPhase::kRunning, 100 + r.rank, 0, r.slot_index});
      all.push_back({id, 1, r.rank, TaskPhase::kRunning, 200 + r.rank, 0, r.slot_index % 2});
    }
  }
  Make();  // The restart: same store, no sessions.
  Worker intruder = AddWorker("c", 4, all);
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_TRUE(coordinator_->GetJob(id)->placement.empty()) << "the intruder's listing counted";
  for (const TaskReport& t : all) {
    ASSERT_TRUE(
        coordinator_->OnTrainerExit("c", intruder.epoch, {id, 1, t.rank, 0, 0, "", false}).ok());
  }
  EXPECT_EQ(State(id), JobState::kRunning) << "a forged clean exit ended the job";
  // The real workers come back and the attempt is re-adopted.
  a_ = AddWorker("a", 2, a_tasks);
  b_ = AddWorker("b", 2, b_tasks);
  coordinator_->Tick();
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(coordinator_->GetJob(id)->placement.size(), 4u);
  MetricReport own = Report(id, a_tasks[0].rank, 3, 1.0);
  ASSERT_TRUE(coordinator_->OnMetrics("a", a_.epoch, own).ok());
  EXPECT_EQ(coordinator_->GetJob(id)->record.last_step, 3);
}

// A placement refused for a passing reason (a slot still stopping) waits and is placed again,
// without counting a restart: before, each refusal used one of max_restarts within
// milliseconds and the job FAILED (issue 25, item 7).
TEST_F(CoordinatorReportsTest, ARefusalThatPassesIsRetriedWithBackoffAndNotCounted) {
  Worker a = AddWorker("a", 2);
  const std::string id = Submit(JobYaml(1, 2, "{max_restarts: 1}"));
  coordinator_->Tick();
  ASSERT_EQ(State(id), JobState::kStarting);
  for (int refusal = 1; refusal <= 3; ++refusal) {
    SCOPED_TRACE(refusal);
    const int attempt = a.sink->assignments.back().attempt;
    ASSERT_TRUE(coordinator_
                    ->OnAssignmentRefused("a", a.epoch, id, attempt,
                                          "slot 0 is busy with job j-0 attempt 1 rank 0 (stopping)",
                                          /*retry=*/true)
                    .ok());
    coordinator_->Tick();
    const JobView waiting = *coordinator_->GetJob(id);
    EXPECT_EQ(waiting.record.state, JobState::kPlacing);
    EXPECT_EQ(waiting.record.restarts, 0);
    EXPECT_EQ(waiting.record.last_recovery_cause, RecoveryCause::kPlacementRefused);
    EXPECT_THAT(waiting.record.state_reason,
                ::testing::HasSubstr(absl::StrCat("placing again in ", 1 << (refusal - 1), " s")));
    EXPECT_EQ(a.sink->assignments.back().attempt, attempt) << "placed again without waiting";
    // Not a timing threshold: the backoff is a minimum wait, and the test waits it out (and
    // then as long as the placement takes on a loaded machine).
    Pass(a, std::chrono::milliseconds(1000 << (refusal - 1)),
         [&] { return a.sink->assignments.back().attempt == attempt + 1; });
    EXPECT_EQ(State(id), JobState::kStarting);
    EXPECT_EQ(a.sink->assignments.back().attempt, attempt + 1);
  }
  // A refusal that does not pass still counts, and max_restarts (1) still ends the job.
  for (int refusal = 0; refusal < 2; ++refusal) {
    const int attempt = a.sink->assignments.back().attempt;
    ASSERT_TRUE(coordinator_->OnAssignmentRefused("a", a.epoch, id, attempt, "cannot fork", false)
                    .ok());
    coordinator_->Tick();
    coordinator_->Tick();
  }
  EXPECT_EQ(State(id), JobState::kFailed);
}

TEST_F(CoordinatorReportsTest, AJobWaitingToBePlacedAgainCanBeCancelled) {
  Worker a = AddWorker("a", 2);
  const std::string id = Submit(JobYaml(1, 2, ""));
  coordinator_->Tick();
  ASSERT_TRUE(coordinator_->OnAssignmentRefused("a", a.epoch, id, 1, "busy (stopping)", true).ok());
  coordinator_->Tick();
  ASSERT_EQ(State(id), JobState::kPlacing);
  ASSERT_TRUE(coordinator_->Cancel(id, "no longer needed").ok());
  EXPECT_EQ(State(id), JobState::kCancelled);
  Pass(a, std::chrono::milliseconds(1200));
  EXPECT_EQ(State(id), JobState::kCancelled);
  EXPECT_EQ(a.sink->assignments.size(), 1u);
}

}  // namespace
}  // namespace deepnet::coordinator
