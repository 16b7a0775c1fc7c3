#include "worker/worker_daemon.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "tests/worker/fake_worker_service.h"
#include "tests/worker/worker_test_util.h"

namespace deepnet::worker {
namespace {

namespace v1 = deepnet::v1;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using testing::FakeCoordinator;
using testing::ProcessAlive;
using testing::ReadFile;
using Messages = std::vector<v1::WorkerMessage>;

constexpr char kConfig[] = "name: worker-test\nparallel:\n  pipeline_stages: 2\n";

// A real WorkerDaemon with two CPU slots and the fake trainer, against a fake coordinator.
class WorkerDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator_ = std::make_unique<FakeCoordinator>();
    ASSERT_TRUE(coordinator_->ok());
    fake_dir_ = dir_.path() + "/fake";
    std::filesystem::create_directories(fake_dir_);
    WorkerDaemonOptions options;
    options.coordinator = coordinator_->address();
    options.worker_name = "node-a";
    options.token = "worker-secret";
    options.host.hostname = "node-a";
    options.host.address = "10.0.0.1";
    options.host.cpu_count = 2;
    options.supervisor.trainer = testing::WriteFakeTrainer(dir_.path());
    options.supervisor.work_dir = dir_.path() + "/work";
    options.supervisor.slots = slots_;
    options.supervisor.base_env = {"PATH=/usr/bin:/bin", "DEEPNET_RANK=99", "KEEP_ME=1",
                                   "DEEPNET_TOKEN=worker-secret"};
    options.supervisor.base_env.insert(options.supervisor.base_env.end(), extra_env_.begin(),
                                       extra_env_.end());
    options.supervisor.trainer_env = trainer_env_;
    options.max_backoff = 500ms;
    auto daemon = WorkerDaemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    daemon_->Start();
  }

  void TearDown() override {
    if (daemon_) daemon_->Shutdown(0ms);
    daemon_.reset();
    for (const char* kind : {"pid-", "grandchild-"}) {
      for (int rank = 0; rank < 4; ++rank) {
        testing::KillPidIn(fake_dir_ + "/" + kind + std::to_string(rank));
      }
    }
  }

  std::vector<SlotInfo> slots_ = {{0, false, -1}, {1, false, -1}};
  std::vector<std::string> extra_env_;    // Appended to the daemon's environment.
  std::vector<std::string> trainer_env_;  // --trainer-env

  v1::CoordinatorMessage Assignment(const std::string& job, int attempt,
                                    std::vector<std::pair<int, int>> rank_slots,
                                    const std::string& mode, bool grandchild = false) {
    v1::CoordinatorMessage message;
    v1::Assignment* a = message.mutable_assignment();
    a->set_job_id(job);
    a->set_job_uid(job + "@42");
    a->set_attempt(attempt);
    for (auto [rank, slot] : rank_slots) {
      v1::RankAssignment* r = a->add_ranks();
      r->set_rank(rank);
      r->set_slot_index(slot);
      r->set_rendezvous_credential("credential-of-rank-" + std::to_string(rank));
    }
    a->set_world_size(4);
    a->set_config_yaml(kConfig);
    a->set_rendezvous_address("10.0.0.9:7070");
    (*a->mutable_env())["FAKE_DIR"] = fake_dir_;
    (*a->mutable_env())["FAKE_MODE"] = mode;
    (*a->mutable_env())["FAKE_EXIT_CODE"] = "3";
    if (grandchild) (*a->mutable_env())["FAKE_GRANDCHILD"] = "1";
    return message;
  }

  v1::CoordinatorMessage Cancellation(const std::string& job, int attempt,
                                      std::chrono::milliseconds grace) {
    v1::CoordinatorMessage message;
    v1::Cancellation* c = message.mutable_cancellation();
    c->set_job_id(job);
    c->set_attempt(attempt);
    c->set_reason("test");
    c->mutable_grace_period()->set_nanos(static_cast<int32_t>(grace.count() * 1000000));
    return message;
  }

  // The CommandResult answering the command of `sequence`, once it arrived.
  std::optional<v1::CommandResult> ResultOf(int64_t sequence) {
    std::optional<v1::CommandResult> found;
    coordinator_->service().WaitFor([&](const Messages& messages) {
      for (const auto& m : messages) {
        if (m.has_command_result() && m.command_result().command_sequence() == sequence) {
          found = m.command_result();
          return true;
        }
      }
      return false;
    });
    return found;
  }

