// Fair sharing: the limits file (parsing, defaults, admins) and the coordinator applying it:
// priorities above max_priority and jobs beyond max_queued_jobs are refused naming the limit;
// jobs beyond max_running_ranks wait with a pending reason naming it, without holding back other
// users' jobs, and start when the owner's other jobs end; team limits through scheduling.team;
// limits replaced at run time and counts rebuilt from the job store after a restart.
#include "coordinator/scheduler/fair_share.h"

#include "coordinator/scheduler/gang_scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/coordinator/coordinator_fixture.h"
#include "tests/coordinator/test_util.h"

namespace deepnet::coordinator {
namespace {

using ::testing::AllOf;
using testing::CoordinatorTest;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::TempDir;
using testing::Worker;

constexpr const char* kExample = R"(
default:
  max_priority: 10
  max_running_ranks: 16
  max_queued_jobs: 20
users:
  alice: {max_priority: 100}
  root: {max_queued_jobs: 5}
teams:
  nlp: {max_running_ranks: 32, max_priority: 50}
)";

LimitsConfig Parse(const std::string& text) {
  absl::StatusOr<LimitsConfig> config = ParseLimits(text, "limits.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : LimitsConfig();
}

TEST(LimitsFileTest, UserEntriesFallBackToDefaultAndAdminsHaveOnlyTheirOwnEntry) {
  const LimitsConfig config = Parse(kExample);
  const ShareLimits alice = config.ForUser("alice", false);
  ASSERT_TRUE(alice.max_priority && alice.max_running_ranks && alice.max_queued_jobs);
  EXPECT_EQ(alice.max_priority->value, 100);
  EXPECT_EQ(alice.max_priority->origin, "users.alice.max_priority");
  EXPECT_EQ(alice.max_running_ranks->value, 16);
  EXPECT_EQ(alice.max_running_ranks->origin, "default.max_running_ranks");
  const ShareLimits carol = config.ForUser("carol", false);  // no entry: the defaults
  ASSERT_TRUE(carol.max_priority);
  EXPECT_EQ(carol.max_priority->value, 10);
  const ShareLimits root = config.ForUser("root", true);
  EXPECT_FALSE(root.max_priority);
  EXPECT_FALSE(root.max_running_ranks);
  ASSERT_TRUE(root.max_queued_jobs);
  EXPECT_EQ(root.max_queued_jobs->value, 5);
  const ShareLimits other_admin = config.ForUser("ops", true);
  EXPECT_FALSE(other_admin.max_priority || other_admin.max_running_ranks ||
               other_admin.max_queued_jobs);
  const ShareLimits nlp = config.ForTeam("nlp");
  ASSERT_TRUE(nlp.max_running_ranks);
  EXPECT_EQ(nlp.max_running_ranks->value, 32);
  EXPECT_FALSE(nlp.max_queued_jobs);
  EXPECT_FALSE(config.ForTeam("vision").max_running_ranks);  // unlisted teams: unlimited
  EXPECT_FALSE(Parse("").defaults.max_priority);             // an empty file: no limits
  EXPECT_FALSE(Parse("users:\n  bob:\n").ForUser("bob", false).max_priority);
}

TEST(LimitsFileTest, ErrorsNameTheFileAndTheField) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"default: {max_priority: high}", "limits.yaml: default.max_priority: "},
      {"default: {max_running_ranks: -1}", "default.max_running_ranks: must be in [0, "},
      {"default: {max_queued_jobs: 3000000000}", "default.max_queued_jobs: must be in [0, "},
      {"default: {max_priority: 3000000000}", "default.max_priority: must be in ["},
      {"default: {max_ranks: 3}", "default.max_ranks: unknown key"},
      {"users: {alice: {max_priority: 1, bogus: 2}}", "users.alice.bogus: unknown key"},
      {"users: {'../x': {max_priority: 1}}", "users: not a valid name"},
      {"users: [alice]", "users: expected a map"},
      {"teams: {nlp: 5}", "teams.nlp: expected a map of limits"},
      {"limits: {}", "limits: unknown key (allowed: default, users, teams)"},
      {"- a\n- b\n", "limits.yaml: expected a map"},
      {"default: {max_priority: [1\n", "limits.yaml: not valid YAML"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<LimitsConfig> config = ParseLimits(c.text, "limits.yaml");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(config.status().message(), HasSubstr(c.expected));
    EXPECT_THAT(config.status().message(), HasSubstr("limits.yaml"));
  }
  absl::StatusOr<LimitsConfig> missing = LoadLimitsFile("/nonexistent/limits.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/limits.yaml"));
  TempDir dir;
  { std::ofstream(dir / "limits.yaml") << kExample; }
  absl::StatusOr<LimitsConfig> loaded = LoadLimitsFile(dir / "limits.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->source, dir / "limits.yaml");
  EXPECT_EQ(loaded->users.size(), 2u);
}

