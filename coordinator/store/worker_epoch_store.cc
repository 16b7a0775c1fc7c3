#include "coordinator/store/worker_epoch_store.h"

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {

absl::StatusOr<std::unique_ptr<WorkerEpochStore>> WorkerEpochStore::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db =
      SqliteDb::Open(path.empty() ? std::string(":memory:") : path, /*create=*/true);
  if (!db.ok()) return db.status();
  // The job store's connection may hold the write lock for a moment: wait for it.
  if (absl::Status s = (*db)->Exec("PRAGMA busy_timeout=10000", "setting busy_timeout"); !s.ok()) {
    return s;
  }
  if (!path.empty()) {
    absl::StatusOr<std::string> mode = (*db)->QueryText("PRAGMA journal_mode=WAL", "enabling WAL");
    if (!mode.ok()) return mode.status();
    if (absl::Status s = (*db)->Exec("PRAGMA synchronous=FULL", "setting synchronous"); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = (*db)->Exec(
          "CREATE TABLE IF NOT EXISTS worker_epochs (name TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
          "creating table worker_epochs");
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<WorkerEpochStore>(new WorkerEpochStore(std::move(*db)));
}

absl::StatusOr<int64_t> WorkerEpochStore::Next(const std::string& worker_name) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::unique_ptr<SqliteStatement>> upsert = db_->Prepare(
      "INSERT INTO worker_epochs (name, epoch) VALUES (?1, 1) "
      "ON CONFLICT(name) DO UPDATE SET epoch = epoch + 1 RETURNING epoch");
  if (!upsert.ok()) return upsert.status();
  SqliteStatement& statement = **upsert;
  statement.BindText(1, worker_name);
  absl::StatusOr<bool> row = statement.Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return absl::InternalError(absl::StrCat("worker_epochs: no epoch returned for ", worker_name));
  }
  const int64_t epoch = statement.ColumnInt(0);
  // The write commits when the statement runs to completion; report a failed commit.
  absl::StatusOr<bool> more = statement.Step();
  statement.Reset();
  if (!more.ok()) return more.status();
  return epoch;
}

}  // namespace deepnet::coordinator
