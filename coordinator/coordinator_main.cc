// deepnet-coordinator: the control-plane daemon. Serves JobService, WorkerService and the
// Rendezvous store over gRPC (plus health checking and reflection) and Prometheus metrics over
// HTTP; keeps jobs in SQLite. Exits non-zero with a message on bad configuration.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <fstream>
#include <iostream>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/auth/audit_log.h"
#include "coordinator/auth/auth.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/coordinator_metrics.h"
#include "coordinator/grpc/audit_interceptor.h"
#include "coordinator/grpc/job_service_impl.h"
#include "coordinator/grpc/worker_service_impl.h"
#include "coordinator/rendezvous/rendezvous_service.h"
#include "coordinator/store/sqlite_job_store.h"
#include "coordinator/store/store_backup.h"
#include "deepnet/v1/rendezvous.grpc.pb.h"
#include "deepnet/v1/worker_service.grpc.pb.h"
#include "rpc/reflection_gate.h"
#include "rpc/rpc_util.h"
#include "storage/atomic_file.h"
#include "storage/storage_policy.h"
#include "version/deepnet_version.h"

namespace deepnet::coordinator {
namespace {

struct Flags {
  std::string listen = "0.0.0.0:7070";
  std::string metrics_listen = "0.0.0.0:9464";
  std::string db = "deepnet-coordinator.db";
  std::string backup_to;  // --backup-to: copy --db there and exit
  std::string tokens_file;
  std::string tls_cert;
  std::string tls_key;
  std::string advertise_address;
  std::string port_file;
  int heartbeat_ms = 1000;
  int lease_heartbeats = 3;
  double stop_grace_s = 10;
  double reattach_window_s = 10;
  double log_request_timeout_s = 10;
  int64_t cluster_slots = 0;
  int64_t cluster_slot_memory = 0;
  std::string retain_finished = "0";
  int max_overtakes = 0;
  bool no_check_paths = false;
  std::string storage_root;
  std::string limits_file;
  std::string audit_log;
  int max_streams_per_user = 64;
  int max_streams_per_admin = 1024;
  double write_rate = 20;
  double write_burst = 200;
  bool no_reflection = false;
};

constexpr int kMaxRequestBytes = 4 * 1024 * 1024;

// --retain-finished: "0", or a positive number with a unit d, h, m or s.
absl::StatusOr<std::chrono::milliseconds> ParseRetention(const std::string& text) {
  if (text == "0") return std::chrono::milliseconds(0);
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--retain-finished \"", text, "\": expected 0 or a number with a unit (30d, 12h, 90m, 45s)"));
  };
  if (text.size() < 2) return bad();
  double value = 0;
  if (!absl::SimpleAtod(text.substr(0, text.size() - 1), &value) || !(value > 0)) return bad();
  double unit_s = 0;
  switch (text.back()) {
    case 'd': unit_s = 86400; break;
    case 'h': unit_s = 3600; break;
    case 'm': unit_s = 60; break;
    case 's': unit_s = 1; break;
    default: return bad();
  }
  const double ms = value * unit_s * 1000;
  if (ms > 1e15) return bad();
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

int Fail(const std::string& message) {
  std::cerr << "deepnet-coordinator: " << message << "\n";
  return 2;
}

// "host:port" -> (host, port); port may be 0.
bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  *host = address.substr(0, colon);
  return absl::SimpleAtoi(address.substr(colon + 1), port) && *port >= 0 && *port < 65536;
}

