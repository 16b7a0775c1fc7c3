#include "experiment/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace deepnet::experiment {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

absl::StatusOr<ChildResult> RunChild(const ChildOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no program to run");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const int err_fd = ::open(options.stderr_path.empty() ? "/dev/null" : options.stderr_path.c_str(),
                            O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err_fd < 0) {
    const std::string why = std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError(absl::StrCat(options.stderr_path, ": cannot open: ", why));
  }
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    ::close(err_fd);
    return absl::InternalError(absl::StrCat("fork: ", why));
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, STDIN_FILENO);
    for (const std::string& e : options.env) ::putenv(const_cast<char*>(e.c_str()));
    ::execvp(argv[0], argv.data());
    const std::string msg =
        absl::StrCat("cannot run ", options.argv[0], ": ", std::strerror(errno), "\n");
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::close(err_fd);
  ChildResult result;
  std::string pending;
  bool term_sent = false;
  std::optional<Clock::time_point> term_at;
  bool kill_sent = false;
  // SIGTERM at the deadline or when asked to stop, SIGKILL kill_grace_s later if still running.
  const auto escalate = [&] {
    const bool deadline_hit = options.deadline_s && Since(start) >= *options.deadline_s;
    const bool stop_asked = options.stop != nullptr && options.stop->load();
    if (!term_sent && (deadline_hit || stop_asked)) {
      result.hit_deadline = deadline_hit && !stop_asked;
      result.stopped = stop_asked;
      ::kill(pid, SIGTERM);
      term_sent = true;
      term_at = Clock::now();
    }
    if (term_sent && !kill_sent && Since(*term_at) >= options.kill_grace_s) {
      ::kill(pid, SIGKILL);
      kill_sent = true;
    }
  };
  char buf[65536];
  for (bool open = true; open;) {
    escalate();
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, 200);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      open = false;
      break;
    }
    pending.append(buf, static_cast<size_t>(n));
    size_t from = 0;
    for (size_t nl; (nl = pending.find('\n', from)) != std::string::npos; from = nl + 1) {
      if (options.on_line) options.on_line(pending.substr(from, nl - from));
    }
    pending.erase(0, from);
  }
  if (!pending.empty() && options.on_line) options.on_line(pending);
  ::close(fds[0]);
  int status = 0;
  // The child may have closed stdout and still run: keep the deadline and stop flag in force.
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    escalate();
    ::usleep(50000);
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.wall_s = Since(start);
  return result;
}

std::string FileTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes)
                                  ? size - static_cast<std::streamoff>(max_bytes)
                                  : 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

}  // namespace deepnet::experiment
