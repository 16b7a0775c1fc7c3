#pragma once
// Bearer-token authentication and the access rules of the coordinator's services: a tokens
// file maps tokens to users and roles; a job belongs to its submitter; worker daemons and
// trainers (the Rendezvous service) use worker tokens.

#include <grpcpp/support/string_ref.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerContext;
class ServerContextBase;
}  // namespace grpc

namespace deepnet::coordinator {

enum class Role {
  kUser,    // Submits jobs and acts on its own jobs.
  kAdmin,   // Acts on every job, and may call the worker services.
  kWorker,  // Worker daemons and their trainers: WorkerService and Rendezvous.
};

// Who made a call.
struct Principal {
  std::string user;
  Role role = Role::kUser;
};

// Maps bearer tokens to principals. Immutable after creation, so safe for concurrent use.
class Authenticator {
 public:
  // Tokens file: `TOKEN USER [ROLE]` per line (ROLE user|admin|worker, default user), '#'
  // comments and blank lines ignored. INVALID_ARGUMENT naming file:line for a bad line, a
  // duplicate token or a token shorter than kMinTokenLength characters (the token itself is
  // never put in a message); NOT_FOUND naming the file when it does not exist, INVALID_ARGUMENT
  // when it cannot be read or holds no token. Empty path: open mode (see Open()).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Authenticator>> Load(
      const std::string& tokens_file);
  // No authentication: every call is {"anonymous", kAdmin}.
  static std::unique_ptr<Authenticator> Open();

  static constexpr size_t kMinTokenLength = 16;

  bool open() const { return open_; }
  // Number of tokens loaded (0 in open mode).
  size_t num_tokens() const { return entries_.size(); }

  // The principal of a call, from its "authorization: Bearer <token>" metadata. UNAUTHENTICATED
  // with a message saying what is wrong when it is missing, malformed or unknown (never echoing
  // the token). Compares against every known token in time independent of where they differ.
  [[nodiscard]] absl::StatusOr<Principal> Authenticate(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  // Convenience: the metadata of a synchronous or callback server call.
  [[nodiscard]] absl::StatusOr<Principal> Authenticate(const grpc::ServerContext& context) const;
  [[nodiscard]] absl::StatusOr<Principal> Authenticate(
      const grpc::ServerContextBase& context) const;

 private:
  struct Entry {
    std::string token;
    Principal principal;
  };
  Authenticator(bool open, std::vector<Entry> entries)
      : open_(open), entries_(std::move(entries)) {}

  const bool open_;
  const std::vector<Entry> entries_;
};

// OK when `principal` may act on job `job_id` of user `owner` (the owner itself, or an admin);
// PERMISSION_DENIED naming the user and the job otherwise.
[[nodiscard]] absl::Status CheckJobAccess(const Principal& principal, const std::string& owner,
                                          const std::string& job_id);

// OK for a worker or an admin (WorkerService, Rendezvous); PERMISSION_DENIED naming the user
// otherwise.
[[nodiscard]] absl::Status CheckWorkerAccess(const Principal& principal);

// "user", "admin", "worker" (the names used in the tokens file).
absl::string_view RoleName(Role role);

}  // namespace deepnet::coordinator