std::string Hostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// SIGHUP: reads the tokens file and the limits file again (a bad one keeps what is in force)
// and reopens the audit log (after rotation).
void Reload(const Flags& flags, Coordinator& coordinator, Authenticator& auth, AuditLog* audit) {
  if (!flags.tokens_file.empty()) {
    if (absl::Status s = auth.Reload(flags.tokens_file); s.ok()) {
      spdlog::info("SIGHUP: {} tokens in force from {} (streams of removed tokens end)",
                   auth.num_tokens(), flags.tokens_file);
    } else {
      spdlog::error("SIGHUP: keeping the tokens in force; {}", std::string(s.message()));
    }
  }
  if (!flags.limits_file.empty()) {
    absl::StatusOr<LimitsConfig> loaded = LoadLimitsFile(flags.limits_file);
    if (loaded.ok()) {
      coordinator.SetLimits(*std::move(loaded));
      spdlog::info("SIGHUP: limits reloaded from {}", flags.limits_file);
    } else {
      spdlog::error("SIGHUP: keeping the limits in force; --limits-file: {}",
                    std::string(loaded.status().message()));
    }
  }
  if (audit != nullptr) {
    if (absl::Status s = audit->Reopen(); !s.ok()) {
      spdlog::error("SIGHUP: {}", std::string(s.message()));
    } else {
      spdlog::info("SIGHUP: audit log {} reopened", audit->path());
    }
  }
}

