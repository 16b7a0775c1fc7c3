// deepnet-worker: the worker daemon. Parses flags (each with an environment fallback for
// Kubernetes and Slurm), builds the daemon and runs it until SIGTERM/SIGINT; the work is done
// by worker/worker_daemon.cc.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "job/stop_exit.h"
#include "rpc/rpc_util.h"
#include "worker/daemon_secrets.h"
#include "worker/health_server.h"
#include "worker/host_resources.h"
#include "worker/trainer_account.h"
#include "version/deepnet_version.h"
#include "worker/worker_daemon.h"

extern char** environ;

namespace {

#ifndef DEEPNET_TORCH_VERSION
#define DEEPNET_TORCH_VERSION ""
#endif

std::string Hostname() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("worker");
}

// The `deepnet` binary next to this one.
std::string DefaultTrainer() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("deepnet") : (self.parent_path() / "deepnet").string();
}

int Fail(const std::string& message) {
  std::cerr << "deepnet-worker: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Every line of this process carries its name (docs/ARCHITECTURE.md, "Processes and rooms").
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [worker] [%l] %v");
  using namespace deepnet;
  CLI::App app{"deepnet-worker: runs DeepNet trainer processes for the coordinator"};
  app.set_version_flag("--version", ProgramVersion());
  std::string coordinator;
  std::string name;
  int slots = 0;
  std::string work_dir;
  std::string trainer;
  std::string token;
  std::string token_file;
  std::string ca_cert;
  std::string tls_server_name;
  std::string listen = "0.0.0.0:7071";
  std::string advertise_address;
  double stop_grace_s = 30.0;
  std::string storage_root;
  worker::TrainerAccountFlags account;
  int64_t slot_memory_bytes = 0;
  app.add_option("--coordinator", coordinator, "Coordinator address host:port")
      ->envname("DEEPNET_COORDINATOR")
      ->required();
  app.add_option("--name", name, "Stable worker name (default: hostname)")
      ->envname("DEEPNET_WORKER_NAME");
  app.add_option("--slots", slots, "Slots (default: one per GPU, else 1 CPU slot)")
      ->envname("DEEPNET_SLOTS")
      ->check(CLI::Range(0, 4096));
  app.add_option("--slot-memory-bytes", slot_memory_bytes,
                 "Memory each slot offers one rank (bytes, or with a unit: 80GiB); the "
                 "coordinator places only jobs whose estimate fits. Default: the GPU's memory "
                 "(NVML) for GPU slots, the host's memory (or its cgroup limit) divided among "
                 "CPU slots")
      ->envname("DEEPNET_SLOT_MEMORY_BYTES")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--work-dir", work_dir,
                 "Folder for job configs and trainer logs (default: deepnet-work/NAME)")
      ->envname("DEEPNET_WORK_DIR");
  app.add_option("--trainer", trainer, "Path of the deepnet binary (default: next to this one)")
      ->envname("DEEPNET_TRAINER");
  app.add_option("--token", token, "Bearer token (else DEEPNET_TOKEN)");
  app.add_option("--token-file", token_file,
                 "File holding the bearer token (else DEEPNET_TOKEN_FILE)");
  app.add_option("--ca-cert", ca_cert, "PEM CA certificate: use TLS to the coordinator")
      ->envname("DEEPNET_CA_CERT");
  app.add_option("--tls-server-name", tls_server_name, "Name the coordinator certificate carries");
  app.add_option("--listen", listen, "Health and reflection address host:port")
      ->envname("DEEPNET_WORKER_LISTEN")
      ->capture_default_str();
  app.add_option("--advertise-address", advertise_address,
                 "Address its trainers' Gloo ranks bind and advertise (default: chosen per rank, "
                 "docs/OPERATIONS.md \"Addresses across hosts\"; NCCL picks its own)")
      ->envname("DEEPNET_ADVERTISE_ADDRESS");
  app.add_option("--stop-grace", stop_grace_s,
                 "Seconds trainers get to checkpoint after SIGTERM when the worker stops")
      ->envname("DEEPNET_STOP_GRACE")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--storage-root", storage_root,
                 "Check every job path against the storage layout under DIR before starting a "
                 "trainer (users/<user>/, teams/<team>/); creates DIR/users/<user>/ on first use")
      ->envname("DEEPNET_STORAGE_ROOT");
  std::vector<std::string> trainer_env;
  app.add_option("--trainer-env", trainer_env,
                 "a variable of this daemon's environment the trainers inherit too (NAME, or a "
                 "prefix ending in '*'; repeatable); beyond these they inherit only PATH, LANG, "
                 "LC_*, TZ, TMPDIR, LD_LIBRARY_PATH and DEEPNET_, CUDA_, NCCL_, GLOO_, NVIDIA_, "
                 "OMP_, KMP_, MKL_, OPENBLAS_, GOTO_, TORCH_, PYTORCH_, UCX_, FI_, TP_ variables")
      ->envname("DEEPNET_TRAINER_ENV")
      ->delimiter(',');
  // Trainers dump no core by default: a core holds the trainer's memory, its credentials too.
  uint64_t trainer_core_size = 0;
  uint64_t trainer_max_open_files = 0;
  uint64_t trainer_max_address_space = 0;
  app.add_option("--trainer-core-size", trainer_core_size,
                 "largest core file a trainer may dump, in bytes (RLIMIT_CORE; 0: none)")
      ->envname("DEEPNET_TRAINER_CORE_SIZE")
      ->capture_default_str();
  app.add_option("--trainer-max-open-files", trainer_max_open_files,
                 "descriptors a trainer may hold open (RLIMIT_NOFILE; 0: as this daemon)")
      ->envname("DEEPNET_TRAINER_MAX_OPEN_FILES")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20));
  app.add_option("--trainer-max-address-space", trainer_max_address_space,
                 "bytes of address space a trainer may map (RLIMIT_AS; 0: no limit; not for GPU "
                 "slots: CUDA maps far more address space than it uses)")
      ->envname("DEEPNET_TRAINER_MAX_ADDRESS_SPACE");
  app.add_option("--trainer-user", account.user,
                 "Unprivileged account trainers run as when the job's owner has no uid= in the "
                 "tokens file (a root daemon never runs trainers as root)")
      ->envname("DEEPNET_TRAINER_USER");
  app.add_option("--trainer-uid", account.uid, "As --trainer-user, by number")
      ->check(CLI::Range(int64_t{1}, int64_t{4294967294}));
  app.add_option("--trainer-gid", account.gid,
                 "Group of --trainer-uid (default: its primary group)")
      ->check(CLI::Range(int64_t{1}, int64_t{4294967294}));
  CLI11_PARSE(app, argc, argv);

  // Before any thread starts: SIGTERM/SIGINT are taken by sigwait() below only; trainers get
  // an empty mask and default actions (TrainerProcess).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  worker::WorkerDaemonOptions options;
  options.coordinator = coordinator;
  options.worker_name = name.empty() ? Hostname() : name;
  options.ca_cert_file = ca_cert;
  options.tls_server_name = tls_server_name;
  absl::StatusOr<std::string> resolved = rpc::ResolveToken(token, token_file, "DEEPNET_TOKEN");
  if (!resolved.ok()) return Fail(std::string(resolved.status().message()));
  options.token = *resolved;
  // Trainers that run as this daemon's own account must not read the token from its
  // environment or memory (/proc, ptrace).
  if (absl::Status s = worker::KeepSecretsFromTrainers(); !s.ok()) {
    return Fail(std::string(s.message()));
  }

  worker::SupervisorOptions& sup = options.supervisor;
  sup.trainer_env = trainer_env;
  sup.limits.push_back({RLIMIT_CORE, trainer_core_size});
  if (trainer_max_open_files > 0) sup.limits.push_back({RLIMIT_NOFILE, trainer_max_open_files});
  if (trainer_max_address_space > 0) {
    sup.limits.push_back({RLIMIT_AS, trainer_max_address_space});
  }
  sup.trainer = trainer.empty() ? DefaultTrainer() : trainer;
  if (access(sup.trainer.c_str(), X_OK) != 0) {
    return Fail("--trainer " + sup.trainer + ": not an executable file");
  }
  if (absl::Status s = worker::ConfigureTrainerAccount(account, geteuid(), &sup); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  if (sup.switch_account && sup.trainer_uid > 0) {
    absl::Status s = worker::CheckExecutableBy(sup.trainer, static_cast<uid_t>(sup.trainer_uid),
                                               static_cast<gid_t>(sup.trainer_gid));
    if (!s.ok()) return Fail("--trainer: " + std::string(s.message()));
  }
  if (sup.switch_account && sup.trainer_uid < 0) {
    spdlog::warn(
        "running as root with no --trainer-user: only jobs whose owner has uid= in the "
        "coordinator's tokens file can start; others are refused");
  }
  if (absl::Status s = worker::ConfigureStorageRoot(storage_root, &sup); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  if (storage_root.empty()) {
    spdlog::warn("no --storage-root: job paths are not checked on this worker");
  }
  std::error_code ec;
  sup.work_dir = std::filesystem::absolute(
                     work_dir.empty() ? "deepnet-work/" + options.worker_name : work_dir, ec)
                     .string();
  std::filesystem::create_directories(sup.work_dir, ec);
  if (ec) return Fail("--work-dir " + sup.work_dir + ": " + ec.message());
  if (sup.switch_account && sup.trainer_uid > 0) {
    // Trainers read their config.yaml under it.
    absl::Status s = worker::CheckExecutableBy(sup.work_dir, static_cast<uid_t>(sup.trainer_uid),
                                               static_cast<gid_t>(sup.trainer_gid));
    if (!s.ok()) return Fail("--work-dir: " + std::string(s.message()));
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> gpus =
      worker::DetectGpus("/proc/driver/nvidia/gpus",
                         visible != nullptr ? std::optional<std::string>(visible) : std::nullopt);
  absl::StatusOr<std::vector<worker::SlotInfo>> planned =
      worker::PlanSlots(slots, static_cast<int>(gpus.size()));
  if (!planned.ok()) return Fail(std::string(planned.status().message()));
  sup.slots = *planned;
  if (absl::Status s = worker::AssignTrainerDevices(
          &sup.slots, visible != nullptr ? std::optional<std::string>(visible) : std::nullopt);
      !s.ok()) {
    return Fail(std::string(s.message()));
  }
  for (char** e = environ; *e != nullptr; ++e) sup.base_env.emplace_back(*e);
  sup.ca_cert_file = ca_cert.empty() ? "" : std::filesystem::absolute(ca_cert, ec).string();
  sup.tls_server_name = tls_server_name;
  sup.advertise_address = advertise_address;
  options.host =
      worker::DetectHostFacts(advertise_address, gpus, ProgramVersion(), DEEPNET_TORCH_VERSION);
  const std::vector<int64_t> gpu_memory =
      slot_memory_bytes > 0 || gpus.empty()
          ? std::vector<int64_t>{}
          : worker::GpuMemoryBytes(worker::DetectGpuBusIds(
                "/proc/driver/nvidia/gpus",
                visible != nullptr ? std::optional<std::string>(visible) : std::nullopt));
  // CPU slots share the machine's memory, or the container's limit when it has one.
  int64_t host_memory = options.host.memory_bytes;
  const int64_t limit = worker::CgroupMemoryLimit("/proc/self/cgroup", "/sys/fs/cgroup");
  if (limit > 0 && (host_memory == 0 || limit < host_memory)) host_memory = limit;
  options.host.slot_memory_source =
      worker::AssignSlotMemory(&sup.slots, slot_memory_bytes, host_memory, gpu_memory);

  int port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> health = worker::StartHealthServer(listen, &port);
  if (!health.ok()) return Fail(std::string(health.status().message()));
  absl::StatusOr<std::unique_ptr<worker::WorkerDaemon>> worker =
      worker::WorkerDaemon::Create(options);
  if (!worker.ok()) return Fail(std::string(worker.status().message()));
  spdlog::info("deepnet-worker {} '{}': {} {} slot(s), coordinator {}, health on port {}",
               ProgramVersion(), options.worker_name, sup.slots.size(),
               sup.slots.front().cuda ? "cuda" : "cpu", coordinator, port);
  spdlog::info("trainers run as {}",
               !sup.switch_account ? "this daemon's user"
               : sup.trainer_uid > 0
                   ? "the job owner's uid/gid, else uid " + std::to_string(sup.trainer_uid) +
                         " gid " + std::to_string(sup.trainer_gid)
                   : std::string("the job owner's uid/gid (no --trainer-user)"));
  spdlog::info("slot memory: {} bytes for slot 0 (source: {}; 0 means unknown)",
               sup.slots.front().memory_bytes, options.host.slot_memory_source);
  (*worker)->Start();

  int received = 0;
  while (sigwait(&signals, &received) != 0) {
  }
  const std::string why = received == SIGTERM ? "signal 15 (SIGTERM)" : "signal 2 (SIGINT)";
  spdlog::info("{}: draining; stopping trainers (grace {} s)", why, stop_grace_s);
  const worker::WorkerStopSummary stopped = (*worker)->Shutdown(
      std::chrono::milliseconds(static_cast<int64_t>(stop_grace_s * 1000)), why);
  (*health)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return stopped.state_lost() ? job::kWorkerLostTrainerStateExitCode : 0;
}
