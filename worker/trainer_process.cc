#include "worker/trainer_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace deepnet::worker {
namespace {

// How long the reader waits for more output before checking whether the trainer was reaped.
constexpr int kReaderPollMs = 100;

// argv/envp arrays pointing into `strings` (which must outlive them), null-terminated.
std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // A full disk loses log text, never the trainer's progress.
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Closes the fds it holds unless released; keeps Start()'s error paths short.
struct FdCloser {
  std::vector<int> fds;
  ~FdCloser() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
};

// What the forked child needs, prepared before fork(): the child calls async-signal-safe
// functions only (the daemon has other threads whose locks may be held at fork()).
struct ChildSetup {
  const char* executable = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* work_dir = nullptr;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int status_fd = -1;  // O_CLOEXEC: closed by a successful exec.
  bool switch_account = false;
  uid_t uid = 0;
  gid_t gid = 0;
  const TrainerLimit* limits = nullptr;
  size_t limit_count = 0;
};

enum ChildStep : int {
  kStepSession = 1,
  kStepSignals,
  kStepFds,
  kStepDescriptors,
  kStepChdir,
  kStepLimits,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepExec,
};

const char* ChildStepName(int step) {
  switch (step) {
    case kStepSession:
      return "setsid";
    case kStepSignals:
      return "signal setup";
    case kStepFds:
      return "dup2 of stdin/stdout/stderr";
    case kStepDescriptors:
      return "close-on-exec of inherited descriptors";
    case kStepChdir:
      return "chdir";
    case kStepLimits:
      return "setrlimit";
    case kStepGroups:
      return "setgroups";
    case kStepGid:
      return "setresgid";
    case kStepUid:
      return "setresuid";
    case kStepExec:
      return "exec";
    default:
      return "setup";
  }
}

[[noreturn]] void ChildFailed(int status_fd, int step) {
  const int report[2] = {step, errno};
  ssize_t ignored = write(status_fd, report, sizeof(report));
  (void)ignored;
  _exit(127);
}

// Marks every descriptor from `first` on close-on-exec, so that none of the daemon's (its
// sockets, its log files, whatever a library opened without O_CLOEXEC) reaches the trainer;
// status_fd, already close-on-exec, stays open until the exec. close_range(2) (Linux 5.11)
// where it exists, else one fcntl per possible descriptor. Async-signal-safe.
bool CloseOnExecFrom(int first) {
#ifdef SYS_close_range
  constexpr unsigned kCloseRangeCloexec = 1U << 2;  // CLOSE_RANGE_CLOEXEC
  if (syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, kCloseRangeCloexec) == 0) {
    return true;
  }
#endif
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  const rlim_t cap = std::min<rlim_t>(limit.rlim_cur, rlim_t{1} << 20);
  for (rlim_t fd = static_cast<rlim_t>(first); fd < cap; ++fd) {
    (void)fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);  // EBADF for the closed ones.
  }
  return true;
}

// Runs in the child between fork() and exec(): own session and process group (a stop signals
// the trainer and all its children; no controlling terminal, nothing of the daemon's session),
// default signal actions and an empty mask (the daemon blocks
// SIGTERM/SIGINT for sigwait() and may ignore SIGPIPE), the three standard fds and no other, the
// working
// folder, then the account: supplementary groups, gid, uid, in that order (dropping the uid
// first would forbid the rest). Raw system calls change the credentials of this (only) thread
// without glibc's all-threads machinery. A failed step is reported on status_fd.
[[noreturn]] void RunChild(const ChildSetup& s) {
  if (setsid() < 0) ChildFailed(s.status_fd, kStepSession);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGCHLD}) {
    if (sigaction(sig, &default_action, nullptr) != 0) ChildFailed(s.status_fd, kStepSignals);
  }
  sigset_t empty;
  sigemptyset(&empty);
  if (sigprocmask(SIG_SETMASK, &empty, nullptr) != 0) ChildFailed(s.status_fd, kStepSignals);
  if (dup2(s.stdin_fd, STDIN_FILENO) < 0 || dup2(s.stdout_fd, STDOUT_FILENO) < 0 ||
      dup2(s.stderr_fd, STDERR_FILENO) < 0) {
    ChildFailed(s.status_fd, kStepFds);
  }
  if (!CloseOnExecFrom(STDERR_FILENO + 1)) ChildFailed(s.status_fd, kStepDescriptors);
  if (s.work_dir != nullptr && chdir(s.work_dir) != 0) ChildFailed(s.status_fd, kStepChdir);
  // Before the account switch: a root daemon may raise a limit, the trainer's account may not.
  for (size_t i = 0; i < s.limit_count; ++i) {
    const struct rlimit limit = {static_cast<rlim_t>(s.limits[i].value),
                                 static_cast<rlim_t>(s.limits[i].value)};
    using Resource = decltype(RLIMIT_CORE);  // glibc's enum, an int elsewhere.
    if (setrlimit(static_cast<Resource>(s.limits[i].resource), &limit) != 0) {
      ChildFailed(s.status_fd, kStepLimits);
    }
  }
  if (s.switch_account) {
    const gid_t groups[1] = {s.gid};
    if (syscall(SYS_setgroups, 1, groups) != 0) ChildFailed(s.status_fd, kStepGroups);
    if (syscall(SYS_setresgid, s.gid, s.gid, s.gid) != 0) ChildFailed(s.status_fd, kStepGid);
    if (syscall(SYS_setresuid, s.uid, s.uid, s.uid) != 0) ChildFailed(s.status_fd, kStepUid);
    // Paranoia: a uid that did not change must never exec the trainer.
    if (getuid() != s.uid || geteuid() != s.uid || getgid() != s.gid) {
      errno = EPERM;
      ChildFailed(s.status_fd, kStepUid);
    }
  }
  execve(s.executable, s.argv, s.envp);
  ChildFailed(s.status_fd, kStepExec);
}

}  // namespace

