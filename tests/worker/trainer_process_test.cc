#include "worker/trainer_process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

#include "tests/worker/worker_test_util.h"

namespace deepnet::worker {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using testing::ProcessAlive;
using testing::WaitUntil;

class TrainerProcessTest : public ::testing::Test {
 protected:
  TrainerLaunch Launch(const std::string& mode, bool grandchild = false) {
    TrainerLaunch launch;
    launch.executable = testing::WriteFakeTrainer(dir_.path());
    launch.args = {"train", "--config", "job.yaml", "--log-format", "json"};
    launch.env = {"FAKE_DIR=" + dir_.path(), "FAKE_MODE=" + mode, "FAKE_EXIT_CODE=7",
                  "DEEPNET_RANK=0", "PATH=/usr/bin:/bin"};
    if (grandchild) launch.env.push_back("FAKE_GRANDCHILD=1");
    launch.work_dir = dir_.path();
    launch.stdout_log = dir_.path() + "/out.log";
    launch.stderr_log = dir_.path() + "/err.log";
    return launch;
  }

  std::unique_ptr<TrainerProcess> MustStart(const TrainerLaunch& launch) {
    auto process = TrainerProcess::Start(launch, [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    });
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? *std::move(process) : nullptr;
  }

  std::optional<TrainerExitStatus> WaitExit(TrainerProcess& process) {
    std::optional<TrainerExitStatus> exit;
    WaitUntil([&] { return (exit = process.Poll()).has_value(); });
    return exit;
  }

  testing::TempDir dir_;
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(TrainerProcessTest, ReportsExitCodeOutputLinesAndStderrTail) {
  auto process = MustStart(Launch("exit"));
  ASSERT_NE(process, nullptr);
  std::optional<TrainerExitStatus> exit = WaitExit(*process);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 7);
  EXPECT_EQ(exit->signal, 0);
  EXPECT_FALSE(exit->stop_requested);
  EXPECT_EQ(exit->stderr_tail, "fake trainer rank 0: stderr line");
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(lines_.size(), 6u);  // Every line reached the callback before Poll() reported.
  EXPECT_THAT(lines_[5], HasSubstr("step_0000020"));
  EXPECT_THAT(testing::ReadFile(dir_.path() + "/out.log"), HasSubstr(R"("step":10)"));
  EXPECT_EQ(testing::ReadFile(dir_.path() + "/args-0"),
            "train --config job.yaml --log-format json\n");
}

TEST_F(TrainerProcessTest, ReportsTheKillingSignal) {
  auto process = MustStart(Launch("kill"));
  ASSERT_NE(process, nullptr);
  std::optional<TrainerExitStatus> exit = WaitExit(*process);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_EQ(exit->exit_code, 0);
}

TEST_F(TrainerProcessTest, StopTermsThenKillsTheWholeGroupAfterTheGrace) {
  auto process = MustStart(Launch("ignore-term", /*grandchild=*/true));
  ASSERT_NE(process, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return !testing::ReadFile(dir_.path() + "/ready-0").empty(); }));
  const pid_t grandchild = testing::PidIn(dir_.path() + "/grandchild-0");
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(ProcessAlive(grandchild));
  process->Stop(300ms);
  EXPECT_FALSE(process->Poll().has_value());  // Both ignore SIGTERM.
  std::optional<TrainerExitStatus> exit = WaitExit(*process);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_TRUE(exit->stop_requested);
  EXPECT_FALSE(ProcessAlive(process->pid()));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(grandchild); }));
}

TEST_F(TrainerProcessTest, ChildrenDieWithTheTrainer) {
  auto process = MustStart(Launch("exit", /*grandchild=*/true));
  ASSERT_NE(process, nullptr);
  std::optional<TrainerExitStatus> exit = WaitExit(*process);
  ASSERT_TRUE(exit.has_value());
  const pid_t grandchild = testing::PidIn(dir_.path() + "/grandchild-0");
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(grandchild); }));
}

TEST_F(TrainerProcessTest, TermLetsTheTrainerExitItself) {
  auto process = MustStart(Launch("run"));
  ASSERT_NE(process, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return !testing::ReadFile(dir_.path() + "/ready-0").empty(); }));
  process->Stop(20s);
  std::optional<TrainerExitStatus> exit = WaitExit(*process);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 143);
  EXPECT_EQ(exit->signal, 0);
  EXPECT_TRUE(exit->stop_requested);
  EXPECT_THAT(exit->stderr_tail, HasSubstr("fake trainer: SIGTERM"));
}

