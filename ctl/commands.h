#pragma once
// The deepnetctl commands, each one request (or stream) against a JobClient and its output.
// Every function prints results to `out`, errors to `err` as `deepnetctl: CODE: message`, and
// returns the process exit code (exit_codes.h). Blocking; not thread-safe (one command at a
// time per CommandContext).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ctl/job_client.h"
#include "ctl/job_watcher.h"
#include "ctl/output.h"

namespace deepnet::ctl {

struct CommandContext {
  JobClient* client = nullptr;
  OutputFormat format = OutputFormat::kTable;
  // Used by watch and submit --watch (its format is `format`).
  WatchOptions watch;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  std::ostream* terminal = nullptr;  // CtlEnvironment::terminal; null: out.
  // Unix seconds now, for the runtime of running jobs.
  std::function<int64_t()> now_s;
};

struct SubmitArgs {
  // Path of the job YAML, sent verbatim as JobSpec.config_yaml.
  std::string file;
  // Empty: a fresh random key.
  std::string idempotency_key;
  bool validate_only = false;
  // Follow the job until it is terminal afterwards (exit code as for watch).
  bool watch = false;
};

struct ListArgs {
  std::vector<v1::JobState> states;
  // Empty: the caller's jobs; "*": everyone's.
  std::string owner;
  std::map<std::string, std::string> labels;
  std::string name_prefix;
  // Jobs per page; 0: the server's default.
  int page_size = 0;
  // Jobs in all; 0: every page.
  int limit = 0;
};

struct MetricsArgs {
  std::string job_id;
  int64_t from_step = 0;
  bool live_only = false;
};

struct LogsArgs {
  std::string job_id;
  // 0: the latest attempt.
  int attempt = 0;
  // Unset: the rank whose failure ended the attempt, else rank 0 (the coordinator picks).
  std::optional<int> rank;
  // The trainer's JSON events instead of its human-readable stderr log.
  bool stdout_stream = false;
  // > 0: only the last this many bytes; else from `offset`.
  int64_t tail_bytes = 0;
  int64_t offset = 0;
  bool follow = false;
};

[[nodiscard]] int RunSubmit(const SubmitArgs& args, const CommandContext& ctx);
[[nodiscard]] int RunGet(const std::string& job_id, const CommandContext& ctx);
[[nodiscard]] int RunList(const ListArgs& args, const CommandContext& ctx);
[[nodiscard]] int RunCancel(const std::string& job_id, const std::string& reason,
                            const CommandContext& ctx);
[[nodiscard]] int RunCheckpoints(const std::string& job_id, const CommandContext& ctx);
[[nodiscard]] int RunWatch(const std::string& job_id, const CommandContext& ctx);
[[nodiscard]] int RunMetrics(const MetricsArgs& args, const CommandContext& ctx);
[[nodiscard]] int RunWorkers(const CommandContext& ctx);
// Writes the log's bytes to `out` unchanged (the output format does not apply); notes go to
// `err`: which rank's log it is when the coordinator chose the rank, and where to continue
// when the call stopped at its size limit.
[[nodiscard]] int RunLogs(const LogsArgs& args, const CommandContext& ctx);

}  // namespace deepnet::ctl
