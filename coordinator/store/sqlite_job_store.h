#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/job_store.h"
#include "coordinator/store/sqlite_db.h"

namespace deepnet::coordinator {

class JobIdMark;

struct JobStoreOptions {
  // The SQLite database file; its directory must exist. Keep it on a local filesystem: WAL
  // mode needs shared memory between connections, which network filesystems do not provide.
  std::string path;
  // Create the file and the schema if the file is missing; if false, a missing file is
  // NOT_FOUND.
  bool create_if_missing = true;
  // Milliseconds a call waits for another connection's write lock before UNAVAILABLE;
  // 0 fails at once.
  int busy_timeout_ms = 5000;
  // Source of timestamps in unix milliseconds; empty means the system clock.
  std::function<int64_t()> now_ms;
};

// JobStore in one SQLite file. Durability: WAL journal with synchronous=FULL, so every
// mutating call returns only after its transaction is fsync'ed to the write-ahead log; a
// process crash or power loss after the return cannot lose it. Multi-row changes (a job and
// its event) are one transaction. Safe for concurrent use: one connection whose prepared
// statements are used under one mutex; other processes may open the same file (writers are
// serialised by SQLite's lock, waiting up to busy_timeout_ms).
class SqliteJobStore final : public JobStore {
 public:
  // The schema version this code reads and writes (table schema_version).
  static constexpr int kSchemaVersion = 1;

  // Opens (or creates) the store at options.path and checks it: a file that is not a SQLite
  // database is DATA_LOSS, a database that is not a job store or has another schema version
  // is FAILED_PRECONDITION; both name the path, and the file is left as it was.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(
      const JobStoreOptions& options);
  ~SqliteJobStore() override;

  // JobStore:
  absl::StatusOr<CreateResult> Create(const JobRecord& record) override;
  absl::StatusOr<JobRecord> Get(absl::string_view id) override;
  absl::StatusOr<JobPage> List(const JobFilter& filter, int page_size,
                               absl::string_view page_token) override;
  absl::StatusOr<JobRecord> Transition(absl::string_view id, const StateChange& change) override;
  absl::StatusOr<JobRecord> SetReason(absl::string_view id, JobState expected,
                                      absl::string_view reason) override;
  absl::StatusOr<JobRecord> UpdateProgress(absl::string_view id,
                                           const JobProgress& progress) override;
  absl::StatusOr<JobEvent> AppendEvent(absl::string_view job_id, absl::string_view kind,
                                       absl::string_view message) override;
  absl::StatusOr<std::vector<JobEvent>> ListEvents(absl::string_view job_id,
                                                   int64_t after_seq) override;
  absl::Status DeleteFinished(absl::string_view id) override;

 private:
  struct Statements;
  // A stored job and its creation number (the jobs table's key).
  using Row = std::pair<int64_t, JobRecord>;

  SqliteJobStore(std::unique_ptr<SqliteDb> db, std::unique_ptr<Statements> statements,
                 std::function<int64_t()> now_ms, std::unique_ptr<JobIdMark> mark);

  absl::StatusOr<Row> ReadRow(SqliteStatement& statement) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Row> FindById(absl::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the mutable fields of `record`, compare-and-set on `old_version`.
  absl::Status WriteRecord(const JobRecord& record, int64_t old_version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends `event` with the job's next seq (stored back into event->seq).
  absl::Status InsertEvent(int64_t number, JobEvent* event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Read-modify-write of one job in one transaction; `apply` edits the record and may fill
  // an event to append (kind left empty: none).
  absl::StatusOr<JobRecord> Mutate(
      absl::string_view id, const std::function<absl::Status(JobRecord*, JobEvent*)>& apply);

  absl::Mutex mu_;
  // Declared before the statements so that it is closed after they are finalised.
  const std::unique_ptr<SqliteDb> db_ ABSL_GUARDED_BY(mu_);
  const std::unique_ptr<Statements> statements_ ABSL_GUARDED_BY(mu_);
  const std::function<int64_t()> now_ms_;
  // The newest job number ever handed out, also beyond this database (a restored backup).
  const std::unique_ptr<JobIdMark> mark_ ABSL_GUARDED_BY(mu_);
};

}  // namespace deepnet::coordinator