int Run(const Flags& flags) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(flags.listen, &host, &port)) {
    return Fail(absl::StrCat("--listen \"", flags.listen, "\" is not HOST:PORT"));
  }
  absl::StatusOr<std::unique_ptr<Authenticator>> auth =
      flags.tokens_file.empty() ? absl::StatusOr<std::unique_ptr<Authenticator>>(Authenticator::Open())
                                : Authenticator::Load(flags.tokens_file);
  if (!auth.ok()) return Fail(absl::StrCat("--tokens-file: ", auth.status().message()));
  std::shared_ptr<const storage::StoragePolicy> storage_policy;
  if (!flags.storage_root.empty()) {
    absl::StatusOr<storage::StoragePolicy> policy =
        storage::StoragePolicy::Create(flags.storage_root, "--storage-root");
    if (!policy.ok()) return Fail(std::string(policy.status().message()));
    storage_policy = std::make_shared<const storage::StoragePolicy>(*std::move(policy));
  }
  if ((*auth)->open()) {
    spdlog::warn("no --tokens-file: every caller is an anonymous admin (set one in production)");
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      rpc::MakeServerCredentials(flags.tls_cert, flags.tls_key);
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  JobStoreOptions store_options;
  store_options.path = flags.db;
  absl::StatusOr<std::unique_ptr<SqliteJobStore>> store = SqliteJobStore::Open(store_options);
  if (!store.ok()) return Fail(absl::StrCat("--db: ", store.status().message()));
  absl::StatusOr<std::unique_ptr<WorkerEpochStore>> epochs = WorkerEpochStore::Open(flags.db);
  if (!epochs.ok()) return Fail(absl::StrCat("--db: ", epochs.status().message()));
  absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> metrics =
      CoordinatorMetrics::Create(flags.metrics_listen);
  if (!metrics.ok()) return Fail(std::string(metrics.status().message()));

  std::optional<LimitsConfig> limits;
  if (!flags.limits_file.empty()) {
    absl::StatusOr<LimitsConfig> loaded = LoadLimitsFile(flags.limits_file);
    if (!loaded.ok()) return Fail(absl::StrCat("--limits-file: ", loaded.status().message()));
    limits = *std::move(loaded);
  }
  std::unique_ptr<AuditLog> audit;
  if (!flags.audit_log.empty()) {
    CoordinatorMetrics* m = metrics->get();
    absl::StatusOr<std::unique_ptr<AuditLog>> opened =
        AuditLog::Open(flags.audit_log, [m] { m->IncAuditWriteFailures(); });
    if (!opened.ok()) return Fail(std::string(opened.status().message()));
    audit = std::move(*opened);
  }

  // Each rank's rendezvous credential (with authentication on): signed with a key drawn now.
  std::unique_ptr<TrainerCredentials> trainer_credentials;
  if (!(*auth)->open()) {
    absl::StatusOr<std::unique_ptr<TrainerCredentials>> created = TrainerCredentials::Create();
    if (!created.ok()) return Fail(std::string(created.status().message()));
    trainer_credentials = std::move(*created);
  }
  RendezvousStore rendezvous;
  RendezvousService rendezvous_service(rendezvous, (*auth)->open() ? nullptr : auth->get(),
                                       trainer_credentials.get());
  rpc::EnableHealthAndReflection();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(flags.listen, *credentials, &bound_port);
  // Reflection needs a token like every call but health (rpc/reflection_gate.h).
  std::vector<std::unique_ptr<grpc::Service>> listed;
  listed.push_back(std::make_unique<v1::JobService::Service>());
  listed.push_back(std::make_unique<v1::WorkerService::Service>());
  listed.push_back(std::make_unique<v1::Rendezvous::Service>());
  const Authenticator& authenticator = **auth;
  absl::StatusOr<std::unique_ptr<rpc::ReflectionGate>> reflection = rpc::ReflectionGate::Create(
      std::move(listed), [&authenticator](const grpc::ServerContextBase& context) {
        return rpc::ToGrpc(authenticator.Authenticate(context).status());
      });
  if (!reflection.ok()) return Fail(std::string(reflection.status().message()));
  if (flags.no_reflection) {
    builder.SetOption(rpc::WithoutReflection());
  } else {
    (*reflection)->AttachTo(builder);
  }
  builder.RegisterService(&rendezvous_service);
  if (audit != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(MakeAuditInterceptorFactory(audit.get(), auth->get()));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }

  CoordinatorOptions options;
  options.heartbeat_interval = std::chrono::milliseconds(flags.heartbeat_ms);
  options.lease_heartbeats = flags.lease_heartbeats;
  options.stop_grace = std::chrono::milliseconds(static_cast<int64_t>(flags.stop_grace_s * 1000));
  options.reattach_window =
      std::chrono::milliseconds(static_cast<int64_t>(flags.reattach_window_s * 1000));
  options.log_request_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(flags.log_request_timeout_s * 1000));
  options.cluster_slots = flags.cluster_slots;
  options.cluster_slot_memory = flags.cluster_slot_memory;
  {
    absl::StatusOr<std::chrono::milliseconds> retain = ParseRetention(flags.retain_finished);
    if (!retain.ok()) return Fail(std::string(retain.status().message()));
    options.retain_finished = *retain;
  }
  options.scheduler.max_overtakes = flags.max_overtakes;
  options.spec_check.check_paths = !flags.no_check_paths;
  options.spec_check.storage_policy = storage_policy;
  if (storage_policy != nullptr) {
    spdlog::info("storage root {}: job paths must lie under it (users/<user>/, teams/<team>/){}",
                 flags.storage_root,
                 flags.no_check_paths ? "; --no-check-paths: only the workers check them" : "");
  } else {
    spdlog::warn(
        "no --storage-root: job paths are not confined (any path the workers can reach "
        "is accepted; set one on a shared service)");
  }
  options.accounts = auth->get();
  options.trainer_credentials = trainer_credentials.get();
  options.limits = limits;
  options.is_admin = [&authenticator](const std::string& user) {
    if (authenticator.open()) return true;  // every caller is an admin
    absl::StatusOr<Principal> account = authenticator.FindUser(user);
    return account.ok() && account->role == Role::kAdmin;
  };
  // The rendezvous address needs the bound port: it is set once the server has started, before
  // Start() lets the coordinator place anything.
  absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
      Coordinator::Create(options, store->get(), epochs->get(), &rendezvous, metrics->get());
  if (!coordinator.ok()) return Fail(std::string(coordinator.status().message()));
  JobServiceOptions job_service_options;
  job_service_options.streams.per_user = flags.max_streams_per_user;
  job_service_options.streams.per_admin = flags.max_streams_per_admin;
  job_service_options.writes.per_second = flags.write_rate;
  job_service_options.writes.burst = flags.write_burst;
  JobServiceImpl job_service(**coordinator, **auth, job_service_options);
  // gRPC's default, said out loud (docs/OPERATIONS.md): a larger request is refused with
  // RESOURCE_EXHAUSTED before any handler sees it.
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  WorkerServiceImpl worker_service(**coordinator, **auth);
  builder.RegisterService(&job_service);
  builder.RegisterService(&worker_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return Fail(absl::StrCat("--listen ", flags.listen, ": cannot listen (port in use?)"));
  }
  std::string advertise = flags.advertise_address;
  if (advertise.empty()) {
    const bool wildcard = host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::";
    advertise = absl::StrCat(wildcard ? Hostname() : host, ":", bound_port);
  }
  (*coordinator)->SetRendezvousAddress(advertise);
  if (absl::Status s = (*coordinator)->Start(); !s.ok()) return Fail(std::string(s.message()));
  spdlog::info("deepnet-coordinator: gRPC on port {} (trainers reach it at {}), metrics on port {}, "
               "db {}, TLS {}", bound_port, advertise, (*metrics)->port(), flags.db,
               flags.tls_cert.empty() ? "off" : "on");
  if (!flags.port_file.empty()) {
    const std::string ports =
        absl::StrCat("grpc=", bound_port, "\nmetrics=", (*metrics)->port(), "\n");
    if (absl::Status s = storage::WriteFileAtomically(flags.port_file, ports); !s.ok()) {
      return Fail(absl::StrCat("--port-file: ", s.message()));
    }
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    Reload(flags, **coordinator, **auth, audit.get());
  }
  spdlog::info("deepnet-coordinator: signal {}, shutting down (jobs keep running)", signal_number);
  (*coordinator)->Shutdown();
  rendezvous.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}

}  // namespace
}  // namespace deepnet::coordinator

