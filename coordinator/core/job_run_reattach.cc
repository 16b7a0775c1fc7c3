// JobRun after a coordinator restart: re-adopting a running attempt once its workers have
// reported every rank (coordinator_tasks.cc matches their task lists), or restarting it when
// they do not within the reattach window.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/job_run.h"

namespace deepnet::coordinator {

void JobRun::MaybeCompleteReattach() {
  const int64_t world = record().world_size();
  JobReattach::Outcome outcome = reattach_.Check(world, record().data_parallel);
  switch (outcome.kind) {
    case JobReattach::Outcome::Kind::kWaiting:
      return;
    case JobReattach::Outcome::Kind::kEnded:
      // Nothing runs any more: the job ended while we were away.
      (void)reattach_.End();
      if (outcome.all_clean) {
        if (record().state == JobState::kStarting) (void)Move(JobState::kRunning, "all ranks ran");
        (void)Move(JobState::kSucceeded, "all ranks finished while the coordinator was away");
      } else if (Move(JobState::kRecovering, outcome.failed, RecoveryCause::kWorkerExit).ok()) {
        stop_.after = AfterStop::kRestart;
        stop_.message = outcome.failed;
        FinishStop();
      }
      return;
    case JobReattach::Outcome::Kind::kReadopt:
      break;
  }
  Placement placement;
  placement.job_id = record().id;
  placement.pipeline_stages = record().pipeline_stages;
  placement.data_parallel = record().data_parallel;
  for (const RankRun& r : outcome.ranks) {
    placement.ranks.push_back(RankSlot{r.view.worker_id, r.view.slot});
  }
  if (absl::Status s = context_.scheduler->RestorePlacement(placement); !s.ok()) {
    spdlog::warn("job {}: cannot re-adopt its ranks: {}", record().id, s.ToString());
    return;  // stays reattaching; the window's end restarts it
  }
  attempt_.placed = true;
  attempt_.ranks = std::move(outcome.ranks);
  (void)reattach_.End();
  timers_.last_progress = timers_.state_since = JobClock::now();
  (void)context_.rendezvous->OpenAttempt({record().id, record().attempt});
  spdlog::info("job {}: re-adopted all {} ranks of attempt {}", record().id, world,
               record().attempt);
  if (!outcome.failed.empty()) {
    FailRanks(RecoveryCause::kWorkerExit, outcome.failed);
  } else {
    CheckAllRunning();
  }
}

void JobRun::ReattachTimedOut() {
  const std::map<int, RankView> found = reattach_.End();
  const std::string why =
      absl::StrCat("only ", found.size(), " of ", record().world_size(),
                   " ranks reported after the coordinator restarted");
  for (const auto& [rank, view] : found) {
    context_.workers->SendCancel(
        view.worker_id,
        CancellationCommand{record().id, record().attempt, why, context_.stop_grace.count()});
  }
  if (Move(JobState::kRecovering, why, RecoveryCause::kWorkerLost).ok()) {
    stop_.after = AfterStop::kRestart;
    stop_.message = why;
    FinishStop();
  }
}

}  // namespace deepnet::coordinator
