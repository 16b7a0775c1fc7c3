#pragma once
// A whole DeepNet service on loopback for integration tests: deepnet-coordinator, deepnet-worker
// daemons and the trainers they spawn, all on ports chosen at run time, in a temporary folder.
// The destructor stops workers (which stop their trainers), then kills anything left whose
// command line mentions the folder, so no test leaves processes behind.
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "deepnet/v1/job_service.grpc.pb.h"
#include "deepnet/v1/worker_service.grpc.pb.h"
#include "rpc/rpc_util.h"
#include "tests/integration/child_process.h"
#include "tests/loopback.h"

namespace deepnet::testing {

inline constexpr char kAliceToken[] = "alice-token-0123456789";
inline constexpr char kBobToken[] = "bob-token-0123456789ab";
inline constexpr char kAdminToken[] = "admin-token-0123456789";
// Each worker daemon has its own token, good only for its name (the tokens file's worker lines).
inline constexpr const char* kWorkerNames[] = {"w1", "w2", "w3", "w4", "node-a", "small"};
inline std::string WorkerToken(const std::string& name) {
  return "worker-token-" + name + "-0123456789";
}
// The tokens file's lines of every worker in kWorkerNames.
inline std::string WorkerTokenLines() {
  std::string lines;
  for (const char* name : kWorkerNames) lines += WorkerToken(name) + " " + name + " worker\n";
  return lines;
}

// The unprivileged account the workers' trainers run as when the tests run as root (setup.sh's
// deepnet-trainer, else nobody); nullopt when not root (trainers run as the test's user).
inline std::optional<std::pair<uid_t, gid_t>> TrainerAccount() {
  if (geteuid() != 0) return std::nullopt;
  for (const char* name : {"deepnet-trainer", "nobody"}) {
    if (const passwd* pw = getpwnam(name)) return std::make_pair(pw->pw_uid, pw->pw_gid);
  }
  return std::make_pair(uid_t{65534}, gid_t{65534});
}

// A tiny job on the synthetic multilingual task, 2x2 (pipeline x data) unless told otherwise.
inline std::string SyntheticJobYaml(const std::string& checkpoint_dir, int64_t max_steps,
                                    int every_steps,
                                    const std::string& scheduling = "{max_restarts: 2}",
                                    int stages = 2, int replicas = 2) {
  std::ostringstream y;
  y << "name: service-test\n"
       "model: {encoder_layers: 2, decoder_layers: 2, d_model: 32, heads: 2, ffn_dim: 64, "
       "max_positions: 128, dropout: 0.0}\n"
       "data: {synthetic: {languages: [rev, cp], pairs_per_language: 200, max_words: 5}, "
       "max_tokens: 160, max_len: 64, prefetch: 2}\n"
       "optim: {lr: 2.0e-3, warmup_steps: 5}\n"
    << "train: {max_steps: " << max_steps << ", log_every: 1, probe_every: 5, seed: 3}\n"
    << "checkpoint: {dir: " << checkpoint_dir << ", every_steps: " << every_steps
    << ", keep_last: 0}\n"
    << "runtime: {blas_threads: 1}\n"
    << "parallel: {pipeline_stages: " << stages << ", data_parallel: " << replicas
    << ", backend: gloo, timeout_s: 60}\n"
    << "scheduling: " << scheduling << "\n";
  return y.str();
}

// GetJob `id` as the holder of `token`; on failure a Job whose message says why.
inline v1::Job GetJobAs(v1::JobService::Stub& jobs, const std::string& id,
                        const char* token = kAliceToken) {
  v1::GetJobRequest request;
  request.set_job_id(id);
  v1::Job job;
  grpc::ClientContext context;
  rpc::PrepareContext(&context, token, std::chrono::seconds(30));
  const grpc::Status s = jobs.GetJob(&context, request, &job);
  if (!s.ok()) job.set_message("GetJob failed: " + rpc::Describe(s));
  return job;
}

// SubmitJob `yaml` as the holder of `token`; sets `job_id` when accepted. (No gtest macros here:
// the control-plane benchmarks include this header too.)
inline grpc::Status SubmitJobAs(v1::JobService::Stub& jobs, const std::string& yaml,
                                std::string* job_id, const char* token = kAliceToken) {
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_config_yaml(yaml);
  v1::SubmitJobResponse response;
  grpc::ClientContext context;
  rpc::PrepareContext(&context, token, std::chrono::seconds(30));
  const grpc::Status s = jobs.SubmitJob(&context, request, &response);
  *job_id = response.job().job_id();
  return s;
}

// Every event of job `id` so far (WatchJob from the first sequence, as the holder of `token`);
// `finished` says whether the stream ended cleanly.
inline std::vector<v1::JobEvent> JobEventsAs(v1::JobService::Stub& jobs, const std::string& id,
                                             bool* finished = nullptr,
                                             const char* token = kAliceToken) {
  v1::WatchJobRequest request;
  request.set_job_id(id);
  request.set_from_sequence(1);
  grpc::ClientContext context;
  rpc::PrepareContext(&context, token, std::chrono::seconds(30));
  std::unique_ptr<grpc::ClientReader<v1::WatchJobResponse>> reader =
      jobs.WatchJob(&context, request);
  std::vector<v1::JobEvent> out;
  v1::WatchJobResponse item;
  while (reader->Read(&item)) {
    if (item.has_event()) out.push_back(item.event());
  }
  const bool ok = reader->Finish().ok();
  if (finished != nullptr) *finished = ok;
  return out;
}

// Whether `account` may execute `path`, every folder above it included (a checkout under a 0700
// folder such as /root is not reachable by it): asked in a child that takes the account's ids.
inline bool AccountCanExecute(const std::pair<uid_t, gid_t>& account, const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(account.second, account.second, account.second) ||
        setresuid(account.first, account.first, account.first)) {
      _exit(2);
    }
    _exit(access(path.c_str(), X_OK) == 0 ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Every process whose command line mentions `needle`, except this one.
inline std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::filesystem::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == getpid()) continue;
    std::string cmdline = Slurp(entry.path() / "cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(needle) != std::string::npos) out.push_back(pid);
  }
  return out;
}

