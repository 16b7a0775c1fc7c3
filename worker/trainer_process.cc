#include "worker/trainer_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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
  // Checked here so that the error names the file (the child would only fail to start).
  const int err_fd =
      open(launch.stderr_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err_fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer stderr log ", launch.stderr_log, ": ", std::strerror(errno)));
  }
  close(err_fd);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, launch.stderr_log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (!launch.work_dir.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, launch.work_dir.c_str());
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group (pgid = pid): a stop signals the trainer and all its children.
  posix_spawnattr_setpgroup(&attr, 0);
  // The daemon blocks SIGTERM/SIGINT for sigwait() and may ignore SIGPIPE; the trainer must
  // see all of them with their default actions.
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGCHLD}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> argv_strings = {launch.executable};
  argv_strings.insert(argv_strings.end(), launch.args.begin(), launch.args.end());
  std::vector<std::string> env_strings = launch.env;
  std::vector<char*> argv = CStrings(argv_strings);
  std::vector<char*> envp = CStrings(env_strings);
  pid_t pid = 0;
  const bool search_path = launch.executable.find('/') == std::string::npos;
  const int rc =
      search_path
          ? posix_spawnp(&pid, launch.executable.c_str(), &actions, &attr, argv.data(), envp.data())
          : posix_spawn(&pid, launch.executable.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot start trainer ", launch.executable,
                                                      " in ", launch.work_dir, ": ",
                                                      std::strerror(rc)));
  }
  close(pipe_fds[1]);  // Only the child writes; EOF once it and its children are gone.
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
