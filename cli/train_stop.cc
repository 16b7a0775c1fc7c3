#include "cli/train_stop.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "job/stop_exit.h"

namespace deepnet::cli {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

}  // namespace

void NoteStopSignal(int signal) { g_stop_signal.store(signal, std::memory_order_relaxed); }

std::string StopSignalName() {
  switch (g_stop_signal.load(std::memory_order_relaxed)) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case 0:
      return "a stop request";
    default:
      return absl::StrCat("signal ", g_stop_signal.load());
  }
}

StartupStopWatch::StartupStopWatch(const std::atomic<bool>* stop, std::string who)
    : stop_(stop), who_(std::move(who)), phase_("loading the configuration") {
  if (stop_ != nullptr) thread_ = std::thread([this] { Watch(); });
}

StartupStopWatch::~StartupStopWatch() { Disarm(); }

void StartupStopWatch::SetPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = phase;
}

void StartupStopWatch::SetWho(const std::string& who) {
  std::lock_guard<std::mutex> lock(mu_);
  who_ = who;
}

void StartupStopWatch::Disarm() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StartupStopWatch::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (armed_) {
    if (stop_->load()) {
      const std::string line =
          absl::StrCat(who_, "stopped by ", StopSignalName(), " during start-up (", phase_,
                       "): nothing was trained, so no checkpoint was written (none needed); exit ",
                       job::kStoppedNothingTrainedExitCode, "\n");
      // The main thread may be blocked anywhere (a rendezvous, a connect): no destructor runs.
      (void)!write(STDERR_FILENO, line.data(), line.size());
      _exit(job::kStoppedNothingTrainedExitCode);
    }
    wake_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

StopEnding DescribeSignalStop(int64_t start_step, int64_t final_step,
                              const std::string& last_checkpoint, bool checkpointing) {
  const std::string by = absl::StrCat("stopped by ", StopSignalName());
  StopEnding out;
  if (final_step == start_step) {
    if (start_step > 0) {
      out.exit_code = job::kStoppedCheckpointedExitCode;
      out.message = absl::StrCat(by,
                                 " before its first step: no checkpoint written (none "
                                 "needed): its state is the checkpoint of step ",
                                 start_step, " it resumed from, unchanged");
    } else {
      out.exit_code = job::kStoppedNothingTrainedExitCode;
      out.message = absl::StrCat(by,
                                 " before its first step: nothing was trained, so no "
                                 "checkpoint was written (none needed); a rerun starts from "
                                 "step 0");
    }
    return out;
  }
  if (!checkpointing) {
    out.exit_code = job::kStoppedUnsavedExitCode;
    out.message = absl::StrCat(by, " at step ", final_step,
                               ": no checkpoint written because checkpoint.dir is not set; steps ",
                               start_step + 1, "-", final_step, " are lost");
    return out;
  }
  out.exit_code = job::kStoppedCheckpointedExitCode;
  out.message =
      last_checkpoint.empty()
          ? absl::StrCat(by, " at step ", final_step, ": its state is the checkpoint of step ",
                         final_step, " (no new one needed)")
          : absl::StrCat(by, " at step ", final_step, ": checkpoint written (", last_checkpoint,
                         ")");
  return out;
}

}  // namespace deepnet::cli
