#pragma once

// Picks events out of a trainer's `--log-format json` output (train/progress_reporter.cc).

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepnet::testing {

/// The JSON lines of `log` whose "event" is `event`, in order; other lines are skipped.
inline std::vector<nlohmann::json> JsonLogEvents(const std::string& log, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == event) out.push_back(j);
  }
  return out;
}

}  // namespace deepnet::testing
