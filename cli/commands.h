#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "model/deepnet_config.h"
#include "model/model_stats.h"

namespace deepnet::cli {

/// Exit codes of the `deepnet` tool; scripts may rely on them.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,   // Runtime failure (I/O, divergence, compute error).
  kExitBadInput = 2,  // Bad flags, configuration or input.
  // A newer attempt of the job (or another job) owns the checkpoint folder: this stale attempt
  // was refused a commit and stopped without touching the folder (storage/checkpoint_fence.h).
  kExitFencedOut = 77,
  // The divergence guard ran out of retries (job::GuardConfig): restarting from the checkpoints
  // would replay the same divergence (job::kGuardExhaustedExitCode).
  kExitGuardExhausted = 78,
  // Stopped by SIGTERM/SIGINT; the state it stopped in is in a checkpoint, written at the stop
  // or already there (128 + 15). job/stop_exit.h has these three.
  kExitTerminated = 143,
  // Stopped during start-up or before the first step with no checkpoint loaded: nothing was
  // trained, so no checkpoint was written (none needed).
  kExitStoppedNothingTrained = 79,
  // Stopped after training steps that no checkpoint holds (no checkpoint.dir): they are lost.
  kExitStoppedUnsaved = 80,
};

struct TrainCommand {
  std::string config_path;
  std::vector<std::string> overrides;  // "key.path=value"
  std::string log_format = "text";     // text | json
  bool validate_only = false;          // Print the effective config and exit.
  // Skip the check of the memory estimate against the available memory (train/memory_check.h).
  bool no_memory_check = false;
};

struct InspectCommand {
  std::string config_path;  // Optional: take the shape from a job file's model section.
  model::DeepNetConfig model = model::DeepNetConfig();
  model::StatsOptions stats;
  std::string format = "text";  // text | json
};

struct TranslateCommand {
  std::string checkpoint;  // Checkpoint folder or checkpoint.dir.
  std::string to_lang;
  int64_t beam_size = 4;
  double length_penalty = 1.0;
  std::string device = "cpu";
};

/// Each runs one subcommand, printing results to `out` and problems to `err`.
int RunTrain(const TrainCommand& command, const std::atomic<bool>* stop, std::ostream& out,
             std::ostream& err);
int RunInspect(const InspectCommand& command, std::ostream& out, std::ostream& err);
int RunTranslate(const TranslateCommand& command, std::istream& in, std::ostream& out,
                 std::ostream& err);

}  // namespace deepnet::cli
