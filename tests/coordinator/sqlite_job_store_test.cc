// What only the SQLite store promises: durability across reopen and crashes, and clear
// errors for files it must not use.
#include "coordinator/store/sqlite_job_store.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/barrier.h"
#include "coordinator/store/sqlite_db.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::NewJob;
using testing::SameEvent;
using testing::SameRecord;
using testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class SqliteJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }

  absl::StatusOr<std::unique_ptr<SqliteJobStore>> OpenStore() {
    JobStoreOptions options;
    options.path = path_;
    return SqliteJobStore::Open(options);
  }

  TempDir dir_;
  const std::string path_ = dir_ / "jobs.db";
};

TEST_F(SqliteJobStoreTest, ReopenedStoreHasEveryJobFieldAndEvent) {
  std::vector<JobRecord> jobs;
  std::vector<std::vector<JobEvent>> events;
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
    ASSERT_TRUE(store.ok()) << store.status();
    JobStore& s = **store;
    for (int i = 0; i < 5; ++i) {
      JobRecord job = NewJob("alice", absl::StrCat("k", i));
      if (i == 1) job.checkpoint_dir = "/ckpt/two";  // j-000002: every column non-empty.
      ASSERT_TRUE(s.Create(job).ok());
    }
    const StateChange path[] = {
        {JobState::kQueued, JobState::kPlacing, "", std::nullopt, std::nullopt},
        {JobState::kPlacing, JobState::kStarting, "", std::nullopt, std::nullopt},
        {JobState::kStarting, JobState::kRunning, "", std::nullopt, std::nullopt},
        {JobState::kRunning, JobState::kRecovering, "worker lost", RecoveryCause::kWorkerLost,
         std::nullopt}};
    for (const StateChange& change : path) ASSERT_TRUE(s.Transition("j-000002", change).ok());
    ASSERT_TRUE(s.UpdateProgress("j-000002", {777, std::nullopt}).ok());
    ASSERT_TRUE(s.SetReason("j-000003", JobState::kQueued, "behind 2 jobs").ok());
    ASSERT_TRUE(s.AppendEvent("j-000004", "checkpoint", "step 500 saved").ok());
    for (int i = 1; i <= 5; ++i) {
      jobs.push_back(*s.Get(JobIdFromNumber(i)));
      events.push_back(*s.ListEvents(JobIdFromNumber(i), 0));
    }
  }
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> reopened = OpenStore();
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<JobRecord> job = (*reopened)->Get(jobs[i].id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_TRUE(SameRecord(*job, jobs[i])) << jobs[i].id;
    absl::StatusOr<std::vector<JobEvent>> job_events = (*reopened)->ListEvents(jobs[i].id, 0);
    ASSERT_TRUE(job_events.ok());
    ASSERT_EQ(job_events->size(), events[i].size());
    for (size_t e = 0; e < events[i].size(); ++e) {
      EXPECT_TRUE(SameEvent((*job_events)[e], events[i][e])) << jobs[i].id << " event " << e;
    }
  }
  EXPECT_EQ(jobs[1].last_recovery_cause, RecoveryCause::kWorkerLost);
  EXPECT_EQ(jobs[1].checkpoint_dir, "/ckpt/two");
  absl::StatusOr<CreateResult> replay = (*reopened)->Create(NewJob("alice", "k3"));
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->record.id, "j-000004");
  EXPECT_EQ((*reopened)->Create(NewJob("alice"))->record.id, "j-000006");
}

// A child acknowledges creates and transitions over a pipe and is SIGKILLed mid-stream;
// everything it acknowledged must be in the file.
// A database restored from a backup (or replaced) must not hand out again the ids of jobs
// submitted after the backup (issue 25, item 5): the mark beside it remembers the newest.
TEST_F(SqliteJobStoreTest, IdsAreNotHandedOutAgainAfterTheDatabaseIsRestored) {
  const std::string backup = dir_ / "backup.db";
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->Create(NewJob("alice"))->record.id, "j-000001");
  }
  std::filesystem::copy_file(path_, backup);
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->Create(NewJob("alice"))->record.id, "j-000002");
    EXPECT_EQ((*store)->Create(NewJob("alice"))->record.id, "j-000003");
  }
  EXPECT_EQ(ReadFile(path_ + ".last-job"), "00000000000000000003\n");
  // The restore: the backup over the database (its WAL files gone with it).
  std::filesystem::copy_file(backup, path_, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(path_ + "-wal");
  std::filesystem::remove(path_ + "-shm");
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->Get("j-000002").status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ((*store)->Create(NewJob("alice"))->record.id, "j-000004");
  }
  // A mark that is not a number is refused naming the file, and nothing is written.
  std::ofstream(path_ + ".last-job", std::ios::trunc) << "garbage\n";
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> broken = OpenStore();
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(broken.status().message(), HasSubstr(path_ + ".last-job"));
}