  // The TrainerExit of (job, attempt, rank), once it arrived.
  std::optional<v1::TrainerExit> ExitOf(const std::string& job, int attempt, int rank) {
    std::optional<v1::TrainerExit> found;
    coordinator_->service().WaitFor([&](const Messages& messages) {
      for (const auto& m : messages) {
        const auto& e = m.trainer_exit();
        if (m.has_trainer_exit() && e.job_id() == job && e.attempt() == attempt &&
            e.rank() == rank) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  bool WaitForFile(const std::string& path) {
    return testing::WaitUntil([&] { return !ReadFile(path).empty(); });
  }

  testing::TempDir dir_;
  std::string fake_dir_;
  std::unique_ptr<FakeCoordinator> coordinator_;
  std::unique_ptr<WorkerDaemon> daemon_;
};

TEST_F(WorkerDaemonTest, RegistersThenStartsTheSessionAndHeartbeats) {
  ASSERT_TRUE(coordinator_->service().WaitFor([](const Messages& m) {
    return std::count_if(m.begin(), m.end(), [](const auto& x) { return x.has_heartbeat(); }) >= 3;
  }));
  const Messages messages = coordinator_->service().received();
  ASSERT_FALSE(messages.empty());
  EXPECT_TRUE(messages.front().has_start());
  // The session echoes the secret its registration returned.
  EXPECT_EQ(messages.front().start().session_secret(), "secret-1");
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_EQ(messages[i].epoch(), 1);
    EXPECT_EQ(messages[i].worker_id(), "w-node-a");
    EXPECT_EQ(messages[i].sequence(), static_cast<int64_t>(i + 1));
  }
  const auto registrations = coordinator_->service().registrations();
  ASSERT_EQ(registrations.size(), 1u);
  EXPECT_EQ(registrations[0].worker_name(), "node-a");
  EXPECT_EQ(registrations[0].host().address(), "10.0.0.1");
  ASSERT_EQ(registrations[0].slots_size(), 2);
  EXPECT_EQ(registrations[0].slots(1).kind(), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(registrations[0].slots(1).device_index(), -1);
  EXPECT_EQ(registrations[0].running_tasks_size(), 0);
  EXPECT_EQ(coordinator_->service().authorization(), "Bearer worker-secret");
  EXPECT_EQ(daemon_->state().epoch, 1);
  EXPECT_TRUE(daemon_->state().connected);
}

// Two GPU slots on a daemon that sees two GPUs by UUID: each trainer sees only its slot's GPU,
// as cuda:0, whatever CUDA_VISIBLE_DEVICES the daemon or the job had.
class WorkerDaemonGpuSlotTest : public WorkerDaemonTest {
 protected:
  WorkerDaemonGpuSlotTest() {
    slots_ = {{0, true, 0, 0, "GPU-aaaa"}, {1, true, 1, 0, "GPU-bbbb"}};
    extra_env_ = {"CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb"};
  }
};

// The trainers inherit only the allow-listed part of the daemon's environment, and what
// --trainer-env adds: a cloud credential, LD_PRELOAD or an admin's variable stays behind.
class WorkerDaemonEnvTest : public WorkerDaemonTest {
 protected:
  WorkerDaemonEnvTest() {
    extra_env_ = {"AWS_SECRET_ACCESS_KEY=admin-secret",
                  "LD_PRELOAD=/nonexistent.so",
                  "OMP_NUM_THREADS=3",
                  "LC_ALL=C.UTF-8",
                  "SITE_PROXY=http://p",
                  "SITE_MIRROR=http://m",
                  "NCCL_DEBUG=INFO"};
    trainer_env_ = {"SITE_*"};
  }
};

TEST_F(WorkerDaemonEnvTest, TrainersInheritOnlyTheAllowListAndTrainerEnv) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-v", 1, {{0, 0}}, "run"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-0"));
  const std::string names = ReadFile(fake_dir_ + "/names-0");
  for (const char* kept : {"PATH\n", "OMP_NUM_THREADS\n", "LC_ALL\n", "NCCL_DEBUG\n",
                           "SITE_PROXY\n", "SITE_MIRROR\n", "DEEPNET_RANK\n", "FAKE_MODE\n"}) {
    EXPECT_THAT(names, HasSubstr(kept));
  }
  for (const char* dropped : {"AWS_SECRET_ACCESS_KEY", "LD_PRELOAD", "KEEP_ME"}) {
    EXPECT_THAT(names, Not(HasSubstr(dropped)));
  }
}

TEST(InheritedByTrainersTest, NamesPrefixesAndExtraPatterns) {
  EXPECT_TRUE(InheritedByTrainers("PATH", {}));
  EXPECT_TRUE(InheritedByTrainers("CUDA_VISIBLE_DEVICES", {}));
  EXPECT_FALSE(InheritedByTrainers("PATHX", {}));
  EXPECT_FALSE(InheritedByTrainers("HOME", {}));
  EXPECT_FALSE(InheritedByTrainers("KUBERNETES_SERVICE_HOST", {}));
  EXPECT_TRUE(InheritedByTrainers("HOME", {"HOME"}));
  EXPECT_TRUE(InheritedByTrainers("SITE_X", {"SITE_*"}));
  EXPECT_FALSE(InheritedByTrainers("SIT", {"SITE_*"}));
}

TEST_F(WorkerDaemonGpuSlotTest, EachTrainerSeesOnlyItsSlotsGpu) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  v1::CoordinatorMessage message = Assignment("job-g", 1, {{0, 0}, {1, 1}}, "run");
  (*message.mutable_assignment()->mutable_env())["CUDA_VISIBLE_DEVICES"] = "0,1";
  std::optional<v1::CommandResult> result = ResultOf(coordinator_->service().Send(message));
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->accepted()) << result->error();
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/env-0"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/env-1"));
  const std::string env0 = ReadFile(fake_dir_ + "/env-0");
  const std::string env1 = ReadFile(fake_dir_ + "/env-1");
  EXPECT_THAT(env0, HasSubstr("CUDA_VISIBLE_DEVICES=GPU-aaaa\n"));
  EXPECT_THAT(env0, HasSubstr("DEEPNET_CUDA_DEVICE=0\n"));
  EXPECT_THAT(env1, HasSubstr("CUDA_VISIBLE_DEVICES=GPU-bbbb\n"));
  EXPECT_THAT(env1, HasSubstr("DEEPNET_CUDA_DEVICE=0\n"));
}

