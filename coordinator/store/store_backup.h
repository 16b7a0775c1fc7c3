#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace deepnet::coordinator {

// Copies the SQLite job store at `db_path` to `to` with SQLite's online backup API: a consistent
// snapshot (committed WAL frames included) taken while a coordinator may be writing the store,
// which is not blocked. The copy is one self-contained file (rollback journal mode; a coordinator
// started on it switches it back to WAL), written as `to`.tmp-PID, checked (PRAGMA
// integrity_check, a `jobs` table) and renamed onto `to`. Returns the number of jobs in it.
// `deepnet-coordinator --db DB --backup-to FILE` (docs/OPERATIONS.md, "Runbook").
[[nodiscard]] absl::StatusOr<int64_t> BackupJobStore(const std::string& db_path,
                                                     const std::string& to);

}  // namespace deepnet::coordinator
