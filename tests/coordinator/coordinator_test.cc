// The coordinator core driven directly (no gRPC): fake worker sessions record the commands it
// sends; the test plays the workers' part (heartbeats, exits, metrics) and calls Tick().
#include "coordinator/coordinator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "coordinator/in_memory_job_store.h"
#include "coordinator/sqlite_job_store.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;

class FakeSink : public WorkerCommandSink {
 public:
  void SendAssignment(int64_t epoch, const AssignmentCommand& command) override {
    assignments.push_back(command);
    epochs.push_back(epoch);
  }
  void SendCancellation(int64_t epoch, const CancellationCommand& command) override {
    cancellations.push_back(command);
  }
  void SendLease(int64_t, int64_t, int64_t) override { ++leases; }
  void Close(const absl::Status& status) override { closed = status; }

  std::vector<AssignmentCommand> assignments;
  std::vector<int64_t> epochs;
  std::vector<CancellationCommand> cancellations;
  int leases = 0;
  std::optional<absl::Status> closed;
};

std::string JobYaml(int stages, int replicas, const std::string& scheduling) {
  return absl::StrCat(
      "name: test-job\n"
      "model: {encoder_layers: 2, decoder_layers: 2, d_model: 16, heads: 2, ffn_dim: 32}\n"
      "train: {max_steps: 10}\n"
      "parallel: {pipeline_stages: ", stages, ", data_parallel: ", replicas, "}\n",
      scheduling.empty() ? "" : "scheduling: " + scheduling + "\n");
}

struct Worker {
  std::string id;
  int64_t epoch = 0;
  std::shared_ptr<FakeSink> sink;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.heartbeat_interval = std::chrono::milliseconds(50);
    options_.lease_heartbeats = 3;
    options_.stop_timeout = std::chrono::milliseconds(2000);
    options_.reattach_window = std::chrono::milliseconds(300);
    options_.rendezvous_address = "127.0.0.1:1";
    options_.spec_check.check_paths = false;
    Make();
  }

  void Make() {
    if (!epochs_) epochs_ = *WorkerEpochStore::Open("");
    absl::StatusOr<std::unique_ptr<Coordinator>> c =
        Coordinator::Create(options_, &store_, epochs_.get(), &rendezvous_, nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = std::move(*c);
  }

  Worker AddWorker(const std::string& name, int slots, std::vector<TaskReport> tasks = {}) {
    Registration reg;
    reg.worker_name = name;
    for (int i = 0; i < slots; ++i) reg.slots.push_back({i, false, -1});
    reg.running_tasks = std::move(tasks);
    absl::StatusOr<RegistrationResult> r = coordinator_->Register(reg);
    EXPECT_TRUE(r.ok()) << r.status();
    Worker w{name, r->epoch, std::make_shared<FakeSink>()};
    EXPECT_TRUE(coordinator_->AttachSession(name, w.epoch, w.sink).ok());
    return w;
  }

  std::string Submit(const std::string& yaml, const std::string& key = "") {
    absl::StatusOr<JobSpecInfo> spec = coordinator_->ParseSpec(yaml);
    EXPECT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<SubmitResultData> r = coordinator_->Submit({"alice", key, yaml, *spec});
    EXPECT_TRUE(r.ok()) << r.status();
    return r->job.record.id;
  }

  JobState State(const std::string& id) { return coordinator_->GetJob(id)->record.state; }

  // Reports every rank of the worker's latest assignment as running.
  void Running(const Worker& w) {
    const AssignmentCommand& a = w.sink->assignments.back();
    std::vector<TaskReport> tasks;
    for (const RankAssignmentData& r : a.ranks) {
      tasks.push_back({a.job_id, a.attempt, r.rank, TaskPhase::kRunning, 100 + r.rank, 0,
                       r.slot_index});
    }
    ASSERT_TRUE(coordinator_->OnHeartbeat(w.id, w.epoch, tasks).ok());
  }

  void Exit(const Worker& w, int code, int signal = 0) {
    const AssignmentCommand& a = w.sink->assignments.back();
    for (const RankAssignmentData& r : a.ranks) {
      ASSERT_TRUE(coordinator_
                      ->OnTrainerExit(w.id, w.epoch, {a.job_id, a.attempt, r.rank, code, signal,
                                                      "last line", false})
                      .ok());
    }
  }

  std::vector<JobEventView> Events(const std::string& id) {
    return coordinator_->WaitEvents(id, 0, absl::ZeroDuration())->events;
  }

  CoordinatorOptions options_;
  InMemoryJobStore store_;
  std::unique_ptr<WorkerEpochStore> epochs_;
  RendezvousStore rendezvous_;
  std::unique_ptr<Coordinator> coordinator_;
};

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
  EXPECT_EQ(a.sink->assignments[0].ranks[0].stage, a.sink->assignments[0].ranks[1].stage);
  EXPECT_EQ(coordinator_->GetJob(id)->placement.size(), 4u);
  Running(a);
  EXPECT_EQ(State(id), JobState::kStarting);
  Running(b);
  EXPECT_EQ(State(id), JobState::kRunning);
  MetricReportData report{id, 1, 0, {}, {5}};
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

