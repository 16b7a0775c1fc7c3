#include "coordinator/auth.h"

#include <grpcpp/server_context.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

// Equal contents, in time that depends on the lengths only, not on where the bytes differ
// (so response times do not reveal a token's prefix).
bool ConstantTimeEquals(absl::string_view known, absl::string_view presented) {
  unsigned char diff = known.size() == presented.size() ? 0 : 1;
  for (size_t i = 0; i < known.size(); ++i) {
    const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= static_cast<unsigned char>(known[i]) ^ p;
  }
  return diff == 0;
}

}  // namespace

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
    if (fields.size() > 3 || fields.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expected 'TOKEN USER [ROLE]', found ", fields.size(), " fields"));
    }
    if (fields[0].size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(where, "token of user '", fields[1],
                                                     "' is shorter than ", kMinTokenLength,
                                                     " characters"));
    }
    Entry entry;
    entry.token = std::string(fields[0]);
    entry.principal.user = std::string(fields[1]);
    if (fields.size() == 3) {
      absl::StatusOr<Role> role = ParseRole(fields[2]);
      if (!role.ok())
        return absl::InvalidArgumentError(absl::StrCat(where, role.status().message()));
      entry.principal.role = *role;
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

std::unique_ptr<Authenticator> Authenticator::Open() {
  return std::unique_ptr<Authenticator>(new Authenticator(true, {}));
}

absl::StatusOr<Principal> Authenticator::Authenticate(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (open_) return Principal{"anonymous", Role::kAdmin};
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
  // Every entry is compared, with no early exit, so timing does not tell which one matched.
  const Entry* match = nullptr;
  for (const Entry& entry : entries_) {
    if (ConstantTimeEquals(entry.token, token)) match = &entry;
  }
  if (match == nullptr) return absl::UnauthenticatedError("unknown bearer token");
  return match->principal;
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
