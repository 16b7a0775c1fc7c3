// LimitChecks: admission checks against the limits file and the scheduler's rank caps.
#include "coordinator/core/limit_checks.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/auth/auth.h"

namespace deepnet::coordinator {
namespace {

// "user alice" / "team nlp".
std::string Account(bool team, const std::string& name) {
  return absl::StrCat(team ? "team " : "user ", name);
}

// "(limits file /etc/deepnet/limits.yaml, users.alice.max_priority)".
std::string Where(const LimitsConfig& config, const Limit& limit) {
  return absl::StrCat("(limits file ", config.source, ", ", limit.origin, ")");
}

}  // namespace

LimitChecks::LimitChecks(std::optional<LimitsConfig> limits,
                         std::function<bool(const std::string& user)> is_admin)
    : limits_(std::move(limits)), is_admin_(std::move(is_admin)) {}

ShareLimits LimitChecks::UserLimits(const std::string& user, bool admin) const {
  return limits_.has_value() ? limits_->ForUser(user, admin) : ShareLimits();
}

absl::Status LimitChecks::Check(const SubmitRequestData& request) const {
  const std::string& team = request.spec.team;
  if (!team.empty() && !IsValidPrincipalName(team)) {
    return absl::InvalidArgumentError(
        "scheduling.team: not a team name (1 to 64 of A-Z a-z 0-9 . _ -, not starting with . or "
        "-)");
  }
  if (!team.empty() && !request.admin &&
      std::find(request.teams.begin(), request.teams.end(), team) == request.teams.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "scheduling.team: user ", request.owner, " is not a member of team '", team,
        "' (their teams in the tokens file: ",
        request.teams.empty() ? std::string("none") : absl::StrJoin(request.teams, ", "), ")"));
  }
  if (!limits_.has_value()) return absl::OkStatus();
  struct Charged {
    bool team;
    std::string name;
    ShareLimits limits;
  };
  std::vector<Charged> accounts = {
      {false, request.owner, UserLimits(request.owner, request.admin)}};
  if (!team.empty()) accounts.push_back({true, team, limits_->ForTeam(team)});
  const int64_t ranks = int64_t{request.spec.pipeline_stages} * int64_t{request.spec.data_parallel};
  for (const Charged& a : accounts) {
    if (a.limits.max_priority && request.spec.priority > a.limits.max_priority->value) {
      return absl::PermissionDeniedError(
          absl::StrCat("scheduling.priority: ", request.spec.priority, " is above max_priority ",
                       a.limits.max_priority->value, " of ", Account(a.team, a.name), " ",
                       Where(*limits_, *a.limits.max_priority)));
    }
    if (a.limits.max_running_ranks && ranks > a.limits.max_running_ranks->value) {
      return absl::PermissionDeniedError(
          absl::StrCat("parallel.pipeline_stages x parallel.data_parallel: the job needs ", ranks,
                       " ranks, more than max_running_ranks ", a.limits.max_running_ranks->value,
                       " of ", Account(a.team, a.name), " ",
                       Where(*limits_, *a.limits.max_running_ranks), ", so it could never start"));
    }
  }
  return absl::OkStatus();
}

absl::Status LimitChecks::CheckSubmit(const SubmitRequestData& request,
                                      const std::map<std::string, JobRun>& jobs) const {
  if (!request.idempotency_key.empty()) {
    for (const auto& [id, job] : jobs) {
      // A retry of a stored submission answers with that job whatever the limits say now.
      if (job.record().owner == request.owner &&
          job.record().idempotency_key == request.idempotency_key) {
        return absl::OkStatus();
      }
    }
  }
  if (absl::Status s = Check(request); !s.ok()) return s;
  if (!limits_.has_value()) return absl::OkStatus();
  const ShareLimits user = UserLimits(request.owner, request.admin);
  const std::string& team = request.spec.team;
  const ShareLimits team_limits = team.empty() ? ShareLimits() : limits_->ForTeam(team);
  if (!user.max_queued_jobs && !team_limits.max_queued_jobs) return absl::OkStatus();
  int64_t user_queued = 0;
  int64_t team_queued = 0;
  for (const auto& [id, job] : jobs) {
    if (!job.queued()) continue;
    if (job.record().owner == request.owner) ++user_queued;
    if (!team.empty() && job.settings().team == team) ++team_queued;
  }
  const std::pair<const std::optional<Limit>*, int64_t> checks[] = {
      {&user.max_queued_jobs, user_queued}, {&team_limits.max_queued_jobs, team_queued}};
  for (size_t i = 0; i < 2; ++i) {
    const std::optional<Limit>& limit = *checks[i].first;
    if (!limit || checks[i].second < limit->value) continue;
    const bool is_team = i == 1;
    return absl::ResourceExhaustedError(
        absl::StrCat(Account(is_team, is_team ? team : request.owner), " has ", checks[i].second,
                     " job(s) queued, max_queued_jobs ", limit->value, " ", Where(*limits_, *limit),
                     ": wait for one to start, or cancel one"));
  }
  return absl::OkStatus();
}

RankCaps LimitChecks::CapsFor(const std::map<std::string, JobRun>& jobs) const {
  RankCaps caps;
  if (limits_.has_value()) {
    std::set<std::string> users_seen;
    std::set<std::string> teams_seen;
    for (const auto& [id, job] : jobs) {
      if (!job.queued()) continue;
      const std::string& owner = job.record().owner;
      if (users_seen.insert(owner).second) {
        const bool admin = is_admin_ && is_admin_(owner);
        const ShareLimits limits = UserLimits(owner, admin);
        if (limits.max_running_ranks) {
          caps.users[owner] = {limits.max_running_ranks->value, 0,
                               limits.max_running_ranks->origin};
        }
      }
      const std::string& team = job.settings().team;
      if (!team.empty() && teams_seen.insert(team).second) {
        const ShareLimits limits = limits_->ForTeam(team);
        if (limits.max_running_ranks) {
          caps.teams[team] = {limits.max_running_ranks->value, 0, limits.max_running_ranks->origin};
        }
      }
    }
    if (!caps.users.empty() || !caps.teams.empty()) {
      for (const auto& [id, job] : jobs) {
        if (!job.placed() && !job.reattaching()) continue;
        const int64_t ranks = job.record().world_size();
        auto user = caps.users.find(job.record().owner);
        if (user != caps.users.end()) user->second.held += ranks;
        const std::string& job_team = job.settings().team;
        auto team = job_team.empty() ? caps.teams.end() : caps.teams.find(job_team);
        if (team != caps.teams.end()) team->second.held += ranks;
      }
    }
  }
  return caps;
}

}  // namespace deepnet::coordinator