GangRequest Gang(const std::string& id, const std::string& user, int64_t ranks, int priority) {
  GangRequest r;
  r.job_id = id;
  r.user = user;
  r.data_parallel = ranks;
  r.priority = priority;
  return r;
}

TEST(RankCapSchedulingTest, ACappedJobIsSkippedAndDoesNotBlockTheQueue) {
  absl::StatusOr<std::unique_ptr<GangScheduler>> s = GangScheduler::Create({});  // strict order
  ASSERT_TRUE(s.ok());
  GangScheduler& scheduler = **s;
  ASSERT_TRUE(scheduler.AddWorker("w", 3).ok());
  ASSERT_TRUE(scheduler.Enqueue(Gang("a1", "alice", 2, 10)).ok());
  ASSERT_TRUE(scheduler.Enqueue(Gang("a2", "alice", 2, 5)).ok());
  ASSERT_TRUE(scheduler.Enqueue(Gang("b1", "bob", 1, 0)).ok());
  // Uncapped, a2 would not fit after a1 and would block b1 (strict order).
  std::vector<PendingJob> pending = scheduler.Pending();
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[2].code, PendingCode::kBehindJob);

  RankCaps caps;
  caps.users["alice"] = RankCap{2, 0, "default.max_running_ranks"};
  scheduler.SetRankCaps(caps);
  pending = scheduler.Pending();
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[1].job_id, "a2");
  EXPECT_EQ(pending[1].code, PendingCode::kUserRankLimit);
  EXPECT_THAT(pending[1].reason, HasSubstr("alice holds 2 of max_running_ranks 2"));
  EXPECT_EQ(pending[2].code, PendingCode::kSchedulable);
  std::vector<Placement> placed = scheduler.Schedule();
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].job_id, "a1");
  EXPECT_EQ(placed[1].job_id, "b1");

  // The coordinator reports alice's held ranks; once a1 is released they drop to 0.
  ASSERT_TRUE(scheduler.Release("a1").ok());
  caps.users["alice"].held = 0;
  scheduler.SetRankCaps(caps);
  placed = scheduler.Schedule();
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].job_id, "a2");
}

class FairShareTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    options_.is_admin = [](const std::string& user) { return user == "root"; };
  }

  // Restarts the coordinator on the same store with `limits_text` (empty: no limits file).
  void UseLimits(const std::string& limits_text) {
    if (limits_text.empty()) {
      options_.limits.reset();
    } else {
      options_.limits = Parse(limits_text);
    }
    coordinator_.reset();
    Make();
  }

  absl::StatusOr<std::string> SubmitAs(const std::string& user, const std::string& yaml,
                                       std::vector<std::string> teams = {},
                                       const std::string& key = "") {
    absl::StatusOr<JobSpecInfo> spec = coordinator_->ParseSpec(yaml);
    if (!spec.ok()) return spec.status();
    SubmitRequestData request{user, key, yaml, *spec};
    request.admin = user == "root";
    request.teams = std::move(teams);
    absl::StatusOr<SubmitResultData> result = coordinator_->Submit(request);
    if (!result.ok()) return result.status();
    return result->job.record.id;
  }

  JobView Job(const std::string& id) { return *coordinator_->GetJob(id); }

  // The worker whose latest assignment is of job `id`, or null.
  static const Worker* Holder(const std::vector<const Worker*>& workers, const std::string& id) {
    for (const Worker* w : workers) {
      if (!w->sink->assignments.empty() && w->sink->assignments.back().job_id == id) return w;
    }
    return nullptr;
  }
};

TEST_F(FairShareTest, WithoutALimitsFileAnyPriorityAndAnyNumberOfJobsAreAccepted) {
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(SubmitAs("carol", JobYaml(1, 1, "{priority: 2147483647}")).ok());
  }
}

