#include "coordinator/store/job_state.h"

#include <deque>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace deepnet::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

bool Allowed(JobState from, JobState to) { return CheckTransition(from, to).ok(); }

// States reachable from `start` through the table.
std::set<JobState> ReachableFrom(JobState start) {
  std::set<JobState> seen = {start};
  std::deque<JobState> frontier = {start};
  while (!frontier.empty()) {
    const JobState state = frontier.front();
    frontier.pop_front();
    for (const auto& [from, to] : AllowedJobTransitions()) {
      if (from == state && seen.insert(to).second) frontier.push_back(to);
    }
  }
  return seen;
}

TEST(JobStateTest, NamesRoundTripThroughParse) {
  for (JobState state : AllJobStates()) {
    absl::StatusOr<JobState> parsed = ParseJobState(ToString(state));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, state);
  }
  for (RecoveryCause cause :
       {RecoveryCause::kWorkerExit, RecoveryCause::kWorkerLost, RecoveryCause::kHang,
        RecoveryCause::kStartTimeout}) {
    absl::StatusOr<RecoveryCause> parsed = ParseRecoveryCause(ToString(cause));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, cause);
  }
  EXPECT_EQ(ToString(JobState::kRecovering), "RECOVERING");
  EXPECT_EQ(ToString(RecoveryCause::kWorkerLost), "WORKER_LOST");
}

TEST(JobStateTest, ParseRejectsUnknownNamesAndNamesThem) {
  absl::StatusOr<JobState> state = ParseJobState("queued");
  EXPECT_EQ(state.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(state.status().message(), HasSubstr("'queued'"));
  absl::StatusOr<RecoveryCause> cause = ParseRecoveryCause("OOM");
  EXPECT_EQ(cause.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cause.status().message(), HasSubstr("'OOM'"));
}

TEST(JobStateTest, TerminalStatesAreExactlyThoseWithoutExits) {
  for (JobState state : AllJobStates()) {
    bool has_exit = false;
    for (const auto& [from, to] : AllowedJobTransitions()) has_exit |= from == state;
    EXPECT_EQ(IsTerminal(state), !has_exit) << ToString(state);
  }
  EXPECT_TRUE(IsTerminal(JobState::kSucceeded));
  EXPECT_TRUE(IsTerminal(JobState::kFailed));
  EXPECT_TRUE(IsTerminal(JobState::kCancelled));
  EXPECT_FALSE(IsTerminal(JobState::kRecovering));
}

TEST(JobStateTest, EveryStateIsReachableFromQueued) {
  EXPECT_EQ(ReachableFrom(JobState::kQueued).size(), AllJobStates().size());
}

TEST(JobStateTest, EveryNonTerminalStateCanBeCancelledAndCanEnd) {
  for (JobState state : AllJobStates()) {
    if (IsTerminal(state)) continue;
    EXPECT_TRUE(Allowed(state, JobState::kCancelled)) << ToString(state);
    EXPECT_TRUE(ReachableFrom(state).count(JobState::kSucceeded)) << ToString(state);
  }
}

TEST(JobStateTest, DocumentedPathsAreAllowed) {
  using S = JobState;
  const std::pair<S, S> expected[] = {
      {S::kQueued, S::kPlacing},      {S::kPlacing, S::kStarting},   {S::kStarting, S::kRunning},
      {S::kRunning, S::kSucceeded},   {S::kRunning, S::kFailed},     {S::kRunning, S::kCancelled},
      {S::kRunning, S::kRecovering},  {S::kRecovering, S::kPlacing}, {S::kStarting, S::kRecovering},
      {S::kPlacing, S::kQueued},      {S::kRecovering, S::kFailed},
  };
  for (const auto& [from, to] : expected) {
    EXPECT_TRUE(Allowed(from, to)) << ToString(from) << " -> " << ToString(to);
  }
}

TEST(JobStateTest, RejectedTransitionsNameBothStates) {
  using S = JobState;
  const std::pair<S, S> forbidden[] = {
      {S::kQueued, S::kRunning},     {S::kQueued, S::kSucceeded}, {S::kSucceeded, S::kRunning},
      {S::kFailed, S::kQueued},      {S::kCancelled, S::kPlacing}, {S::kRunning, S::kQueued},
      {S::kRunning, S::kRunning},    {S::kRecovering, S::kRunning}, {S::kQueued, S::kRecovering},
      {S::kPlacing, S::kRunning},
  };
  for (const auto& [from, to] : forbidden) {
    absl::Status status = CheckTransition(from, to);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr(std::string(ToString(from)) + " -> " + std::string(ToString(to)))));
  }
}

TEST(JobStateTest, TableHasNoDuplicatesOrSelfLoops) {
  std::set<std::pair<JobState, JobState>> seen;
  for (const auto& transition : AllowedJobTransitions()) {
    EXPECT_TRUE(seen.insert(transition).second) << ToString(transition.first);
    EXPECT_NE(transition.first, transition.second) << ToString(transition.first);
  }
}

}  // namespace
}  // namespace deepnet::coordinator
