#pragma once
// Fair sharing: per-user and per-team limits an admin sets in a limits file (YAML), read by
// `deepnet-coordinator --limits-file` at start and again on SIGHUP. Pure data and parsing; the
// coordinator applies the limits (docs/OPERATIONS.md "Fair sharing").
//
//   default:            # every user that has no entry below (admins excepted)
//     max_priority: 10
//     max_running_ranks: 16
//     max_queued_jobs: 20
//   users:
//     alice: {max_priority: 100}      # other fields from default
//   teams:                            # jobs with scheduling.team: nlp count here too
//     nlp: {max_running_ranks: 32}

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace deepnet::coordinator {

// One limit and where it comes from ("users.alice.max_priority"), for messages.
struct Limit {
  int64_t value = 0;
  std::string origin;
};

// Unset: unlimited.
struct ShareLimits {
  std::optional<Limit> max_priority;       // highest scheduling.priority allowed
  std::optional<Limit> max_running_ranks;  // ranks the account's placed jobs may hold at once
  std::optional<Limit> max_queued_jobs;    // jobs waiting in the queue at once
};

struct LimitsConfig {
  std::string source;  // the file, for messages
  ShareLimits defaults;
  std::map<std::string, ShareLimits> users;
  std::map<std::string, ShareLimits> teams;

  // A user's limits: their users: entry, each field it leaves unset taken from default. An admin
  // has only the limits of their own users: entry (none: unlimited).
  ShareLimits ForUser(const std::string& user, bool admin) const;
  // A team's limits: its teams: entry; a team without one is unlimited.
  ShareLimits ForTeam(const std::string& team) const;
};

// INVALID_ARGUMENT "<source>: <field>: <problem>" (every problem, one per line) for YAML that is
// not a map of default / users / teams, an unknown key, a user or team name that is not a valid
// principal name, or a value that is not an integer in range (max_priority: 32-bit signed;
// max_running_ranks, max_queued_jobs: 0 .. 2^31-1).
[[nodiscard]] absl::StatusOr<LimitsConfig> ParseLimits(const std::string& yaml_text,
                                                       const std::string& source);
// Reads and parses `path`; NOT_FOUND / INVALID_ARGUMENT naming the file when it cannot be read.
[[nodiscard]] absl::StatusOr<LimitsConfig> LoadLimitsFile(const std::string& path);

}  // namespace deepnet::coordinator
