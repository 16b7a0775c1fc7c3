#include "coordinator/store/sqlite_db.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {
namespace {

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_NOTFOUND:
    case SQLITE_CANTOPEN: return absl::StatusCode::kNotFound;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return absl::StatusCode::kDataLoss;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL: return absl::StatusCode::kUnavailable;
    case SQLITE_FULL: return absl::StatusCode::kResourceExhausted;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return absl::StatusCode::kPermissionDenied;
    case SQLITE_CONSTRAINT: return absl::StatusCode::kAlreadyExists;
    case SQLITE_TOOBIG:
    case SQLITE_RANGE: return absl::StatusCode::kInvalidArgument;
    default: return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  // NOMUTEX: the owner serialises access, so SQLite's own per-connection mutex is redundant.
  const int flags =
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message =
        absl::StrCat("job store ", path, ": cannot open: ",
                     db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close_v2(db);
    return absl::Status(CodeFor(rc), message);
  }
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<SqliteDb>(new SqliteDb(path, db));
}

SqliteDb::~SqliteDb() { sqlite3_close_v2(db_); }

absl::Status SqliteDb::Error(int rc, absl::string_view what) const {
  // sqlite3_errmsg describes the connection's latest failure; fall back to the code's text
  // when the failure came from elsewhere (e.g. a bind).
  const int latest = sqlite3_extended_errcode(db_);
  const char* message = latest == rc ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc), absl::StrCat("job store ", path_, ": ", what, ": ", message,
                                                " (sqlite code ", rc, ")"));
}

absl::Status SqliteDb::Exec(absl::string_view sql, absl::string_view what) {
  const std::string text(sql);
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : Error(rc, what);
}

absl::StatusOr<std::string> SqliteDb::QueryText(absl::string_view sql, absl::string_view what) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, what);
  std::string text;
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const unsigned char* value = sqlite3_column_text(stmt, 0);
    if (value != nullptr) text = reinterpret_cast<const char*>(value);
  }
  absl::Status status = rc == SQLITE_ROW ? absl::OkStatus()
                        : rc == SQLITE_DONE
                            ? absl::InternalError(
                                  absl::StrCat("job store ", path_, ": ", what, ": no result row"))
                            : Error(rc, what);
  sqlite3_finalize(stmt);
  if (!status.ok()) return status;
  return text;
}

absl::StatusOr<std::unique_ptr<SqliteStatement>> SqliteDb::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, absl::StrCat("preparing `", sql, "`"));
  return std::make_unique<SqliteStatement>(*this, stmt, std::string(sql));
}

int64_t SqliteDb::Changes() const { return sqlite3_changes(db_); }

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

void SqliteStatement::BindInt(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
}

void SqliteStatement::BindText(int index, absl::string_view value) {
  // SQLITE_TRANSIENT: SQLite copies the bytes, so `value` need not outlive the call.
  const int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                                     SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
}

void SqliteStatement::BindNull(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
}

absl::StatusOr<bool> SqliteStatement::Step() {
  if (bind_error_ != 0) return db_.Error(bind_error_, absl::StrCat("binding `", sql_, "`"));
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_.Error(rc, absl::StrCat("running `", sql_, "`"));
}

absl::Status SqliteStatement::Run() {
  absl::StatusOr<bool> row = Step();
  return row.ok() ? absl::OkStatus() : row.status();
}

int64_t SqliteStatement::ColumnInt(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

std::string SqliteStatement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

bool SqliteStatement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = 0;
}

absl::StatusOr<std::unique_ptr<SqliteTransaction>> SqliteTransaction::Begin(SqliteDb& db) {
  if (absl::Status s = db.Exec("BEGIN IMMEDIATE", "beginning a transaction"); !s.ok()) return s;
  return std::unique_ptr<SqliteTransaction>(new SqliteTransaction(db));
}

SqliteTransaction::~SqliteTransaction() {
  // SQLite may already have rolled back on its own (some I/O errors do that); and if ROLLBACK
  // fails there is nothing more to do: the transaction ends when the connection closes.
  if (open_ && sqlite3_get_autocommit(db_.handle()) == 0) {
    db_.Exec("ROLLBACK", "rolling back").IgnoreError();
  }
}

absl::Status SqliteTransaction::Commit() {
  absl::Status status = db_.Exec("COMMIT", "committing");
  // After a failed COMMIT the transaction may still be open; the destructor rolls it back.
  if (status.ok()) open_ = false;
  return status;
}

}  // namespace deepnet::coordinator
