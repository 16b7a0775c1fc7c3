#include "coordinator/auth/audit_log.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {
namespace {

constexpr size_t kMaxMessage = 300;

int OpenForAppend(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

// Status messages may hold anything a client sent: keep them short and valid UTF-8 for JSON.
std::string Printable(absl::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxMessage)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : u == '\n' ? ' ' : '?');
  }
  if (text.size() > kMaxMessage) out += "...";
  return out;
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

std::string AuditJson(const AuditRecord& r) {
  nlohmann::ordered_json j;
  j["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", r.time, absl::UTCTimeZone());
  j["user"] = Printable(r.user);
  j["role"] = r.role;
  j["action"] = r.action;
  if (!r.job_id.empty()) j["job_id"] = Printable(r.job_id);
  if (!r.job_owner.empty()) j["job_owner"] = Printable(r.job_owner);
  j["outcome"] = r.outcome;
  if (!r.message.empty()) j["message"] = Printable(r.message);
  if (r.action == "submit") {
    j["idempotency_key"] = Printable(r.idempotency_key);
    j["spec_sha256"] = r.spec_sha256;
    j["created"] = r.created;
  }
  if (!r.peer.empty()) j["peer"] = Printable(r.peer);
  return j.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace) + "\n";
}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path,
                                                         std::function<void()> on_failure) {
  if (path.empty()) return absl::InvalidArgumentError("--audit-log: empty path");
  const int fd = OpenForAppend(path);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--audit-log ", path, ": cannot open for appending: ", std::strerror(errno)));
  }
  return std::unique_ptr<AuditLog>(new AuditLog(path, fd, std::move(on_failure)));
}

AuditLog::~AuditLog() {
  absl::MutexLock lock(&mu_);
  if (fd_ >= 0) ::close(fd_);
}

bool AuditLog::Write(const AuditRecord& record) {
  std::string line;
  try {
    line = AuditJson(record);
  } catch (const std::exception& e) {  // nlohmann throws on what it cannot encode
    line.clear();
    spdlog::error("audit log: cannot encode a {} record of user {}: {}", record.action, record.user,
                  e.what());
  }
  bool ok = !line.empty();
  {
    absl::MutexLock lock(&mu_);
    size_t done = 0;
    while (ok && done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!failing_) {
          spdlog::error(
              "audit log {}: write failed: {} (further failures are counted in "
              "deepnet_audit_write_failures_total)",
              path_, n < 0 ? std::strerror(errno) : "nothing written");
        }
        ok = false;
        break;
      }
      done += static_cast<size_t>(n);
    }
    failing_ = !ok;
  }
  if (!ok && on_failure_) on_failure_();
  return ok;
}

absl::Status AuditLog::Reopen() {
  const int fd = OpenForAppend(path_);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("audit log ", path_, ": cannot reopen: ", std::strerror(errno)));
  }
  absl::MutexLock lock(&mu_);
  ::close(fd_);
  fd_ = fd;
  return absl::OkStatus();
}

}  // namespace deepnet::coordinator
