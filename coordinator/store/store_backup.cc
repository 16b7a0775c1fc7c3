#include "coordinator/store/store_backup.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/store/sqlite_db.h"
#include "storage/atomic_file.h"

namespace deepnet::coordinator {

namespace {

absl::StatusOr<int64_t> CopyAndCheck(const SqliteDb& source, SqliteDb& copy) {
  // A coordinator writing at the same moment holds the write lock only briefly.
  if (absl::Status s = copy.Exec("PRAGMA busy_timeout = 10000", "setting busy_timeout"); !s.ok()) {
    return s;
  }
  sqlite3_backup* backup = sqlite3_backup_init(copy.handle(), "main", source.handle(), "main");
  if (backup == nullptr) {
    return copy.Error(sqlite3_errcode(copy.handle()), "starting the backup");
  }
  int rc = SQLITE_OK;
  do {
    rc = sqlite3_backup_step(backup, -1);  // all pages in one read transaction
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) sqlite3_sleep(50);
  } while (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) return source.Error(rc, "copying the job store");
  absl::StatusOr<std::string> mode =
      copy.QueryText("PRAGMA journal_mode = DELETE", "making the copy one self-contained file");
  if (!mode.ok()) return mode.status();
  absl::StatusOr<std::string> integrity =
      copy.QueryText("PRAGMA integrity_check", "checking the copy");
  if (!integrity.ok()) return integrity.status();
  if (*integrity != "ok") {
    return absl::DataLossError(absl::StrCat("job store ", source.path(),
                                            ": the copy fails integrity_check: ", *integrity));
  }
  absl::StatusOr<std::string> jobs =
      copy.QueryText("SELECT count(*) FROM jobs", "counting the copy's jobs");
  if (!jobs.ok()) return jobs.status();
  int64_t n = 0;
  if (!absl::SimpleAtoi(*jobs, &n)) n = -1;
  return n;
}

}  // namespace

absl::StatusOr<int64_t> BackupJobStore(const std::string& db_path, const std::string& to) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> source = SqliteDb::Open(db_path, /*create=*/false);
  if (!source.ok()) return source.status();
  if (absl::Status s = (*source)->Exec("PRAGMA busy_timeout = 10000", "setting busy_timeout");
      !s.ok()) {
    return s;
  }
  const std::string tmp = absl::StrCat(to, ".tmp-", static_cast<int64_t>(::getpid()));
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  absl::StatusOr<int64_t> jobs;
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> copy = SqliteDb::Open(tmp, /*create=*/true);
    if (!copy.ok()) return copy.status();
    jobs = CopyAndCheck(**source, **copy);
  }  // the copy is closed (and synced: journal_mode DELETE, synchronous FULL by default)
  if (!jobs.ok()) {
    std::filesystem::remove(tmp, ec);
    return jobs.status();
  }
  if (std::rename(tmp.c_str(), to.c_str()) != 0) {
    const std::error_code err(errno, std::generic_category());
    std::filesystem::remove(tmp, ec);
    return absl::InternalError(
        absl::StrCat("job store backup: cannot rename ", tmp, " to ", to, ": ", err.message()));
  }
  // The rename itself must reach the disk before "backed up" is printed.
  if (absl::Status synced = storage::FsyncParentFolder(to); !synced.ok()) return synced;
  return jobs;
}

}  // namespace deepnet::coordinator