TEST_F(FairShareTest, PriorityAboveTheLimitIsRefusedNamingIt) {
  UseLimits(kExample);
  absl::StatusOr<std::string> id = SubmitAs("carol", JobYaml(1, 1, "{priority: 11}"));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(id.status().message(),
              AllOf(HasSubstr("scheduling.priority: 11 is above max_priority 10 of user carol"),
                    HasSubstr("default.max_priority")));
  EXPECT_TRUE(SubmitAs("carol", JobYaml(1, 1, "{priority: 10}")).ok());
  EXPECT_TRUE(SubmitAs("alice", JobYaml(1, 1, "{priority: 100}")).ok());  // her own entry
  EXPECT_FALSE(SubmitAs("alice", JobYaml(1, 1, "{priority: 101}")).ok());
  // The validate-only check says the same without storing anything.
  absl::StatusOr<JobSpecInfo> spec = coordinator_->ParseSpec(JobYaml(1, 1, "{priority: 11}"));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(coordinator_->CheckLimits({"carol", "", "", *spec}).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(FairShareTest, AdminsAreNotLimitedUnlessTheFileNamesThem) {
  UseLimits("default: {max_priority: 0, max_running_ranks: 1, max_queued_jobs: 1}");
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(SubmitAs("root", JobYaml(1, 2, "{priority: 1000}")).ok());
  }
  UseLimits("default: {max_priority: 0}\nusers: {root: {max_priority: 5}}");
  EXPECT_TRUE(SubmitAs("root", JobYaml(1, 1, "{priority: 5}")).ok());
  absl::StatusOr<std::string> refused = SubmitAs("root", JobYaml(1, 1, "{priority: 6}"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("users.root.max_priority"));
}

TEST_F(FairShareTest, QueuedJobsBeyondTheLimitAreRefusedAlsoAfterARestart) {
  UseLimits("default: {max_queued_jobs: 2}");
  ASSERT_TRUE(SubmitAs("carol", JobYaml(1, 1, ""), {}, "k1").ok());  // no worker: they queue
  ASSERT_TRUE(SubmitAs("carol", JobYaml(1, 1, "")).ok());
  absl::StatusOr<std::string> third = SubmitAs("carol", JobYaml(1, 1, ""));
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(),
              AllOf(HasSubstr("user carol has 2 job(s) queued, max_queued_jobs 2"),
                    HasSubstr("default.max_queued_jobs")));
  EXPECT_TRUE(SubmitAs("dave", JobYaml(1, 1, "")).ok());  // per user
  // A retry of an accepted submission is answered, not refused.
  EXPECT_TRUE(SubmitAs("carol", JobYaml(1, 1, ""), {}, "k1").ok());

  UseLimits("default: {max_queued_jobs: 2}");  // a restart: the count comes from the store
  third = SubmitAs("carol", JobYaml(1, 1, ""));
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);

  // Once a job leaves the queue there is room again.
  Worker a = AddWorker("a", 1);
  coordinator_->Tick();
  EXPECT_TRUE(SubmitAs("carol", JobYaml(1, 1, "")).ok());
}

TEST_F(FairShareTest, RunningRanksBeyondTheLimitWaitWithoutHoldingBackOthers) {
  UseLimits("users: {alice: {max_running_ranks: 2}}");
  Worker a = AddWorker("a", 2);
  Worker b = AddWorker("b", 2);
  const std::vector<const Worker*> workers = {&a, &b};
  absl::StatusOr<std::string> first = SubmitAs("alice", JobYaml(1, 2, ""));
  absl::StatusOr<std::string> second = SubmitAs("alice", JobYaml(1, 2, "{priority: 5}"));
  ASSERT_TRUE(first.ok() && second.ok());
  coordinator_->Tick();
  // The higher-priority second job went first; the other waits for alice's ranks.
  EXPECT_EQ(State(*second), JobState::kStarting);
  EXPECT_EQ(State(*first), JobState::kQueued);
  EXPECT_EQ(Job(*first).pending_code, PendingCode::kUserRankLimit);
  EXPECT_EQ(Job(*first).record.state_reason,
            "waiting for user alice's running ranks to drop: needs 2 slots (1 pipeline stage x 2 "
            "data-parallel); alice holds 2 of max_running_ranks 2 (limits file, "
            "users.alice.max_running_ranks)");
  // Bob's job, submitted later with a lower priority, is not held back by it.
  absl::StatusOr<std::string> bob = SubmitAs("bob", JobYaml(1, 2, "{priority: -1}"));
  ASSERT_TRUE(bob.ok());
  coordinator_->Tick();
  EXPECT_EQ(State(*bob), JobState::kStarting);
  EXPECT_EQ(State(*first), JobState::kQueued);

  // Alice's running job ends: the waiting one starts.
  const Worker* holder = Holder(workers, *second);
  ASSERT_NE(holder, nullptr);
  Running(*holder);
  Exit(*holder, 0);
  coordinator_->Tick();
  EXPECT_EQ(State(*second), JobState::kSucceeded);
  coordinator_->Tick();
  EXPECT_EQ(State(*first), JobState::kStarting);

  // A gang that could never fit the limit is refused at once.
  absl::StatusOr<std::string> big = SubmitAs("alice", JobYaml(2, 2, ""));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(big.status().message(), HasSubstr("needs 4 ranks, more than max_running_ranks 2"));
}

