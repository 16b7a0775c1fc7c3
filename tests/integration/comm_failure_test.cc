// Failure behaviour of the multi-process communicators: a rank that skips a collective makes
// the others fail with DeadlineExceeded within the timeout; a rank that dies makes the others
// exit non-zero instead of hanging. Spawns tests/integration/comm_check_main.cc processes
// (gloo: three processes with DEEPNET_RANK/DEEPNET_WORLD_SIZE and a FileStore in a temp dir;
// mpi: under mpirun) and kills whatever is left in teardown.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/temp_dir.h"

namespace {

using deepnet::testing::TempDir;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Processes started in one process group; all of it is SIGKILLed when the object goes away.
class ProcessGroup {
 public:
  ~ProcessGroup() {
    if (pgid_ > 0) kill(-pgid_, SIGKILL);
    for (pid_t pid : pids_) {
      if (pid > 0) waitpid(pid, nullptr, 0);
    }
  }

  // Starts `args` with extra environment `env` ("NAME=value"), stdout+stderr into `log`.
  // Returns an index for Wait().
  int Start(const std::vector<std::string>& args, const std::vector<std::string>& env,
            const std::string& log) {
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, pgid_);  // The first child leads the group (pgid_ == 0).
      FILE* f = std::fopen(log.c_str(), "w");
      if (f != nullptr) {
        dup2(fileno(f), STDOUT_FILENO);
        dup2(fileno(f), STDERR_FILENO);
      }
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    setpgid(pid, pgid_ == 0 ? pid : pgid_);  // Also here: no race with the child's call.
    if (pgid_ == 0) pgid_ = pid;
    pids_.push_back(pid);
    return static_cast<int>(pids_.size()) - 1;
  }

  // Exit code, -signal when killed by a signal, -1000 when still running at `deadline`.
  int Wait(int index, Clock::time_point deadline) {
    pid_t& pid = pids_[index];
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1000;
  }

 private:
  pid_t pgid_ = 0;
  std::vector<pid_t> pids_;
};

// Starts three gloo ranks of comm_check with `extra` flags; returns their logs' paths.
std::vector<std::string> StartGlooRanks(ProcessGroup& group, const TempDir& dir,
                                        const std::vector<std::string>& extra) {
  std::vector<std::string> logs;
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<std::string> args = {DEEPNET_COMM_CHECK, "--backend", "gloo", "--rendezvous",
                                     "file://" + (dir / "rendezvous")};
    args.insert(args.end(), extra.begin(), extra.end());
    logs.push_back(dir / ("rank" + std::to_string(rank) + ".log"));
    group.Start(args, {"DEEPNET_RANK=" + std::to_string(rank), "DEEPNET_WORLD_SIZE=3"},
                logs.back());
  }
  return logs;
}

TEST(CommFailureTest, GlooRankSkippingACollectiveMakesOthersFailWithDeadlineExceeded) {
#ifndef DEEPNET_HAVE_GLOO
  GTEST_SKIP() << "built without the gloo backend";
#endif
  TempDir dir;
  ProcessGroup group;
  const auto start = Clock::now();
  const std::vector<std::string> logs = StartGlooRanks(
      group, dir, {"--timeout_ms", "2000", "--fail_mode", "skip_collective", "--fail_rank", "2"});
  // Liveness bound only: the operations time out after 2 s.
  const auto deadline = start + std::chrono::seconds(60);
  for (int rank = 0; rank < 2; ++rank) {
    const int code = group.Wait(rank, deadline);
    const std::string log = Slurp(logs[rank]);
    EXPECT_NE(code, 0) << log;
    EXPECT_NE(code, -1000) << "rank " << rank << " still running after 60 s\n" << log;
    EXPECT_THAT(log, HasSubstr("DEADLINE_EXCEEDED")) << log;
    EXPECT_THAT(log, HasSubstr("rank " + std::to_string(rank) + "/3: all_reduce of 1024 float32"))
        << log;
    EXPECT_THAT(log, HasSubstr("did not complete within 2 s")) << log;
  }
  std::printf("ranks 0 and 1 failed %.1f s after start\n",
              std::chrono::duration<double>(Clock::now() - start).count());
  EXPECT_THAT(Slurp(logs[2]), HasSubstr("skipping the all_reduce"));
}