TEST_F(SqliteJobStoreTest, AcknowledgedWritesSurviveSigkill) {
  constexpr int kAcksBeforeKill = 60;
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
    if (!store.ok()) _exit(2);
    for (int i = 0; i < 100000; ++i) {
      absl::StatusOr<CreateResult> created =
          (*store)->Create(NewJob("alice", absl::StrCat("key-", i)));
      if (!created.ok()) _exit(3);
      std::string ack = absl::StrCat("C ", created->record.id, "\n");
      if (write(fds[1], ack.data(), ack.size()) != static_cast<ssize_t>(ack.size())) _exit(4);
      if (!(*store)
               ->Transition(created->record.id, {JobState::kQueued, JobState::kPlacing, "",
                                                 std::nullopt, std::nullopt})
               .ok()) {
        _exit(5);
      }
      ack = absl::StrCat("T ", created->record.id, "\n");
      if (write(fds[1], ack.data(), ack.size()) != static_cast<ssize_t>(ack.size())) _exit(4);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string acks;
  bool killed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (true) {
    if (!killed && (std::count(acks.begin(), acks.end(), '\n') >= kAcksBeforeKill ||
                    std::chrono::steady_clock::now() > deadline)) {
      kill(child, SIGKILL);
      killed = true;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    if (poll(&pfd, 1, 1000) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // EOF: the child is gone and every ack it wrote has been read.
    acks.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status)) << "child exited with " << WEXITSTATUS(wait_status);

  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
  ASSERT_TRUE(store.ok()) << store.status();
  int creates = 0;
  for (absl::string_view line : absl::StrSplit(acks, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> parts = absl::StrSplit(line, ' ');
    ASSERT_EQ(parts.size(), 2u) << line;
    absl::StatusOr<JobRecord> job = (*store)->Get(parts[1]);
    ASSERT_TRUE(job.ok()) << "acknowledged " << line << " lost: " << job.status();
    EXPECT_EQ(job->owner, "alice");
    if (parts[0] == "C") {
      ++creates;
      EXPECT_EQ(job->id, JobIdFromNumber(creates));  // Numbering has no holes.
    } else {
      EXPECT_EQ(job->state, JobState::kPlacing) << line;
      EXPECT_EQ((*store)->ListEvents(parts[1], 0)->size(), 2u) << line;
    }
  }
  EXPECT_GE(creates, kAcksBeforeKill / 2);
  // At most the one create in flight at the kill can exist without an ack.
  absl::StatusOr<JobPage> all = (*store)->List({}, 1000, "");
  ASSERT_TRUE(all.ok());
  EXPECT_GE(static_cast<int>(all->records.size()), creates);
  EXPECT_LE(static_cast<int>(all->records.size()), creates + 1);
  // The store stays usable, and the keys still deduplicate.
  absl::StatusOr<CreateResult> replay = (*store)->Create(NewJob("alice", "key-0"));
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_TRUE(replay->replayed);
}

TEST_F(SqliteJobStoreTest, NonDatabaseFileIsRejectedNamingPathAndLeftAlone) {
  const std::string contents(2048, 'x');
  std::ofstream(path_, std::ios::binary) << "not a database\n" << contents;
  const std::string before = ReadFile(path_);
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_THAT(store.status().message(), HasSubstr("not a database"));
  EXPECT_EQ(ReadFile(path_), before);
}

TEST_F(SqliteJobStoreTest, CorruptDatabaseIsRejectedNamingPath) {
  {
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 200; ++i) ASSERT_TRUE((*store)->Create(NewJob("alice")).ok());
  }  // Closing the last connection checkpoints the WAL into the main file.
  std::string bytes = ReadFile(path_);
  ASSERT_GT(bytes.size(), 8192u);
  // Overwrite pages 2 and 3 (the default page size is 4096) with garbage.
  for (size_t i = 4096; i < 3 * 4096 && i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
}

TEST_F(SqliteJobStoreTest, ForeignSqliteDatabaseIsRejectedAndLeftAlone) {
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_, /*create=*/true);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Exec("CREATE TABLE photos (name TEXT)", "test").ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_, /*create=*/false);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*(*db)->QueryText("SELECT group_concat(name) FROM sqlite_master", "test"), "photos");
}

TEST_F(SqliteJobStoreTest, OtherSchemaVersionIsRejected) {
  ASSERT_TRUE(OpenStore().ok());
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_, /*create=*/false);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("UPDATE schema_version SET version = 2", "test").ok());
  }
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = OpenStore();
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("schema version '2'"));
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
}

TEST_F(SqliteJobStoreTest, MissingFileIsNotFoundWithoutCreateIfMissing) {
  JobStoreOptions options;
  options.path = path_;
  options.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  options.path = dir_ / "no/such/dir/jobs.db";
  options.create_if_missing = true;
  EXPECT_FALSE(SqliteJobStore::Open(options).ok());
}

TEST_F(SqliteJobStoreTest, FileIsInWalMode) {
  ASSERT_TRUE(OpenStore().ok());
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(path_, /*create=*/false);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*(*db)->QueryText("PRAGMA journal_mode", "test"), "wal");
}

// Two stores (two connections, as two coordinator processes would have) race on one key.
TEST_F(SqliteJobStoreTest, RacingCreatesOnTwoConnectionsMakeOneJob) {
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> first = OpenStore();
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> second = OpenStore();
  ASSERT_TRUE(first.ok() && second.ok());
  constexpr int kThreads = 8;
  absl::Barrier* start = new absl::Barrier(kThreads);
  std::vector<absl::StatusOr<CreateResult>> results(kThreads, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (start->Block()) delete start;
      results[t] = (t % 2 == 0 ? *first : *second)->Create(NewJob("alice", "shared"));
    });
  }
  for (std::thread& thread : threads) thread.join();
  int fresh = 0;
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->record.id, "j-000001");
    fresh += result->replayed ? 0 : 1;
  }
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ((*first)->List({}, 10, "")->records.size(), 1u);
}

}  // namespace
}  // namespace deepnet::coordinator
