#pragma once
// deepnetctl run in-process for its tests: `args` after the program name, no environment
// variables, output captured in `out` and `err` (cleared first). Returns its exit code.
#include <sstream>
#include <string>
#include <vector>

#include "ctl/ctl_app.h"

namespace deepnet::ctl::testing {

inline int RunCtlQuietEnv(std::vector<std::string> args, std::ostringstream& out,
                          std::ostringstream& err) {
  out.str("");
  err.str("");
  args.insert(args.begin(), "deepnetctl");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  CtlEnvironment env;
  env.getenv = [](const std::string&) { return std::string(); };
  env.out = &out;
  env.err = &err;
  return RunDeepnetctl(static_cast<int>(argv.size()), argv.data(), env);
}

}  // namespace deepnet::ctl::testing
