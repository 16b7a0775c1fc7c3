#pragma once
// The trainer processes of one worker daemon: spawns the ranks of an assignment onto its slots,
// stops job attempts, reaps exits and collects the progress parsed from their output. Knows
// nothing about gRPC or protos (WorkerDaemon converts). Torch-free.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job/stop_exit.h"
#include "worker/host_resources.h"
#include "worker/trainer_output_parser.h"
#include "worker/trainer_process.h"

namespace deepnet::storage {
class StoragePolicy;
}  // namespace deepnet::storage

namespace deepnet::worker {

class TrainerProcess;
struct TrainerAccount;

struct SupervisorOptions {
  // Path of the `deepnet` binary; started as `TRAINER train --config FILE --log-format json`.
  std::string trainer;
  // Per job attempt: WORK_DIR/JOB/attempt-N/{config.yaml, rank-R.stdout.log, rank-R.stderr.log}.
  std::string work_dir;
  // Working directory of the trainers (relative paths of the job YAML resolve against it);
  // "" keeps the daemon's.
  std::string trainer_cwd;
  std::vector<SlotInfo> slots;
  // The daemon's environment (NAME=VALUE). The trainers get only the variables of it that
  // InheritedByTrainers allows (an allow-list: locale, PATH, library paths and the knobs of
  // CUDA, NCCL, Gloo, OpenMP, BLAS and LibTorch; cut once, when the supervisor is made), then
  // their own DEEPNET_* variables.
  std::vector<std::string> base_env;
  // More names (NAME, or a prefix ending in '*') the trainers inherit (--trainer-env).
  std::vector<std::string> trainer_env;
  // Resource limits every trainer gets (--trainer-core-size, --trainer-max-open-files,
  // --trainer-max-address-space).
  std::vector<TrainerLimit> limits;
  // Passed to trainers as DEEPNET_CA_CERT / DEEPNET_TLS_SERVER_NAME / DEEPNET_ADVERTISE_ADDRESS
  // when non-empty (never inherited from base_env). The supervisor holds no token: a trainer's
  // DEEPNET_TOKEN is its rank's rendezvous credential (RankLaunch).
  std::string ca_cert_file;
  std::string tls_server_name;
  std::string advertise_address;
  // Trainers run as an unprivileged account (a root daemon sets this): the assignment's
  // uid/gid (the owner's, from the coordinator's tokens file) or else trainer_uid/trainer_gid
  // (--trainer-user); an assignment with neither, or with uid or gid 0, is refused. False:
  // trainers run as the daemon itself (a non-root daemon; tests).
  bool switch_account = false;
  int64_t trainer_uid = -1;
  int64_t trainer_gid = -1;
  // --storage-root: every path of an assigned job must pass the policy for the job's owner
  // before a trainer starts; null: paths are not checked here.
  std::shared_ptr<const storage::StoragePolicy> storage_policy;
};

struct RankLaunch {
  int rank = 0;
  // WorkerSlot index on this worker.
  int slot_index = 0;
  // The rank's credential for the coordinator's rendezvous (RankAssignment.
  // rendezvous_credential), the trainer's DEEPNET_TOKEN; empty: the trainer gets no token.
  std::string rendezvous_credential;
};

// The ranks of one job attempt placed on this worker (Assignment, without protos).
struct AssignmentSpec {
  std::string job_id;
  std::string job_uid;  // Assignment.job_uid: the trainers' DEEPNET_JOB_UID.
  // >= 1.
  int attempt = 0;
  std::vector<RankLaunch> ranks;
  int world_size = 0;
  std::string config_yaml;
  // host:port of the Rendezvous service; "" sets no DEEPNET_RENDEZVOUS.
  std::string rendezvous_address;
  // Extra trainer environment; the DEEPNET_* variables above win over it.
  std::map<std::string, std::string> env;
  // The job's owner and their teams (for the storage policy) and trainer account (-1: none).
  std::string owner;
  std::vector<std::string> owner_teams;
  int64_t uid = -1;
  int64_t gid = -1;
};

enum class TaskPhase { kRunning, kStopping };

// What a trainer that was asked to stop left behind, and how its exit code tells it (one
// definition for the worker and the coordinator: job/stop_exit.h).
using job::StopCheckpoint;
using job::StopCheckpointOf;

struct TaskSnapshot {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  TaskPhase phase = TaskPhase::kRunning;
  int pid = 0;
  // Latest step the trainer printed (or resumed from); 0 before.
  int64_t step = 0;
  int slot_index = 0;
  // The step the trainer started from (a checkpoint's, 0 from scratch); unset until it said.
  std::optional<int64_t> start_step = std::nullopt;
};

struct TaskExit {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  int exit_code = 0;
  int signal = 0;
  // Last lines of the trainer's stderr.
  std::string message;
  // Whether it was being stopped (Cancel, StopAll).
  bool requested = false;
  // When requested: what it left behind, from its exit code (job/stop_exit.h).
  StopCheckpoint checkpoint = StopCheckpoint::kUnspecified;
  // Newest checkpoint step it wrote or resumed from (its output); 0 none.
  int64_t checkpoint_step = 0;
  std::chrono::system_clock::time_point time;
};

// One metric point: a step's values or a guard event, as the trainer printed it
// (deepnet.v1.MetricPoint without the proto).
struct MetricPoint {
  TrainerStep values;
  // When the worker read the line.
  std::chrono::system_clock::time_point time;
  // Peak resident memory of the trainer when the point was collected; 0 when unknown.
  int64_t memory_bytes = 0;
  // Set for a guard or plateau event instead of a step (values.step is the event's step).
  std::optional<TrainerGuardEvent> guard;
};

// The points and checkpoints of one rank since the previous Poll() (deepnet.v1.MetricReport
// without the proto).
struct MetricReport {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
  std::vector<MetricPoint> points;
  std::vector<int64_t> checkpoint_steps;
};

// Thread-safety: safe for concurrent use, except that Poll() is called from one thread at a time.
class TrainerSupervisor {
 public:
  explicit TrainerSupervisor(const SupervisorOptions& options);
  // Kills every trainer's process group at once and reaps them.
  ~TrainerSupervisor();
  TrainerSupervisor(const TrainerSupervisor&) = delete;
  TrainerSupervisor& operator=(const TrainerSupervisor&) = delete;

