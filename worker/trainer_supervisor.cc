#include "worker/trainer_supervisor.h"

#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "job/job_config.h"
#include "job/job_paths.h"
#include "job/stop_exit.h"
#include "storage/atomic_file.h"
#include "storage/guarded_read.h"
#include "storage/storage_policy.h"
#include "worker/trainer_process.h"

namespace deepnet::worker {

// What the trainer's reader thread found; shared with it, hence its own lock.
struct TaskOutput {
  std::mutex mu;
  std::vector<MetricPoint> points;    // Guarded by mu.
  std::vector<int64_t> checkpoints;   // Guarded by mu.
  int64_t step = 0;                   // Guarded by mu.
  int64_t newest_checkpoint = 0;      // Guarded by mu: written or resumed from.
  std::optional<int64_t> start_step;  // Guarded by mu.
  PendingTrainerValues pending;       // Guarded by mu.

  void OnLine(const std::string& line) {
    TrainerLine parsed = ParseTrainerLine(line);
    if (!parsed.step && !parsed.checkpoint && !parsed.resumed_step && !parsed.start_step &&
        !parsed.probe && !parsed.diagnostics && !parsed.guard) {
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    pending.Merge(parsed);  // Probe and diagnostics travel with the next step point.
    if (parsed.step) {
      MetricPoint point;
      point.values = *parsed.step;
      point.time = std::chrono::system_clock::now();
      points.push_back(std::move(point));
      step = std::max(step, parsed.step->step);
    }
    if (parsed.checkpoint) {
      checkpoints.push_back(parsed.checkpoint->step);
      newest_checkpoint = std::max(newest_checkpoint, parsed.checkpoint->step);
    }
    if (parsed.guard) {
      TrainerStep at;
      at.step = parsed.guard->step;
      points.push_back({at, std::chrono::system_clock::now(), 0, parsed.guard});
    }
    if (parsed.resumed_step) step = std::max(step, *parsed.resumed_step);
    if (parsed.start_step && !start_step) start_step = parsed.start_step;
    if (parsed.resumed_step) newest_checkpoint = std::max(newest_checkpoint, *parsed.resumed_step);
  }
};

struct TrainerSupervisor::Task {
  RankLaunch rank;
  std::shared_ptr<TaskOutput> output;
  std::unique_ptr<TrainerProcess> process;  // Declared last: its reader thread uses `output`.
};

namespace {

// Variables the daemon sets for its trainers; never inherited from its own environment.
constexpr const char* kOwnedVariables[] = {"DEEPNET_RANK",
                                           "DEEPNET_WORLD_SIZE",
                                           "DEEPNET_LOCAL_RANK",
                                           "DEEPNET_LOCAL_SIZE",
                                           "DEEPNET_JOB_ID",
                                           "DEEPNET_JOB_UID",
                                           "DEEPNET_ATTEMPT",
                                           "DEEPNET_RENDEZVOUS",
                                           "DEEPNET_TOKEN",
                                           "DEEPNET_TOKEN_FILE",
                                           "DEEPNET_CA_CERT",
                                           "DEEPNET_TLS_SERVER_NAME",
                                           "DEEPNET_CUDA_DEVICE",
                                           "DEEPNET_ADVERTISE_ADDRESS",
                                           "DEEPNET_WORKER_PID",
                                           "DEEPNET_SLOT_MEMORY_BYTES"};

std::string NameOf(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

std::string Describe(const std::string& job_id, int attempt, int rank) {
  return absl::StrCat("job ", job_id, " attempt ", attempt, " rank ", rank);
}

// With an account: the attempt folder and its config.yaml readable by the trainer's group
// (root:gid, 0750 and 0640; the logs stay the daemon's: the trainer writes them through the
// fds it inherits), and with a storage policy, the owner's folder ROOT/users/<owner>/ created on
// first use as theirs, mode 0700.
absl::Status PrepareFolders(const AssignmentSpec& spec, const std::string& attempt_dir,
                            const std::string& config_path,
                            const std::optional<TrainerAccount>& account,
                            const storage::StoragePolicy* policy) {
  if (account) {
    if (chown(attempt_dir.c_str(), 0, account->gid) != 0 || chmod(attempt_dir.c_str(), 0750) != 0 ||
        chown(config_path.c_str(), 0, account->gid) != 0 || chmod(config_path.c_str(), 0640) != 0) {
      return absl::InternalError(absl::StrCat("cannot hand ", attempt_dir, " to gid ", account->gid,
                                              ": ", std::strerror(errno)));
    }
  }
  if (policy == nullptr || spec.owner.empty() || spec.owner.find('/') != std::string::npos ||
      spec.owner == "." || spec.owner == "..") {
    return absl::OkStatus();
  }
  const std::string users = policy->resolved_root() + "/users";
  const std::string folder = policy->UserFolder(spec.owner);
  if (mkdir(users.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", users, ": ", std::strerror(errno)));
  }
  if (mkdir(folder.c_str(), 0700) != 0) {
    if (errno == EEXIST) return absl::OkStatus();  // The admin's or an earlier job's: left alone.
    return absl::InternalError(absl::StrCat("cannot create ", folder, ": ", std::strerror(errno)));
  }
  if (account && chown(folder.c_str(), account->uid, account->gid) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot give ", folder, " to uid ", account->uid, ": ", std::strerror(errno)));
  }
  spdlog::info("created {} for user {}", folder, spec.owner);
  return absl::OkStatus();
}

}  // namespace

absl::Status ClaimJobFolder(const std::string& job_dir, const std::string& owner,
                            const std::string& job_uid) {
  namespace fs = std::filesystem;
  const std::string marker = (fs::path(job_dir) / kJobOwnerFile).string();
  const std::string identity = job_uid.empty() ? owner : absl::StrCat(owner, " ", job_uid);
  std::error_code ec;
  if (fs::exists(job_dir, ec)) {
    absl::StatusOr<std::string> recorded = storage::ReadGuardedFile(marker, 4096);
    const std::pair<std::string, std::string> was = absl::StrSplit(
        recorded.ok() ? absl::StripTrailingAsciiWhitespace(*recorded) : "", absl::MaxSplits(' ', 1));
    // The same job: the same owner, and the same uid where both name one.
    const bool same_job = was.first == owner &&
                          (was.second.empty() || job_uid.empty() || was.second == job_uid);
    if (recorded.ok() && !same_job) {
      // Another job of the same id: the coordinator's database was replaced or lost and ids
      // started over. Its logs are not the new owner's to read: kept aside for the admin.
      const std::string aside =
          absl::StrCat(job_dir, ".previous-",
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
      fs::rename(job_dir, aside, ec);
      if (ec)
        return absl::InternalError(absl::StrCat("cannot move ", job_dir, " aside: ", ec.message()));
      spdlog::warn("{} belonged to another job of the same id ({}, now {}): moved to {}", job_dir,
                   std::string(absl::StripTrailingAsciiWhitespace(*recorded)), identity, aside);
    } else if (recorded.ok()) {
      return absl::OkStatus();
    }
  }
  fs::create_directories(job_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", job_dir, ": ", ec.message()));
  // Written once per job folder (a folder from before the marker existed is adopted).
  return storage::WriteFileAtomically(marker, identity + "\n");
}

bool InheritedByTrainers(const std::string& name, const std::vector<std::string>& extra) {
  static constexpr const char* kNames[] = {"PATH", "LANG",   "LANGUAGE",
                                           "TZ",   "TMPDIR", "LD_LIBRARY_PATH"};
  static constexpr const char* kPrefixes[] = {
      "LC_",  "DEEPNET_",  "CUDA_", "NCCL_",  "GLOO_",    "NVIDIA_", "OMP_", "KMP_",
      "MKL_", "OPENBLAS_", "GOTO_", "TORCH_", "PYTORCH_", "UCX_",    "FI_",  "TP_"};
  for (const char* allowed : kNames) {
    if (name == allowed) return true;
  }
  for (const char* prefix : kPrefixes) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  for (const std::string& pattern : extra) {
    if (!pattern.empty() && pattern.back() == '*') {
      if (absl::StartsWith(name, absl::string_view(pattern).substr(0, pattern.size() - 1))) {
        return true;
      }
    } else if (name == pattern) {
      return true;
    }
  }
  return false;
}

bool IsSafeJobId(const std::string& job_id) {
  if (job_id.empty() || job_id.size() > 128 || job_id == "." || job_id == "..") return false;
  return std::all_of(job_id.begin(), job_id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

namespace {

// `options` with base_env cut to what trainers inherit, once for every trainer to come.
SupervisorOptions WithInheritedEnv(SupervisorOptions options) {
  std::vector<std::string> kept;
  for (std::string& entry : options.base_env) {
    const std::string name = NameOf(entry);
    if (!name.empty() && name.size() < entry.size() &&
        InheritedByTrainers(name, options.trainer_env)) {
      kept.push_back(std::move(entry));
    }
  }
  options.base_env = std::move(kept);
  return options;
}

}  // namespace

TrainerSupervisor::TrainerSupervisor(const SupervisorOptions& options)
    : options_(WithInheritedEnv(options)) {}

TrainerSupervisor::~TrainerSupervisor() {
  std::map<TaskKey, std::shared_ptr<Task>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(tasks_);
  }
  tasks.clear();  // ~TrainerProcess kills each group and reaps.
}

std::vector<std::string> TrainerSupervisor::TrainerEnv(const AssignmentSpec& spec,
                                                       const RankLaunch& rank, int local_rank,
                                                       int local_size) const {
  std::map<std::string, std::string> vars;
  for (const std::string& entry : options_.base_env) {
    const std::string name = NameOf(entry);
    if (name.empty() || name.size() == entry.size()) continue;
    vars[name] = entry.substr(name.size() + 1);
  }
  for (const char* name : kOwnedVariables) vars.erase(name);
  for (const auto& [name, value] : spec.env) vars[name] = value;
  vars["DEEPNET_RANK"] = std::to_string(rank.rank);
  vars["DEEPNET_WORLD_SIZE"] = std::to_string(spec.world_size);
  vars["DEEPNET_LOCAL_RANK"] = std::to_string(local_rank);
  vars["DEEPNET_LOCAL_SIZE"] = std::to_string(local_size);
  vars["DEEPNET_JOB_ID"] = spec.job_id;
  if (!spec.job_uid.empty()) vars["DEEPNET_JOB_UID"] = spec.job_uid;
  vars["DEEPNET_ATTEMPT"] = std::to_string(spec.attempt);
  // The trainer exits if this daemon dies (cli/parent_watch.h): no orphan keeps training.
  vars["DEEPNET_WORKER_PID"] = std::to_string(getpid());
  if (!spec.rendezvous_address.empty()) {
    vars["DEEPNET_RENDEZVOUS"] = "grpc://" + spec.rendezvous_address;
  }
  auto set_if = [&](const char* name, const std::string& value) {
    if (!value.empty()) vars[name] = value;
  };
  // The rank's own rendezvous credential, never the daemon's token: a trainer (and its job's
  // owner, who can read its environment) holds only what that rank's rendezvous needs.
  set_if("DEEPNET_TOKEN", rank.rendezvous_credential);
  set_if("DEEPNET_CA_CERT", options_.ca_cert_file);
  set_if("DEEPNET_TLS_SERVER_NAME", options_.tls_server_name);
  set_if("DEEPNET_ADVERTISE_ADDRESS", options_.advertise_address);
  const SlotInfo& slot = options_.slots[static_cast<size_t>(rank.slot_index)];
  if (slot.cuda) {
    // One GPU per trainer: it sees only its slot's device, as cuda:0 (set_device picks it).
    vars["CUDA_VISIBLE_DEVICES"] = slot.cuda_visible_devices.empty()
                                       ? std::to_string(slot.device_index)
                                       : slot.cuda_visible_devices;
    vars["DEEPNET_CUDA_DEVICE"] = "0";
  }
  // The trainer checks its memory estimate against this before it builds the model.
  if (slot.memory_bytes > 0) vars["DEEPNET_SLOT_MEMORY_BYTES"] = std::to_string(slot.memory_bytes);
  std::vector<std::string> env;
  env.reserve(vars.size());
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

absl::StatusOr<std::optional<TrainerAccount>> TrainerSupervisor::AccountFor(
    const AssignmentSpec& spec) const {
  if (!options_.switch_account) return std::optional<TrainerAccount>();
  int64_t uid = options_.trainer_uid;
  int64_t gid = options_.trainer_gid;
  std::string source = "the worker's --trainer-user";
  if (spec.uid >= 0) {
    uid = spec.uid;
    gid = spec.gid;
    source = absl::StrCat("user ", spec.owner, "'s uid= in the coordinator's tokens file");
    if (gid < 0) {
      // No gid= given: the uid's primary group, when the passwd database knows the uid.
      struct passwd entry {};
      struct passwd* found = nullptr;
      char buffer[4096];
      if (getpwuid_r(static_cast<uid_t>(uid), &entry, buffer, sizeof(buffer), &found) == 0 &&
          found != nullptr) {
        gid = found->pw_gid;
      }
    }
  }
  if (uid < 0 || gid < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this worker daemon runs as root and has no account to run trainers as",
        spec.uid >= 0 ? absl::StrCat(" (uid ", spec.uid, " of user ", spec.owner,
                                     " has no gid: add gid= to the tokens file)")
                      : "",
        ": start it with --trainer-user NAME (or --trainer-uid/--trainer-gid), or give the "
        "job owner uid=/gid= in the coordinator's tokens file; trainers never run as root"));
  }
  if (uid == 0 || gid == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "trainers never run as uid or gid 0 (got uid ", uid, ", gid ", gid, " from ", source, ")"));
  }
  return std::optional<TrainerAccount>(
      TrainerAccount{static_cast<uid_t>(uid), static_cast<gid_t>(gid)});
}

absl::Status TrainerSupervisor::CheckPaths(const AssignmentSpec& spec) const {
  if (options_.storage_policy == nullptr) return absl::OkStatus();
  absl::StatusOr<job::JobConfig> config = job::ParseJobConfig(spec.config_yaml, {}, "job spec");
  if (!config.ok()) return config.status();
  const storage::StorageUser user{spec.owner, spec.owner_teams};
  std::vector<std::string> refusals;
  for (const job::JobPath& path : job::JobPaths(*config)) {
    const storage::PathAccess access =
        path.use == job::JobPathUse::kReadFile  ? storage::PathAccess::kReadFile
        : path.use == job::JobPathUse::kReadDir ? storage::PathAccess::kReadDir
                                                : storage::PathAccess::kWriteDir;
    absl::Status status = options_.storage_policy->Check(user, path.field, path.value, access);
    if (!status.ok()) refusals.emplace_back(status.message());
  }
  if (refusals.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(refusals, "; "));
}

absl::Status TrainerSupervisor::StartRank(const AssignmentSpec& spec, const RankLaunch& rank,
                                          int local_rank, int local_size,
                                          const std::string& attempt_dir,
                                          const std::optional<TrainerAccount>& account) {
  const std::string stem =
      (std::filesystem::path(attempt_dir) / ("rank-" + std::to_string(rank.rank))).string();
  TrainerLaunch launch;
  launch.executable = options_.trainer;
  launch.args = {"train", "--config", attempt_dir + "/config.yaml", "--log-format", "json"};
  launch.env = TrainerEnv(spec, rank, local_rank, local_size);
  launch.work_dir = options_.trainer_cwd;
  launch.stdout_log = stem + ".stdout.log";
  launch.stderr_log = stem + ".stderr.log";
  launch.account = account;
  launch.limits = options_.limits;
  auto task = std::make_shared<Task>();
  task->rank = rank;
  task->output = std::make_shared<TaskOutput>();
  std::shared_ptr<TaskOutput> output = task->output;
  absl::StatusOr<std::unique_ptr<TrainerProcess>> process =
      TrainerProcess::Start(launch, [output](const std::string& line) { output->OnLine(line); });
  if (!process.ok()) {
    return absl::Status(process.status().code(),
                        absl::StrCat(Describe(spec.job_id, spec.attempt, rank.rank), ": ",
                                     process.status().message()));
  }
  task->process = *std::move(process);
  spdlog::info("{}: started trainer pid {} on slot {}",
               Describe(spec.job_id, spec.attempt, rank.rank), task->process->pid(),
               rank.slot_index);
  tasks_[TaskKey{spec.job_id, spec.attempt, rank.rank}] = std::move(task);
  return absl::OkStatus();
}

absl::Status TrainerSupervisor::Assign(const AssignmentSpec& spec) {
  const std::string what =
      absl::StrCat("assignment of job ", spec.job_id, " attempt ", spec.attempt);
  if (!IsSafeJobId(spec.job_id)) {
    return absl::InvalidArgumentError(absl::StrCat("assignment: job_id '", spec.job_id,
                                                   "' is not 1-128 characters of [A-Za-z0-9._-]"));
  }
  if (spec.attempt < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": attempt must be >= 1"));
  }
  if (spec.ranks.empty()) return absl::InvalidArgumentError(what + ": no ranks");
  std::vector<RankLaunch> ranks = spec.ranks;
  std::sort(ranks.begin(), ranks.end(),
            [](const RankLaunch& a, const RankLaunch& b) { return a.rank < b.rank; });
  std::set<int> slots_used;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankLaunch& r = ranks[i];
    if (r.rank < 0 || r.rank >= spec.world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": rank ", r.rank, " is outside world_size ", spec.world_size));
    }
    if (i > 0 && ranks[i - 1].rank == r.rank) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": rank ", r.rank, " listed twice"));
    }
    if (r.slot_index < 0 || r.slot_index >= static_cast<int>(options_.slots.size())) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": rank ", r.rank, " slot ",
                                                     r.slot_index, " is unknown (this worker has ",
                                                     options_.slots.size(), " slots)"));
    }
    if (!slots_used.insert(r.slot_index).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": slot ", r.slot_index, " given to two ranks"));
    }
  }
  const std::string attempt_dir = (std::filesystem::path(options_.work_dir) / spec.job_id /
                                   ("attempt-" + std::to_string(spec.attempt)))
                                      .string();
  // Defence in depth: the coordinator checked the paths at SubmitJob (unless it runs with
  // --no-check-paths or another root); they may also have changed since.
  if (absl::Status status = CheckPaths(spec); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", status.message()));
  }
  absl::StatusOr<std::optional<TrainerAccount>> account = AccountFor(spec);
  if (!account.ok()) {
    return absl::Status(account.status().code(),
                        absl::StrCat(what, ": ", account.status().message()));
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the worker is shutting down and starts no new trainers"));
  }
  // Busy slots: held by a task of another rank (a stopping one too, until it is reaped).
  for (const RankLaunch& r : ranks) {
    for (const auto& [key, task] : tasks_) {
      if (task->rank.slot_index != r.slot_index) continue;
      if (key == TaskKey{spec.job_id, spec.attempt, r.rank}) continue;
      const std::string busy =
          absl::StrCat(what, ": slot ", r.slot_index, " is busy with ",
                       Describe(std::get<0>(key), std::get<1>(key), std::get<2>(key)));
      // A stopping trainer frees its slot within its grace: UNAVAILABLE (try again), which the
      // worker reports as a refusal to retry, not a failure of the job.
      if (task->process->stop_requested()) {
        return absl::UnavailableError(absl::StrCat(busy, " (stopping)"));
      }
      return absl::FailedPreconditionError(busy);
    }
  }
  if (absl::Status s = ClaimJobFolder(
          (std::filesystem::path(options_.work_dir) / spec.job_id).string(), spec.owner,
          spec.job_uid);
      !s.ok()) {
    return absl::InternalError(absl::StrCat(what, ": ", s.message()));
  }
  std::error_code ec;
  std::filesystem::create_directories(attempt_dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat(what, ": cannot create ", attempt_dir, ": ", ec.message()));
  }
  // Closed to everyone but the daemon until PrepareFolders opens it to the trainer's group, so
  // that no other local account can open config.yaml while it is being written.
  if (account->has_value() && chmod(attempt_dir.c_str(), 0700) != 0) {
    return absl::InternalError(
        absl::StrCat(what, ": cannot chmod ", attempt_dir, ": ", std::strerror(errno)));
  }
  const std::string config_path = attempt_dir + "/config.yaml";
  {
    std::ofstream config(config_path, std::ios::binary | std::ios::trunc);
    config << spec.config_yaml;
    config.close();
    if (!config) {
      return absl::InternalError(absl::StrCat(what, ": cannot write ", config_path));
    }
  }
  if (absl::Status status =
          PrepareFolders(spec, attempt_dir, config_path, *account, options_.storage_policy.get());
      !status.ok()) {
    return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
  }
  std::vector<TaskKey> started;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const TaskKey key{spec.job_id, spec.attempt, ranks[i].rank};
    if (tasks_.count(key) > 0) continue;  // Already running: a repeated assignment.
    absl::Status status = StartRank(spec, ranks[i], static_cast<int>(i),
                                    static_cast<int>(ranks.size()), attempt_dir, *account);
    if (!status.ok()) {
      for (const TaskKey& k : started) tasks_.erase(k);  // ~TrainerProcess kills and reaps.
      return status;
    }
    started.push_back(key);
  }
  return absl::OkStatus();
}

