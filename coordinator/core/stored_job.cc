#include "coordinator/core/stored_job.h"

#include <spdlog/spdlog.h>

#include "coordinator/core/job_events.h"

namespace deepnet::coordinator {

StoredJob::StoredJob(JobStore* store, JobRunObserver* observer, JobRecord record)
    : store_(store), observer_(observer) {
  Keep(std::move(record));
}

void StoredJob::Keep(JobRecord record) {
  record_ = std::move(record);
  spec_released_ = IsTerminal(record_.state);
  if (spec_released_) std::string().swap(record_.spec_yaml);
}


absl::Status StoredJob::LoadEvents() {
  absl::StatusOr<std::vector<JobEvent>> stored = store_->ListEvents(record_.id, 0);
  if (!stored.ok()) return stored.status();
  events_.Append(*stored);
  return absl::OkStatus();
}

void StoredJob::SyncEvents() {
  absl::StatusOr<std::vector<JobEvent>> stored =
      store_->ListEvents(record_.id, events_.last_sequence());
  if (!stored.ok()) {
    spdlog::error("job {}: reading its new events: {}", record_.id, stored.status().ToString());
    return;
  }
  if (events_.Append(*stored) > 0) observer_->OnJobFeed(record_.id);
}

absl::Status StoredJob::Transition(JobState to, const std::string& reason,
                                   std::optional<RecoveryCause> cause) {
  // The step lives in memory between throttled writes: store it with the final state.
  const int64_t step = record_.last_step;
  if (IsTerminal(to)) PersistStep(step);
  StateChange change;
  change.expected = record_.state;
  change.to = to;
  change.reason = reason;
  change.cause = cause;
  absl::StatusOr<JobRecord> updated = store_->Transition(record_.id, change);
  if (!updated.ok()) {
    spdlog::error("job {}: {} -> {} failed: {}", record_.id, std::string(ToString(record_.state)),
                  std::string(ToString(to)), updated.status().ToString());
    return updated.status();
  }
  Keep(*std::move(updated));
  record_.last_step = step;
  SyncEvents();
  return absl::OkStatus();
}

void StoredJob::AddEvent(JobEventView event) {
  event.attempt = event.attempt != 0 ? event.attempt : record_.attempt;
  const EncodedEvent encoded = EncodeJobEvent(event);
  absl::StatusOr<JobEvent> stored = store_->AppendEvent(record_.id, encoded.kind, encoded.message);
  if (!stored.ok()) {
    spdlog::error("job {}: recording a {} event failed: {}", record_.id, encoded.kind,
                  stored.status().ToString());
    return;
  }
  events_.Append({*stored});
  observer_->OnJobFeed(record_.id);
}

void StoredJob::PersistStep(int64_t step) {
  JobProgress progress;
  progress.last_step = step;
  progress.expected_attempt = record_.attempt;
  absl::StatusOr<JobRecord> updated = store_->UpdateProgress(record_.id, progress);
  if (updated.ok()) {
    Keep(*std::move(updated));
  } else {
    spdlog::warn("job {}: recording step {}: {}", record_.id, step, updated.status().ToString());
  }
}

}  // namespace deepnet::coordinator
