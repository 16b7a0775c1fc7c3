#pragma once
// The run-time state of one job (JobRun), in small structs by concern. None of it is stored:
// what a restarted coordinator must know is in the JobRecord (the job store) and its events;
// the rest is rebuilt from the store and from what workers report.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/core/coordinator_types.h"
#include "coordinator/scheduler/gang_types.h"

namespace deepnet::coordinator {

using JobClock = std::chrono::steady_clock;

// One rank of the current attempt.
struct RankRun {
  RankView view;
  TaskPhase phase = TaskPhase::kStarting;
  bool exited = false;
  bool clean_exit = false;  // exited with code 0
};

// The current attempt: its ranks, whether it holds or waits for slots, and its progress.
struct AttemptState {
  std::vector<RankRun> ranks;  // [rank]; empty when none runs
  bool placed = false;         // holds scheduler slots
  bool queued = false;         // in the scheduler queue
  int64_t max_step = 0;        // highest step reported by the attempt
  // The checkpoint step a restart announced (what `latest` names in checkpoint.dir, the one the
  // new attempt loads first) and the step the attempt reports it resumed from.
  std::optional<int64_t> announced_resume_step;
  std::optional<int64_t> resumed_step;
};

// Why a queued job waits, recomputed by every scheduling pass; kept in memory only (a restarted
// coordinator recomputes it), so queueing costs no second store write. The code is unset until
// the first pass after the job was queued.
struct PendingState {
  std::string reason;
  std::optional<PendingCode> code;
};

struct JobTimers {
  JobClock::time_point state_since;
  JobClock::time_point last_progress;
  JobClock::time_point progress_written;  // when the step was last written to the store
  // After a placement refused for a passing reason (RecoveryCause::kPlacementRefused): queued
  // again at `requeue_at`; the backoff doubles with each such refusal in a row (1 s to 30 s)
  // and starts over once the job runs.
  std::optional<JobClock::time_point> requeue_at;
  int placement_refusals = 0;
};

// What happens once a stopping job's ranks have all exited.
enum class AfterStop { kRestart, kCancel, kFail };

struct StopIntent {
  bool stopping = false;
  AfterStop after = AfterStop::kRestart;
  std::string message;
  JobClock::time_point deadline;
  // Why the ranks fail (kRestart), for storing RECOVERING again when the first write failed.
  std::optional<RecoveryCause> cause;
  // Store writes that ended the stop and failed in a row: FinishStop runs again after a backoff
  // (the job never stays between states because one write failed).
  int store_failures = 0;
};

// Milestones the API shows and metrics observe once.
struct JobMilestones {
  int64_t start_time_ms = 0;  // first RUNNING; 0 before
  int64_t end_time_ms = 0;    // terminal; 0 before
  bool ever_started = false;  // observed queue wait
  bool ever_running = false;  // observed time to running
  int64_t latest_checkpoint_step = 0;
  std::map<int64_t, int> checkpoint_attempts;  // checkpoint step -> attempt that wrote it
};

}  // namespace deepnet::coordinator