TEST(CommFailureTest, GlooRankKilledMidLoopMakesOthersExitNonZero) {
#ifndef DEEPNET_HAVE_GLOO
  GTEST_SKIP() << "built without the gloo backend";
#endif
  TempDir dir;
  ProcessGroup group;
  const auto start = Clock::now();
  // A timeout longer than the liveness bound: the others must notice the death, not time out.
  const std::vector<std::string> logs =
      StartGlooRanks(group, dir,
                     {"--timeout_ms", "90000", "--fail_mode", "sigkill", "--fail_rank", "1",
                      "--iterations", "1000000"});
  const auto deadline = start + std::chrono::seconds(60);
  EXPECT_EQ(group.Wait(1, deadline), -SIGKILL) << Slurp(logs[1]);
  for (int rank : {0, 2}) {
    const int code = group.Wait(rank, deadline);
    const std::string log = Slurp(logs[rank]);
    EXPECT_NE(code, 0) << log;
    EXPECT_NE(code, -1000) << "rank " << rank << " still running after 60 s\n" << log;
    EXPECT_THAT(log, HasSubstr("rank " + std::to_string(rank) + "/3: all_reduce")) << log;
  }
  std::printf("ranks 0 and 2 exited %.1f s after start\n",
              std::chrono::duration<double>(Clock::now() - start).count());
}

// Processes whose command line contains `marker`.
std::vector<pid_t> ProcessesWithMarker(const std::string& marker) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    std::string cmdline = Slurp("/proc/" + std::string(entry->d_name) + "/cmdline");
    if (cmdline.find(marker) != std::string::npos) found.push_back(pid);
  }
  closedir(proc);
  return found;
}

TEST(CommFailureTest, MpiRankKilledMidLoopEndsMpirunNonZeroWithNoProcessLeft) {
  TempDir dir;
  const std::string marker =
      "comm-failure-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device()());
  const auto start = Clock::now();
  int code = 0;
  {
    ProcessGroup group;
    group.Start({DEEPNET_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-np", "3",
                 DEEPNET_COMM_CHECK, "--backend", "mpi", "--timeout_ms", "90000", "--fail_mode",
                 "sigkill", "--fail_rank", "1", "--iterations", "1000000", "--marker", marker},
                {}, dir / "mpirun.log");
    code = group.Wait(0, start + std::chrono::seconds(60));
    const std::string log = Slurp(dir / "mpirun.log");
    EXPECT_NE(code, 0) << log;
    EXPECT_NE(code, -1000) << "mpirun still running after 60 s\n" << log;
    EXPECT_THAT(log, HasSubstr("killing myself")) << log;
  }
  std::printf("mpirun exited with %d %.1f s after start\n", code,
              std::chrono::duration<double>(Clock::now() - start).count());
  // mpirun has exited; its ranks must be gone too (allow them a moment to finish dying).
  std::vector<pid_t> left = ProcessesWithMarker(marker);
  for (int i = 0; i < 100 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = ProcessesWithMarker(marker);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " comm_check processes outlived mpirun";
  for (pid_t pid : left) kill(pid, SIGKILL);
}

// With DEEPNET_MPI_SYNC_SEND=1 (how the `mpi` tests run) a send completes only once its receive is
// posted: ranks that each wait for their send before receiving time out, naming the send, where
// buffered sends would let the same code pass. What makes a schedule-order regression fail here.
TEST(CommFailureTest, MpiSynchronousSendsTurnAnUngroupedExchangeIntoATimeout) {
  TempDir dir;
  for (const bool sync : {true, false}) {
    SCOPED_TRACE(sync ? "DEEPNET_MPI_SYNC_SEND=1" : "DEEPNET_MPI_SYNC_SEND=0");
    const auto start = Clock::now();
    ProcessGroup group;
    const std::string log_path = dir / (sync ? "sync.log" : "buffered.log");
    group.Start(
        {DEEPNET_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-np", "2", DEEPNET_COMM_CHECK,
         "--backend", "mpi", "--timeout_ms", "3000", "--fail_mode", "ungrouped_exchange"},
        {sync ? "DEEPNET_MPI_SYNC_SEND=1" : "DEEPNET_MPI_SYNC_SEND=0"}, log_path);
    const int code = group.Wait(0, start + std::chrono::seconds(120));
    const std::string log = Slurp(log_path);
    EXPECT_NE(code, -1000) << "mpirun still running after 120 s\n" << log;
    if (sync) {
      EXPECT_NE(code, 0) << log;
      EXPECT_THAT(log, HasSubstr("send of 16 float32 to rank")) << log;
      EXPECT_THAT(log, HasSubstr("did not complete within 3 s")) << log;
    } else {
      // Buffered: the same order completes (comm_check then exits 3, "did not fail").
      EXPECT_THAT(log, HasSubstr("ungrouped exchange completed")) << log;
      EXPECT_NE(code, 0) << log;
    }
  }
}

}  // namespace