std::string TailOfFile(const std::string& path, int max_lines) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > 16384 ? size - 16384 : 0;
  in.seekg(start);
  std::ostringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines = absl::StrSplit(text.str(), '\n');
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // A cut first line.
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (static_cast<int>(lines.size()) > max_lines) {
    lines.erase(lines.begin(), lines.end() - max_lines);
  }
  return absl::StrJoin(lines, "\n");
}

absl::StatusOr<std::unique_ptr<TrainerProcess>> TrainerProcess::Start(const TrainerLaunch& launch,
                                                                      LineCallback on_stdout_line) {
  if (launch.executable.empty()) {
    return absl::InvalidArgumentError("trainer executable: no path given");
  }
  FdCloser fds;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pipe for the stdout of ", launch.executable, ": ", std::strerror(errno)));
  }
  fds.fds = {pipe_fds[0], pipe_fds[1], -1};
  const int log_fd =
      open(launch.stdout_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer stdout log ", launch.stdout_log, ": ", std::strerror(errno)));
  }
  fds.fds[2] = log_fd;
  const int err_fd =
      open(launch.stderr_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err_fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer stderr log ", launch.stderr_log, ": ", std::strerror(errno)));
  }
  fds.fds.push_back(err_fd);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    return absl::InternalError(absl::StrCat("/dev/null: ", std::strerror(errno)));
  }
  fds.fds.push_back(null_fd);
  if (launch.account && (launch.account->uid == 0 || launch.account->gid == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("trainers never run as uid or gid 0 (got uid ",
                                                   launch.account->uid, ", gid ",
                                                   launch.account->gid, ")"));
  }
  std::string executable = launch.executable;
  if (executable.find('/') == std::string::npos) {
    const char* path_env = std::getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(path_env ? path_env : "/usr/bin:/bin", ':')) {
      const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", executable);
      if (access(candidate.c_str(), X_OK) == 0) {
        executable = candidate;
        break;
      }
    }
  }
  // The child reports a failure before exec() as {step, errno} on this pipe; EOF: exec'd.
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  fds.fds.push_back(status_pipe[0]);
  fds.fds.push_back(status_pipe[1]);

  std::vector<std::string> argv_strings = {launch.executable};
  argv_strings.insert(argv_strings.end(), launch.args.begin(), launch.args.end());
  std::vector<std::string> env_strings = launch.env;
  std::vector<char*> argv = CStrings(argv_strings);
  std::vector<char*> envp = CStrings(env_strings);
  ChildSetup setup;
  setup.executable = executable.c_str();
  setup.argv = argv.data();
  setup.envp = envp.data();
  setup.work_dir = launch.work_dir.empty() ? nullptr : launch.work_dir.c_str();
  setup.stdin_fd = null_fd;
  setup.stdout_fd = pipe_fds[1];
  setup.stderr_fd = err_fd;
  setup.status_fd = status_pipe[1];
  setup.switch_account = launch.account.has_value();
  setup.limits = launch.limits.data();
  setup.limit_count = launch.limits.size();
  if (launch.account) {
    setup.uid = launch.account->uid;
    setup.gid = launch.account->gid;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot fork for trainer ", launch.executable, ": ", std::strerror(errno)));
  }
  if (pid == 0) RunChild(setup);  // Never returns.
  close(status_pipe[1]);
  fds.fds.pop_back();
  int report[2] = {0, 0};
  size_t got = 0;
  while (got < sizeof(report)) {
    const ssize_t n =
        read(status_pipe[0], reinterpret_cast<char*>(report) + got, sizeof(report) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const std::string as =
        launch.account ? absl::StrCat(" as uid ", launch.account->uid, " gid ", launch.account->gid)
                       : "";
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start trainer ", launch.executable, as, " in ",
                     launch.work_dir.empty() ? "the daemon's folder" : launch.work_dir, ": ",
                     got == sizeof(report) ? ChildStepName(report[0]) : "setup", ": ",
                     std::strerror(got == sizeof(report) ? report[1] : EIO)));
  }
  close(pipe_fds[1]);  // Only the child writes; EOF once it and its children are gone.
  close(err_fd);
  close(null_fd);
  close(status_pipe[0]);
  fds.fds.clear();
  return std::unique_ptr<TrainerProcess>(
      new TrainerProcess(pid, pipe_fds[0], log_fd, launch.stderr_log, std::move(on_stdout_line)));
}

