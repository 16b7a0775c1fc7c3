#include "coordinator/auth/auth.h"

#include <grpcpp/server_context.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "coordinator/auth/secrets.h"

namespace deepnet::coordinator {

namespace {

constexpr absl::string_view kBearer = "bearer ";

absl::StatusOr<Role> ParseRole(absl::string_view text) {
  if (text == "user") return Role::kUser;
  if (text == "admin") return Role::kAdmin;
  if (text == "worker") return Role::kWorker;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role '", text, "' (expected user, admin or worker)"));
}

// Applies one `KEY=VALUE` field of a tokens-file line to `principal`.
absl::Status ApplyOption(absl::string_view field, Principal* principal) {
  const size_t equals = field.find('=');
  const absl::string_view key = field.substr(0, equals);
  const absl::string_view value = field.substr(equals + 1);
  if (key == "teams") {
    std::vector<std::string> teams;
    for (absl::string_view team : absl::StrSplit(value, ',')) {
      if (!IsValidPrincipalName(team)) {
        return absl::InvalidArgumentError(
            absl::StrCat("teams: '", team,
                         "' is not a valid team name (1 to 64 of [A-Za-z0-9._-], not "
                         "starting with '.' or '-')"));
      }
      teams.emplace_back(team);
    }
    std::sort(teams.begin(), teams.end());
    teams.erase(std::unique(teams.begin(), teams.end()), teams.end());
    principal->teams = std::move(teams);
    return absl::OkStatus();
  }
  if (key == "uid" || key == "gid") {
    int64_t id = 0;
    // 0 is root: trainers never run as root, so it is refused here already.
    if (!absl::SimpleAtoi(value, &id) || id <= 0 || id >= (int64_t{1} << 32) - 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          key, ": '", value, "' is not a numeric id between 1 and 4294967294 (0 is root)"));
    }
    (key == "uid" ? principal->uid : principal->gid) = id;
    return absl::OkStatus();
  }
  if (key == "workers") {
    if (principal->role != Role::kWorker) {
      return absl::InvalidArgumentError(
          "workers: only a worker token names the workers it may act as");
    }
    std::vector<std::string> names;
    for (absl::string_view pattern : absl::StrSplit(value, ',')) {
      // A name as the USER field allows, with '*' standing for any run of its characters.
      if (!IsValidPrincipalName(absl::StrReplaceAll(pattern, {{"*", "x"}}))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "workers: '", pattern,
            "' is not a worker name or pattern (1 to 64 of [A-Za-z0-9._-], '*' for any run)"));
      }
      names.emplace_back(pattern);
    }
    principal->worker_names = std::move(names);
    return absl::OkStatus();
  }
  if (key == "expires") {
    absl::Time expires;
    std::string error;
    if (!absl::ParseTime(absl::RFC3339_full, value, &expires, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("expires: '", value,
                       "' is not an RFC 3339 time such as 2027-01-31T00:00:00Z (", error, ")"));
    }
    principal->expires = expires;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown option '", key, "' (expected teams, uid, gid, expires or workers)"));
}

// A token's id in a Principal: a hash, so that the token itself is kept in one place only.
uint64_t TokenId(absl::string_view token) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a 64
  for (unsigned char c : token) h = (h ^ c) * 1099511628211ULL;
  return h == 0 ? 1 : h;
}

// UNAUTHENTICATED for a call, or an open stream, whose token's `expires` has passed.
absl::Status Expired(const Principal& principal) {
  return absl::UnauthenticatedError(absl::StrCat(
      "the token of user '", principal.user, "' expired at ",
      absl::FormatTime(absl::RFC3339_sec, principal.expires, absl::UTCTimeZone()),
      " (ask an admin for a new one)"));
}

// The fields of a principal that every line of one user must repeat identically.
bool SameAccount(const Principal& a, const Principal& b) {
  return a.teams == b.teams && a.uid == b.uid && a.gid == b.gid;
}

}  // namespace

