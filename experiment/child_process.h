#pragma once
// Runs a program (a `deepnet train` run, gnuplot) with its stdout read line by line, its stderr
// in a file, an optional deadline (SIGTERM, then SIGKILL after a grace period) and a stop flag.

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::experiment {

struct ChildOptions {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'.
  std::vector<std::string> env;   // Extra "NAME=value" entries.
  std::string stderr_path;        // Empty: /dev/null.
  // Seconds from the start after which the child gets SIGTERM; nullopt: none.
  std::optional<double> deadline_s;
  double kill_grace_s = 30.0;
  // When it becomes true the child gets SIGTERM (then SIGKILL after the grace period).
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string& line)> on_line;  // Each stdout line, without '\n'.
};

struct ChildResult {
  int exit_code = 0;  // 128 + signal when killed by one.
  bool hit_deadline = false;
  bool stopped = false;
  double wall_s = 0.0;
};

/// Starts the program and waits for it. An error when it cannot be started at all.
absl::StatusOr<ChildResult> RunChild(const ChildOptions& options);

/// The last `max_bytes` of a file (empty when unreadable).
std::string FileTail(const std::string& path, size_t max_bytes);

}  // namespace deepnet::experiment
