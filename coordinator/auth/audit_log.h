#pragma once
// The coordinator's audit log (--audit-log FILE): one JSON object per line for every
// state-changing JobService call (SubmitJob, CancelJob), accepted or refused, appended with one
// write(2) per record. Format: docs/OPERATIONS.md "Audit log".

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace deepnet::coordinator {

struct AuditRecord {
  absl::Time time;
  std::string user;       // empty when the call was not authenticated
  std::string role;       // "user", "admin", "worker"; empty when not authenticated
  std::string action;     // "submit", "cancel"
  std::string job_id;     // empty when no job was created / named
  std::string job_owner;  // the owner of the job acted on, when known
  std::string outcome;    // "ok" or the gRPC status code name ("PERMISSION_DENIED")
  std::string message;    // the status message (shortened); empty for ok
  std::string peer;       // the client's address as gRPC gives it ("ipv4:127.0.0.1:5555")
  // submit only:
  std::string idempotency_key;
  std::string spec_sha256;  // hex SHA-256 of spec.config_yaml
  bool created = false;     // a new job (false: a replayed key or a refusal)
};

// One JSON line (ending in '\n'); time in RFC 3339 UTC with milliseconds; fields that do not
// apply are left out.
std::string AuditJson(const AuditRecord& record);

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

class AuditLog {
 public:
  // Opens (creates, mode 0600) `path` for appending. INVALID_ARGUMENT naming the path when it
  // cannot be opened. `on_failure` (may be null) is called after each record that could not be
  // written (the metric deepnet_audit_write_failures_total).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<AuditLog>> Open(
      const std::string& path, std::function<void()> on_failure = nullptr);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Appends the record. Thread-safe; never throws. On failure logs an error (at most once per
  // failure streak), calls on_failure and returns false; the caller goes on either way.
  bool Write(const AuditRecord& record);
  // Opens the path again (after log rotation moved the file; SIGHUP); keeps the old file on
  // failure.
  [[nodiscard]] absl::Status Reopen();

  const std::string& path() const { return path_; }

 private:
  AuditLog(std::string path, int fd, std::function<void()> on_failure)
      : path_(std::move(path)), on_failure_(std::move(on_failure)), fd_(fd) {}

  const std::string path_;
  const std::function<void()> on_failure_;
  absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace deepnet::coordinator
