#include "coordinator/store/sqlite_job_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "coordinator/store/job_id_mark.h"
#include "storage/atomic_file.h"

namespace deepnet::coordinator {
namespace {

// Version 1. `number` is the creation order (ids are "j-" + number); states and causes are
// stored by name so the file reads well in the sqlite3 shell.
constexpr absl::string_view kSchema = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
  number INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  owner TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  spec_yaml TEXT NOT NULL,
  name TEXT NOT NULL,
  priority INTEGER NOT NULL,
  pipeline_stages INTEGER NOT NULL,
  data_parallel INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('QUEUED', 'PLACING', 'STARTING', 'RUNNING',
                                       'RECOVERING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  state_reason TEXT NOT NULL,
  last_recovery_cause TEXT,
  restarts INTEGER NOT NULL,
  max_restarts INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  last_step INTEGER NOT NULL,
  checkpoint_dir TEXT NOT NULL,
  version INTEGER NOT NULL
);
CREATE UNIQUE INDEX jobs_by_idempotency_key ON jobs (owner, idempotency_key)
  WHERE idempotency_key <> '';
CREATE TABLE job_events (
  job_number INTEGER NOT NULL REFERENCES jobs (number),
  seq INTEGER NOT NULL,
  time_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL,
  PRIMARY KEY (job_number, seq)
) WITHOUT ROWID;
)sql";

#define DEEPNET_JOB_COLUMNS                                                                   \
  "number, id, owner, idempotency_key, spec_yaml, name, priority, pipeline_stages, "          \
  "data_parallel, state, state_reason, last_recovery_cause, restarts, max_restarts, attempt, " \
  "created_ms, updated_ms, last_step, checkpoint_dir, version"

// Columns written by an update, in bind order ?2..?10; ?1 is the id, ?11 the old version.
constexpr absl::string_view kUpdateJob =
    "UPDATE jobs SET state = ?2, state_reason = ?3, last_recovery_cause = ?4, restarts = ?5, "
    "attempt = ?6, updated_ms = ?7, last_step = ?8, checkpoint_dir = ?9, version = ?10 "
    "WHERE id = ?1 AND version = ?11";

// fsync()s the folder holding `path` so that a newly created database file's name is durable
// too (SQLite syncs the directory for its WAL file, not for the main file).
absl::Status SyncParentDirectory(const std::string& path) {
  const absl::Status status = storage::FsyncParentFolder(path);
  if (status.ok()) return status;
  return absl::UnavailableError(absl::StrCat("job store ", path, ": ", status.message()));
}

// Creates the schema in an empty database, or checks the version of an existing one.
absl::Status PrepareSchema(SqliteDb& db) {
  absl::StatusOr<std::unique_ptr<SqliteTransaction>> txn = SqliteTransaction::Begin(db);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<std::string> tables = db.QueryText(
      "SELECT count(*) || ',' || (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
      "name = 'schema_version') FROM sqlite_master WHERE type = 'table'",
      "reading the schema");
  if (!tables.ok()) return tables.status();
  if (*tables == "0,0") {
    if (absl::Status s = db.Exec(kSchema, "creating the schema"); !s.ok()) return s;
    if (absl::Status s = db.Exec(absl::StrCat("INSERT INTO schema_version VALUES (",
                                              SqliteJobStore::kSchemaVersion, ")"),
                                 "writing the schema version");
        !s.ok()) {
      return s;
    }
    return (*txn)->Commit();
  }
  if (absl::EndsWith(*tables, ",0")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job store ", db.path(), ": the file is a SQLite database but not a DeepNet job store "
        "(no schema_version table); refusing to use it"));
  }
  absl::StatusOr<std::string> version =
      db.QueryText("SELECT group_concat(version) FROM schema_version", "reading the version");
  if (!version.ok()) return version.status();
  if (*version != absl::StrCat(SqliteJobStore::kSchemaVersion)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job store ", db.path(), ": schema version '", *version,
                     "', this coordinator reads version ", SqliteJobStore::kSchemaVersion));
  }
  return absl::OkStatus();  // Read-only transaction: rolled back, nothing to keep.
}

}  // namespace

