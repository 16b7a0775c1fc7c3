// A stop's intent is stored before any rank is signalled, so that a coordinator restarted while
// the ranks still stop finishes that stop instead of re-adopting and restarting the job
// (issue 25, item 5); and a repeated cancel stores nothing new (item 6).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "coordinator/core/coordinator.h"
#include "coordinator/store/job_store.h"
#include "storage/checkpoint_fence.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace deepnet::coordinator {
namespace {

using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::Worker;

class CoordinatorStopIntentTest : public CoordinatorTest {
 protected:
  // A 2x2 job RUNNING on a and b; `tasks` gets each worker's running ranks.
  std::string RunningJob(std::map<std::string, std::vector<TaskReport>>* tasks) {
    Worker a = AddWorker("a", 2);
    Worker b = AddWorker("b", 2);
    const std::string id = Submit(JobYaml(2, 2, ""));
    coordinator_->Tick();
    Running(a);
    Running(b);
    EXPECT_EQ(State(id), JobState::kRunning);
    for (const Worker& w : {a, b}) {
      for (const RankAssignmentData& r : w.sink->assignments.back().ranks) {
        (*tasks)[w.id].push_back(
            {id, 1, r.rank, TaskPhase::kRunning, 100 + r.rank, 0, r.slot_index});
      }
    }
    first_a_ = a;
    return id;
  }
  // The restart: a new coordinator on the same store; the workers come back listing `tasks`.
  std::map<std::string, Worker> Restart(
      const std::map<std::string, std::vector<TaskReport>>& tasks) {
    Make();
    std::map<std::string, Worker> back;
    for (const auto& [name, listed] : tasks) back[name] = AddWorker(name, 2, listed);
    coordinator_->Tick();
    return back;
  }
  // Lets the reattach window pass (workers heartbeating, the coordinator ticking) until the
  // job `id` has ended, at most 60 s more on a loaded machine.
  void PassReattachWindow(const std::map<std::string, Worker>& workers, const std::string& id) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < start + options_.reattach_window ||
           (!IsTerminal(State(id)) &&
            std::chrono::steady_clock::now() < start + std::chrono::seconds(60))) {
      for (const auto& [name, w] : workers)
        ASSERT_TRUE(coordinator_->OnHeartbeat(name, w.epoch, {}).ok());
      coordinator_->Tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  int EventsOf(const std::string& id, EventType type) {
    int n = 0;
    for (const JobEventView& e : Events(id)) n += e.type == type ? 1 : 0;
    return n;
  }

  Worker first_a_;

  void RunningOn(JobStore* store, Worker* a, std::string* id);
  void TickUntil(const Worker& a, const std::function<bool()>& done);
};

TEST_F(CoordinatorStopIntentTest, ACancelInterruptedByARestartIsFinishedNotUndone) {
  std::map<std::string, std::vector<TaskReport>> tasks;
  const std::string id = RunningJob(&tasks);
  ASSERT_TRUE(coordinator_->Cancel(id, "not needed", "alice").ok());
  EXPECT_EQ(EventsOf(id, EventType::kCancelRequested), 1);
  // The coordinator stops before any rank reported its exit.
  std::map<std::string, Worker> back = Restart(tasks);
  // Each worker that lists a rank of the job is told to stop it; nothing is re-adopted.
  for (const auto& [name, w] : back) {
    ASSERT_FALSE(w.sink->cancellations.empty()) << name;
    EXPECT_EQ(w.sink->cancellations.back().job_id, id);
    EXPECT_THAT(w.sink->cancellations.back().reason, HasSubstr("cancelled by alice"));
    EXPECT_TRUE(w.sink->assignments.empty()) << name;
  }
  PassReattachWindow(back, id);
  const JobView job = *coordinator_->GetJob(id);
  EXPECT_EQ(job.record.state, JobState::kCancelled);
  EXPECT_THAT(job.record.state_reason, HasSubstr("cancelled by alice: not needed"));
  EXPECT_EQ(job.record.restarts, 0);
}

TEST_F(CoordinatorStopIntentTest, AFailureInterruptedByARestartStillFails) {
  std::map<std::string, std::vector<TaskReport>> tasks;
  const std::string id = RunningJob(&tasks);
  // One rank is fenced out: the job must fail without restarts; the others are being stopped.
  const TaskReport fenced = tasks.at("a").front();
  ASSERT_TRUE(
      coordinator_
          ->OnTrainerExit("a", first_a_.epoch,
                          {id, 1, fenced.rank, storage::kFencedOutExitCode, 0, "fenced out", false})
          .ok());
  EXPECT_EQ(EventsOf(id, EventType::kFailRequested), 1);
  tasks.at("a").erase(tasks.at("a").begin());
  std::map<std::string, Worker> back = Restart(tasks);
  PassReattachWindow(back, id);
  const JobView job = *coordinator_->GetJob(id);
  EXPECT_EQ(job.record.state, JobState::kFailed);
  EXPECT_THAT(job.record.state_reason, HasSubstr("fenced"));
  EXPECT_EQ(job.record.restarts, 0);
}

TEST_F(CoordinatorStopIntentTest, RepeatedCancelsStoreOneEvent) {
  std::map<std::string, std::vector<TaskReport>> tasks;
  const std::string id = RunningJob(&tasks);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(coordinator_->Cancel(id, "again").ok());
  EXPECT_EQ(EventsOf(id, EventType::kCancelRequested), 1);
}

TEST_F(CoordinatorStopIntentTest, ARestartWithoutAStopStillReadoptsTheJob) {
  std::map<std::string, std::vector<TaskReport>> tasks;
  const std::string id = RunningJob(&tasks);
  std::map<std::string, Worker> back = Restart(tasks);
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(coordinator_->GetJob(id)->placement.size(), 4u);
  for (const auto& [name, w] : back) EXPECT_TRUE(w.sink->cancellations.empty()) << name;
}

// A job store whose next `fail_transitions` transitions fail, as a full disk would.
class FlakyStore final : public JobStore {
 public:
  explicit FlakyStore(JobStore* inner) : inner_(inner) {}
  int fail_transitions = 0;
  absl::StatusOr<CreateResult> Create(const JobRecord& record) override {
    return inner_->Create(record);
  }
  absl::StatusOr<JobRecord> Get(absl::string_view id) override { return inner_->Get(id); }
  absl::StatusOr<JobPage> List(const JobFilter& filter, int page_size,
                               absl::string_view page_token) override {
    return inner_->List(filter, page_size, page_token);
  }
  absl::StatusOr<JobRecord> Transition(absl::string_view id, const StateChange& change) override {
    if (fail_transitions > 0) {
      --fail_transitions;
      return absl::UnavailableError("job store: disk I/O error (test)");
    }
    return inner_->Transition(id, change);
  }
  absl::StatusOr<JobRecord> SetReason(absl::string_view id, JobState expected,
                                      absl::string_view reason) override {
    return inner_->SetReason(id, expected, reason);
  }
  absl::StatusOr<JobRecord> UpdateProgress(absl::string_view id,
                                           const JobProgress& progress) override {
    return inner_->UpdateProgress(id, progress);
  }
  absl::StatusOr<JobEvent> AppendEvent(absl::string_view job_id, absl::string_view kind,
                                       absl::string_view message) override {
    return inner_->AppendEvent(job_id, kind, message);
  }
  absl::StatusOr<std::vector<JobEvent>> ListEvents(absl::string_view job_id,
                                                   int64_t after_seq) override {
    return inner_->ListEvents(job_id, after_seq);
  }
  absl::Status DeleteFinished(absl::string_view id) override { return inner_->DeleteFinished(id); }