TrainerProcess::TrainerProcess(pid_t pid, int stdout_fd, int stdout_log_fd, std::string stderr_log,
                               LineCallback on_line)
    : pid_(pid),
      stdout_fd_(stdout_fd),
      stdout_log_fd_(stdout_log_fd),
      stderr_log_(std::move(stderr_log)),
      on_line_(std::move(on_line)) {
  reader_ = std::thread([this] { ReadLoop(); });
}

TrainerProcess::~TrainerProcess() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reaped_) {
      killpg(pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      reaped_ = true;
    }
  }
  leader_reaped_.store(true);
  JoinReader();
  close(stdout_fd_);
  close(stdout_log_fd_);
}

void TrainerProcess::JoinReader() {
  if (reader_.joinable()) reader_.join();
}

void TrainerProcess::ReadLoop() {
  std::string pending;
  bool skipping = false;  // Inside an over-long line: drop bytes until its newline.
  char chunk[8192];
  auto emit = [&](std::string&& line) {
    if (on_line_) on_line_(line);
  };
  while (true) {
    pollfd p{stdout_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, kReaderPollMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      // A descendant that left the process group may hold the pipe open forever.
      if (leader_reaped_.load()) break;
      continue;
    }
    const ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    WriteAll(stdout_log_fd_, chunk, static_cast<size_t>(n));
    size_t begin = 0;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      if (chunk[i] != '\n') continue;
      if (!skipping) {
        pending.append(chunk + begin, i - begin);
        emit(std::move(pending));
      }
      pending.clear();
      skipping = false;
      begin = i + 1;
    }
    if (!skipping) pending.append(chunk + begin, static_cast<size_t>(n) - begin);
    if (pending.size() > kMaxLineBytes) {
      pending.resize(kMaxLineBytes);
      emit(std::move(pending));
      pending.clear();
      skipping = true;
    }
  }
  if (!pending.empty() && !skipping) emit(std::move(pending));
}

void TrainerProcess::Stop(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reaped_) return;
  stop_requested_.store(true);
  const auto now = std::chrono::steady_clock::now();
  if (grace.count() <= 0) {
    killpg(pid_, SIGKILL);
    kill_deadline_ = now;
    return;
  }
  killpg(pid_, SIGTERM);
  if (!kill_deadline_ || now + grace < *kill_deadline_) kill_deadline_ = now + grace;
}

std::optional<TrainerExitStatus> TrainerProcess::Poll() {
  if (exit_) return exit_;
  int status = 0;
  bool lost = false;  // Not our child any more (should not happen): report it as failed.
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Look without reaping first: while the trainer is a zombie its pid stays reserved as the
    // group id, so killing the rest of the group cannot hit a recycled pid.
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) return std::nullopt;
      lost = true;
    } else if (info.si_pid == 0) {
      if (kill_deadline_ && std::chrono::steady_clock::now() >= *kill_deadline_) {
        killpg(pid_, SIGKILL);
        kill_deadline_.reset();  // Sent; the trainer cannot survive it.
      }
      return std::nullopt;
    }
    // Children of the trainer die with it.
    killpg(pid_, SIGKILL);
    if (!lost) {
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    reaped_ = true;
  }
  leader_reaped_.store(true);
  JoinReader();
  TrainerExitStatus result;
  if (lost) {
    result.exit_code = -1;
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  result.stderr_tail = TailOfFile(stderr_log_, kStderrTailLines);
  if (lost) {
    result.stderr_tail =
        absl::StrCat("trainer pid ", pid_, " could not be reaped\n", result.stderr_tail);
  }
  result.stop_requested = stop_requested_.load();
  exit_ = result;
  return exit_;
}

int64_t TrainerProcess::PeakResidentBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (reaped_) return 0;
  std::ifstream in(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kib = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) return kib * 1024;
  }
  return 0;
}

}  // namespace deepnet::worker