TEST_F(CoordinatorTest, RejectsGangsLargerThanTheCluster) {
  AddWorker("a", 2);
  absl::StatusOr<JobSpecInfo> spec = coordinator_->ParseSpec(JobYaml(2, 2, ""));
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("parallel.pipeline_stages"));
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
  MetricReportData report{id, 1, 0, {}, {}};
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
    MetricReportData more{id, 1, 0, {{6, 2.0}}, {}};
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
    old_epoch = first->Register(reg)->epoch;
    ASSERT_TRUE(first->AttachSession("w", old_epoch, std::make_shared<FakeSink>()).ok());
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
  ASSERT_TRUE(second->AttachSession("w", r->epoch, sink).ok());
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

}  // namespace
}  // namespace deepnet::coordinator

namespace deepnet::coordinator {
namespace {

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
    const int64_t epoch = first->Register(reg)->epoch;
    ASSERT_TRUE(first->AttachSession("w", epoch, std::make_shared<FakeSink>()).ok());
    id = first->Submit({"alice", "", yaml, *first->ParseSpec(yaml)})->job.record.id;
    first->Tick();
    ASSERT_TRUE(first->OnHeartbeat("w", epoch, {{id, 1, 0, TaskPhase::kRunning, 1, 0, 0},
                                                {id, 1, 1, TaskPhase::kRunning, 1, 0, 1}})
                    .ok());
    ASSERT_EQ(first->GetJob(id)->record.state, JobState::kRunning);
  }
  auto second = *Coordinator::Create(options, &store, epochs.get(), &rendezvous, nullptr);
  // Rank 0 still runs; rank 1 finished while the coordinator was down (its exit comes late).
  reg.running_tasks = {{id, 1, 0, TaskPhase::kRunning, 1, 0, 0}};
  const int64_t epoch = second->Register(reg)->epoch;
  ASSERT_TRUE(second->AttachSession("w", epoch, std::make_shared<FakeSink>()).ok());
  EXPECT_EQ(second->GetJob(id)->record.state, JobState::kRunning);
  ASSERT_TRUE(second->OnTrainerExit("w", epoch, {id, 1, 1, 0, 0, "", false}).ok());
  EXPECT_EQ(second->GetJob(id)->record.state, JobState::kRunning);  // re-adopted, rank 0 runs
  ASSERT_TRUE(second->OnTrainerExit("w", epoch, {id, 1, 0, 0, 0, "", false}).ok());
  EXPECT_EQ(second->GetJob(id)->record.state, JobState::kSucceeded);
  EXPECT_EQ(second->GetJob(id)->record.attempt, 1);
}

}  // namespace
}  // namespace deepnet::coordinator