TEST_F(WorkerDaemonTest, AssignmentStartsEachRankWithItsEnvironmentAndConfig) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  const int64_t sequence =
      coordinator_->service().Send(Assignment("job-a", 1, {{3, 1}, {1, 0}}, "run"));
  std::optional<v1::CommandResult> result = ResultOf(sequence);
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->accepted()) << result->error();
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/env-1"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/env-3"));
  const std::string attempt_dir = dir_.path() + "/work/job-a/attempt-1";
  EXPECT_EQ(ReadFile(attempt_dir + "/config.yaml"), kConfig);
  EXPECT_EQ(ReadFile(fake_dir_ + "/args-1"),
            "train --config " + attempt_dir + "/config.yaml --log-format json\n");
  const std::string env1 = ReadFile(fake_dir_ + "/env-1");
  EXPECT_EQ(env1,
            "DEEPNET_ATTEMPT=1\nDEEPNET_JOB_ID=job-a\nDEEPNET_JOB_UID=job-a@42\nDEEPNET_LOCAL_RANK=0\n"
            "DEEPNET_LOCAL_SIZE=2\n"
            "DEEPNET_RANK=1\nDEEPNET_RENDEZVOUS=grpc://10.0.0.9:7070\n"
            "DEEPNET_TOKEN=credential-of-rank-1\nDEEPNET_WORKER_PID=" +
                std::to_string(getpid()) + "\nDEEPNET_WORLD_SIZE=4\n");
  const std::string env3 = ReadFile(fake_dir_ + "/env-3");
  EXPECT_THAT(env3, HasSubstr("DEEPNET_LOCAL_RANK=1\n"));
  // Each rank holds its own credential; the daemon's worker token reaches no trainer.
  EXPECT_THAT(env3, HasSubstr("DEEPNET_TOKEN=credential-of-rank-3\n"));
  EXPECT_THAT(env1 + env3, Not(HasSubstr("worker-secret")));
  ASSERT_TRUE(coordinator_->service().WaitFor([](const Messages& m) {
    for (const auto& x : m) {
      if (x.has_heartbeat() && x.heartbeat().tasks_size() == 2) return true;
    }
    return false;
  }));
  std::vector<TaskSnapshot> tasks = daemon_->Tasks();
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].rank, 1);
  EXPECT_EQ(tasks[0].slot_index, 0);
  EXPECT_EQ(tasks[1].slot_index, 1);
  EXPECT_TRUE(ProcessAlive(tasks[0].pid));
}

