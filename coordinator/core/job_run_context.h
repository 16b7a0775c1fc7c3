#pragma once
// What a JobRun's transitions reach beyond the job itself, as narrow collaborators. Every one
// is called with the coordinator's mutex held (coordinator.h, "Threading") and must not call
// back into the coordinator.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "coordinator/auth/trainer_credentials.h"
#include "coordinator/core/coordinator_metrics.h"
#include "coordinator/core/coordinator_types.h"
#include "coordinator/scheduler/gang_scheduler.h"
#include "coordinator/store/job_state.h"
#include "coordinator/store/job_store.h"
#include "coordinator/rendezvous/rendezvous_store.h"

namespace deepnet::coordinator {

// Sending commands to workers (WorkerRegistry implements it). Sends only queue.
class WorkerCommands {
 public:
  virtual ~WorkerCommands() = default;
  // Cancels an attempt's trainers on the worker: over its session, or queued for its next one;
  // nothing for a lost worker, nor for a draining one (it stops its trainers itself, with its
  // own grace period).
  virtual void SendCancel(const std::string& worker_id, const CancellationCommand& command) = 0;
  // Whether the worker is registered, not lost and has a session (an assignment reaches it).
  virtual bool HasSession(const std::string& worker_id) const = 0;
  // Sends an assignment over the worker's session; false when it has none (nothing is sent).
  virtual bool SendAssignment(const std::string& worker_id, const AssignmentCommand& command) = 0;
  // The grace period a draining worker gives its trainers; nullopt when it is not draining.
  virtual std::optional<std::chrono::milliseconds> DrainGrace(
      const std::string& worker_id) const = 0;
};

// What the coordinator keeps across jobs, told of each job's changes.
class JobRunObserver {
 public:
  virtual ~JobRunObserver() = default;
  // A job moved between states (state counts and gauges follow).
  virtual void OnJobStateChanged(JobState from, JobState to) = 0;
  // The job's events, metric points or state changed (streams wake).
  virtual void OnJobFeed(const std::string& job_id) = 0;
  // The scheduler's queue or held slots changed: a scheduling pass is due.
  virtual void OnScheduleChanged() = 0;
};

// The collaborators and settings every JobRun of one coordinator shares.
struct JobRunContext {
  JobStore* store = nullptr;
  GangScheduler* scheduler = nullptr;
  RendezvousStore* rendezvous = nullptr;
  CoordinatorMetrics* metrics = nullptr;  // may be null
  WorkerCommands* workers = nullptr;
  JobRunObserver* observer = nullptr;
  // SIGTERM -> SIGKILL grace sent with cancellations; how long a stop waits for exit reports.
  std::chrono::milliseconds stop_grace{0};
  std::chrono::milliseconds stop_timeout{0};
  size_t points_per_job = 0;  // metric points kept per job
  // Mints each rank's rendezvous credential, sent with its assignment; null: none (no auth).
  const TrainerCredentials* credentials = nullptr;
};

}  // namespace deepnet::coordinator