  // Writes the attempt's config.yaml and starts one trainer per rank (DEEPNET_LOCAL_RANK /
  // LOCAL_SIZE: its index / count among `spec.ranks` in rank order). Ranks of this attempt
  // that already run are left alone (a repeated assignment is a no-op). InvalidArgument
  // naming the field for a bad spec or unknown slot; FailedPrecondition naming the slot and
  // the task holding it when a slot is busy; the I/O or spawn error otherwise, after stopping
  // the ranks of this call that had started. Does not block on the trainers.
  [[nodiscard]] absl::Status Assign(const AssignmentSpec& spec);

  // Stops every rank of (job_id, attempt): SIGTERM to each process group, SIGKILL after
  // `grace`. Returns how many ranks it stops (0 when none run).
  int Cancel(const std::string& job_id, int attempt, std::chrono::milliseconds grace);
  // Stops every rank of every job, and refuses every later Assign (the worker is shutting
  // down).
  void StopAll(std::chrono::milliseconds grace);

  struct Events {
    // Points and checkpoints, per rank; ranks in `exits` come here first.
    std::vector<MetricReport> metrics;
    std::vector<TaskExit> exits;
  };
  // Non-blocking: sends due SIGKILLs, reaps exited trainers (forgetting them) and collects the
  // progress parsed since the last call.
  Events Poll();

  std::vector<TaskSnapshot> Tasks() const;
  size_t size() const;

 private:
  struct Task;
  using TaskKey = std::tuple<std::string, int, int>;  // job, attempt, rank

  absl::Status StartRank(const AssignmentSpec& spec, const RankLaunch& rank, int local_rank,
                         int local_size, const std::string& attempt_dir,
                         const std::optional<TrainerAccount>& account);
  // The account the trainers of `spec` run as; nullopt: as the daemon.
  absl::StatusOr<std::optional<TrainerAccount>> AccountFor(const AssignmentSpec& spec) const;
  // The job's paths against options_.storage_policy for its owner.
  absl::Status CheckPaths(const AssignmentSpec& spec) const;
  std::vector<std::string> TrainerEnv(const AssignmentSpec& spec, const RankLaunch& rank,
                                      int local_rank, int local_size) const;

  const SupervisorOptions options_;
  mutable std::mutex mu_;
  std::map<TaskKey, std::shared_ptr<Task>> tasks_;  // Guarded by mu_.
  bool closed_ = false;                             // Guarded by mu_: StopAll was called.
};

// Whether `job_id` can name a folder: 1..128 of [A-Za-z0-9._-], not "." or "..".
bool IsSafeJobId(const std::string& job_id);

// The file in a job's folder of the worker (WORK/<job>/) that names the job: "<owner> <job uid>"
// (or "<owner>" alone, written by workers before the job uid).
inline constexpr char kJobOwnerFile[] = ".owner";
// Makes `job_dir` the folder of the job `job_uid` of `owner` (Assignment.job_uid; empty: not
// known). A folder that names another owner, or another uid, belonged to an earlier job of the
// same id (a coordinator whose database was lost hands ids out again): it is moved aside
// (job_dir.previous-<unix ms>) so that the new job neither reads its logs nor gets it handed
// over. A folder without the file is adopted.
absl::Status ClaimJobFolder(const std::string& job_dir, const std::string& owner,
                            const std::string& job_uid);

// Whether a trainer inherits the daemon's variable `name`: the allow-list above, or one of
// `extra` (NAME, or PREFIX* ). Anything else of the daemon's (credentials, cloud keys,
// LD_PRELOAD, the daemon's own settings) stays with the daemon.
bool InheritedByTrainers(const std::string& name, const std::vector<std::string>& extra);

}  // namespace deepnet::worker
