#pragma once
// deepnetctl's command line: global flags (before or after the subcommand) with their
// environment fallbacks, the subcommands and their flags, then one command run against the
// coordinator. The process's environment, terminal and streams are handed in, so tests run the
// whole tool in-process. Blocking; one call at a time.

#include <functional>
#include <ostream>
#include <string>

namespace deepnet::ctl {

struct CtlEnvironment {
  // The value of an environment variable; "" when unset. Null: no environment.
  std::function<std::string(const std::string&)> getenv;
  // Standard output is a terminal (watch redraws its progress line in place), and its width.
  bool stdout_is_tty = false;
  int terminal_width = 80;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  // Standard output unescaped, for deepnetctl's own terminal control only (watch redraws its
  // progress line with CR and ESC [K); `out` may escape control characters
  // (ctl/terminal_escape.h). Null: out. Both must reach the same stream in order.
  std::ostream* terminal = nullptr;
  // What `deepnetctl --version` prints; empty: no --version flag.
  std::string version;
};

// Runs `deepnetctl argv[1..]`; returns the process exit code (exit_codes.h).
[[nodiscard]] int RunDeepnetctl(int argc, const char* const* argv, const CtlEnvironment& env);

}  // namespace deepnet::ctl
