// One suite run against every JobStore implementation: they must behave the same.
#include "coordinator/store/job_store.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "coordinator/store/in_memory_job_store.h"
#include "coordinator/store/sqlite_job_store.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::FakeClock;
using testing::NewJob;
using testing::SameRecord;
using testing::TempDir;

struct InMemoryFactory {
  static std::unique_ptr<JobStore> Make(const TempDir&, FakeClock& clock) {
    return std::make_unique<InMemoryJobStore>(clock.AsFunction());
  }
};

struct SqliteFactory {
  static std::unique_ptr<JobStore> Make(const TempDir& dir, FakeClock& clock) {
    JobStoreOptions options;
    options.path = dir / "jobs.db";
    options.now_ms = clock.AsFunction();
    absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
};

template <typename Factory>
class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    store_ = Factory::Make(dir_, clock_);
    ASSERT_NE(store_, nullptr);
  }

  JobRecord CreateJob(const std::string& owner = "alice", const std::string& key = "") {
    absl::StatusOr<CreateResult> created = store_->Create(NewJob(owner, key));
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->record : JobRecord{};
  }

  // Moves a new job to `target` along the shortest path of allowed transitions.
  JobRecord CreateJobIn(JobState target) {
    JobRecord job = CreateJob();
    for (const auto& [from, to] : PathTo(target)) {
      StateChange change{from, to, "test path", std::nullopt, std::nullopt};
      if (to == JobState::kRecovering) change.cause = RecoveryCause::kWorkerExit;
      absl::StatusOr<JobRecord> moved = store_->Transition(job.id, change);
      EXPECT_TRUE(moved.ok()) << moved.status();
      if (moved.ok()) job = *moved;
    }
    EXPECT_EQ(job.state, target);
    return job;
  }

  static std::vector<std::pair<JobState, JobState>> PathTo(JobState target) {
    std::map<JobState, JobState> parent;
    std::deque<JobState> frontier = {JobState::kQueued};
    std::set<JobState> seen = {JobState::kQueued};
    while (!frontier.empty()) {
      const JobState state = frontier.front();
      frontier.pop_front();
      for (const auto& [from, to] : AllowedJobTransitions()) {
        if (from == state && seen.insert(to).second) {
          parent[to] = from;
          frontier.push_back(to);
        }
      }
    }
    std::vector<std::pair<JobState, JobState>> path;
    for (JobState s = target; s != JobState::kQueued; s = parent.at(s)) {
      path.insert(path.begin(), {parent.at(s), s});
    }
    return path;
  }

  std::vector<JobRecord> ListAll(const JobFilter& filter, int page_size) {
    std::vector<JobRecord> all;
    std::string token;
    // A token that does not advance would loop forever; no listing here needs 1,000 pages.
    for (int pages = 0; pages < 1000; ++pages) {
      absl::StatusOr<JobPage> page = store_->List(filter, page_size, token);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      EXPECT_LE(static_cast<int>(page->records.size()), page_size);
      all.insert(all.end(), page->records.begin(), page->records.end());
      token = page->next_page_token;
      if (token.empty()) return all;
    }
    ADD_FAILURE() << "paging did not end after 1000 pages";
    return all;
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<JobStore> store_;
};

using Implementations = ::testing::Types<InMemoryFactory, SqliteFactory>;
class ImplementationNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, InMemoryFactory> ? "InMemory" : "Sqlite";
  }
};
TYPED_TEST_SUITE(JobStoreTest, Implementations, ImplementationNames);

TYPED_TEST(JobStoreTest, CreateStoresQueuedJobThatGetReturns) {
  const JobRecord request = NewJob("alice", "key-1");
  absl::StatusOr<CreateResult> created = this->store_->Create(request);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(created->replayed);
  const JobRecord& job = created->record;
  EXPECT_EQ(job.id, "j-000001");
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.state_reason, request.state_reason);
  EXPECT_EQ(job.spec_yaml, request.spec_yaml);
  EXPECT_EQ(job.version, 1);
  EXPECT_EQ(job.attempt, 0);
  EXPECT_EQ(job.created_ms, this->clock_.Now());
  absl::StatusOr<JobRecord> got = this->store_->Get(job.id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameRecord(*got, job));
  EXPECT_EQ(this->CreateJob().id, "j-000002");
}

