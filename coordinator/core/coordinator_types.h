#pragma once
// Plain data the coordinator core exchanges with its gRPC services (which convert to and from
// deepnet.v1 protos at the boundary): worker registrations and reports in, commands out, and
// the job views the JobService serves.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/scheduler/gang_types.h"
#include "coordinator/core/job_spec.h"
#include "coordinator/store/job_state.h"
#include "coordinator/store/job_store.h"
#include "job/stop_exit.h"

namespace deepnet::coordinator {

// --- Workers -> coordinator. ---

struct SlotFacts {
  int index = 0;
  bool cuda = false;
  int device_index = -1;
  // Memory one rank may use on the slot (WorkerSlot.memory_bytes); 0: unknown.
  int64_t memory_bytes = 0;
};

struct HostFacts {
  std::string hostname;
  std::string address;
  int cpu_count = 0;
  int64_t memory_bytes = 0;
  int gpu_count = 0;
  std::vector<std::string> gpu_names;
  std::string version;
  std::string torch_version;
};

enum class TaskPhase { kStarting, kRunning, kStopping, kExited };

// One trainer process as a worker reports it.
struct TaskReport {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  TaskPhase phase = TaskPhase::kStarting;
  int pid = 0;
  int64_t step = 0;
  int slot_index = 0;
  // The checkpoint step the trainer resumed from (0: from scratch); unset until it said.
  std::optional<int64_t> resumed_step = std::nullopt;
};

struct Registration {
  std::string worker_name;
  HostFacts host;
  std::vector<SlotFacts> slots;
  std::vector<TaskReport> running_tasks;
  // The worker is shutting down (RegisterWorkerRequest.draining): it stays DRAINING.
  bool draining = false;
};

struct CancellationCommand {
  std::string job_id;
  int attempt = 0;
  std::string reason;
  int64_t grace_ms = 0;
};

struct RegistrationResult {
  std::string worker_id;
  int64_t epoch = 0;
  // Unguessable, new at every registration: the session of this epoch must present it.
  std::string session_secret;
  int64_t heartbeat_interval_ms = 0;
  int64_t lease_ms = 0;
  // Listed tasks of attempts that are no longer current, to stop before anything else.
  std::vector<CancellationCommand> stale_tasks;
};

// What a trainer that was asked to stop left behind (one definition for the worker and the
// coordinator: job/stop_exit.h).
using job::StopCheckpoint;

struct TrainerExitReport {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  int exit_code = 0;
  int signal = 0;
  std::string message;
  bool requested = false;
  StopCheckpoint checkpoint = StopCheckpoint::kUnspecified;
  // Newest checkpoint step the rank wrote or resumed from; 0 none.
  int64_t checkpoint_step = 0;
};

// Summary over a model's layers of one per-layer value (deepnet.v1.LayerSummary).
struct LayerSummaryValues {
  double min = 0;
  double max = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
};

// One training progress point (deepnet.v1.MetricPoint without the proto).
struct MetricPoint {
  int64_t step = 0;
  double loss = 0;
  double nll = 0;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double update_norm = 0;  // 0: not measured at this step
  int64_t time_ms = 0;
  int attempt = 0;
  int64_t memory_bytes = 0;
  // CUDA memory of the reporting rank (MetricPoint.gpu_*); all 0 on CPU.
  int64_t gpu_allocated_bytes = 0;
  int64_t gpu_reserved_bytes = 0;
  int64_t gpu_peak_allocated_bytes = 0;
  // The latest probe at or before `step` (MetricPoint 14-20); probe_step 0: none.
  int64_t probe_step = 0;
  double probe_update_norm = 0;
  double f0_norm = 0;
  double update_norm_relative = 0;
  double logits_update_norm = 0;
  double logits_f0_norm = 0;
  double logits_update_norm_relative = 0;
  // The latest per-layer diagnostics at or before `step` (MetricPoint 21-23); 0: none.
  int64_t diagnostics_step = 0;
  LayerSummaryValues ln_input_norm;
  LayerSummaryValues layer_grad_norm;
  // A divergence-guard event instead of a step's values (MetricPoint.guard_*): "rollback",
  // "fail" or "plateau"; empty for a normal point.
  std::string guard_event;
  std::string guard_trigger;
  int64_t guard_to_step = 0;
  int guard_retries = 0;
  std::string guard_message;
};

struct MetricReport {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  std::vector<MetricPoint> points;
  std::vector<int64_t> checkpoint_steps;
};

// --- Coordinator -> workers. ---

struct RankAssignmentData {
  int rank = 0;
  int slot_index = 0;
  // The rank's trainer credential for the attempt's rendezvous scope; empty: none.
  std::string rendezvous_credential;
};

struct AssignmentCommand {
  std::string job_id;
  std::string job_uid;  // JobUid(record): the id and its creation time (Assignment.job_uid).
  int attempt = 0;
  std::vector<RankAssignmentData> ranks;
  int world_size = 0;
  std::string config_yaml;
  std::string rendezvous_address;
  // The job's owner, their teams and trainer account from the tokens file (-1: not given).
  std::string owner;
  std::vector<std::string> owner_teams;
  int64_t uid = -1;
  int64_t gid = -1;
};

// Which output of a trainer process: stderr is its human-readable log, stdout its JSON events.
enum class LogStream { kStderr, kStdout };

// The most a worker sends in one answer to a log request (LogRequest.max_bytes' bound).
inline constexpr int64_t kMaxLogChunkBytes = 64 * 1024;

// Asks a worker for part of one trainer log (deepnet.v1.LogRequest without the proto).
struct LogRequestCommand {
  int64_t request_id = 0;
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  LogStream stream = LogStream::kStderr;
  int64_t offset = 0;
  int64_t tail_bytes = 0;  // > 0: read from this many bytes before the end
  int64_t max_bytes = 0;    // 1..kMaxLogChunkBytes; anything else: kMaxLogChunkBytes
};

// A worker's answer to a LogRequestCommand (deepnet.v1.LogChunk).
struct LogChunkReport {
  int64_t request_id = 0;
  std::string data;
  int64_t offset = 0;  // of data's first byte
  int64_t size = 0;    // of the log when read
  bool running = false;  // the trainer still ran just before the read
  absl::Status error;    // the worker's refusal, if any
};

// Where the core sends commands for one worker session. Implementations queue the command
// and return at once (never block, never call back into the coordinator).
class WorkerCommandSink {
 public:
  virtual ~WorkerCommandSink() = default;
  virtual void SendAssignment(int64_t epoch, const AssignmentCommand& command) = 0;
  virtual void SendCancellation(int64_t epoch, const CancellationCommand& command) = 0;
  virtual void SendLease(int64_t epoch, int64_t valid_for_ms, int64_t expire_time_ms) = 0;
  // Queues a log request; false when this session cannot carry one (it is then not sent).
  virtual bool SendLogRequest(int64_t /*epoch*/, const LogRequestCommand& /*command*/) {
    return false;
  }
  // Ends the session (the worker registered again, or the coordinator shuts down).
  virtual void Close(const absl::Status& status) = 0;
};

// --- JobService -> coordinator. ---

struct SubmitRequestData {
  std::string owner;
  std::string idempotency_key;
  std::string config_yaml;
  JobSpecInfo spec;  // ParseSpec(config_yaml)
  // The submitter's role and teams (Principal), for the fair-sharing limits: an admin is limited
  // only by their own users: entry and may charge any team; others only their teams.
  bool admin = false;
  std::vector<std::string> teams = {};
};

// --- Views served by the JobService. ---

enum class EventType {
  kStateChanged,
  kPlaced,
  kRankExited,
  kWorkerLost,
  kCheckpointSaved,
  kHangDetected,
  kCancelRequested,
  kGuardRollback,  // the divergence guard rolled back (guard_* fields)
  kGuardFailed,    // the divergence guard gave up
  kPlateau,        // the validation loss stopped improving
  kFailRequested,  // the coordinator began stopping the job to fail it (message: why)
  kOther,          // an event kind this version does not know (shown with its raw text)
};

// A job event as the API shows it, decoded from the store's (kind, message) events.
struct JobEventView {
  std::string job_id;
  int64_t sequence = 0;
  int64_t time_ms = 0;
  EventType type = EventType::kStateChanged;
  int attempt = 0;
  std::optional<JobState> from_state;  // unset for the creation event
  JobState to_state = JobState::kQueued;
  std::optional<RecoveryCause> cause;
  int rank = 0;
  int exit_code = 0;
  int signal = 0;
  std::string worker_id;
  int64_t checkpoint_step = 0;
  std::string message;
  // GUARD_ROLLBACK, GUARD_FAILED.
  std::string guard_trigger;
  int64_t guard_to_step = 0;
  int guard_retries = 0;
  // PLACED: the worker of every rank of the attempt, by rank (what GetJobLogs asks); empty in
  // events stored before it was recorded.
  std::vector<std::string> rank_workers;
};

struct RankView {
  int rank = 0;
  int stage = 0;
  int replica = 0;
  std::string worker_id;
  int slot = 0;
};

struct JobView {
  JobRecord record;
  JobSpecInfo spec;
  // While QUEUED, once a scheduling pass has looked at the job: why it waits (the text is
  // record.state_reason).
  std::optional<PendingCode> pending_code;
  std::vector<RankView> placement;
  int64_t latest_checkpoint_step = 0;
  int64_t start_time_ms = 0;  // first RUNNING; 0 before
  int64_t end_time_ms = 0;    // terminal; 0 before
  int64_t last_event_seq = 0;
};

// The rank of a job that holds a worker's slot.
struct SlotTaskView {
  std::string job_id;
  std::string owner;  // the job's owner, for the caller's access check
  int attempt = 0;
  int rank = 0;
};

struct SlotView {
  SlotFacts facts;
  bool used = false;
  // The holder when used (a service may clear it for a caller who may not see the job).
  std::optional<SlotTaskView> task;
};

// A registered worker daemon as ListWorkers shows it.
struct WorkerView {
  std::string id;  // the name it registered under
  // kReady: session open; kDraining: registered without a session, or shutting down (it sent
  // WorkerDraining): keeps its ranks, takes no new ones; kLost: its heartbeat lease ran out.
  WorkerState state = WorkerState::kReady;
  HostFacts host;
  std::vector<SlotView> slots;  // by slot index
  int slots_used = 0;
  // Slots no rank holds; 0 while lost (its slots count for nothing then).
  int slots_free = 0;
  // Since the coordinator last heard from it (registration, heartbeat or report).
  int64_t heartbeat_age_ms = 0;
};

// The trainer whose log a GetJobLogs call reads: the defaults resolved, and who ran it.
struct LogSource {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  std::string worker_id;
};

struct CheckpointView {
  int64_t step = 0;
  std::string path;
  int64_t time_ms = 0;
  int64_t size_bytes = 0;
  bool latest = false;
  int attempt = 0;
};

}  // namespace deepnet::coordinator
