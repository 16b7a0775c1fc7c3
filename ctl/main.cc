// deepnetctl: the user CLI of the coordinator's JobService. Hands the process's environment
// and terminal to the library (ctl/ctl_app.h), which does everything else.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "ctl/ctl_app.h"
#include "ctl/terminal_escape.h"
#include "version/deepnet_version.h"

int main(int argc, char** argv) {
  deepnet::ctl::CtlEnvironment env;
  env.version = deepnet::ProgramVersion();
  env.getenv = [](const std::string& name) {
    const char* value = std::getenv(name.c_str());
    return value != nullptr ? std::string(value) : std::string();
  };
  env.stdout_is_tty = isatty(STDOUT_FILENO) == 1;
  struct winsize size {};
  if (env.stdout_is_tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    env.terminal_width = size.ws_col;
  }
  // Everything deepnetctl prints passes through the escaping (ctl/terminal_escape.h): names,
  // reasons and logs come from other users and their trainers.
  deepnet::ctl::EscapingStreambuf out_escape(std::cout.rdbuf());
  deepnet::ctl::EscapingStreambuf err_escape(std::cerr.rdbuf());
  std::ostream out(&out_escape);
  std::ostream err(&err_escape);
  env.out = &out;
  env.err = &err;
  env.terminal = &std::cout;
  const int code = deepnet::ctl::RunDeepnetctl(argc, argv, env);
  out.flush();
  err.flush();
  return code;
}