// Retention deletes finished jobs with their events, never a live one and never the newest,
// so an id is never handed out twice (issue 25, item 6).
TYPED_TEST(JobStoreTest, DeleteFinishedKeepsLiveJobsAndTheNewestAndNeverReusesIds) {
  const JobRecord done = this->CreateJobIn(JobState::kSucceeded);
  ASSERT_TRUE(this->store_->AppendEvent(done.id, "note", "x").ok());
  const JobRecord running = this->CreateJobIn(JobState::kRunning);
  const JobRecord cancelled = this->CreateJobIn(JobState::kCancelled);
  EXPECT_EQ(this->store_->DeleteFinished(running.id).code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status newest = this->store_->DeleteFinished(cancelled.id);
  EXPECT_EQ(newest.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(newest.message(), HasSubstr("never reused"));
  ASSERT_TRUE(this->store_->DeleteFinished(done.id).ok());
  EXPECT_EQ(this->store_->Get(done.id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->ListEvents(done.id, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->DeleteFinished(done.id).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(this->store_->Get(running.id).ok());
  EXPECT_EQ(this->CreateJob().id, "j-000004");
  EXPECT_EQ(this->ListAll(JobFilter(), 10).size(), 3u);
}

TYPED_TEST(JobStoreTest, ListLeavesTheSpecOutWhenAsked) {
  const JobRecord request = NewJob("alice", "key-1");
  ASSERT_FALSE(request.spec_yaml.empty());
  ASSERT_TRUE(this->store_->Create(request).ok());
  JobFilter filter;
  std::vector<JobRecord> listed = this->ListAll(filter, 10);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].spec_yaml, request.spec_yaml);
  filter.with_spec = false;
  listed = this->ListAll(filter, 10);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].spec_yaml, "");
  EXPECT_EQ(listed[0].owner, "alice");
  EXPECT_EQ(this->store_->Get(listed[0].id)->spec_yaml, request.spec_yaml);
}

TYPED_TEST(JobStoreTest, CreateRejectsInvalidJobsAndStoresNothing) {
  JobRecord no_owner = NewJob("");
  JobRecord no_stages = NewJob("alice");
  no_stages.pipeline_stages = 0;
  JobRecord no_replicas = NewJob("alice");
  no_replicas.data_parallel = -1;
  JobRecord negative_restarts = NewJob("alice");
  negative_restarts.max_restarts = -1;
  const std::pair<JobRecord, std::string> cases[] = {{no_owner, "owner"},
                                                     {no_stages, "pipeline_stages"},
                                                     {no_replicas, "data_parallel"},
                                                     {negative_restarts, "max_restarts"}};
  for (const auto& [request, field] : cases) {
    absl::StatusOr<CreateResult> created = this->store_->Create(request);
    EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(created.status().message(), HasSubstr(field));
  }
  EXPECT_TRUE(this->ListAll({}, 10).empty());
}

TYPED_TEST(JobStoreTest, UnknownJobIsNotFoundEverywhere) {
  this->CreateJob();
  EXPECT_EQ(this->store_->Get("j-000099").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(this->store_->Get("j-000099").status().message(), HasSubstr("j-000099"));
  const StateChange change{JobState::kQueued, JobState::kPlacing, "", std::nullopt, std::nullopt};
  EXPECT_EQ(this->store_->Transition("nope", change).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->UpdateProgress("nope", {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->AppendEvent("nope", "k", "m").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->ListEvents("nope", 0).status().code(), absl::StatusCode::kNotFound);
}

TYPED_TEST(JobStoreTest, CreateWithSameKeyReturnsFirstJobUnchanged) {
  const JobRecord first = this->CreateJob("alice", "retry-7");
  JobRecord retry = NewJob("alice", "retry-7");
  retry.spec_yaml = "something else entirely";
  retry.priority = 99;
  absl::StatusOr<CreateResult> replay = this->store_->Create(retry);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_TRUE(replay->replayed);
  EXPECT_TRUE(SameRecord(replay->record, first));
  // The key is per owner, and an empty key never deduplicates.
  EXPECT_NE(this->CreateJob("bob", "retry-7").id, first.id);
  EXPECT_NE(this->CreateJob("alice", "").id, this->CreateJob("alice", "").id);
  EXPECT_EQ(this->ListAll({}, 10).size(), 4u);
}

TYPED_TEST(JobStoreTest, RacingCreatesWithSameKeyMakeExactlyOneJob) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 3; ++round) {
    const std::string key = absl::StrCat("race-", round);
    absl::Barrier* start = new absl::Barrier(kThreads);  // Deletes itself (Block returns true).
    std::vector<absl::StatusOr<CreateResult>> results(kThreads, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        if (start->Block()) delete start;
        results[t] = this->store_->Create(NewJob("alice", key));
      });
    }
    for (std::thread& thread : threads) thread.join();
    int fresh = 0;
    for (const auto& result : results) {
      ASSERT_TRUE(result.ok()) << result.status();
      fresh += result->replayed ? 0 : 1;
      EXPECT_TRUE(SameRecord(result->record, results[0]->record));
    }
    EXPECT_EQ(fresh, 1) << key;
  }
  EXPECT_EQ(this->ListAll({}, 100).size(), 3u);
}

