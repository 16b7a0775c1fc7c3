#pragma once
// A job's stored side: its JobRecord and events as the job store holds them, and every write to
// the store for the job (transitions, events, progress). The record's last_step runs ahead of
// the store between throttled progress writes; a terminal transition writes it first. A finished
// job's spec (up to 1 MiB) is not kept in memory: record().spec_yaml is then empty, and whoever
// shows it reads the store's copy (Coordinator::WithStoredSpec, ListJobs with specs), so memory
// grows with the jobs that run, not with the history.
//
// Not thread-safe: called by its JobRun with the coordinator's mutex held.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "coordinator/core/coordinator_types.h"
#include "coordinator/core/job_event_log.h"
#include "coordinator/core/job_run_context.h"
#include "coordinator/store/job_state.h"
#include "coordinator/store/job_store.h"

namespace deepnet::coordinator {

class StoredJob {
 public:
  // `store` and `observer` must outlive this; the observer hears of new events (OnJobFeed).
  StoredJob(JobStore* store, JobRunObserver* observer, JobRecord record);

  const JobRecord& record() const { return record_; }
  // Whether the job is finished and its spec left to the store (record().spec_yaml empty).
  bool spec_released() const { return spec_released_; }
  const JobEventLog& events() const { return events_; }

  // Reads every stored event (at coordinator start).
  absl::Status LoadEvents();
  // Appends the stored events newer than events() (after a transition wrote one).
  void SyncEvents();
  // Moves the job to `to` (the store checks it against the transition table).
  absl::Status Transition(JobState to, const std::string& reason,
                          std::optional<RecoveryCause> cause);
  // Stores an event; its attempt defaults to the current one. A failure is logged.
  void AddEvent(JobEventView event);
  // The latest step, in memory only.
  void SetLastStep(int64_t step) { record_.last_step = step; }
  // Writes `step` as the job's latest step. A failure is logged.
  void PersistStep(int64_t step);

 private:
  // Sets record_ (from the store) and releases the spec of a finished job.
  void Keep(JobRecord record);

  JobStore* const store_;
  JobRunObserver* const observer_;
  JobRecord record_;
  bool spec_released_ = false;
  JobEventLog events_;
};

}  // namespace deepnet::coordinator