struct SqliteJobStore::Statements {
  std::unique_ptr<SqliteStatement> insert_job, max_number, select_by_id, select_by_key, list,
      update_job, insert_event, max_event_seq, list_events, delete_events, delete_job;
};

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(
    const JobStoreOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("job store path is empty");
  if (options.busy_timeout_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat("job store ", options.path,
                                                   ": busy_timeout_ms must be >= 0, got ",
                                                   options.busy_timeout_ms));
  }
  struct stat info;
  const bool existed = ::stat(options.path.c_str(), &info) == 0;
  if (!existed && !options.create_if_missing) {
    return absl::NotFoundError(absl::StrCat("job store ", options.path,
                                            ": no such file (create_if_missing is off)"));
  }
  absl::StatusOr<std::unique_ptr<SqliteDb>> db =
      SqliteDb::Open(options.path, options.create_if_missing);
  if (!db.ok()) return db.status();
  SqliteDb& d = **db;
  if (absl::Status s = d.Exec(absl::StrCat("PRAGMA busy_timeout = ", options.busy_timeout_ms),
                              "setting busy_timeout");
      !s.ok()) {
    return s;
  }
  // The first statement that reads the file: a non-database file fails here (NOTADB), before
  // anything could be written to it.
  absl::StatusOr<std::string> mode = d.QueryText("PRAGMA journal_mode = WAL", "enabling WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("job store ", options.path, ": journal_mode is '", *mode,
                     "', WAL could not be enabled (is the file on a network filesystem?)"));
  }
  // FULL: every commit fsyncs the WAL, so an acknowledged write survives power loss.
  // (NORMAL in WAL mode only survives a process crash.)
  for (const char* pragma : {"PRAGMA synchronous = FULL", "PRAGMA foreign_keys = ON"}) {
    if (absl::Status s = d.Exec(pragma, pragma); !s.ok()) return s;
  }
  absl::StatusOr<std::string> check = d.QueryText("PRAGMA quick_check", "checking integrity");
  if (!check.ok()) return check.status();
  if (*check != "ok") {
    return absl::DataLossError(absl::StrCat("job store ", options.path,
                                            ": integrity check failed: ",
                                            absl::StrReplaceAll(*check, {{"\n", "; "}})));
  }
  if (absl::Status s = PrepareSchema(d); !s.ok()) return s;
  if (!existed) {
    if (absl::Status s = SyncParentDirectory(options.path); !s.ok()) return s;
  }

  auto statements = std::make_unique<Statements>();
  const std::pair<std::unique_ptr<SqliteStatement>*, std::string> sql[] = {
      {&statements->insert_job,
       "INSERT INTO jobs (" DEEPNET_JOB_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
       "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"},
      {&statements->max_number, "SELECT coalesce(max(number), 0) FROM jobs"},
      {&statements->select_by_id, "SELECT " DEEPNET_JOB_COLUMNS " FROM jobs WHERE id = ?1"},
      {&statements->select_by_key,
       "SELECT " DEEPNET_JOB_COLUMNS " FROM jobs WHERE owner = ?1 AND idempotency_key = ?2"},
      // ?3 is ",STATE,STATE," (empty: any state); the scan follows the primary key, so a page
      // costs page_size matches plus the rows skipped by the filter.
      // ?5: 0 leaves spec_yaml out (JobFilter::with_spec).
      {&statements->list,
       absl::StrCat(
           "SELECT ",
           absl::StrReplaceAll(DEEPNET_JOB_COLUMNS,
                               {{"spec_yaml", "CASE WHEN ?5 THEN spec_yaml ELSE '' END"}}),
           " FROM jobs WHERE number > ?1 AND (?2 = '' OR owner = ?2) "
           "AND (?3 = '' OR instr(?3, ',' || state || ',') > 0) ORDER BY number LIMIT ?4")},
      {&statements->update_job, std::string(kUpdateJob)},
      {&statements->insert_event,
       "INSERT INTO job_events (job_number, seq, time_ms, kind, message) "
       "VALUES (?1, ?2, ?3, ?4, ?5)"},
      {&statements->max_event_seq,
       "SELECT coalesce(max(seq), 0) FROM job_events WHERE job_number = ?1"},
      {&statements->delete_events, "DELETE FROM job_events WHERE job_number = ?1"},
      {&statements->delete_job, "DELETE FROM jobs WHERE number = ?1"},
      {&statements->list_events,
       "SELECT seq, time_ms, kind, message FROM job_events WHERE job_number = ?1 AND seq > ?2 "
       "ORDER BY seq"},
  };
  for (const auto& [slot, text] : sql) {
    absl::StatusOr<std::unique_ptr<SqliteStatement>> statement = d.Prepare(text);
    if (!statement.ok()) return statement.status();
    *slot = std::move(*statement);
  }
  absl::StatusOr<std::unique_ptr<JobIdMark>> mark = JobIdMark::Open(options.path + ".last-job");
  if (!mark.ok()) return mark.status();
  return std::unique_ptr<SqliteJobStore>(new SqliteJobStore(
      std::move(*db), std::move(statements),
      options.now_ms ? options.now_ms : std::function<int64_t()>(SystemNowMs), *std::move(mark)));
}