TEST_F(FairShareTest, RunningRanksCountAfterARestartAndLimitsCanBeReplaced) {
  options_.reattach_window = std::chrono::minutes(10);  // the old worker never comes back
  UseLimits("default: {max_running_ranks: 1}");
  Worker a = AddWorker("a", 1);
  absl::StatusOr<std::string> running = SubmitAs("carol", JobYaml(1, 1, ""));
  ASSERT_TRUE(running.ok());
  coordinator_->Tick();
  Running(a);
  coordinator_->Tick();
  ASSERT_EQ(State(*running), JobState::kRunning);
  absl::StatusOr<std::string> waiting = SubmitAs("carol", JobYaml(1, 1, ""));
  ASSERT_TRUE(waiting.ok());

  // Restarted: the running job is reattaching (its worker has not come back), yet its rank
  // still counts, so a new worker does not get carol's second job.
  UseLimits("default: {max_running_ranks: 1}");
  Worker b = AddWorker("b", 1);
  coordinator_->Tick();
  EXPECT_EQ(State(*waiting), JobState::kQueued);
  EXPECT_EQ(Job(*waiting).pending_code, PendingCode::kUserRankLimit);
  EXPECT_TRUE(b.sink->assignments.empty());

  // The admin raises the limit (SIGHUP): it starts at the next pass.
  absl::StatusOr<LimitsConfig> raised = ParseLimits("default: {max_running_ranks: 2}", "l.yaml");
  ASSERT_TRUE(raised.ok());
  coordinator_->SetLimits(*raised);
  coordinator_->Tick();
  EXPECT_EQ(State(*waiting), JobState::kStarting);
}

TEST_F(FairShareTest, TeamJobsAreChargedToTheTeamAsWellAsTheUser) {
  UseLimits(kExample);
  Worker a = AddWorker("a", 32);
  Worker b = AddWorker("b", 2);
  // Only a member may charge a team; the team's own max_priority applies too.
  absl::StatusOr<std::string> outsider = SubmitAs("carol", JobYaml(1, 1, "{team: nlp}"), {"cv"});
  ASSERT_FALSE(outsider.ok());
  EXPECT_EQ(outsider.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(outsider.status().message(),
              HasSubstr("scheduling.team: user carol is not a member of team 'nlp' (their teams "
                        "in the tokens file: cv)"));
  absl::StatusOr<std::string> urgent =
      SubmitAs("alice", JobYaml(1, 1, "{team: nlp, priority: 60}"), {"nlp"});
  ASSERT_FALSE(urgent.ok());
  EXPECT_THAT(urgent.status().message(),
              HasSubstr("is above max_priority 50 of team nlp (limits file limits.yaml, "
                        "teams.nlp.max_priority)"));
  EXPECT_TRUE(SubmitAs("root", JobYaml(1, 1, "{team: vision}")).ok());  // admins: any team
  EXPECT_EQ(SubmitAs("root", JobYaml(1, 1, "{team: ../x}")).status().code(),
            absl::StatusCode::kInvalidArgument);

  // alice's 16 ranks and bob's 16 fill the team's 32: dave's team job waits, carol's job (her
  // own account only) still runs.
  absl::StatusOr<std::string> alice = SubmitAs("alice", JobYaml(2, 8, "{team: nlp}"), {"nlp"});
  absl::StatusOr<std::string> bob = SubmitAs("bob", JobYaml(2, 8, "{team: nlp}"), {"nlp"});
  ASSERT_TRUE(alice.ok() && bob.ok());
  coordinator_->Tick();
  ASSERT_EQ(State(*alice), JobState::kStarting);
  absl::StatusOr<std::string> more = SubmitAs("dave", JobYaml(1, 1, "{team: nlp}"), {"nlp"});
  absl::StatusOr<std::string> carol = SubmitAs("carol", JobYaml(1, 1, ""));
  ASSERT_TRUE(more.ok() && carol.ok());
  coordinator_->Tick();
  EXPECT_EQ(Job(*bob).pending_code, std::nullopt);  // placed: 16 + 16 = 32
  EXPECT_EQ(State(*more), JobState::kQueued);
  EXPECT_EQ(Job(*more).pending_code, PendingCode::kTeamRankLimit);
  EXPECT_THAT(Job(*more).record.state_reason,
              HasSubstr("waiting for team nlp's running ranks to drop: needs 1 slot (1 pipeline "
                        "stage x 1 data-parallel); nlp holds 32 of max_running_ranks 32"));
  EXPECT_EQ(State(*carol), JobState::kStarting);
}

}  // namespace
}  // namespace deepnet::coordinator
