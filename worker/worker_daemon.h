#pragma once
// The worker daemon's control loop: registers with the coordinator's WorkerService, keeps one
// Session stream open (heartbeats, lease renewals, assignments, cancellations, trainer exits,
// metric reports, requests for trainer logs) and runs the assigned trainers through a
// TrainerSupervisor. Survives the coordinator's restarts: trainers keep running while it
// registers again (listing them) and opens a new session. Torch-free.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/host_resources.h"
#include "worker/trainer_supervisor.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc
namespace deepnet::v1 {
class CoordinatorMessage;
class WorkerMessage;
}  // namespace deepnet::v1

namespace deepnet::worker {

struct WorkerDaemonOptions {
  // host:port of the coordinator.
  std::string coordinator;
  // PEM CA file; non-empty turns TLS on. tls_server_name overrides the name checked.
  std::string ca_cert_file;
  std::string tls_server_name;
  // Bearer token of this worker; empty sends none.
  std::string token;
  // Stable worker name (the coordinator maps it to the same worker id); non-empty.
  std::string worker_name;
  HostFacts host;
  // What the trainers run with; supervisor.slots are the worker's slots (non-empty).
  SupervisorOptions supervisor;
  // Deadline of every unary call (RegisterWorker). > 0.
  std::chrono::milliseconds rpc_timeout{10000};
  // Retry delays after a failed registration or a broken session: from 100 ms, doubling, up
  // to this. > 0.
  std::chrono::milliseconds max_backoff{2000};
  // How often trainers are checked for exits and output. > 0.
  std::chrono::milliseconds poll_interval{50};
  // Heartbeat period when the coordinator names none.
  std::chrono::milliseconds default_heartbeat_interval{1000};
};

[[nodiscard]] absl::Status Validate(const WorkerDaemonOptions& options);

// Progress of the daemon, for tests and logs.
struct WorkerDaemonState {
  std::string worker_id;
  // Epoch of the current registration; 0 before the first.
  int64_t epoch = 0;
  // Whether a session stream is open now.
  bool connected = false;
  // Registrations that succeeded so far.
  int registrations = 0;
};

// How the trainers ended when the worker stopped (Shutdown). deepnet-worker exits with
// job::kWorkerLostTrainerStateExitCode when state_lost() (docs/OPERATIONS.md), so that a script
// that stopped it (deploy/slurm/deepnet-service.sbatch) knows whether every trainer's state is in
// a checkpoint without racing the trainers' writes.
struct WorkerStopSummary {
  int trainers = 0;  // Running when Shutdown began (or started since) and reaped by it.
  int unsaved = 0;   // Of those, ended with StopCheckpoint::kNotSaved (killed, failed, exit 80).
  int left = 0;      // Not reaped when Shutdown gave up: their state is lost too.
  bool state_lost() const { return unsaved > 0 || left > 0; }
};

// Thread-safety: safe for concurrent use. Start() runs two threads of its own: the session
// thread (registration, reading commands) and the supervision thread (reaping, heartbeats,
// sending exits and metrics); writes to the stream are serialised by a lock.
class WorkerDaemon {
 public:
  // Validates the options and makes the channel (does not connect). InvalidArgument naming the
  // option or flag.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<WorkerDaemon>> Create(
      const WorkerDaemonOptions& options);
  // Shutdown(0) if still running.
  ~WorkerDaemon();
  WorkerDaemon(const WorkerDaemon&) = delete;
  WorkerDaemon& operator=(const WorkerDaemon&) = delete;

  // Starts the threads; returns at once. Call once.
  void Start();
  // Tells the coordinator (when connected) that this worker is draining (WorkerDraining with
  // `reason` and `grace`), then stops every trainer (SIGTERM, SIGKILL after `grace`; no new one
  // starts), waits until all were reaped and, when connected, their exits were sent (at most
  // grace + 5 s), then closes the session and joins the threads. Blocks. Idempotent: a second
  // call returns an empty summary.
  WorkerStopSummary Shutdown(std::chrono::milliseconds grace,
                             const std::string& reason = "shutting down");

  WorkerDaemonState state() const;
  std::vector<TaskSnapshot> Tasks() const;
  // Trainer exits written to a session that the coordinator has not acknowledged yet
  // (CoordinatorMessage.ack_sequence); they are sent again on the next session.
  size_t unacknowledged_exits() const;

 private:
  struct Session;
  struct Outbox;

  WorkerDaemon(const WorkerDaemonOptions& options, std::shared_ptr<grpc::Channel> channel);
  void SessionLoop();
  void SupervisionLoop();
  // One registration + session; returns when the stream ends. False when registering failed.
  bool RunSession();
  void HandleCommand(const v1::CoordinatorMessage& message);
  // Answers a LogRequest with a LogChunk (read on the session thread: at most 64 KiB).
  void AnswerLog(const v1::CoordinatorMessage& message);
  // Stamps `message` with the session's worker id, epoch and next sequence number and writes
  // it; false when no session is open or the write failed.
  bool Send(v1::WorkerMessage& message);
  void FlushOutbox();
  // The coordinator processed this session's messages up to `sequence`: exits up to it are safe.
  void Acknowledge(int64_t epoch, int64_t sequence);
  // A new session: exits a lost session never acknowledged go out again, first.
  void RequeueUnacknowledged();
  void SendHeartbeatIfDue();
  void WaitFor(std::chrono::milliseconds delay);

  const WorkerDaemonOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  struct Rpc;
  std::unique_ptr<Rpc> rpc_;  // The WorkerService stub (safe for concurrent use).
  TrainerSupervisor supervisor_;

  int register_failures_ = 0;  // In a row; used by the session thread only.
  std::atomic<bool> stopping_{false};
  // Trainers that ended after Shutdown began, and those of them whose state no checkpoint holds
  // (StopCheckpoint::kNotSaved); counted on the supervision thread.
  std::atomic<int> stopped_trainers_{0};
  std::atomic<int> stopped_unsaved_{0};
  std::mutex wait_mu_;
  std::condition_variable wake_;  // Ends backoff waits at shutdown.

  // Lock order: outbox_mu_, then session_mu_; timing_mu_ and cancel_mu_ are leaves.
  mutable std::mutex session_mu_;     // Serialises stream writes (which may block) and guards:
  std::unique_ptr<Session> session_;  // null between sessions.
  std::atomic<int64_t> epoch_{0};     // Of the current registration; commands are checked on it.

  mutable std::mutex state_mu_;
  WorkerDaemonState state_;  // Guarded by state_mu_.

  std::mutex timing_mu_;  // Guards the four below.
  std::chrono::milliseconds heartbeat_interval_{1000};
  std::chrono::milliseconds lease_duration_{0};
  std::chrono::steady_clock::time_point next_heartbeat_;
  std::chrono::steady_clock::time_point last_heard_;  // Last message from the coordinator.

  std::mutex cancel_mu_;
  grpc::ClientContext* active_context_ = nullptr;  // Of the open stream; guarded by cancel_mu_.
  void CancelSession(const char* why);
  void Watchdog();

  mutable std::mutex outbox_mu_;
  std::unique_ptr<Outbox> outbox_;  // Guarded by outbox_mu_: exits and reports not yet sent.

  std::atomic<bool> supervision_stop_{false};
  std::mutex shutdown_mu_;  // Makes Shutdown idempotent; guards the two flags.
  bool started_ = false;
  bool shut_down_ = false;
  std::thread session_thread_;
  std::thread supervision_thread_;
};

}  // namespace deepnet::worker