TYPED_TEST(JobStoreTest, ListPagesWithoutGapsOrDuplicatesUnderFilters) {
  const std::string owners[] = {"alice", "bob", "carol"};
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 90; ++i) {
    JobRecord job = this->CreateJob(owners[i % 3]);
    if (i % 4 == 0) {
      absl::StatusOr<JobRecord> moved = this->store_->Transition(
          job.id, {JobState::kQueued, JobState::kCancelled, "user", std::nullopt, std::nullopt});
      ASSERT_TRUE(moved.ok()) << moved.status();
      job = *moved;
    }
    jobs.push_back(job);
  }
  const JobFilter filters[] = {
      {}, {"bob", {}}, {"", {JobState::kCancelled}},
      {"alice", {JobState::kQueued, JobState::kRunning}}, {"nobody", {}}};
  for (const JobFilter& filter : filters) {
    std::vector<std::string> expected;
    for (const JobRecord& job : jobs) {
      if (MatchesFilter(filter, job)) expected.push_back(job.id);
    }
    for (int page_size : {1, 7, 30, 1000}) {
      std::vector<std::string> listed;
      for (const JobRecord& job : this->ListAll(filter, page_size)) listed.push_back(job.id);
      EXPECT_EQ(listed, expected) << "owner=" << filter.owner << " page_size=" << page_size;
    }
  }
}

TYPED_TEST(JobStoreTest, PageTokenStaysValidWhileJobsAreAdded) {
  for (int i = 0; i < 10; ++i) this->CreateJob();
  absl::StatusOr<JobPage> first = this->store_->List({}, 4, "");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->records.size(), 4u);
  for (int i = 0; i < 3; ++i) this->CreateJob();
  std::vector<std::string> ids;
  for (const JobRecord& job : first->records) ids.push_back(job.id);
  std::string token = first->next_page_token;
  for (int pages = 0; !token.empty(); ++pages) {
    ASSERT_LT(pages, 100) << "paging does not advance";
    absl::StatusOr<JobPage> page = this->store_->List({}, 4, token);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const JobRecord& job : page->records) ids.push_back(job.id);
    token = page->next_page_token;
  }
  ASSERT_EQ(ids.size(), 13u);
  for (int i = 0; i < 13; ++i) EXPECT_EQ(ids[i], JobIdFromNumber(i + 1));
  // The same token gives the same page again.
  absl::StatusOr<JobPage> again = this->store_->List({}, 4, first->next_page_token);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->records.front().id, "j-000005");
}

TYPED_TEST(JobStoreTest, ListRejectsForeignTokensAndNegativePageSize) {
  this->CreateJob();
  for (const char* token : {"garbage", "am9icy52MTp4", "!!"}) {
    absl::StatusOr<JobPage> page = this->store_->List({}, 10, token);
    EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument) << token;
    EXPECT_THAT(page.status().message(), HasSubstr("page token"));
  }
  EXPECT_EQ(this->store_->List({}, -1, "").status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<JobPage> whole = this->store_->List({}, 0, "");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->records.size(), 1u);
  EXPECT_TRUE(whole->next_page_token.empty());
}

