// A worker cut off from the coordinator while its trainers keep running (its daemon stopped with
// SIGSTOP: no heartbeats, the trainers are separate processes and go on): the coordinator
// restarts the jobs on the other worker as attempt 2, the stale attempt-1 trainer's checkpoint
// commit is refused by the folder's fence and leaves `latest` and every step folder as they
// were, and once the daemon is back the coordinator's registration answer makes it stop its
// other stale trainer first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

using ::testing::HasSubstr;

bool IsZombieOrGone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  return Slurp("/proc/" + std::to_string(pid) + "/stat").find(") Z") != std::string::npos;
}

// Whether `pid` holds an flock (the checkpoint fence lock is the only one a trainer takes).
bool HoldsFlock(pid_t pid) {
  std::istringstream locks(Slurp("/proc/locks"));
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string id, kind, mode, rw, owner;
    fields >> id >> kind >> mode >> rw >> owner;
    if (kind == "FLOCK" && owner == std::to_string(pid)) return true;
  }
  return false;
}

// Stops `pid`, never while it is inside a commit (it would hold up the new attempt's claim).
void StopOutsideACommit(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    kill(pid, SIGSTOP);
    WaitFor(
        [&] {
          return Slurp("/proc/" + std::to_string(pid) + "/stat").find(") T") != std::string::npos;
        },
        std::chrono::seconds(5));
    if (!HoldsFlock(pid)) return;
    kill(pid, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Every entry of a checkpoint folder, with the text of its files (`latest`, FENCE).
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out[it->path().filename().string()] = it->is_regular_file() ? Slurp(it->path().string()) : "";
  }
  return out;
}

class PartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.StartCoordinator()) << cluster_.Log("coordinator.1.log");
    jobs_ = cluster_.Jobs();
  }

  std::string Submit(const std::string& yaml) {
    std::string id;
    const grpc::Status s = SubmitJobAs(*jobs_, yaml, &id);
    EXPECT_TRUE(s.ok()) << rpc::Describe(s);
    return id;
  }

  v1::Job Get(const std::string& id) { return GetJobAs(*jobs_, id); }

  std::string Logs() {
    std::string text = cluster_.Log("coordinator.1.log") + cluster_.Log("worker-w1.log") +
                       cluster_.Log("worker-w2.log");
    return text.size() > 6000 ? text.substr(text.size() - 6000) : text;
  }

  ServiceCluster cluster_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

TEST_F(PartitionTest, StaleAttemptCannotCommitAndIsStoppedWhenItsWorkerReturns) {
  const std::string x_dir = cluster_.UserDir("alice") + "/ckpt-x";
  const std::string y_dir = cluster_.UserDir("alice") + "/ckpt-y";
  // Both jobs land on w1, the only worker at first.
  cluster_.StartWorker("w1", 2);
  const std::string x = Submit(SyntheticJobYaml(x_dir, 150, 3, "{max_restarts: 3}", 1, 1));
  const std::string y = Submit(
      SyntheticJobYaml(y_dir, 100000, 0, "{max_restarts: 3}", 1, 1));  // saves only when stopped
  ASSERT_FALSE(x.empty() || y.empty()) << "a submission was refused";
  ASSERT_TRUE(
      WaitFor([&] { return Get(x).latest_checkpoint_step() >= 3; }, std::chrono::seconds(240)))
      << Logs();
  ASSERT_TRUE(WaitFor([&] { return Get(y).step() >= 1; }, std::chrono::seconds(240))) << Logs();
  const std::map<pid_t, int> x_trainers = cluster_.Trainers(x);
  const std::map<pid_t, int> y_trainers = cluster_.Trainers(y);
  ASSERT_EQ(x_trainers.size(), 1u);
  ASSERT_EQ(y_trainers.size(), 1u);
  const pid_t x_stale = x_trainers.begin()->first;
  const pid_t y_stale = y_trainers.begin()->first;
  cluster_.StartWorker("w2", 2);

  // The partition: w1's daemon stops heartbeating. X's trainer is frozen too (so that it is
  // still short of its last step when attempt 2 has finished); Y's keeps training.
  StopOutsideACommit(x_stale);
  kill(cluster_.WorkerPid("w1"), SIGSTOP);
  ASSERT_TRUE(WaitFor([&] { return Get(x).attempt() == 2 && Get(y).attempt() == 2; },
                      std::chrono::seconds(60)))
      << Logs();
  EXPECT_EQ(Get(x).recovery_cause(), v1::RECOVERY_CAUSE_WORKER_LOST);
  EXPECT_EQ(Get(y).recovery_cause(), v1::RECOVERY_CAUSE_WORKER_LOST);
  ASSERT_TRUE(
      WaitFor([&] { return Get(x).state() == v1::JOB_STATE_SUCCEEDED; }, std::chrono::seconds(240)))
      << Get(x).message() << "\n"
      << Logs();
  const std::map<std::string, std::string> before = Snapshot(x_dir);
  ASSERT_EQ(before.at("latest"), "step_000000150\n");
  EXPECT_THAT(before.at("FENCE"), HasSubstr("attempt 2"));

  // The stale attempt-1 trainer goes on and reaches its next checkpoint: refused.
  kill(x_stale, SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return IsZombieOrGone(x_stale); }, std::chrono::seconds(120)))
      << Logs();
  const std::string x_stderr =
      Slurp(cluster_.dir() + "/work-w1/" + x + "/attempt-1/rank-0.stderr.log");
  EXPECT_THAT(x_stderr, HasSubstr("fenced out"));
  EXPECT_THAT(x_stderr, HasSubstr("attempt 1 is stale"));
  EXPECT_EQ(Snapshot(x_dir), before);  // `latest`, step folders, FENCE: untouched, no temporary
  // The step X's restart announced is the one its attempt 2 loaded.
  std::string resumed;
  std::istringstream coordinator_log(cluster_.Log("coordinator.1.log"));
  for (std::string line; std::getline(coordinator_log, line);) {
    if (line.find("job " + x + " attempt 2 resumed from step ") != std::string::npos)
      resumed = line;
  }
  EXPECT_THAT(resumed, HasSubstr(", the step its restart announced")) << Logs();

  // The worker comes back: before anything else it is told to stop Y's stale trainer (which
  // tries to checkpoint as it stops, and is refused too).
  EXPECT_FALSE(IsZombieOrGone(y_stale));
  kill(cluster_.WorkerPid("w1"), SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return kill(y_stale, 0) != 0; }, std::chrono::seconds(60))) << Logs();
  EXPECT_THAT(cluster_.Log("worker-w1.log"),
              HasSubstr("stale task: job " + y + " attempt 1 is no longer current"));
  EXPECT_THAT(Slurp(cluster_.dir() + "/work-w1/" + y + "/attempt-1/rank-0.stderr.log"),
              HasSubstr("fenced out"));
  // Y's attempt 2 runs on; nothing of attempt 1 reached its folder.
  EXPECT_EQ(Get(y).attempt(), 2);
  for (const auto& [name, text] : Snapshot(y_dir)) {
    EXPECT_EQ(name.rfind("step_", 0), std::string::npos) << name;
  }
  EXPECT_THAT(Snapshot(y_dir).at("FENCE"), HasSubstr("attempt 2"));
}

}  // namespace
}  // namespace deepnet::testing