bool IsValidPrincipalName(absl::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.' || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Load(const std::string& tokens_file) {
  if (tokens_file.empty()) return Open();
  std::ifstream in(tokens_file);
  if (!in) {
    const int error = errno;
    const std::string message =
        absl::StrCat("--tokens-file ", tokens_file, ": cannot read: ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  std::vector<Entry> entries;
  absl::flat_hash_map<std::string, int> line_of_token;
  absl::flat_hash_map<std::string, std::pair<int, Principal>> account_of_user;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::vector<absl::string_view> fields;
    for (absl::string_view field :
         absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty())) {
      if (absl::StartsWith(field, "#")) break;  // A comment runs to the end of the line.
      fields.push_back(field);
    }
    if (fields.empty()) continue;
    const std::string where = absl::StrCat(tokens_file, ":", number, ": ");
    if (fields.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "expected 'TOKEN USER [ROLE] [KEY=VALUE ...]', found ", fields.size(), " field"));
    }
    if (fields[0].size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(where, "token of user '", fields[1],
                                                     "' is shorter than ", kMinTokenLength,
                                                     " characters"));
    }
    if (!IsValidPrincipalName(fields[1])) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "user name '", fields[1],
                       "' is not valid (1 to 64 of [A-Za-z0-9._-], not starting with '.' or '-')"));
    }
    Entry entry;
    entry.token = std::string(fields[0]);
    entry.principal.token_id = TokenId(entry.token);
    entry.principal.user = std::string(fields[1]);
    size_t next = 2;
    if (next < fields.size() && !absl::StrContains(fields[next], '=')) {
      absl::StatusOr<Role> role = ParseRole(fields[next]);
      if (!role.ok())
        return absl::InvalidArgumentError(absl::StrCat(where, role.status().message()));
      entry.principal.role = *role;
      ++next;
    }
    if (entry.principal.role == Role::kWorker) {
      entry.principal.worker_names = {entry.principal.user};  // Unless `workers=` says otherwise.
    }
    for (; next < fields.size(); ++next) {
      if (!absl::StrContains(fields[next], '=')) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "field ", next + 1, " '", fields[next],
                         "' is neither the role (only the third field may be) nor KEY=VALUE"));
      }
      if (absl::Status s = ApplyOption(fields[next], &entry.principal); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, s.message()));
      }
    }
    if (const auto it = account_of_user.find(entry.principal.user); it != account_of_user.end()) {
      if (!SameAccount(it->second.second, entry.principal)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "user '", entry.principal.user, "' has other teams, uid or gid than on line ",
            it->second.first, " (every line of a user must agree)"));
      }
    } else {
      account_of_user.emplace(entry.principal.user, std::make_pair(number, entry.principal));
    }
    const auto [previous, inserted] = line_of_token.emplace(entry.token, number);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "duplicate token (already on line ", previous->second, ")"));
    }
    entries.push_back(std::move(entry));
  }
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokens-file ", tokens_file, ": read error: ", std::strerror(errno)));
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokens-file ", tokens_file,
                     ": holds no token (leave the flag empty to run without authentication)"));
  }
  return std::unique_ptr<Authenticator>(new Authenticator(false, std::move(entries)));
}

size_t Authenticator::num_tokens() const { return Entries()->size(); }

std::shared_ptr<const std::vector<Authenticator::Entry>> Authenticator::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

absl::Status Authenticator::Reload(const std::string& tokens_file) {
  if (open_) {
    return absl::FailedPreconditionError(
        "the coordinator runs without --tokens-file: restart it with one to check tokens");
  }
  absl::StatusOr<std::unique_ptr<Authenticator>> fresh = Load(tokens_file);
  if (!fresh.ok()) return fresh.status();
  if ((*fresh)->open_) {
    return absl::InvalidArgumentError("--tokens-file: empty path; keeping the tokens in force");
  }
  std::shared_ptr<const std::vector<Entry>> entries = (*fresh)->Entries();
  std::lock_guard<std::mutex> lock(mu_);
  entries_ = std::move(entries);
  return absl::OkStatus();
}

absl::Status Authenticator::StillValid(const Principal& principal, absl::Time now) const {
  if (open_) return absl::OkStatus();
  if (now >= principal.expires) return Expired(principal);
  const std::shared_ptr<const std::vector<Entry>> entries = Entries();
  for (const Entry& entry : *entries) {
    if (entry.principal.token_id == principal.token_id && entry.principal.user == principal.user &&
        entry.principal.role == principal.role) {
      return absl::OkStatus();
    }
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "the token of user '", principal.user, "' was revoked (no longer in the tokens file)"));
}