TEST_F(WorkerDaemonTest, ReportsMetricsThenTheExitWithCodeAndStderr) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-m", 1, {{0, 0}}, "exit"));
  std::optional<v1::TrainerExit> exit = ExitOf("job-m", 1, 0);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code(), 3);
  EXPECT_EQ(exit->signal(), 0);
  EXPECT_FALSE(exit->requested());
  EXPECT_THAT(exit->message(), HasSubstr("fake trainer rank 0: stderr line"));
  EXPECT_GT(exit->time().seconds(), 0);

  std::vector<v1::MetricPoint> points;
  std::vector<int64_t> checkpoints;
  int64_t exit_sequence = 0;
  int64_t last_report_sequence = 0;
  for (const auto& m : coordinator_->service().received()) {
    if (m.has_trainer_exit()) exit_sequence = m.sequence();
    if (!m.has_metrics()) continue;
    EXPECT_EQ(m.metrics().job_id(), "job-m");
    EXPECT_EQ(m.metrics().attempt(), 1);
    points.insert(points.end(), m.metrics().points().begin(), m.metrics().points().end());
    checkpoints.insert(checkpoints.end(), m.metrics().checkpoint_steps().begin(),
                       m.metrics().checkpoint_steps().end());
    last_report_sequence = m.sequence();
  }
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].step(), 10);
  EXPECT_DOUBLE_EQ(points[0].loss(), 2.5);
  EXPECT_DOUBLE_EQ(points[0].update_norm(), 0.0);
  EXPECT_EQ(points[1].step(), 20);
  EXPECT_DOUBLE_EQ(points[1].nll(), 1.75);
  EXPECT_DOUBLE_EQ(points[1].lr(), 0.002);
  EXPECT_DOUBLE_EQ(points[1].grad_norm(), 1.25);
  EXPECT_DOUBLE_EQ(points[1].tokens_per_s(), 1100.0);
  EXPECT_DOUBLE_EQ(points[1].update_norm(), 0.5);
  EXPECT_EQ(points[1].attempt(), 1);
  // The probe of step 15 and the diagnostics of step 20 travel with the step-20 point.
  EXPECT_EQ(points[0].probe_step(), 0);
  EXPECT_EQ(points[0].diagnostics_step(), 0);
  EXPECT_EQ(points[1].probe_step(), 15);
  EXPECT_DOUBLE_EQ(points[1].probe_update_norm(), 0.25);
  EXPECT_DOUBLE_EQ(points[1].f0_norm(), 2.0);
  EXPECT_DOUBLE_EQ(points[1].update_norm_relative(), 0.125);
  EXPECT_DOUBLE_EQ(points[1].logits_update_norm(), 0.0);  // null in the line
  EXPECT_EQ(points[1].diagnostics_step(), 20);
  EXPECT_DOUBLE_EQ(points[1].ln_input_norm().p90(), 2.8);
  EXPECT_DOUBLE_EQ(points[1].layer_grad_norm().max(), 0.3);
  EXPECT_EQ(checkpoints, std::vector<int64_t>{20});
  EXPECT_LT(last_report_sequence, exit_sequence);
  EXPECT_TRUE(testing::WaitUntil([&] { return daemon_->Tasks().empty(); }));
}

TEST_F(WorkerDaemonTest, ReportsATrainerKilledByASignal) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-k", 2, {{1, 1}}, "kill"));
  std::optional<v1::TrainerExit> exit = ExitOf("job-k", 2, 1);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal(), SIGKILL);
  EXPECT_EQ(exit->exit_code(), 0);
  EXPECT_FALSE(exit->requested());
}