TYPED_TEST(JobStoreTest, EveryAllowedTransitionIsAccepted) {
  for (const auto& [from, to] : AllowedJobTransitions()) {
    const JobRecord before = this->CreateJobIn(from);
    this->clock_.Advance(10);
    StateChange change{from, to, "because", std::nullopt, before.version};
    if (to == JobState::kRecovering) change.cause = RecoveryCause::kHang;
    absl::StatusOr<JobRecord> after = this->store_->Transition(before.id, change);
    ASSERT_TRUE(after.ok()) << ToString(from) << " -> " << ToString(to) << ": " << after.status();
    EXPECT_EQ(after->state, to);
    EXPECT_EQ(after->state_reason, "because");
    EXPECT_EQ(after->version, before.version + 1);
    EXPECT_EQ(after->updated_ms, this->clock_.Now());
    absl::StatusOr<JobRecord> stored = this->store_->Get(before.id);
    ASSERT_TRUE(stored.ok());
    EXPECT_TRUE(SameRecord(*stored, *after));
    absl::StatusOr<std::vector<JobEvent>> events = this->store_->ListEvents(before.id, 0);
    ASSERT_TRUE(events.ok());
    EXPECT_EQ(events->back().kind, "state");
    EXPECT_THAT(events->back().message,
                HasSubstr(absl::StrCat(ToString(from), " -> ", ToString(to))));
  }
}

TYPED_TEST(JobStoreTest, ForbiddenTransitionsAreRejectedNamingBothStatesAndChangeNothing) {
  using S = JobState;
  const std::pair<S, S> forbidden[] = {
      {S::kQueued, S::kRunning},   {S::kQueued, S::kSucceeded},  {S::kPlacing, S::kRunning},
      {S::kRunning, S::kQueued},   {S::kRunning, S::kStarting},  {S::kRecovering, S::kRunning},
      {S::kSucceeded, S::kQueued}, {S::kFailed, S::kRecovering}, {S::kCancelled, S::kCancelled},
  };
  for (const auto& [from, to] : forbidden) {
    const JobRecord before = this->CreateJobIn(from);
    absl::StatusOr<std::vector<JobEvent>> events_before = this->store_->ListEvents(before.id, 0);
    ASSERT_TRUE(events_before.ok());
    StateChange change{from, to, "nope", std::nullopt, std::nullopt};
    if (to == JobState::kRecovering) change.cause = RecoveryCause::kWorkerLost;
    absl::StatusOr<JobRecord> after = this->store_->Transition(before.id, change);
    EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(after.status().message(),
                HasSubstr(absl::StrCat(ToString(from), " -> ", ToString(to))));
    EXPECT_THAT(after.status().message(), HasSubstr(before.id));
    absl::StatusOr<JobRecord> stored = this->store_->Get(before.id);
    ASSERT_TRUE(stored.ok());
    EXPECT_TRUE(SameRecord(*stored, before));
    EXPECT_EQ(this->store_->ListEvents(before.id, 0)->size(), events_before->size());
  }
}

TYPED_TEST(JobStoreTest, CompareAndSetLosesWhenStateOrVersionMoved) {
  const JobRecord job = this->CreateJob();
  // Two schedulers read QUEUED; the first moves it, the second's cancel must not apply.
  ASSERT_TRUE(this->store_
                  ->Transition(job.id, {JobState::kQueued, JobState::kPlacing, "", std::nullopt,
                                        std::nullopt})
                  .ok());
  absl::StatusOr<JobRecord> stale = this->store_->Transition(
      job.id, {JobState::kQueued, JobState::kCancelled, "", std::nullopt, std::nullopt});
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(stale.status().message(), HasSubstr("is PLACING, expected QUEUED"));
  absl::StatusOr<JobRecord> old_version = this->store_->Transition(
      job.id, {JobState::kPlacing, JobState::kStarting, "", std::nullopt, job.version});
  EXPECT_EQ(old_version.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(old_version.status().message(), HasSubstr("version"));
  EXPECT_EQ(this->store_->Get(job.id)->state, JobState::kPlacing);
}

TYPED_TEST(JobStoreTest, RacingTransitionsFromOneStateHaveOneWinner) {
  constexpr int kThreads = 8;
  const JobRecord job = this->CreateJob();
  absl::Barrier* start = new absl::Barrier(kThreads);
  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (start->Block()) delete start;
      const JobState to = t % 2 == 0 ? JobState::kPlacing : JobState::kCancelled;
      results[t] =
          this->store_->Transition(job.id, {JobState::kQueued, to, "", std::nullopt, std::nullopt})
              .status();
    });
  }
  for (std::thread& thread : threads) thread.join();
  int winners = 0;
  for (const absl::Status& status : results) {
    if (status.ok()) {
      ++winners;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    }
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(this->store_->Get(job.id)->version, 2);
  EXPECT_EQ(this->store_->ListEvents(job.id, 0)->size(), 2u);
}

