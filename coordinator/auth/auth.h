#pragma once
// Bearer-token authentication and the access rules of the coordinator's services: a tokens
// file maps tokens to users and roles; a job belongs to its submitter; worker daemons and
// trainers (the Rendezvous service) use worker tokens.

#include <grpcpp/support/string_ref.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace grpc {
class ServerContext;
class ServerContextBase;
}  // namespace grpc

namespace deepnet::coordinator {

enum class Role {
  kUser,    // Submits jobs and acts on its own jobs.
  kAdmin,   // Acts on every job, and may call the worker services.
  kWorker,  // Worker daemons: WorkerService, each as the worker names its token allows.
};

// Who made a call.
struct Principal {
  Principal() = default;
  Principal(std::string user_name, Role user_role) : user(std::move(user_name)), role(user_role) {}

  std::string user;
  Role role = Role::kUser;
  // Teams the user belongs to (tokens file `teams=a,b`): names of folders under the storage
  // root's teams/ that the user may use. Sorted, without duplicates.
  std::vector<std::string> teams;
  // The account trainers of this user's jobs run as (tokens file `uid=N`, `gid=N`); -1: not
  // given, the worker daemon's --trainer-user applies.
  int64_t uid = -1;
  int64_t gid = -1;
  // When the token that authenticated the call stops being accepted (tokens file
  // `expires=<RFC 3339>`); InfiniteFuture: never.
  absl::Time expires = absl::InfiniteFuture();
  // Which token authenticated the call (a hash of it; 0 in open mode and for FindUser), so that
  // a stream opened with it can be ended once the token is revoked (StillValid).
  uint64_t token_id = 0;
  // For a worker token: the worker names it may register and report as (tokens file
  // `workers=PATTERN,...`, '*' matching any run of characters); without that option, only the
  // name in the USER field. See MayActAsWorker.
  std::vector<std::string> worker_names;
};

// The token of "authorization: Bearer <token>" metadata; UNAUTHENTICATED saying what is wrong
// when it is missing or malformed (never echoing what was sent).
[[nodiscard]] absl::StatusOr<absl::string_view> BearerToken(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata);

// True when `name` may name a user or a team: 1 to 64 characters from [A-Za-z0-9._-], not
// starting with '.' or '-' (user and team names become folder names under the storage root).
bool IsValidPrincipalName(absl::string_view name);

// Maps bearer tokens to principals. Immutable after creation, so safe for concurrent use.
class Authenticator {
 public:
  // Tokens file: `TOKEN USER [ROLE] [KEY=VALUE ...]` per line (ROLE user|admin|worker, default
  // user; KEY teams, uid, gid, expires or, for a worker token, workers; see Principal), '#' comments and blank lines ignored.
  // Lines of one user must agree on teams, uid and gid. INVALID_ARGUMENT naming file:line for a bad
  // line, a duplicate token or a token shorter than kMinTokenLength characters (the token itself is
  // never put in a message); NOT_FOUND naming the file when it does not exist, INVALID_ARGUMENT
  // when it cannot be read or holds no token. Empty path: open mode (see Open()).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Authenticator>> Load(
      const std::string& tokens_file);
  // No authentication: every call is {"anonymous", kAdmin}.
  static std::unique_ptr<Authenticator> Open();

  static constexpr size_t kMinTokenLength = 16;

  bool open() const { return open_; }
  // Number of tokens loaded (0 in open mode).
  size_t num_tokens() const;

  // Reads `tokens_file` again (SIGHUP) and, when it is good, puts its tokens in force at once:
  // calls with a removed token are UNAUTHENTICATED from then on and its open streams end
  // (StillValid). A bad file changes nothing: the error says why, as Load's would. An open
  // authenticator cannot start checking tokens (FAILED_PRECONDITION).
  [[nodiscard]] absl::Status Reload(const std::string& tokens_file);

  // Whether the token that authenticated `principal` is still accepted at `now`: in the tokens
  // file (not revoked by a Reload) and not expired. UNAUTHENTICATED saying which, else OK.
  [[nodiscard]] absl::Status StillValid(const Principal& principal,
                                        absl::Time now = absl::Now()) const;
  // The account of `user` as the tokens file states it (teams, uid, gid; `expires` is per token
  // and left infinite), for acting on a user's behalf outside a call of theirs (placing a job
  // after a restart). NOT_FOUND when no token names the user; in open mode every user is a
  // plain user with no teams.
  [[nodiscard]] absl::StatusOr<Principal> FindUser(absl::string_view user) const;

  // The principal of a call, from its "authorization: Bearer <token>" metadata. UNAUTHENTICATED
  // with a message saying what is wrong when it is missing, malformed or unknown (never echoing
  // the token) or when the token has expired at `now`. Compares against every known token in
  // time independent of where they differ.
  [[nodiscard]] absl::StatusOr<Principal> Authenticate(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
      absl::Time now = absl::Now()) const;
  // Convenience: the metadata of a synchronous or callback server call.
  [[nodiscard]] absl::StatusOr<Principal> Authenticate(const grpc::ServerContext& context) const;
  [[nodiscard]] absl::StatusOr<Principal> Authenticate(
      const grpc::ServerContextBase& context) const;

 private:
  struct Entry {
    std::string token;
    Principal principal;  // principal.token_id: the token's id, computed once at load.
  };
  Authenticator(bool open, std::vector<Entry> entries)
      : open_(open), entries_(std::make_shared<const std::vector<Entry>>(std::move(entries))) {}
  // The tokens in force (a Reload swaps the whole table; calls under way keep theirs).
  std::shared_ptr<const std::vector<Entry>> Entries() const;

  const bool open_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<Entry>> entries_;  // Guarded by mu_.
};

// OK when `principal` may act on job `job_id` of user `owner` (the owner itself, or an admin);
// PERMISSION_DENIED naming the user and the job otherwise.
// Asks `check` (an Authenticator::StillValid of an open stream's or session's caller) at most
// once per `every` and remembers the last OK: what long-lived calls run on each message, so that
// a revoked or expired token ends them without reading the token table at every message.
class TokenRecheck {
 public:
  explicit TokenRecheck(std::function<absl::Status()> check,
                        absl::Duration every = absl::Seconds(1))
      : check_(std::move(check)), every_(every) {}
  // OK, or the check's error once the token is no longer accepted. Not thread-safe.
  [[nodiscard]] absl::Status Check(absl::Time now = absl::Now()) {
    if (!check_ || now - checked_ < every_) return absl::OkStatus();
    absl::Status status = check_();
    if (status.ok()) checked_ = now;
    return status;
  }

 private:
  std::function<absl::Status()> check_;
  absl::Duration every_;
  absl::Time checked_ = absl::InfinitePast();
};

[[nodiscard]] absl::Status CheckJobAccess(const Principal& principal, const std::string& owner,
                                          const std::string& job_id);

// OK for a worker or an admin (WorkerService); PERMISSION_DENIED naming the user otherwise.
[[nodiscard]] absl::Status CheckWorkerAccess(const Principal& principal);

// OK when `principal` may register, attach and report as the worker named `worker_name`: an
// admin, or a worker token whose worker_names match it; PERMISSION_DENIED naming both otherwise.
// One worker's token cannot act as another worker.
[[nodiscard]] absl::Status MayActAsWorker(const Principal& principal,
                                          absl::string_view worker_name);

// "user", "admin", "worker" (the names used in the tokens file).
absl::string_view RoleName(Role role);

}  // namespace deepnet::coordinator