int main(int argc, char** argv) {
  // Every line of this process carries its name (docs/ARCHITECTURE.md, "Processes and rooms").
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [coordinator] [%l] %v");
  // Block the stop signals in every thread; main waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  deepnet::coordinator::Flags flags;
  CLI::App app{"deepnet-coordinator: accepts DeepNet training jobs over gRPC, schedules them as "
               "gangs onto deepnet-worker daemons, exports Prometheus metrics"};
  app.set_version_flag("--version", deepnet::ProgramVersion());
  app.add_option("--listen", flags.listen, "gRPC address (JobService, WorkerService, Rendezvous)")
      ->envname("DEEPNET_LISTEN")->capture_default_str();
  app.add_option("--metrics-listen", flags.metrics_listen, "HTTP address of /metrics; empty: off")
      ->envname("DEEPNET_METRICS_LISTEN")->capture_default_str();
  app.add_option("--db", flags.db, "SQLite job store (created if missing)")
      ->envname("DEEPNET_DB")->capture_default_str();
  app.add_option("--backup-to", flags.backup_to,
                 "copy the job store (--db) to FILE and exit; safe while a coordinator runs on it");
  app.add_option("--tokens-file", flags.tokens_file,
                 "bearer tokens: 'TOKEN USER [user|admin|worker]' per line; empty: no auth")
      ->envname("DEEPNET_TOKENS_FILE");
  app.add_option("--tls-cert", flags.tls_cert, "PEM server certificate chain (TLS on)")
      ->envname("DEEPNET_TLS_CERT");
  app.add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert")
      ->envname("DEEPNET_TLS_KEY");
  app.add_option("--advertise-address", flags.advertise_address,
                 "host:port trainers use for the rendezvous (default: hostname and bound port)")
      ->envname("DEEPNET_ADVERTISE_ADDRESS");
  app.add_option("--port-file", flags.port_file, "write the bound ports here once serving");
  app.add_option("--heartbeat-interval-ms", flags.heartbeat_ms, "worker heartbeat period")
      ->check(CLI::Range(10, 600000))->capture_default_str();
  app.add_option("--lease-heartbeats", flags.lease_heartbeats,
                 "heartbeats a worker may miss before it is lost")
      ->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--stop-grace-s", flags.stop_grace_s, "SIGTERM -> SIGKILL grace for ranks")
      ->check(CLI::Range(0.0, 25.0))->capture_default_str();
  app.add_option("--reattach-window-s", flags.reattach_window_s,
                 "after a restart, how long running jobs wait for their workers")
      ->check(CLI::Range(0.0, 3600.0))->capture_default_str();
  app.add_option("--log-request-timeout-s", flags.log_request_timeout_s,
                 "how long `deepnetctl logs` waits for a worker to send a part of a trainer log")
      ->check(CLI::Range(0.1, 600.0))->capture_default_str();
  app.add_option("--cluster-slots", flags.cluster_slots,
                 "slots the cluster can ever have: SubmitJob refuses a gang larger than this; "
                 "0: no bound (a job larger than the registered workers queues until they join)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--retain-finished", flags.retain_finished,
                 "delete a finished job (SUCCEEDED, FAILED, CANCELLED) and its events this long "
                 "after it ended: a number and a unit, 30d, 12h, 90m or 45s; 0: keep every job")
      ->envname("DEEPNET_RETAIN_FINISHED")
      ->capture_default_str();
  app.add_option("--cluster-slot-memory", flags.cluster_slot_memory,
                 "memory of the largest slot the cluster can ever have (bytes, or with a unit: "
                 "80GiB, 512MiB): SubmitJob refuses a job whose estimated memory per rank is "
                 "larger; 0: no bound (such a job queues until a slot with enough memory joins)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-overtakes", flags.max_overtakes,
                 "times a blocked gang may be overtaken by smaller jobs (0: strict order)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--storage-root", flags.storage_root,
                 "confine job paths: users write only under DIR/users/<user>/ and "
                 "DIR/teams/<team>/, read under DIR except other users' and teams' folders")
      ->envname("DEEPNET_STORAGE_ROOT");
  app.add_flag("--no-check-paths", flags.no_check_paths,
               "do not check job data/checkpoint paths (coordinator without shared storage)");
  app.add_option("--limits-file", flags.limits_file,
                 "fair-sharing limits (YAML: default, users, teams with max_priority, "
                 "max_running_ranks, max_queued_jobs); re-read on SIGHUP; empty: no limits")
      ->envname("DEEPNET_LIMITS_FILE");
  app.add_option("--audit-log", flags.audit_log,
                 "append a JSON line per SubmitJob/CancelJob call here (reopened on SIGHUP)")
      ->envname("DEEPNET_AUDIT_LOG");
  app.add_option("--max-streams-per-user", flags.max_streams_per_user,
                 "open WatchJob/StreamMetrics/GetJobLogs streams one user may hold (0: no limit)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--max-streams-per-admin", flags.max_streams_per_admin,
                 "the same for an admin (and for everyone without --tokens-file)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--write-rate", flags.write_rate,
                 "job submissions and cancellations a user may make per second, sustained "
                 "(admins are not limited; 0: no limit)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--write-burst", flags.write_burst,
                 "the same, at once (a bucket of this many, refilled at --write-rate)")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  app.add_flag("--no-reflection", flags.no_reflection,
               "serve no gRPC server reflection (otherwise served to callers with a token)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!flags.backup_to.empty()) {
    absl::StatusOr<int64_t> jobs = deepnet::coordinator::BackupJobStore(flags.db, flags.backup_to);
    if (!jobs.ok()) {
      std::cerr << "deepnet-coordinator: --backup-to: " << jobs.status().message() << "\n";
      return 1;
    }
    std::cout << "backed up " << flags.db << " to " << flags.backup_to << " (" << *jobs
              << " jobs)\n";
    return 0;
  }
  return deepnet::coordinator::Run(flags);
}
