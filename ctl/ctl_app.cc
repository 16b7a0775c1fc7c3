#include "ctl/ctl_app.h"

#include <grpcpp/channel.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ctl/commands.h"
#include "ctl/exit_codes.h"
#include "ctl/format.h"
#include "ctl/health_check.h"
#include "rpc/rpc_util.h"

namespace deepnet::ctl {
namespace {

constexpr const char* kDefaultCoordinator = "localhost:7070";

struct GlobalFlags {
  std::string coordinator;
  std::string token;
  std::string token_file;
  std::string ca_cert;
  std::string tls_server_name;
  std::string timeout = "30s";
  std::string output = "table";
};

// "30s", "500ms", "2m" (absl duration syntax) or plain seconds ("30", "0.5").
bool ParseTimeout(const std::string& text, std::chrono::milliseconds* out) {
  double seconds = 0;
  absl::Duration duration;
  if (absl::SimpleAtod(text, &seconds)) {
    duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &duration)) {
    return false;
  }
  if (duration < absl::ZeroDuration()) return false;
  *out = std::chrono::milliseconds(absl::ToInt64Milliseconds(duration));
  return true;
}

std::string Env(const CtlEnvironment& env, const std::string& name) {
  return env.getenv ? env.getenv(name) : std::string();
}

// --token, --token-file, DEEPNET_TOKEN, DEEPNET_TOKEN_FILE, in this order (rpc::ResolveToken's
// order, with the environment taken from `env`).
absl::StatusOr<std::string> Token(const GlobalFlags& flags, const CtlEnvironment& env) {
  // With either flag set ResolveToken never reaches its environment lookup.
  if (!flags.token.empty() || !flags.token_file.empty()) {
    return rpc::ResolveToken(flags.token, flags.token_file, "DEEPNET_TOKEN");
  }
  const std::string from_env = Env(env, "DEEPNET_TOKEN");
  if (!from_env.empty()) return from_env;
  const std::string file = Env(env, "DEEPNET_TOKEN_FILE");
  if (!file.empty()) return rpc::ReadTokenFile(file);
  return std::string();
}

int UsageError(const std::string& message, const CtlEnvironment& env) {
  *env.err << "deepnetctl: " << message << "\nRun with --help for more information." << std::endl;
  return kExitUsage;
}

}  // namespace