TEST_F(WorkerDaemonTest, CancellationKillsTheAttemptsProcessTreesOnly) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-c", 1, {{0, 0}}, "ignore-term", true));
  ASSERT_TRUE(ResultOf(coordinator_->service().Send(Assignment("job-c", 2, {{1, 1}}, "run"))));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-0"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-1"));
  const pid_t trainer = testing::PidIn(fake_dir_ + "/pid-0");
  const pid_t grandchild = testing::PidIn(fake_dir_ + "/grandchild-0");
  ASSERT_TRUE(ProcessAlive(trainer));
  ASSERT_TRUE(ProcessAlive(grandchild));

  std::optional<v1::CommandResult> result =
      ResultOf(coordinator_->service().Send(Cancellation("job-c", 1, 200ms)));
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->accepted());
  std::optional<v1::TrainerExit> exit = ExitOf("job-c", 1, 0);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->requested());
  EXPECT_EQ(exit->signal(), SIGKILL);  // It ignored SIGTERM: killed after the grace.
  EXPECT_FALSE(ProcessAlive(trainer));
  EXPECT_TRUE(testing::WaitUntil([&] { return !ProcessAlive(grandchild); }));

  std::vector<TaskSnapshot> tasks = daemon_->Tasks();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].attempt, 2);
  EXPECT_TRUE(ProcessAlive(tasks[0].pid));
}

TEST_F(WorkerDaemonTest, RefusesCommandsWithAStaleEpoch) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  v1::CoordinatorMessage stale = Assignment("job-s", 1, {{0, 0}}, "run");
  stale.set_epoch(0);
  std::optional<v1::CommandResult> result =
      ResultOf(coordinator_->service().Send(stale, /*keep_epoch=*/true));
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(result->accepted());
  EXPECT_THAT(result->error(), HasSubstr("epoch 0"));
  EXPECT_THAT(result->error(), HasSubstr("epoch 1"));
  EXPECT_THAT(result->error(), HasSubstr("job-s"));
  EXPECT_TRUE(daemon_->Tasks().empty());
}

TEST_F(WorkerDaemonTest, RefusesABusySlotAndAnUnknownOne) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-b", 1, {{0, 0}}, "run"));
  const int64_t x = coordinator_->service().Send(Assignment("job-x", 1, {{0, 0}}, "run"));
  const int64_t y = coordinator_->service().Send(Assignment("job-y", 1, {{0, 5}}, "run"));
  std::optional<v1::CommandResult> busy = ResultOf(x);
  ASSERT_TRUE(busy.has_value());
  EXPECT_FALSE(busy->accepted());
  EXPECT_THAT(busy->error(), HasSubstr("slot 0 is busy with job job-b attempt 1 rank 0"));
  EXPECT_FALSE(busy->retry()) << "a slot busy with a running trainer stays busy";
  std::optional<v1::CommandResult> unknown = ResultOf(y);
  ASSERT_TRUE(unknown.has_value());
  EXPECT_FALSE(unknown->accepted());
  EXPECT_THAT(unknown->error(), HasSubstr("slot 5 is unknown"));
  EXPECT_FALSE(unknown->retry());
  EXPECT_EQ(daemon_->Tasks().size(), 1u);
}

// A slot whose trainer is still stopping frees itself within the grace: the refusal says so
// (retry), and the coordinator places the job again later without counting a restart.
TEST_F(WorkerDaemonTest, ASlotStillStoppingIsARefusalToRetry) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-s", 1, {{0, 0}}, "ignore-term"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-0"));
  ASSERT_TRUE(ResultOf(coordinator_->service().Send(Cancellation("job-s", 1, 5000ms))).has_value());
  std::optional<v1::CommandResult> stopping =
      ResultOf(coordinator_->service().Send(Assignment("job-t", 1, {{0, 0}}, "run")));
  ASSERT_TRUE(stopping.has_value());
  EXPECT_FALSE(stopping->accepted());
  EXPECT_THAT(stopping->error(), HasSubstr("(stopping)"));
  EXPECT_TRUE(stopping->retry());
}