TEST_F(TrainerProcessTest, DestructorKillsARunningTrainer) {
  pid_t pid = 0;
  {
    auto process = MustStart(Launch("ignore-term"));
    ASSERT_NE(process, nullptr);
    pid = process->pid();
    EXPECT_TRUE(ProcessAlive(pid));
  }
  EXPECT_FALSE(ProcessAlive(pid));
}

TEST_F(TrainerProcessTest, StartFailsNamingTheExecutable) {
  TrainerLaunch launch = Launch("exit");
  launch.executable = dir_.path() + "/no_such_trainer";
  auto process = TrainerProcess::Start(launch, nullptr);
  ASSERT_FALSE(process.ok());
  EXPECT_THAT(process.status().message(), HasSubstr("no_such_trainer"));
}

TEST_F(TrainerProcessTest, StartFailsNamingAnUnwritableLog) {
  TrainerLaunch launch = Launch("exit");
  launch.stderr_log = dir_.path() + "/missing/err.log";
  auto process = TrainerProcess::Start(launch, nullptr);
  ASSERT_FALSE(process.ok());
  EXPECT_THAT(process.status().message(), HasSubstr("missing/err.log"));
}

// The trainer leads its own session (nothing of the daemon's, no controlling terminal) and
// holds only stdin/stdout/stderr: a descriptor the daemon opened without O_CLOEXEC stays behind.
TEST_F(TrainerProcessTest, RunsInItsOwnSessionWithOnlyTheStandardDescriptors) {
  const int leaked = ::open("/dev/null", O_RDONLY);  // No O_CLOEXEC, as a careless library does.
  ASSERT_GE(leaked, 3);
  const std::string probe = dir_.path() + "/probe.sh";
  std::ofstream(probe) << "#!/bin/sh\n"
                       << "echo \"$$ $(cut -d' ' -f6 /proc/$$/stat)\" > " << dir_.path()
                       << "/session\n"
                       << "if [ -e /proc/$$/fd/" << leaked << " ]; then echo open; else echo closed; fi > "
                       << dir_.path() << "/leaked\n";
  ASSERT_EQ(::chmod(probe.c_str(), 0755), 0);
  TrainerLaunch launch = Launch("exit");
  launch.executable = probe;
  auto process = MustStart(launch);
  ::close(leaked);
  ASSERT_NE(process, nullptr);
  std::optional<TrainerExitStatus> exit = WaitExit(*process);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  const std::vector<std::string> ids =
      absl::StrSplit(absl::StripAsciiWhitespace(testing::ReadFile(dir_.path() + "/session")), ' ');
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], ids[1]) << "the trainer's session id is not its own pid";
  EXPECT_EQ(ids[1], std::to_string(process->pid()));
  EXPECT_EQ(testing::ReadFile(dir_.path() + "/leaked"), "closed\n");
}

// The worker's --trainer-core-size and --trainer-max-open-files reach the trainer as hard
// limits: no core file (it would hold the trainer's memory), at most 64 descriptors.
TEST_F(TrainerProcessTest, ResourceLimitsAreSetBeforeTheExec) {
  const std::string probe = dir_.path() + "/limits.sh";
  std::ofstream(probe) << "#!/bin/sh\nulimit -c > " << dir_.path() << "/limits\nulimit -n >> "
                       << dir_.path() << "/limits\nulimit -H -c >> " << dir_.path() << "/limits\n";
  ASSERT_EQ(::chmod(probe.c_str(), 0755), 0);
  TrainerLaunch launch = Launch("exit");
  launch.executable = probe;
  launch.limits = {{RLIMIT_CORE, 0}, {RLIMIT_NOFILE, 64}};
  auto process = MustStart(launch);
  ASSERT_NE(process, nullptr);
  std::optional<TrainerExitStatus> exit = WaitExit(*process);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 0);
  EXPECT_EQ(testing::ReadFile(dir_.path() + "/limits"), "0\n64\n0\n");
}

TEST(TailOfFileTest, KeepsTheLastLines) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/log";
  {
    std::ofstream out(path);
    for (int i = 0; i < 100; ++i) out << "line " << i << "\n";
  }
  EXPECT_EQ(TailOfFile(path, 3), "line 97\nline 98\nline 99");
  EXPECT_EQ(TailOfFile(dir.path() + "/none", 3), "");
}

}  // namespace
}  // namespace deepnet::worker
