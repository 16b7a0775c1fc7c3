#include "experiment/sweep_runner.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiment/budget.h"
#include "experiment/child_process.h"
#include "experiment/results.h"

namespace deepnet::experiment {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

nlohmann::json Series(const std::vector<std::pair<int64_t, double>>& points) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [step, value] : points) {
    j.push_back({step, std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr)});
  }
  return j;
}

nlohmann::json BaseRow(const SweepSpec& spec, const PlannedRun& run, const std::string& mode,
                       const std::string& commit) {
  nlohmann::json axes = nlohmann::json::object();
  nlohmann::json axis_order = nlohmann::json::array();
  for (const auto& [key, value] : run.axis_values) {
    axes[key] = ScalarToJson(value);
    axis_order.push_back(key);
  }
  return {{"sweep", spec.name},
          {"run_id", run.id},
          {"mode", mode},
          {"commit", commit},
          {"started_at", UtcNow()},
          {"axes", axes},
          {"axis_order", axis_order},
          {"seed", run.seed},
          {"max_steps", run.max_steps},
          {"config", YamlToJson(run.config_yaml)}};
}

nlohmann::json Finite(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

absl::StatusOr<RunExecution> LocalExecutor::Execute(const RunRequest& request) {
  RunExecution exec;
  ChildOptions child;
  child.argv = {binary_, "train", "--config", request.job_file, "--log-format", "json"};
  for (const std::string& o : request.overrides) {
    child.argv.push_back("--set");
    child.argv.push_back(o);
  }
  // The trainer ends with this process (cli/parent_watch.h): no orphan trains on after a crash.
  child.env.push_back(absl::StrCat("DEEPNET_WORKER_PID=", ::getpid()));
  child.stderr_path = request.run_dir + "/stderr.txt";
  child.deadline_s = request.deadline_s;
  child.stop = request.stop;
  const std::string log_path = request.run_dir + "/train.jsonl";
  std::ofstream log_file(log_path, std::ios::binary | std::ios::trunc);
  child.on_line = [&](const std::string& line) {
    log_file << line << "\n";
    exec.log.AddLine(line);
  };
  auto result = RunChild(child);
  log_file.close();
  if (!result.ok()) return result.status();
  exec.end.exit_code = result->exit_code;
  exec.end.killed_for_budget = result->hit_deadline;
  exec.end.stderr_tail = FileTail(child.stderr_path, 4096);
  exec.wall_s = result->wall_s;
  exec.interrupted = result->stopped;
  exec.log_file = "runs/" + request.run->id + "/train.jsonl";
  {
    std::ofstream cmd(request.run_dir + "/command.txt", std::ios::trunc);
    for (const std::string& a : child.argv) cmd << a << "\n";
  }
  return exec;
}

absl::StatusOr<SweepSummary> RunSweep(const SweepSpec& spec, const std::vector<PlannedRun>& plan,
                                      RunExecutor* executor, const RunnerOptions& options) {
  const auto start = Clock::now();
  std::error_code ec;
  const fs::path out(options.out_dir);
  fs::create_directories(out / "runs", ec);
  if (ec)
    return absl::InternalError(absl::StrCat(options.out_dir, ": cannot create: ", ec.message()));
  // One sweep per folder at a time: a second would append the same runs twice.
  const std::string lock_path = (out / ".lock").string();
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (lock_fd >= 0) ::close(lock_fd);
    return absl::FailedPreconditionError(
        absl::StrCat(options.out_dir, ": another deepnet experiment is running in this folder (",
                     lock_path, " is locked)"));
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock_fd};
  const std::string results_path = (out / "results.jsonl").string();
  const std::string job_file = (out / "job.yaml").string();
  if (auto s = WriteText(job_file, spec.job_yaml); !s.ok()) return s;
  if (auto s = WriteText((out / "spec.yaml").string(), DumpSweepSpec(spec)); !s.ok()) return s;
  auto results = ReadResults(results_path);
  if (!results.ok()) return results.status();
  double spent_before = 0.0;
  for (const auto& row : results->rows) {
    if (row.contains("wall_s") && row["wall_s"].is_number())
      spent_before += row["wall_s"].get<double>();
  }
  std::map<std::string, nlohmann::json> latest = LatestRows(results->rows);
  std::vector<nlohmann::json> configs;
  int64_t finished = 0;
  for (const PlannedRun& run : plan) {
    configs.push_back(YamlToJson(run.config_yaml));
    auto it = latest.find(run.id);
    if (it != latest.end() && IsFinished(it->second, configs.back())) ++finished;
  }
  SweepSummary summary;
  summary.planned = static_cast<int64_t>(plan.size());
  auto say = [&](const std::string& line) {
    if (options.progress) *options.progress << "[experiment] " << line << "\n" << std::flush;
  };
  say(absl::StrCat(spec.name, ": ", plan.size(), " run(s), ", finished,
                   " already finished; results in ", results_path));
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedRun& run = plan[i];
    const std::string where = absl::StrCat("run ", i + 1, "/", plan.size(), " ", run.id);
    auto it = latest.find(run.id);
    if (it != latest.end() && IsFinished(it->second, configs[i])) {
      ++summary.skipped;
      say(absl::StrCat(where, ": done earlier (", it->second.value("status", ""), ")"));
      continue;
    }
    if (options.stop != nullptr && options.stop->load()) {
      summary.interrupted = true;
      break;
    }
    const double spent = spent_before + Since(start);
    if (std::optional<std::string> why = BudgetStop(spec.budget, spent, finished)) {
      nlohmann::json row = BaseRow(spec, run, executor->mode(), options.commit);
      row.update({{"status", "budget"},
                  {"reason", "not started: " + *why},
                  {"steps", 0},
                  {"wall_s", 0.0},
                  {"final_valid_loss", nullptr},
                  {"final_train_loss", nullptr},
                  {"valid", nlohmann::json::array()},
                  {"loss", nlohmann::json::array()},
                  {"probe", nlohmann::json::array()}});
      if (auto s = AppendResult(results_path, row); !s.ok()) return s;
      latest[run.id] = row;
      ++summary.not_started;
      say(absl::StrCat(where, ": not started (", *why, ")"));
      continue;
    }
    const double remaining = RemainingSeconds(spec.budget, spent);
    RunRequest request;
    request.run = &run;
    request.overrides = run.overrides;
    request.overrides.push_back("checkpoint.dir=");  // Sweeps keep no checkpoints.
    const double max_minutes = RunMaxMinutes(remaining, run.max_minutes);
    if (max_minutes > 0) {
      request.overrides.push_back(absl::StrFormat("train.max_minutes=%.6g", max_minutes));
    }
    if (std::isfinite(remaining)) request.deadline_s = remaining;
    request.run_dir = (out / "runs" / run.id).string();
    fs::remove_all(request.run_dir, ec);
    fs::create_directories(request.run_dir, ec);
    if (ec)
      return absl::InternalError(absl::StrCat(request.run_dir, ": cannot create: ", ec.message()));
    request.job_file = job_file;
    request.stop = options.stop;
    say(absl::StrCat(where, ": running"));
    auto exec = executor->Execute(request);
    if (!exec.ok()) return exec.status();
    if (exec->interrupted) {
      summary.interrupted = true;
      say(absl::StrCat(where, ": interrupted (no row; it runs again on resume)"));
      break;
    }
    const Verdict verdict = Classify(exec->log, exec->end, spec.plateau);
    nlohmann::json row = BaseRow(spec, run, executor->mode(), options.commit);
    const TrainLog& log = exec->log;
    row.update({{"status", verdict.status},
                {"reason", verdict.reason},
                {"exit_code", exec->end.exit_code},
                {"stop_reason", log.stop_reason},
                {"steps", log.last_step},
                {"wall_s", exec->wall_s},
                {"max_minutes_given", max_minutes},
                {"final_valid_loss",
                 Finite(log.valid.empty() ? std::nullopt
                                          : std::optional<double>(log.valid.back().second))},
                {"final_train_loss", Finite(log.last_loss)},
                {"valid", Series(log.valid)},
                {"loss", Series(log.losses)},
                {"probe", log.probe},
                {"guard_rollbacks", log.guard_rollbacks},
                {"plateau_event", log.plateau_event},
                {"diagnostics_lines", log.diagnostics_lines},
                {"diagnostics", log.diagnostics},
                {"guard_events", log.guard_events},
                {"log", exec->log_file}});
    for (const auto& [key, value] : exec->extra.items()) row[key] = value;
    if (auto s = AppendResult(results_path, row); !s.ok()) return s;
    latest[run.id] = row;
    ++summary.ran;
    if (IsFinalStatus(verdict.status)) ++finished;
    say(absl::StrCat(
        where, ": ", verdict.status, verdict.reason.empty() ? "" : " (" + verdict.reason + ")",
        ", ", log.last_step, " steps, ",
        log.valid.empty() ? std::string("no validation")
                          : absl::StrFormat("valid loss %.4f", log.valid.back().second),
        absl::StrFormat(", %.1f s", exec->wall_s)));
  }
  for (const PlannedRun& run : plan) {
    auto it = latest.find(run.id);
    ++summary.by_status[it == latest.end() ? "pending" : it->second.value("status", "")];
  }
  return summary;
}

}  // namespace deepnet::experiment