TEST_F(WorkerDaemonTest, SurvivesACoordinatorRestartWithoutStoppingTrainers) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-r", 1, {{2, 1}}, "run"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-2"));
  const pid_t trainer = testing::PidIn(fake_dir_ + "/pid-2");
  const int port = coordinator_->port();
  const int64_t epoch = coordinator_->service().epoch();

  coordinator_->Stop();
  ASSERT_TRUE(testing::WaitUntil([&] { return !daemon_->state().connected; }));
  EXPECT_TRUE(ProcessAlive(trainer));
  coordinator_ = std::make_unique<FakeCoordinator>(epoch, port);
  ASSERT_TRUE(coordinator_->ok());
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  const auto registration = coordinator_->service().registrations().front();
  ASSERT_EQ(registration.running_tasks_size(), 1);
  const v1::TaskStatus& task = registration.running_tasks(0);
  EXPECT_EQ(task.job_id(), "job-r");
  EXPECT_EQ(task.attempt(), 1);
  EXPECT_EQ(task.rank(), 2);
  EXPECT_EQ(task.slot_index(), 1);
  EXPECT_EQ(task.pid(), trainer);
  EXPECT_EQ(task.state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(task.step(), 20);
  ASSERT_TRUE(coordinator_->service().WaitFor([&](const Messages& m) {
    return !m.empty() && m.front().has_start() && m.front().epoch() == epoch + 1 &&
           std::any_of(m.begin(), m.end(), [](const auto& x) {
             return x.has_heartbeat() && x.heartbeat().tasks_size() == 1;
           });
  }));
  EXPECT_TRUE(ProcessAlive(trainer));
  EXPECT_EQ(daemon_->state().epoch, epoch + 1);
  EXPECT_GE(daemon_->state().registrations, 2);

  // Commands of the old registration are refused now.
  v1::CoordinatorMessage old = Cancellation("job-r", 1, 0ms);
  old.set_epoch(epoch);
  std::optional<v1::CommandResult> refused =
      ResultOf(coordinator_->service().Send(old, /*keep_epoch=*/true));
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->accepted());
  EXPECT_TRUE(ProcessAlive(trainer));
}

// An exit report is kept until the coordinator acknowledges it: one written to a session that
// ended before the ack is sent again on the next session (issue 25, item 7); an acknowledged
// one is not.
TEST_F(WorkerDaemonTest, AnUnacknowledgedExitIsSentAgainOnTheNextSession) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().set_acknowledge(false);
  coordinator_->service().Send(Assignment("job-u", 1, {{0, 0}}, "exit"));
  ASSERT_TRUE(coordinator_->service().WaitFor([](const Messages& m) {
    return std::any_of(m.begin(), m.end(), [](const auto& x) { return x.has_trainer_exit(); });
  }));
  EXPECT_EQ(daemon_->unacknowledged_exits(), 1u);
  const int port = coordinator_->port();
  const int64_t epoch = coordinator_->service().epoch();
  coordinator_->Stop();
  ASSERT_TRUE(testing::WaitUntil([&] { return !daemon_->state().connected; }));
  coordinator_ = std::make_unique<FakeCoordinator>(epoch, port);
  ASSERT_TRUE(coordinator_->ok());
  ASSERT_TRUE(coordinator_->service().WaitFor([&](const Messages& m) {
    return std::any_of(m.begin(), m.end(), [&](const auto& x) {
      return x.has_trainer_exit() && x.trainer_exit().job_id() == "job-u" &&
             x.epoch() == epoch + 1;
    });
  }));
  // This coordinator acknowledges (its lease renewals carry the ack): nothing is left to resend.
  ASSERT_TRUE(testing::WaitUntil([&] { return daemon_->unacknowledged_exits() == 0; }));
}

