#pragma once

// A child process for integration tests: runs a command in its own process group with stdout
// and stderr in a log file, and kills the whole group (mpirun and its ranks included) when the
// object goes away, so no test leaves processes behind.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace deepnet::testing {

class Child {
 public:
  // `env` entries ("NAME=value") are added to the inherited environment.
  Child(const std::vector<std::string>& args, const std::string& log,
        const std::vector<std::string>& env = {}) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      FILE* f = std::fopen(log.c_str(), "w");
      if (f != nullptr) {
        dup2(fileno(f), STDOUT_FILENO);
        dup2(fileno(f), STDERR_FILENO);
      }
      for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    if (pid_ > 0) {
      setpgid(pid_, pid_);  // Also here: whichever runs first, the group exists.
      pgid_ = pid_;
    }
  }
  ~Child() { Kill(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Exit code, or -signal when killed by a signal; -1000 when still running after `limit`.
  int Wait(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        if (pgid_ > 0) kill(-pgid_, SIGKILL);  // Anything the child left in its group.
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        return code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return pid_ > 0 ? -1000 : code_;
  }
  void Kill() {
    if (pid_ > 0) {
      if (pgid_ > 0) kill(-pgid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  pid_t pgid_ = 0;  // The child's process group (its own pid).
  int code_ = -1000;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace deepnet::testing