SqliteJobStore::SqliteJobStore(std::unique_ptr<SqliteDb> db,
                               std::unique_ptr<Statements> statements,
                               std::function<int64_t()> now_ms,
                               std::unique_ptr<JobIdMark> mark)
    : db_(std::move(db)),
      statements_(std::move(statements)),
      now_ms_(std::move(now_ms)),
      mark_(std::move(mark)) {}

SqliteJobStore::~SqliteJobStore() = default;

absl::StatusOr<SqliteJobStore::Row> SqliteJobStore::ReadRow(SqliteStatement& s) {
  JobRecord r;
  r.id = s.ColumnText(1);
  r.owner = s.ColumnText(2);
  r.idempotency_key = s.ColumnText(3);
  r.spec_yaml = s.ColumnText(4);
  r.name = s.ColumnText(5);
  r.priority = static_cast<int32_t>(s.ColumnInt(6));
  r.pipeline_stages = static_cast<int32_t>(s.ColumnInt(7));
  r.data_parallel = static_cast<int32_t>(s.ColumnInt(8));
  absl::StatusOr<JobState> state = ParseJobState(s.ColumnText(9));
  if (!state.ok()) {
    return absl::DataLossError(absl::StrCat("job store ", db_->path(), ": job ", r.id, ": ",
                                            state.status().message()));
  }
  r.state = *state;
  r.state_reason = s.ColumnText(10);
  if (!s.ColumnIsNull(11)) {
    absl::StatusOr<RecoveryCause> cause = ParseRecoveryCause(s.ColumnText(11));
    if (!cause.ok()) {
      return absl::DataLossError(absl::StrCat("job store ", db_->path(), ": job ", r.id, ": ",
                                              cause.status().message()));
    }
    r.last_recovery_cause = *cause;
  }
  r.restarts = static_cast<int32_t>(s.ColumnInt(12));
  r.max_restarts = static_cast<int32_t>(s.ColumnInt(13));
  r.attempt = static_cast<int32_t>(s.ColumnInt(14));
  r.created_ms = s.ColumnInt(15);
  r.updated_ms = s.ColumnInt(16);
  r.last_step = s.ColumnInt(17);
  r.checkpoint_dir = s.ColumnText(18);
  r.version = s.ColumnInt(19);
  return Row(s.ColumnInt(0), std::move(r));
}

absl::StatusOr<SqliteJobStore::Row> SqliteJobStore::FindById(absl::string_view id) {
  SqliteStatement& s = *statements_->select_by_id;
  ScopedReset reset(s);
  s.BindText(1, id);
  absl::StatusOr<bool> row = s.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  return ReadRow(s);
}