int RunDeepnetctl(int argc, const char* const* argv, const CtlEnvironment& env) {
  CLI::App app("deepnetctl: submit and follow DeepNet training jobs on a coordinator.",
               "deepnetctl");
  app.require_subcommand(1);
  app.fallthrough();
  if (!env.version.empty()) app.set_version_flag("--version", env.version);
  app.footer(absl::StrCat(
      "Environment: DEEPNET_COORDINATOR, DEEPNET_TOKEN, DEEPNET_TOKEN_FILE, DEEPNET_CA_CERT\n"
      "(used when the flag is not given).\n\n",
      ExitCodeHelp()));

  GlobalFlags flags;
  app.add_option("--coordinator", flags.coordinator,
                 "Coordinator address host:port (env DEEPNET_COORDINATOR; default " +
                     std::string(kDefaultCoordinator) + ")");
  app.add_option("--token", flags.token, "Bearer token (env DEEPNET_TOKEN)");
  app.add_option("--token-file", flags.token_file,
                 "File whose first line is the token (env DEEPNET_TOKEN_FILE)");
  app.add_option("--ca-cert", flags.ca_cert,
                 "PEM CA certificate of the coordinator; turns TLS on (env DEEPNET_CA_CERT)");
  app.add_option("--tls-server-name", flags.tls_server_name,
                 "Name the coordinator's certificate carries, when not the address's host");
  app.add_option("--timeout", flags.timeout,
                 "Deadline of each call, e.g. 30s, 500ms, 2m; watch keeps reconnecting this long "
                 "after losing the coordinator")
      ->capture_default_str();
  app.add_option("-o,--output", flags.output, "Output format: table, json or yaml")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json", "yaml"}, CLI::ignore_case));

  SubmitArgs submit_args;
  CLI::App* submit = app.add_subcommand("submit", "Submit a job YAML (docs/CONFIG.md)");
  submit->add_option("FILE", submit_args.file, "Job YAML, sent verbatim")->required();
  submit->add_option("--idempotency-key", submit_args.idempotency_key,
                     "Key making resubmission return the same job (default: a fresh random "
                     "key, reused by the automatic retries)");
  submit->add_flag("--validate-only", submit_args.validate_only,
                   "Only validate the spec; nothing is stored");
  submit->add_flag("--watch", submit_args.watch, "Then follow the job like `watch`");

  std::string job_id;
  CLI::App* get = app.add_subcommand("get", "Show one job");
  get->add_option("ID", job_id, "Job id")->required();

  ListArgs list_args;
  std::vector<std::string> states, labels;
  bool all_users = false;
  CLI::App* list = app.add_subcommand("list", "List jobs, newest first (every page)");
  list->add_option("--state", states,
                   "Only jobs in this state (repeatable or comma-separated; e.g. running)")
      ->delimiter(',')
      ->allow_extra_args(false);
  CLI::Option* owner = list->add_option("--owner", list_args.owner, "Only this user's jobs");
  list->add_flag("--all-users", all_users, "Every user's jobs (admins)")->excludes(owner);
  list->add_option("--label", labels, "Only jobs with label KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  list->add_option("--name-prefix", list_args.name_prefix, "Only names starting with this");
  list->add_option("--page-size", list_args.page_size, "Jobs per request (default: server's)")
      ->check(CLI::NonNegativeNumber);
  list->add_option("--limit", list_args.limit, "At most this many jobs (default: all)")
      ->check(CLI::NonNegativeNumber);

  std::string reason;
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel a job");
  cancel->add_option("ID", job_id, "Job id")->required();
  cancel->add_option("--reason", reason, "Recorded with the cancellation");

  CLI::App* checkpoints = app.add_subcommand("checkpoints", "List a job's checkpoints");
  checkpoints->add_option("ID", job_id, "Job id")->required();

  CLI::App* watch = app.add_subcommand(
      "watch", "Follow a job until it ends (exit 0 SUCCEEDED, 1 FAILED or CANCELLED)");
  watch->add_option("ID", job_id, "Job id")->required();

  MetricsArgs metrics_args;
  CLI::App* metrics = app.add_subcommand("metrics", "Stream a job's training metrics");
  metrics->add_option("ID", metrics_args.job_id, "Job id")->required();
  metrics
      ->add_option("--from-step", metrics_args.from_step,
                   "Retained points from this step on, then live ones")
      ->check(CLI::NonNegativeNumber);
  metrics->add_flag("--live-only", metrics_args.live_only, "Only points reported from now on");

  CLI::App* workers = app.add_subcommand(
      "workers", "List worker daemons: state, slots used/free, devices, jobs, last heartbeat");
  workers->alias("nodes");

  LogsArgs logs_args;
  int logs_rank = -1;
  CLI::App* logs = app.add_subcommand(
      "logs", "Print a trainer's output (default: stderr of the failing rank, else rank 0, of "
              "the latest attempt); owner or admin");
  logs->add_option("ID", logs_args.job_id, "Job id")->required();
  logs->add_option("--rank", logs_rank,
                   "Rank (default: the one whose failure ended the attempt, else 0)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--attempt", logs_args.attempt, "Attempt 1, 2, ... (default: the latest)")
      ->check(CLI::PositiveNumber);
  logs->add_flag("--stdout", logs_args.stdout_stream,
                 "The trainer's JSON events (stdout) instead of its log (stderr)");
  CLI::Option* tail_option =
      logs->add_option("--tail-bytes", logs_args.tail_bytes, "Only the last N bytes")
          ->check(CLI::PositiveNumber);
  logs->add_option("--offset", logs_args.offset, "Start at this byte of the log")
      ->check(CLI::NonNegativeNumber)
      ->excludes(tail_option);
  logs->add_flag("-f,--follow", logs_args.follow,
                 "Keep printing new output until the rank exits (Ctrl-C stops)");

  std::string health_address;
  CLI::App* health = app.add_subcommand(
      "health",
      "Ask a daemon's gRPC health service, as kubelet's gRPC probes do (no token): "
      "exit 0 and SERVING; ADDRESS defaults to the coordinator's, a worker's is its "
      "--listen address");
  health->add_option("ADDRESS", health_address, "host:port (a worker daemon: port 7071)");

  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, *env.out, *env.err);
    return code == 0 ? kExitOk : kExitUsage;
  }

  // Flags the parser cannot check alone.
  std::chrono::milliseconds timeout;
  if (!ParseTimeout(flags.timeout, &timeout)) {
    return UsageError("--timeout: not a duration: " + flags.timeout, env);
  }
  for (const std::string& name : states) {
    const std::optional<v1::JobState> state = ParseJobState(name);
    if (!state) {
      return UsageError("--state: unknown job state '" + name +
                            "' (queued, placing, starting, running, recovering, succeeded, "
                            "failed, cancelled)",
                        env);
    }
    list_args.states.push_back(*state);
  }
  for (const std::string& label : labels) {
    const size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return UsageError("--label: expected KEY=VALUE, got '" + label + "'", env);
    }
    list_args.labels[label.substr(0, eq)] = label.substr(eq + 1);
  }
  if (all_users) list_args.owner = "*";
  if (logs_rank >= 0) logs_args.rank = logs_rank;

  rpc::ChannelOptions channel_options;
  channel_options.address =
      !flags.coordinator.empty() ? flags.coordinator : Env(env, "DEEPNET_COORDINATOR");
  if (channel_options.address.empty()) channel_options.address = kDefaultCoordinator;
  if (!health_address.empty()) channel_options.address = health_address;
  channel_options.ca_cert_file =
      !flags.ca_cert.empty() ? flags.ca_cert : Env(env, "DEEPNET_CA_CERT");
  channel_options.tls_server_name = flags.tls_server_name;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = rpc::MakeChannel(channel_options);
  if (!channel.ok()) return UsageError(std::string(channel.status().message()), env);

  // The health check needs no token: a probe must not fail on a missing token file.
  if (health->parsed()) return RunHealth(*channel, timeout, *env.out, *env.err);
  absl::StatusOr<std::string> token = Token(flags, env);
  if (!token.ok()) return UsageError(std::string(token.status().message()), env);

  JobClientOptions client_options;
  client_options.token = *token;
  client_options.timeout = timeout;
  JobClient client(v1::JobService::NewStub(*channel), client_options);

  CommandContext ctx;
  ctx.client = &client;
  ctx.format = *ParseOutputFormat(flags.output);  // IsMember checked it.
  ctx.watch.tty = env.stdout_is_tty;
  ctx.watch.width = env.terminal_width > 0 ? env.terminal_width : 80;
  if (timeout.count() > 0) ctx.watch.reconnect_window = timeout;
  ctx.out = env.out;
  ctx.err = env.err;
  ctx.terminal = env.terminal != nullptr ? env.terminal : env.out;
  ctx.now_s = [] {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };

  if (submit->parsed()) return RunSubmit(submit_args, ctx);
  if (get->parsed()) return RunGet(job_id, ctx);
  if (list->parsed()) return RunList(list_args, ctx);
  if (cancel->parsed()) return RunCancel(job_id, reason, ctx);
  if (checkpoints->parsed()) return RunCheckpoints(job_id, ctx);
  if (watch->parsed()) return RunWatch(job_id, ctx);
  if (metrics->parsed()) return RunMetrics(metrics_args, ctx);
  if (workers->parsed()) return RunWorkers(ctx);
  if (logs->parsed()) return RunLogs(logs_args, ctx);
  return UsageError("no command given", env);
}

}  // namespace deepnet::ctl
