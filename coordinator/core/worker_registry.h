#pragma once
// The registered worker daemons: their epochs (WorkerEpochStore), sessions, heartbeat leases,
// draining, and the cancellations queued for a worker without a session. Keeps the gang
// scheduler's view of each worker (slots, ready/draining/lost) in step. What a change means for
// the jobs (lost ranks, task lists) is the Coordinator's to act on.
//
// Not thread-safe: the Coordinator calls every method with its mutex held.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/core/coordinator_metrics.h"
#include "coordinator/core/coordinator_types.h"
#include "coordinator/scheduler/gang_scheduler.h"
#include "coordinator/core/job_run_context.h"
#include "coordinator/store/worker_epoch_store.h"

namespace deepnet::coordinator {

class WorkerRegistry : public WorkerCommands {
 public:
  using Clock = std::chrono::steady_clock;

  struct Worker {
    std::string id;
    int64_t epoch = 0;
    std::string session_secret;  // Of this epoch's registration (RegistrationResult).
    HostFacts host;
    std::vector<SlotFacts> slots;
    std::shared_ptr<WorkerCommandSink> sink;
    Clock::time_point last_heard;
    bool lost = false;
    // Shutting down (WorkerDraining, or registered with draining): DRAINING until it is lost
    // or registers again without it; nothing is placed on it, nothing cancelled there.
    bool draining = false;
    std::chrono::milliseconds drain_grace{0};  // Its trainers' grace period when draining.
    int missed_reported = 0;
    std::vector<CancellationCommand> pending_cancels;
  };

  // Called for a worker that was lost, with the ranks it held and why.
  using OnLost = std::function<void(const std::string& worker_id,
                                    const std::vector<LostRanks>& lost, const std::string& why)>;

  // The pointers must outlive the registry; `metrics` may be null.
  WorkerRegistry(WorkerEpochStore* epochs, GangScheduler* scheduler, CoordinatorMetrics* metrics,
                 std::chrono::milliseconds heartbeat_interval, int lease_heartbeats);

  // INVALID_ARGUMENT naming the field for a bad worker name or slot list.
  static absl::Status CheckRegistration(const Registration& registration);
  // First half of a registration: a new epoch, the old session closed, and the worker removed
  // from the scheduler when its slots changed (*lost: the ranks it held then).
  absl::StatusOr<int64_t> BeginRegistration(const Registration& registration,
                                            std::vector<LostRanks>* lost);
  // Second half: the worker as registered, DRAINING until its session opens.
  absl::StatusOr<Worker*> CompleteRegistration(const Registration& registration, int64_t epoch);
  int64_t lease_ms() const;

  // The worker at `epoch`: NOT_FOUND unknown, ABORTED stale or lost.
  absl::StatusOr<Worker*> Current(const std::string& worker_id, int64_t epoch);
  // Current(), and the worker was just heard from.
  absl::StatusOr<Worker*> Heard(const std::string& worker_id, int64_t epoch);
  // PERMISSION_DENIED when `session_secret` is not the one of the registration at `epoch`.
  absl::Status AttachSession(const std::string& worker_id, int64_t epoch,
                             const std::string& session_secret,
                             std::shared_ptr<WorkerCommandSink> sink);
  // Whether `sink` was the worker's session at `epoch` (it is then gone).
  bool DetachSession(const std::string& worker_id, int64_t epoch, const WorkerCommandSink* sink);
  // Whether the worker just started draining (false: it already was).
  bool BeginDraining(Worker& worker, std::chrono::milliseconds grace, const std::string& reason);
  void SendLease(const Worker& worker);
  // Counts missed heartbeats and loses every worker whose lease ran out (on_lost for each).
  void ExpireLeases(Clock::time_point now, const OnLost& on_lost);
  // Closes every session (the coordinator shuts down).
  void CloseAll(const absl::Status& why);

  const Worker* Find(const std::string& worker_id) const;
  static WorkerState StateOf(const Worker& w);
  std::map<WorkerState, int64_t> CountByState() const;
  // Every worker as ListWorkers shows it, its slots' facts by index (holders not filled in).
  std::vector<WorkerView> Views(Clock::time_point now) const;

  // WorkerCommands.
  void SendCancel(const std::string& worker_id, const CancellationCommand& command) override;
  bool HasSession(const std::string& worker_id) const override;
  bool SendAssignment(const std::string& worker_id, const AssignmentCommand& command) override;
  std::optional<std::chrono::milliseconds> DrainGrace(const std::string& worker_id) const override;

 private:
  WorkerEpochStore* const epochs_;
  GangScheduler* const scheduler_;
  CoordinatorMetrics* const metrics_;
  const std::chrono::milliseconds heartbeat_interval_;
  const int lease_heartbeats_;
  std::map<std::string, Worker> workers_;
};

}  // namespace deepnet::coordinator