// After the coordinator lost its database, a new job can get an old id: the worker must not
// hand the old job's folder (its logs) to the new owner (issue 25, item 5).
TEST_F(WorkerDaemonTest, AnOldJobsFolderUnderAReusedIdIsMovedAsideForANewOwner) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  const std::string job_dir = dir_.path() + "/work/job-o";
  v1::CoordinatorMessage alices = Assignment("job-o", 1, {{0, 0}}, "exit");
  alices.mutable_assignment()->set_owner("alice");
  alices.mutable_assignment()->set_job_uid("job-o@1");
  coordinator_->service().Send(alices);
  ASSERT_TRUE(coordinator_->service().WaitFor([](const Messages& m) {
    return std::any_of(m.begin(), m.end(), [](const auto& x) { return x.has_trainer_exit(); });
  }));
  EXPECT_EQ(ReadFile(job_dir + "/.owner"), "alice job-o@1\n");
  v1::CoordinatorMessage bobs = Assignment("job-o", 1, {{0, 0}}, "exit");
  bobs.mutable_assignment()->set_owner("bob");
  bobs.mutable_assignment()->set_job_uid("job-o@2");
  std::optional<v1::CommandResult> result = ResultOf(coordinator_->service().Send(bobs));
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->accepted()) << result->error();
  EXPECT_EQ(ReadFile(job_dir + "/.owner"), "bob job-o@2\n");
  int aside = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/work")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("job-o.previous-", 0) != 0) continue;
    ++aside;
    EXPECT_EQ(ReadFile(entry.path().string() + "/.owner"), "alice job-o@1\n");
    EXPECT_TRUE(std::filesystem::exists(entry.path() / "attempt-1" / "rank-0.stderr.log"));
  }
  EXPECT_EQ(aside, 1);
  // The same owner's next attempt (once bob's first one ended) keeps the folder.
  ASSERT_TRUE(coordinator_->service().WaitFor([](const Messages& m) {
    return std::count_if(m.begin(), m.end(), [](const auto& x) { return x.has_trainer_exit(); }) >=
           2;
  }));
  ASSERT_TRUE(testing::WaitUntil([&] { return daemon_->Tasks().empty(); }));
  v1::CoordinatorMessage again = Assignment("job-o", 2, {{0, 0}}, "exit");
  again.mutable_assignment()->set_owner("bob");
  again.mutable_assignment()->set_job_uid("job-o@2");
  std::optional<v1::CommandResult> next = ResultOf(coordinator_->service().Send(again));
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(next->accepted()) << next->error();
  EXPECT_TRUE(std::filesystem::exists(job_dir + "/attempt-1"));
  EXPECT_TRUE(std::filesystem::exists(job_dir + "/attempt-2"));
  // Another job of bob's under the same id (the uid tells them apart): moved aside as well.
  ASSERT_TRUE(coordinator_->service().WaitFor([](const Messages& m) {
    return std::count_if(m.begin(), m.end(), [](const auto& x) { return x.has_trainer_exit(); }) >=
           3;
  }));
  ASSERT_TRUE(testing::WaitUntil([&] { return daemon_->Tasks().empty(); }));
  v1::CoordinatorMessage later = Assignment("job-o", 1, {{0, 0}}, "exit");
  later.mutable_assignment()->set_owner("bob");
  later.mutable_assignment()->set_job_uid("job-o@3");
  std::optional<v1::CommandResult> third = ResultOf(coordinator_->service().Send(later));
  ASSERT_TRUE(third.has_value());
  EXPECT_TRUE(third->accepted()) << third->error();
  EXPECT_EQ(ReadFile(job_dir + "/.owner"), "bob job-o@3\n");
  EXPECT_FALSE(std::filesystem::exists(job_dir + "/attempt-2"));
}

TEST_F(WorkerDaemonTest, StaleTasksNamedByTheRegistrationAreStoppedBeforeTheSession) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-p", 1, {{0, 0}}, "run"));
  coordinator_->service().Send(Assignment("job-q", 4, {{1, 1}}, "run"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-0"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-1"));
  const pid_t stale = testing::PidIn(fake_dir_ + "/pid-0");
  const pid_t live = testing::PidIn(fake_dir_ + "/pid-1");
  const int port = coordinator_->port();
  const int64_t epoch = coordinator_->service().epoch();

  // Cut off; meanwhile the coordinator restarted job-p elsewhere as attempt 2.
  coordinator_->Stop();
  ASSERT_TRUE(testing::WaitUntil([&] { return !daemon_->state().connected; }));
  coordinator_ = std::make_unique<FakeCoordinator>(epoch, port);
  ASSERT_TRUE(coordinator_->ok());
  v1::Cancellation c;
  c.set_job_id("job-p");
  c.set_attempt(1);
  c.set_reason("not part of a live attempt of its job");
  coordinator_->service().SetStaleTasks({c});
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  EXPECT_EQ(coordinator_->service().registrations().front().running_tasks_size(), 2);
  std::optional<v1::TrainerExit> exit = ExitOf("job-p", 1, 0);
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->requested());
  EXPECT_FALSE(ProcessAlive(stale));
  EXPECT_TRUE(ProcessAlive(live));
  std::vector<TaskSnapshot> tasks = daemon_->Tasks();
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].job_id, "job-q");
}