 private:
  JobStore* inner_;
};

// A coordinator on `store` with a 1x2 job RUNNING on worker a.
void CoordinatorStopIntentTest::RunningOn(JobStore* store, Worker* a, std::string* id) {
  absl::StatusOr<std::unique_ptr<Coordinator>> c =
      Coordinator::Create(options_, store, epochs_.get(), &rendezvous_, metrics_);
  ASSERT_TRUE(c.ok()) << c.status();
  coordinator_ = std::move(*c);
  *a = AddWorker("a", 2);
  *id = Submit(JobYaml(1, 2, ""));
  coordinator_->Tick();
  Running(*a);
  ASSERT_EQ(State(*id), JobState::kRunning);
}

// Ticks (worker `a` heartbeating) until `done` holds, at most 60 s.
void CoordinatorStopIntentTest::TickUntil(const Worker& a, const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done() && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(coordinator_->OnHeartbeat("a", a.epoch, {}).ok());
    coordinator_->Tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A failed store write at the end of a stop is tried again (issue 25, item 7): the job does
// not stay RUNNING with no ranks for ever, it reaches the state the stop was for once the
// store takes writes again.
TEST_F(CoordinatorStopIntentTest, AStopWhoseEndIsNotStoredIsFinishedOnceTheStoreRecovers) {
  FlakyStore flaky(&store_);
  Worker a;
  std::string id;
  ASSERT_NO_FATAL_FAILURE(RunningOn(&flaky, &a, &id));
  ASSERT_TRUE(coordinator_->Cancel(id, "done with it").ok());
  flaky.fail_transitions = 2;  // RUNNING -> CANCELLED fails twice
  Exit(a, 143);
  EXPECT_EQ(State(id), JobState::kRunning);
  TickUntil(a, [&] { return State(id) == JobState::kCancelled; });
  EXPECT_EQ(State(id), JobState::kCancelled);
  EXPECT_EQ(flaky.fail_transitions, 0);
  EXPECT_EQ(store_.Get(id)->state, JobState::kCancelled);
}

// The same when RECOVERING itself could not be stored: the ranks still stop, and the restart
// stores RECOVERING and PLACING once it can.
TEST_F(CoordinatorStopIntentTest, ARankFailureWhoseRecoveryIsNotStoredStillRestarts) {
  FlakyStore flaky(&store_);
  Worker a;
  std::string id;
  ASSERT_NO_FATAL_FAILURE(RunningOn(&flaky, &a, &id));
  flaky.fail_transitions = 2;  // RUNNING -> RECOVERING fails, then once more in FinishStop
  Exit(a, 1);
  TickUntil(a, [&] { return a.sink->assignments.size() >= 2; });
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_EQ(a.sink->assignments.back().attempt, 2);
  EXPECT_EQ(coordinator_->GetJob(id)->record.restarts, 1);
}

// --retain-finished: finished jobs older than the retention leave memory and the store, the
// newest job stays (issue 25, item 6).
TEST_F(CoordinatorStopIntentTest, RetentionDeletesFinishedJobsButTheNewestAndLiveOnes) {
  options_.retain_finished = std::chrono::milliseconds(1);
  options_.retention_sweep = std::chrono::milliseconds(1);
  Make();
  Worker a = AddWorker("a", 2);
  const std::string first = Submit(JobYaml(1, 1, ""));
  const std::string second = Submit(JobYaml(1, 1, ""));
  ASSERT_TRUE(coordinator_->Cancel(first, "").ok());
  ASSERT_TRUE(coordinator_->Cancel(second, "").ok());
  const std::string live = Submit(JobYaml(1, 2, ""));
  const std::string last = Submit(JobYaml(1, 1, ""));
  ASSERT_TRUE(coordinator_->Cancel(last, "").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  coordinator_->Tick();
  EXPECT_EQ(coordinator_->GetJob(first).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_->GetJob(second).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.Get(first).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(coordinator_->GetJob(live).ok());
  EXPECT_TRUE(coordinator_->GetJob(last).ok()) << "the newest job is kept";
  EXPECT_EQ(Submit(JobYaml(1, 1, "")), "j-000005");
}

}  // namespace
}  // namespace deepnet::coordinator