int TrainerSupervisor::Cancel(const std::string& job_id, int attempt,
                              std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(mu_);
  int stopped = 0;
  for (const auto& [key, task] : tasks_) {
    if (std::get<0>(key) != job_id || std::get<1>(key) != attempt) continue;
    task->process->Stop(grace);
    ++stopped;
  }
  return stopped;
}

void TrainerSupervisor::StopAll(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (const auto& [key, task] : tasks_) task->process->Stop(grace);
}

TrainerSupervisor::Events TrainerSupervisor::Poll() {
  std::vector<std::pair<TaskKey, std::shared_ptr<Task>>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.assign(tasks_.begin(), tasks_.end());
  }
  Events events;
  std::vector<TaskKey> ended;
  for (auto& [key, task] : tasks) {
    // Reaping joins the reader thread, so the trainer's last lines are in `output` after it.
    std::optional<TrainerExitStatus> exit = task->process->Poll();
    MetricReport report;
    {
      std::lock_guard<std::mutex> lock(task->output->mu);
      report.points.swap(task->output->points);
      report.checkpoint_steps.swap(task->output->checkpoints);
    }
    if (!report.points.empty() || !report.checkpoint_steps.empty()) {
      const int64_t memory = task->process->PeakResidentBytes();
      for (MetricPoint& point : report.points) point.memory_bytes = memory;
      std::tie(report.job_id, report.attempt, report.rank) = key;
      events.metrics.push_back(std::move(report));
    }
    if (!exit) continue;
    TaskExit out;
    std::tie(out.job_id, out.attempt, out.rank) = key;
    out.exit_code = exit->exit_code;
    out.signal = exit->signal;
    out.message = exit->stderr_tail;
    out.requested = exit->stop_requested;
    if (out.requested) out.checkpoint = StopCheckpointOf(out.exit_code, out.signal);
    {
      std::lock_guard<std::mutex> lock(task->output->mu);
      out.checkpoint_step = task->output->newest_checkpoint;
    }
    out.time = std::chrono::system_clock::now();
    spdlog::info("{}: trainer pid {} ended ({} {}{})", Describe(out.job_id, out.attempt, out.rank),
                 task->process->pid(), out.signal != 0 ? "signal" : "exit code",
                 out.signal != 0 ? out.signal : out.exit_code, out.requested ? ", requested" : "");
    events.exits.push_back(std::move(out));
    ended.push_back(key);
  }
  std::vector<std::shared_ptr<Task>> forgotten;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const TaskKey& key : ended) {
      auto it = tasks_.find(key);
      if (it == tasks_.end()) continue;
      forgotten.push_back(std::move(it->second));
      tasks_.erase(it);
    }
  }
  return events;  // `forgotten` and `tasks` release the reaped processes outside the lock.
}

std::vector<TaskSnapshot> TrainerSupervisor::Tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskSnapshot> out;
  for (const auto& [key, task] : tasks_) {
    TaskSnapshot s;
    std::tie(s.job_id, s.attempt, s.rank) = key;
    s.phase = task->process->stop_requested() ? TaskPhase::kStopping : TaskPhase::kRunning;
    s.pid = task->process->pid();
    s.slot_index = task->rank.slot_index;
    {
      std::lock_guard<std::mutex> output_lock(task->output->mu);
      s.step = task->output->step;
      s.start_step = task->output->start_step;
    }
    out.push_back(std::move(s));
  }
  return out;
}

size_t TrainerSupervisor::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size();
}

}  // namespace deepnet::worker
