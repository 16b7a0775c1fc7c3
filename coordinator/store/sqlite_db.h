#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// SQLite's handle types, declared here so that users of these wrappers need not see sqlite3.h.
struct sqlite3;
struct sqlite3_stmt;

namespace deepnet::coordinator {

class SqliteStatement;

// One SQLite connection (RAII: closed in the destructor). Errors come back as absl::Status
// naming the database path, what was being done and SQLite's message. Not thread-safe: the
// owner serialises every use of the connection and of its statements.
class SqliteDb {
 public:
  // Opens `path` read-write, creating the file if `create` is set; NOT_FOUND if it is missing
  // and `create` is not set. Nothing is read or written until the first statement.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path,
                                                                      bool create);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs statements that return no rows (schema, PRAGMAs that set, BEGIN/COMMIT).
  [[nodiscard]] absl::Status Exec(absl::string_view sql, absl::string_view what);
  // Runs a statement that returns one text value (e.g. "PRAGMA journal_mode=WAL").
  [[nodiscard]] absl::StatusOr<std::string> QueryText(absl::string_view sql,
                                                      absl::string_view what);
  [[nodiscard]] absl::StatusOr<std::unique_ptr<SqliteStatement>> Prepare(absl::string_view sql);

  // Rows changed by the latest INSERT/UPDATE/DELETE.
  int64_t Changes() const;
  // The status for SQLite result code `rc` while doing `what`.
  absl::Status Error(int rc, absl::string_view what) const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  SqliteDb(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

  const std::string path_;
  sqlite3* const db_;
};

// A prepared statement (finalised in the destructor). Bind with 1-based indices, Step() for
// each row, read columns with 0-based indices, then Reset() (or use ScopedReset) so the
// statement releases its read snapshot. A failed Bind is reported by the next Step().
class SqliteStatement {
 public:
  SqliteStatement(const SqliteDb& db, sqlite3_stmt* stmt, std::string sql)
      : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  void BindInt(int index, int64_t value);
  void BindText(int index, absl::string_view value);
  void BindNull(int index);
  // True when a row is ready, false when the statement is done.
  [[nodiscard]] absl::StatusOr<bool> Step();
  // Step() for statements that return no rows.
  [[nodiscard]] absl::Status Run();
  int64_t ColumnInt(int column) const;
  std::string ColumnText(int column) const;
  bool ColumnIsNull(int column) const;
  // Ends the current execution and clears the bindings.
  void Reset();

 private:
  const SqliteDb& db_;
  sqlite3_stmt* const stmt_;
  const std::string sql_;
  int bind_error_ = 0;  // First failed bind's result code, 0 if none.
};

// Resets a statement when it leaves scope, on every return path.
class ScopedReset {
 public:
  explicit ScopedReset(SqliteStatement& statement) : statement_(statement) {}
  ~ScopedReset() { statement_.Reset(); }
  ScopedReset(const ScopedReset&) = delete;
  ScopedReset& operator=(const ScopedReset&) = delete;

 private:
  SqliteStatement& statement_;
};

// BEGIN IMMEDIATE ... COMMIT; rolled back in the destructor unless Commit() succeeded.
// IMMEDIATE takes the write lock up front, so a read-then-write inside the transaction cannot
// be interleaved with another connection's write.
class SqliteTransaction {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SqliteTransaction>> Begin(SqliteDb& db);
  ~SqliteTransaction();
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;

  [[nodiscard]] absl::Status Commit();

 private:
  explicit SqliteTransaction(SqliteDb& db) : db_(db) {}

  SqliteDb& db_;
  bool open_ = true;
};

}  // namespace deepnet::coordinator