absl::Status SqliteJobStore::WriteRecord(const JobRecord& r, int64_t old_version) {
  SqliteStatement& s = *statements_->update_job;
  ScopedReset reset(s);
  s.BindText(1, r.id);
  s.BindText(2, ToString(r.state));
  s.BindText(3, r.state_reason);
  if (r.last_recovery_cause.has_value()) {
    s.BindText(4, ToString(*r.last_recovery_cause));
  } else {
    s.BindNull(4);
  }
  s.BindInt(5, r.restarts);
  s.BindInt(6, r.attempt);
  s.BindInt(7, r.updated_ms);
  s.BindInt(8, r.last_step);
  s.BindText(9, r.checkpoint_dir);
  s.BindInt(10, r.version);
  s.BindInt(11, old_version);
  if (absl::Status status = s.Run(); !status.ok()) return status;
  // The row was read in this IMMEDIATE transaction, so no other writer can have moved it.
  if (db_->Changes() != 1) {
    return absl::AbortedError(absl::StrCat("job ", r.id, " changed concurrently"));
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStore::InsertEvent(int64_t number, JobEvent* event) {
  {
    SqliteStatement& s = *statements_->max_event_seq;
    ScopedReset reset(s);
    s.BindInt(1, number);
    absl::StatusOr<bool> row = s.Step();
    if (!row.ok()) return row.status();
    event->seq = s.ColumnInt(0) + 1;
  }
  SqliteStatement& s = *statements_->insert_event;
  ScopedReset reset(s);
  s.BindInt(1, number);
  s.BindInt(2, event->seq);
  s.BindInt(3, event->time_ms);
  s.BindText(4, event->kind);
  s.BindText(5, event->message);
  return s.Run();
}

absl::StatusOr<CreateResult> SqliteJobStore::Create(const JobRecord& request) {
  if (absl::Status s = ValidateNewJob(request); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  // The key lookup and the insert share one IMMEDIATE transaction: with the write lock held
  // from the start, no other connection can insert the same key in between.
  absl::StatusOr<std::unique_ptr<SqliteTransaction>> txn = SqliteTransaction::Begin(*db_);
  if (!txn.ok()) return txn.status();
  if (!request.idempotency_key.empty()) {
    SqliteStatement& s = *statements_->select_by_key;
    ScopedReset reset(s);
    s.BindText(1, request.owner);
    s.BindText(2, request.idempotency_key);
    absl::StatusOr<bool> row = s.Step();
    if (!row.ok()) return row.status();
    if (*row) {
      absl::StatusOr<Row> first = ReadRow(s);
      if (!first.ok()) return first.status();
      return CreateResult{std::move(first->second), /*replayed=*/true};
    }
  }
  int64_t number = 0;
  {
    SqliteStatement& s = *statements_->max_number;
    ScopedReset reset(s);
    absl::StatusOr<bool> row = s.Step();
    if (!row.ok()) return row.status();
    // Never an id handed out before, also by this database before it was restored or replaced.
    number = std::max(s.ColumnInt(0), mark_->last()) + 1;
  }
  if (absl::Status s = mark_->Record(number); !s.ok()) return s;
  const JobRecord r = MakeNewJob(request, number, now_ms_());
  {
    SqliteStatement& s = *statements_->insert_job;
    ScopedReset reset(s);
    s.BindInt(1, number);
    s.BindText(2, r.id);
    s.BindText(3, r.owner);
    s.BindText(4, r.idempotency_key);
    s.BindText(5, r.spec_yaml);
    s.BindText(6, r.name);
    s.BindInt(7, r.priority);
    s.BindInt(8, r.pipeline_stages);
    s.BindInt(9, r.data_parallel);
    s.BindText(10, ToString(r.state));
    s.BindText(11, r.state_reason);
    s.BindNull(12);
    s.BindInt(13, r.restarts);
    s.BindInt(14, r.max_restarts);
    s.BindInt(15, r.attempt);
    s.BindInt(16, r.created_ms);
    s.BindInt(17, r.updated_ms);
    s.BindInt(18, r.last_step);
    s.BindText(19, r.checkpoint_dir);
    s.BindInt(20, r.version);
    if (absl::Status status = s.Run(); !status.ok()) return status;
  }
  JobEvent event = MakeCreatedEvent(r);
  if (absl::Status s = InsertEvent(number, &event); !s.ok()) return s;
  if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  return CreateResult{r, /*replayed=*/false};
}

absl::StatusOr<JobRecord> SqliteJobStore::Get(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Row> row = FindById(id);
  if (!row.ok()) return row.status();
  return std::move(row->second);
}

absl::StatusOr<JobPage> SqliteJobStore::List(const JobFilter& filter, int page_size,
                                             absl::string_view page_token) {
  absl::StatusOr<int> limit = EffectivePageSize(page_size);
  if (!limit.ok()) return limit.status();
  absl::StatusOr<int64_t> after = DecodePageToken(page_token);
  if (!after.ok()) return after.status();
  std::string states;
  for (JobState state : filter.states) absl::StrAppend(&states, ",", ToString(state));
  if (!states.empty()) states += ",";

  absl::MutexLock lock(&mu_);
  SqliteStatement& s = *statements_->list;
  ScopedReset reset(s);
  s.BindInt(1, *after);
  s.BindText(2, filter.owner);
  s.BindText(3, states);
  s.BindInt(4, *limit + 1);  // One more than asked: tells whether another page exists.
  s.BindInt(5, filter.with_spec ? 1 : 0);
  JobPage page;
  int64_t last_number = 0;
  while (true) {
    absl::StatusOr<bool> has_row = s.Step();
    if (!has_row.ok()) return has_row.status();
    if (!*has_row) break;
    if (static_cast<int>(page.records.size()) == *limit) {
      page.next_page_token = EncodePageToken(last_number);
      break;
    }
    absl::StatusOr<Row> row = ReadRow(s);
    if (!row.ok()) return row.status();
    last_number = row->first;
    page.records.push_back(std::move(row->second));
  }
  return page;
}

absl::StatusOr<JobRecord> SqliteJobStore::Mutate(
    absl::string_view id, const std::function<absl::Status(JobRecord*, JobEvent*)>& apply) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::unique_ptr<SqliteTransaction>> txn = SqliteTransaction::Begin(*db_);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<Row> row = FindById(id);
  if (!row.ok()) return row.status();
  JobRecord updated = row->second;
  JobEvent event;
  if (absl::Status s = apply(&updated, &event); !s.ok()) return s;
  if (absl::Status s = WriteRecord(updated, row->second.version); !s.ok()) return s;
  if (!event.kind.empty()) {
    if (absl::Status s = InsertEvent(row->first, &event); !s.ok()) return s;
  }
  if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  return updated;
}

absl::StatusOr<JobRecord> SqliteJobStore::Transition(absl::string_view id,
                                                     const StateChange& change) {
  return Mutate(id, [&](JobRecord* record, JobEvent* event) {
    return ApplyStateChange(change, now_ms_(), record, event);
  });
}

absl::StatusOr<JobRecord> SqliteJobStore::SetReason(absl::string_view id, JobState expected,
                                                    absl::string_view reason) {
  return Mutate(id, [&](JobRecord* record, JobEvent*) {
    return ApplyReason(expected, reason, now_ms_(), record);
  });
}

absl::StatusOr<JobRecord> SqliteJobStore::UpdateProgress(absl::string_view id,
                                                         const JobProgress& progress) {
  return Mutate(id, [&](JobRecord* record, JobEvent*) {
    return ApplyProgress(progress, now_ms_(), record);
  });
}

absl::StatusOr<JobEvent> SqliteJobStore::AppendEvent(absl::string_view job_id,
                                                     absl::string_view kind,
                                                     absl::string_view message) {
  if (kind.empty()) return absl::InvalidArgumentError("event kind must not be empty");
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::unique_ptr<SqliteTransaction>> txn = SqliteTransaction::Begin(*db_);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<Row> row = FindById(job_id);
  if (!row.ok()) return row.status();
  JobEvent event{std::string(job_id), 0, now_ms_(), std::string(kind), std::string(message)};
  if (absl::Status s = InsertEvent(row->first, &event); !s.ok()) return s;
  if (absl::Status s = (*txn)->Commit(); !s.ok()) return s;
  return event;
}

absl::Status SqliteJobStore::DeleteFinished(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::unique_ptr<SqliteTransaction>> txn = SqliteTransaction::Begin(*db_);
  if (!txn.ok()) return txn.status();
  absl::StatusOr<Row> row = FindById(id);
  if (!row.ok()) return row.status();
  int64_t newest = 0;
  {
    SqliteStatement& s = *statements_->max_number;
    ScopedReset reset(s);
    absl::StatusOr<bool> found = s.Step();
    if (!found.ok()) return found.status();
    newest = s.ColumnInt(0);
  }
  if (absl::Status s = CheckDeletable(row->second, row->first == newest); !s.ok()) return s;
  for (SqliteStatement* statement : {statements_->delete_events.get(),
                                     statements_->delete_job.get()}) {
    ScopedReset reset(*statement);
    statement->BindInt(1, row->first);
    if (absl::Status s = statement->Run(); !s.ok()) return s;
  }
  return (*txn)->Commit();
}

absl::StatusOr<std::vector<JobEvent>> SqliteJobStore::ListEvents(absl::string_view job_id,
                                                                 int64_t after_seq) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Row> row = FindById(job_id);
  if (!row.ok()) return row.status();
  SqliteStatement& s = *statements_->list_events;
  ScopedReset reset(s);
  s.BindInt(1, row->first);
  s.BindInt(2, after_seq);
  std::vector<JobEvent> events;
  while (true) {
    absl::StatusOr<bool> has_row = s.Step();
    if (!has_row.ok()) return has_row.status();
    if (!*has_row) break;
    events.push_back(JobEvent{std::string(job_id), s.ColumnInt(0), s.ColumnInt(1),
                              s.ColumnText(2), s.ColumnText(3)});
  }
  return events;
}

}  // namespace deepnet::coordinator
