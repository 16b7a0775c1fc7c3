#include "experiment/coordinator_executor.h"

#include <chrono>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "experiment/child_process.h"
#include "job/job_config.h"

namespace deepnet::experiment {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::vector<std::string> CoordinatorExecutor::Ctl(std::vector<std::string> args) const {
  std::vector<std::string> argv = {deepnetctl_, "--coordinator", address_};
  argv.insert(argv.end(), ctl_flags_.begin(), ctl_flags_.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

absl::StatusOr<RunExecution> CoordinatorExecutor::Execute(const RunRequest& request) {
  const auto start = Clock::now();
  RunExecution exec;
  const std::string& dir = request.run_dir;
  // The job the coordinator gets: the effective config, every field written out.
  auto config = job::LoadJobConfig(request.job_file, request.overrides);
  if (!config.ok()) return config.status();
  const std::string job_path = dir + "/job.yaml";
  {
    std::ofstream f(job_path, std::ios::trunc);
    f << job::DumpJobConfig(*config);
    if (!f) return absl::InternalError(absl::StrCat(job_path, ": cannot write"));
  }
  // Submit.
  std::string submit_out;
  ChildOptions submit;
  submit.argv = Ctl({"-o", "json", "submit", job_path});
  submit.stderr_path = dir + "/submit.stderr.txt";
  submit.on_line = [&](const std::string& line) { submit_out += line + "\n"; };
  auto submitted = RunChild(submit);
  if (!submitted.ok()) return submitted.status();
  const nlohmann::json answer = nlohmann::json::parse(submit_out, nullptr, false);
  std::string job_id;
  if (answer.is_object() && answer.contains("job") && answer["job"].is_object()) {
    job_id = answer["job"].value("job_id", "");
  }
  if (submitted->exit_code != 0 || job_id.empty()) {
    exec.end.exit_code = submitted->exit_code == 0 ? 1 : submitted->exit_code;
    exec.end.stderr_tail = "deepnetctl submit: " + Trim(FileTail(submit.stderr_path, 2000)) + "\n";
    exec.wall_s = Since(start);
    exec.log_file = "";
    return exec;
  }
  exec.extra["job_id"] = job_id;
  exec.extra["coordinator"] = address_;
  std::ofstream(dir + "/job_id.txt") << job_id << "\n";
  // Follow it until it ends (or the budget or a stop ends it).
  ChildOptions watch;
  watch.argv = Ctl({"-o", "json", "watch", job_id});
  watch.stderr_path = dir + "/watch.stderr.txt";
  watch.deadline_s = request.deadline_s;
  watch.kill_grace_s = 5;
  watch.stop = request.stop;
  std::ofstream watch_log(dir + "/watch.jsonl", std::ios::trunc);
  std::string final_state;
  watch.on_line = [&](const std::string& line) {
    watch_log << line << "\n";
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) return;
    if (j.contains("snapshot") && j["snapshot"].is_object()) {
      final_state = j["snapshot"].value("state", final_state);
    } else if (j.contains("event") && j["event"].is_object()) {
      const std::string to = j["event"].value("to_state", "");
      if (!to.empty() && to != "JOB_STATE_UNSPECIFIED") final_state = to;
    }
  };
  auto watched = RunChild(watch);
  watch_log.close();
  if (!watched.ok()) return watched.status();
  if (watched->hit_deadline || watched->stopped) {
    ChildOptions cancel;
    cancel.argv = Ctl({"cancel", job_id, "--reason",
                       watched->stopped ? "deepnet experiment was stopped"
                                        : "the sweep's compute budget ran out"});
    cancel.stderr_path = dir + "/cancel.stderr.txt";
    (void)RunChild(cancel);
  }
  exec.interrupted = watched->stopped;
  exec.end.killed_for_budget = watched->hit_deadline;
  // The trainer's JSON lines (rank 0's stdout) and the end of its stderr.
  ChildOptions logs;
  logs.argv = Ctl({"logs", job_id, "--rank", "0", "--stdout"});
  logs.stderr_path = dir + "/logs.stderr.txt";
  std::ofstream train_log(dir + "/train.jsonl", std::ios::trunc);
  logs.on_line = [&](const std::string& line) {
    train_log << line << "\n";
    exec.log.AddLine(line);
  };
  auto read = RunChild(logs);
  train_log.close();
  if (!read.ok()) return read.status();
  std::string stderr_tail;
  ChildOptions tail;
  tail.argv = Ctl({"logs", job_id, "--tail-bytes", "4096"});
  tail.stderr_path = dir + "/logs.stderr.txt";
  tail.on_line = [&](const std::string& line) { stderr_tail += line + "\n"; };
  (void)RunChild(tail);
  exec.end.stderr_tail = stderr_tail;
  // watch: 0 SUCCEEDED, 1 FAILED or CANCELLED, else deepnetctl's own error.
  if (watched->exit_code == 0) {
    exec.end.exit_code = 0;
  } else {
    exec.end.exit_code = 1;
    if (watched->exit_code != 1 && !watched->hit_deadline && !watched->stopped) {
      exec.end.stderr_tail += "deepnetctl watch: exit " + std::to_string(watched->exit_code) +
                              ": " + Trim(FileTail(watch.stderr_path, 1000)) + "\n";
    }
  }
  exec.extra["job_state"] = final_state;
  exec.log_file = "runs/" + request.run->id + "/train.jsonl";
  exec.wall_s = Since(start);
  return exec;
}

}  // namespace deepnet::experiment