TYPED_TEST(JobStoreTest, RecoveryNeedsCauseAndRestartsAreCountedAndCapped) {
  JobRecord job = this->CreateJobIn(JobState::kRunning);  // max_restarts = 2.
  EXPECT_EQ(job.attempt, 1);
  absl::StatusOr<JobRecord> no_cause = this->store_->Transition(
      job.id, {JobState::kRunning, JobState::kRecovering, "", std::nullopt, std::nullopt});
  EXPECT_EQ(no_cause.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<JobRecord> stray_cause = this->store_->Transition(
      job.id, {JobState::kRunning, JobState::kFailed, "", RecoveryCause::kHang, std::nullopt});
  EXPECT_EQ(stray_cause.status().code(), absl::StatusCode::kInvalidArgument);
  const RecoveryCause causes[] = {RecoveryCause::kWorkerExit, RecoveryCause::kWorkerLost,
                                  RecoveryCause::kHang};
  for (int restart = 1; restart <= 3; ++restart) {
    absl::StatusOr<JobRecord> recovering = this->store_->Transition(
        job.id, {JobState::kRunning, JobState::kRecovering, "rank died", causes[restart - 1],
                 std::nullopt});
    ASSERT_TRUE(recovering.ok()) << recovering.status();
    EXPECT_EQ(recovering->last_recovery_cause, causes[restart - 1]);
    absl::StatusOr<JobRecord> placing = this->store_->Transition(
        job.id, {JobState::kRecovering, JobState::kPlacing, "", std::nullopt, std::nullopt});
    if (restart == 3) {
      EXPECT_EQ(placing.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(placing.status().message(), HasSubstr("2 of 2 restarts"));
      break;
    }
    ASSERT_TRUE(placing.ok()) << placing.status();
    EXPECT_EQ(placing->restarts, restart);
    for (const auto& [from, to] : {std::pair(JobState::kPlacing, JobState::kStarting),
                                   std::pair(JobState::kStarting, JobState::kRunning)}) {
      absl::StatusOr<JobRecord> moved =
          this->store_->Transition(job.id, {from, to, "", std::nullopt, std::nullopt});
      ASSERT_TRUE(moved.ok()) << moved.status();
      job = *moved;
    }
    EXPECT_EQ(job.attempt, restart + 1);
  }
  absl::StatusOr<JobRecord> failed = this->store_->Transition(
      job.id, {JobState::kRecovering, JobState::kFailed, "restarts exhausted", std::nullopt,
               std::nullopt});
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->restarts, 2);
  EXPECT_EQ(failed->last_recovery_cause, RecoveryCause::kHang);
  EXPECT_TRUE(IsTerminal(failed->state));
}

TYPED_TEST(JobStoreTest, SetReasonChangesOnlyThePendingReason) {
  const JobRecord job = this->CreateJob();
  absl::StatusOr<JobRecord> updated =
      this->store_->SetReason(job.id, JobState::kQueued, "needs 6 slots, 4 free");
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->state_reason, "needs 6 slots, 4 free");
  EXPECT_EQ(updated->state, JobState::kQueued);
  EXPECT_EQ(updated->version, job.version + 1);
  EXPECT_EQ(this->store_->SetReason(job.id, JobState::kRunning, "x").status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(this->store_->Get(job.id)->state_reason, "needs 6 slots, 4 free");
}

TYPED_TEST(JobStoreTest, ProgressIsStoredAndStaleAttemptsAreDropped) {
  const JobRecord job = this->CreateJobIn(JobState::kRunning);
  absl::StatusOr<JobRecord> progressed = this->store_->UpdateProgress(job.id, {1200, job.attempt});
  ASSERT_TRUE(progressed.ok()) << progressed.status();
  EXPECT_EQ(progressed->last_step, 1200);
  absl::StatusOr<JobRecord> any_attempt = this->store_->UpdateProgress(job.id, {1300, {}});
  ASSERT_TRUE(any_attempt.ok());
  EXPECT_EQ(any_attempt->last_step, 1300);
  absl::StatusOr<JobRecord> stale = this->store_->UpdateProgress(job.id, {9999, job.attempt - 1});
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(this->store_->UpdateProgress(job.id, {-1, {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(this->store_->Get(job.id)->last_step, 1300);
}

TYPED_TEST(JobStoreTest, EventsAreOrderedPerJob) {
  const JobRecord a = this->CreateJob();
  const JobRecord b = this->CreateJob();
  for (int i = 0; i < 5; ++i) {
    this->clock_.Advance(1);
    ASSERT_TRUE(this->store_->AppendEvent(a.id, "worker", absl::StrCat("a", i)).ok());
    absl::StatusOr<JobEvent> event = this->store_->AppendEvent(b.id, "placement", "b");
    ASSERT_TRUE(event.ok()) << event.status();
    EXPECT_EQ(event->seq, i + 2);  // seq 1 is the "created" event.
    EXPECT_EQ(event->time_ms, this->clock_.Now());
  }
  ASSERT_TRUE(this->store_
                  ->Transition(a.id, {JobState::kQueued, JobState::kPlacing, "slots free",
                                      std::nullopt, std::nullopt})
                  .ok());
  absl::StatusOr<std::vector<JobEvent>> events = this->store_->ListEvents(a.id, 0);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 7u);
  EXPECT_EQ((*events)[0].message, "created QUEUED: waiting for 6 free slots");
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ((*events)[i].seq, i + 1);
    EXPECT_EQ((*events)[i].job_id, a.id);
    if (i >= 1 && i <= 5) {
      EXPECT_EQ((*events)[i].message, absl::StrCat("a", i - 1));
    }
  }
  EXPECT_EQ((*events)[6].message, "QUEUED -> PLACING: slots free");
  absl::StatusOr<std::vector<JobEvent>> tail = this->store_->ListEvents(a.id, 5);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ(tail->front().seq, 6);
  EXPECT_TRUE(this->store_->ListEvents(a.id, 7)->empty());
  EXPECT_EQ(this->store_->AppendEvent(a.id, "", "m").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepnet::coordinator

namespace deepnet::coordinator {
namespace {

// The writer and the reader of "state" event messages live together; every message the store
// writes reads back into the same fields.
TEST(StateEventMessageTest, WhatTheStoreWritesParsesBack) {
  JobRecord record;
  record.id = "j-000001";
  record.owner = "alice";
  record.state_reason = "needs 4 slots";
  absl::StatusOr<StateEventFields> created = ParseStateEventMessage(MakeCreatedEvent(record).message);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(created->from.has_value());
  EXPECT_EQ(created->to, JobState::kQueued);
  EXPECT_EQ(created->reason, "needs 4 slots");

  record.state = JobState::kRunning;
  JobEvent event;
  ASSERT_TRUE(ApplyStateChange({JobState::kRunning, JobState::kRecovering,
                                "rank 1 exited: loss (nan): stop", RecoveryCause::kWorkerExit,
                                std::nullopt},
                               5, &record, &event)
                  .ok());
  absl::StatusOr<StateEventFields> moved = ParseStateEventMessage(event.message);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->from, JobState::kRunning);
  EXPECT_EQ(moved->to, JobState::kRecovering);
  EXPECT_EQ(moved->cause, RecoveryCause::kWorkerExit);
  EXPECT_EQ(moved->reason, "rank 1 exited: loss (nan): stop");

  EXPECT_FALSE(ParseStateEventMessage("something else").ok());
  EXPECT_FALSE(ParseStateEventMessage("RUNNING -> NOWHERE").ok());
}

}  // namespace
}  // namespace deepnet::coordinator