// The value of NAME in /proc/PID/environ; empty when absent.
inline std::string EnvOf(pid_t pid, const std::string& name) {
  const std::string env = Slurp("/proc/" + std::to_string(pid) + "/environ");
  size_t pos = 0;
  while (pos < env.size()) {
    const size_t end = env.find('\0', pos);
    const std::string entry = env.substr(pos, end - pos);
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "";
}

// Polls `done` every 100 ms until it is true or `limit` passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

class ServiceCluster {
 public:
  ServiceCluster() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "deepnet-service-XXXXXX").string();
    dir_ = mkdtemp(pattern.data()) != nullptr ? pattern : "/tmp/deepnet-service-fallback";
    // The trainers' account must reach its work folders and storage below this one.
    chmod(dir_.c_str(), 0711);
    std::filesystem::create_directories(storage_root() + "/users");
    std::ofstream(dir_ + "/tokens") << "# test tokens\n"
                                    << kAliceToken << " alice\n"
                                    << kBobToken << " bob user\n"
                                    << kAdminToken << " root admin\n"
                                    << WorkerTokenLines();
    for (const char* name : kWorkerNames) {
      std::ofstream(dir_ + "/worker-" + name + ".token") << WorkerToken(name) << "\n";
    }
  }
  ~ServiceCluster() {
    for (auto& [name, worker] : workers_) kill(worker->pid(), SIGCONT);  // a test stopped it
    for (auto& [name, worker] : workers_) kill(worker->pid(), SIGTERM);
    for (auto& [name, worker] : workers_) worker->Wait(std::chrono::seconds(20));
    workers_.clear();
    coordinator_.reset();
    for (pid_t pid : ProcessesMentioning(dir_)) kill(pid, SIGKILL);
    std::error_code ec;
    if (std::getenv("DEEPNET_KEEP_TEST_DIR") == nullptr) std::filesystem::remove_all(dir_, ec);
  }
  ServiceCluster(const ServiceCluster&) = delete;
  ServiceCluster& operator=(const ServiceCluster&) = delete;

  const std::string& dir() const { return dir_; }
  // Where a daemon runs: a command prefix (tests/netns/: `ip netns exec HOST`) and the address
  // it listens on and advertises. Default: this machine, on loopback.
  struct Placement {
    std::vector<std::string> prefix;
    std::string address = "127.0.0.1";
  };
  Placement coordinator_placement;
  std::map<std::string, Placement> worker_placements;  // by worker name; absent: the default
  // Whether StartWorker passes the trainer account (when root); false tests the refusal.
  bool give_trainer_account = true;
  // The coordinator's and workers' --storage-root (docs/OPERATIONS.md "Storage layout").
  std::string storage_root() const { return dir_ + "/storage"; }
  // STORAGE/users/<user>/, created as the trainers' account's (mode 0700) like a worker does.
  std::string UserDir(const std::string& user) const {
    const std::string path = storage_root() + "/users/" + user;
    if (mkdir(path.c_str(), 0700) == 0) {
      if (std::optional<std::pair<uid_t, gid_t>> account = TrainerAccount()) {
        if (chown(path.c_str(), account->first, account->second) != 0) perror(path.c_str());
      }
    }
    return path;
  }
  // The trainer the workers start: the build's, or, when the trainers' account cannot reach it
  // (a checkout under a 0700 folder), a link to it or copy of it in this cluster's folder (it
  // needs only system libraries).
  std::string TrainerBinary() {
    if (!trainer_binary_.empty()) return trainer_binary_;
    trainer_binary_ = DEEPNET_BINARY;
    std::optional<std::pair<uid_t, gid_t>> account = TrainerAccount();
    if (!account || AccountCanExecute(*account, trainer_binary_)) return trainer_binary_;
    const std::string bin = dir_ + "/bin";
    std::filesystem::create_directories(bin);
    chmod(bin.c_str(), 0755);
    std::error_code ec;
    std::filesystem::create_hard_link(DEEPNET_BINARY, bin + "/deepnet", ec);
    if (ec) std::filesystem::copy_file(DEEPNET_BINARY, bin + "/deepnet", ec);
    if (ec) {
      std::fprintf(stderr, "cannot place the trainer in %s: %s\n", bin.c_str(),
                   ec.message().c_str());
    }
    chmod((bin + "/deepnet").c_str(), 0755);
    trainer_binary_ = bin + "/deepnet";
    return trainer_binary_;
  }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  std::string address() const {
    return coordinator_placement.address + ":" + std::to_string(grpc_port_);
  }

  // Starts (or restarts, on the same port once one was chosen) the coordinator; true once it
  // serves.
  bool StartCoordinator(const std::vector<std::string>& extra = {}) {
    const std::string port_file = dir_ + "/coordinator.ports";
    std::filesystem::remove(port_file);
    std::vector<std::string> args = coordinator_placement.prefix;
    args.insert(
        args.end(),
        {DEEPNET_COORDINATOR_BINARY, "--listen",
         coordinator_placement.address + ":" + std::to_string(grpc_port_), "--metrics-listen",
         coordinator_placement.address + ":" + std::to_string(metrics_port_), "--db",
         dir_ + "/coordinator.db", "--tokens-file", dir_ + "/tokens", "--port-file", port_file,
         "--stop-grace-s", "3", "--reattach-window-s", "20"});
    args.insert(args.end(), {"--storage-root", storage_root()});
    args.insert(args.end(), extra.begin(), extra.end());
    coordinator_ = std::make_unique<Child>(
        args, dir_ + "/coordinator." + std::to_string(++coordinator_starts_) + ".log");
    const bool up = WaitFor([&] { return std::filesystem::exists(port_file); },
                            std::chrono::seconds(30));
    if (!up) return false;
    std::ifstream in(port_file);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("grpc=", 0) == 0) grpc_port_ = std::stoi(line.substr(5));
      if (line.rfind("metrics=", 0) == 0) metrics_port_ = std::stoi(line.substr(8));
    }
    return grpc_port_ > 0;
  }

  pid_t CoordinatorPid() const { return coordinator_ ? coordinator_->pid() : 0; }

  void KillCoordinator() {
    if (coordinator_) kill(coordinator_->pid(), SIGKILL);
    coordinator_.reset();
  }

  // `env`: "NAME=value" entries added to the daemon's environment (its trainers inherit those
  // its allow-list passes: DEEPNET_* among them; worker/trainer_supervisor.h).
  void StartWorker(const std::string& name, int slots, const std::vector<std::string>& extra = {},
                   const std::vector<std::string>& env = {}) {
    if (std::find(std::begin(kWorkerNames), std::end(kWorkerNames), name) ==
        std::end(kWorkerNames)) {
      throw std::logic_error("worker name " + name + " has no token: add it to kWorkerNames");
    }
    const Placement placement =
        worker_placements.count(name) ? worker_placements.at(name) : Placement();
    std::vector<std::string> args = placement.prefix;
    args.insert(args.end(),
                {DEEPNET_WORKER_BINARY, "--coordinator", address(), "--name", name, "--slots",
                 std::to_string(slots), "--work-dir", dir_ + "/work-" + name, "--trainer",
                 TrainerBinary(), "--token-file", dir_ + "/worker-" + name + ".token", "--listen",
                 placement.address + ":0", "--advertise-address", placement.address});
    args.insert(args.end(), {"--storage-root", storage_root()});
    std::optional<std::pair<uid_t, gid_t>> account = TrainerAccount();
    if (account && give_trainer_account) {
      args.insert(args.end(), {"--trainer-uid", std::to_string(account->first), "--trainer-gid",
                               std::to_string(account->second)});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> variables = {"OPENBLAS_NUM_THREADS=1"};
    variables.insert(variables.end(), env.begin(), env.end());
    workers_[name] =
        std::make_unique<Child>(args, dir_ + "/worker-" + name + ".log", std::move(variables));
  }

  // SIGKILLs one worker daemon (its trainers are in their own process groups and live on).
  void KillWorker(const std::string& name) {
    auto it = workers_.find(name);
    if (it == workers_.end()) return;
    kill(it->second->pid(), SIGKILL);
    it->second->Wait(std::chrono::seconds(10));
    workers_.erase(it);
  }

  // The worker daemon's process id; 0 when it was not started.
  pid_t WorkerPid(const std::string& name) const {
    auto it = workers_.find(name);
    return it == workers_.end() ? 0 : it->second->pid();
  }

  std::unique_ptr<v1::JobService::Stub> Jobs() {
    rpc::ChannelOptions options;
    options.address = address();
    return v1::JobService::NewStub(*rpc::MakeChannel(options));
  }

  // The trainer processes of a job (pid -> rank).
  std::map<pid_t, int> Trainers(const std::string& job_id) {
    std::map<pid_t, int> out;
    for (pid_t pid : ProcessesMentioning(dir_)) {
      if (EnvOf(pid, "DEEPNET_JOB_ID") != job_id) continue;
      const std::string rank = EnvOf(pid, "DEEPNET_RANK");
      if (!rank.empty()) out[pid] = std::stoi(rank);
    }
    return out;
  }

  std::string Log(const std::string& name) const { return Slurp(dir_ + "/" + name); }

 private:
  std::string dir_;
  std::string trainer_binary_;  // TrainerBinary(), once known
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int coordinator_starts_ = 0;
  std::unique_ptr<Child> coordinator_;
  std::map<std::string, std::unique_ptr<Child>> workers_;
};

}  // namespace deepnet::testing