std::unique_ptr<Authenticator> Authenticator::Open() {
  return std::unique_ptr<Authenticator>(new Authenticator(true, {}));
}

absl::StatusOr<absl::string_view> BearerToken(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) {
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "missing credentials: send metadata 'authorization: Bearer <token>' (deepnetctl "
        "--token/--token-file)");
  }
  const absl::string_view value(it->second.data(), it->second.size());
  if (value.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kBearer.size()), kBearer)) {
    return absl::UnauthenticatedError(
        "malformed authorization metadata: expected 'Bearer <token>'");
  }
  const absl::string_view token = absl::StripAsciiWhitespace(value.substr(kBearer.size()));
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "malformed authorization metadata: expected 'Bearer <token>'");
  }
  return token;
}

absl::StatusOr<Principal> Authenticator::Authenticate(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, absl::Time now) const {
  if (open_) return Principal{"anonymous", Role::kAdmin};
  absl::StatusOr<absl::string_view> token = BearerToken(metadata);
  if (!token.ok()) return token.status();
  // Every entry is compared, with no early exit, so timing does not tell which one matched.
  const std::shared_ptr<const std::vector<Entry>> entries = Entries();
  const Entry* match = nullptr;
  for (const Entry& entry : *entries) {
    if (ConstantTimeEquals(entry.token, *token)) match = &entry;
  }
  if (match == nullptr) return absl::UnauthenticatedError("unknown bearer token");
  if (now >= match->principal.expires) return Expired(match->principal);
  return match->principal;
}

absl::StatusOr<Principal> Authenticator::FindUser(absl::string_view user) const {
  if (open_) return Principal{std::string(user), Role::kUser};
  const std::shared_ptr<const std::vector<Entry>> entries = Entries();
  for (const Entry& entry : *entries) {
    if (entry.principal.user != user) continue;
    Principal account = entry.principal;
    account.expires = absl::InfiniteFuture();
    account.token_id = 0;  // Not a call's: no token authenticated it.
    return account;
  }
  return absl::NotFoundError(absl::StrCat("no token of user '", user, "' in the tokens file"));
}

absl::StatusOr<Principal> Authenticator::Authenticate(const grpc::ServerContext& context) const {
  return Authenticate(context.client_metadata());
}

absl::StatusOr<Principal> Authenticator::Authenticate(
    const grpc::ServerContextBase& context) const {
  return Authenticate(context.client_metadata());
}

absl::Status CheckJobAccess(const Principal& principal, const std::string& owner,
                            const std::string& job_id) {
  if (principal.role == Role::kAdmin || principal.user == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("user '", principal.user, "' may not act on job ",
                                                  job_id, ": it belongs to another user"));
}

absl::Status CheckWorkerAccess(const Principal& principal) {
  if (principal.role == Role::kWorker || principal.role == Role::kAdmin) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("user '", principal.user, "' (role ", RoleName(principal.role),
                   ") may not call the worker or rendezvous services: needs a worker token"));
}

namespace {

// Whether `name` matches `pattern`, in which '*' matches any run of characters (none included).
// Greedy with backtracking to the last '*': O(|pattern| × |name|) at worst.
bool MatchesPattern(absl::string_view pattern, absl::string_view name) {
  size_t p = 0, n = 0;
  size_t star = absl::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

absl::Status MayActAsWorker(const Principal& principal, absl::string_view worker_name) {
  if (principal.role == Role::kAdmin) return absl::OkStatus();
  if (principal.role == Role::kWorker) {
    for (const std::string& pattern : principal.worker_names) {
      if (MatchesPattern(pattern, worker_name)) return absl::OkStatus();
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "the token of '", principal.user, "' (role ", RoleName(principal.role),
      ") may not act as worker '", worker_name,
      "': each worker needs its own token, or one whose workers= option names it"));
}

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kUser:
      return "user";
    case Role::kAdmin:
      return "admin";
    case Role::kWorker:
      return "worker";
  }
  return "unknown";
}

}  // namespace deepnet::coordinator