TEST_F(WorkerDaemonTest, ShutdownStopsTrainersAndReportsTheirExits) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-d", 1, {{0, 0}}, "run"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-0"));
  const pid_t trainer = testing::PidIn(fake_dir_ + "/pid-0");
  const WorkerStopSummary stopped = daemon_->Shutdown(10s, "signal 15 (SIGTERM)");
  EXPECT_FALSE(ProcessAlive(trainer));
  // deepnet-worker exits 0 on this: every trainer it stopped left its state in a checkpoint.
  EXPECT_EQ(stopped.trainers, 1);
  EXPECT_EQ(stopped.unsaved, 0);
  EXPECT_EQ(stopped.left, 0);
  EXPECT_FALSE(stopped.state_lost());
  std::optional<v1::TrainerExit> exit = ExitOf("job-d", 1, 0);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code(), 143);
  EXPECT_TRUE(exit->requested());
  // Exit 143 after a stop: the trainer's state is in a checkpoint (job/stop_exit.h).
  EXPECT_EQ(exit->checkpoint(), v1::STOP_CHECKPOINT_SAVED);
  // The coordinator heard that the worker is draining before any of its trainers ended.
  int64_t draining_sequence = 0;
  int64_t exit_sequence = 0;
  for (const auto& m : coordinator_->service().received()) {
    if (m.has_draining()) {
      draining_sequence = m.sequence();
      EXPECT_EQ(m.draining().reason(), "signal 15 (SIGTERM)");
      EXPECT_EQ(m.draining().grace_period().seconds(), 10);
    }
    if (m.has_trainer_exit()) exit_sequence = m.sequence();
  }
  ASSERT_GT(draining_sequence, 0) << "no WorkerDraining message";
  EXPECT_LT(draining_sequence, exit_sequence);
}

// A trainer killed after the grace lost its steps: the summary says so, and deepnet-worker exits
// job::kWorkerLostTrainerStateExitCode (80) on it, which the Slurm service script reads.
TEST_F(WorkerDaemonTest, ShutdownCountsATrainerKilledAfterTheGraceAsUnsaved) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-k", 1, {{0, 0}}, "ignore-term"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-0"));
  const WorkerStopSummary stopped = daemon_->Shutdown(1s, "signal 15 (SIGTERM)");
  EXPECT_EQ(stopped.trainers, 1);
  EXPECT_EQ(stopped.unsaved, 1);
  EXPECT_TRUE(stopped.state_lost());
  std::optional<v1::TrainerExit> exit = ExitOf("job-k", 1, 0);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->checkpoint(), v1::STOP_CHECKPOINT_NOT_SAVED);
}

TEST_F(WorkerDaemonTest, ShuttingDownRefusesNewAssignments) {
  ASSERT_TRUE(coordinator_->service().WaitForRegistrations(1));
  coordinator_->service().Send(Assignment("job-e", 1, {{0, 0}}, "run"));
  ASSERT_TRUE(WaitForFile(fake_dir_ + "/ready-0"));
  std::thread stopper([&] { daemon_->Shutdown(10s); });
  ASSERT_TRUE(coordinator_->service().WaitFor([](const Messages& messages) {
    for (const auto& m : messages) {
      if (m.has_draining()) return true;
    }
    return false;
  }));
  // Too late: the worker is draining, so it starts nothing (the coordinator would not send it;
  // this is a command already under way).
  coordinator_->service().Send(Assignment("job-f", 1, {{1, 0}}, "run"));
  stopper.join();
  for (const TaskSnapshot& task : daemon_->Tasks()) EXPECT_NE(task.job_id, "job-f");
  EXPECT_FALSE(std::filesystem::exists(fake_dir_ + "/ready-1"));
}

TEST(StopCheckpointTest, FromTheTrainersExitCode) {
  EXPECT_EQ(StopCheckpointOf(143, 0), StopCheckpoint::kSaved);
  EXPECT_EQ(StopCheckpointOf(79, 0), StopCheckpoint::kNotNeeded);
  EXPECT_EQ(StopCheckpointOf(80, 0), StopCheckpoint::kNotSaved);
  EXPECT_EQ(StopCheckpointOf(1, 0), StopCheckpoint::kNotSaved);
  EXPECT_EQ(StopCheckpointOf(0, 9), StopCheckpoint::kNotSaved);
}

TEST(WorkerDaemonOptionsTest, CreateNamesTheMissingOption) {
  WorkerDaemonOptions options;
  auto daemon = WorkerDaemon::Create(options);
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(), HasSubstr("--coordinator"));
  options.coordinator = "127.0.0.1:1";
  options.worker_name = "w";
  options.supervisor.trainer = "/bin/true";
  options.supervisor.work_dir = "/tmp";
  daemon = WorkerDaemon::Create(options);
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(daemon.status().message(), HasSubstr("--slots"));
}

}  // namespace
}  // namespace deepnet::worker
