#pragma once
// How `deepnet train` ends when SIGTERM or SIGINT stops it (job/stop_exit.h has the exit codes;
// docs/OPERATIONS.md "Stopping a worker / a trainer"): one line on stderr says whether a
// checkpoint was written and why, and the exit code says the same to scripts.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace deepnet::cli {

// Records which signal asked the trainer to stop (async-signal-safe: a lock-free store), for
// the messages below; call it from the signal handler.
void NoteStopSignal(int signal);
// "SIGTERM", "SIGINT" or "a stop request" when no signal was noted.
std::string StopSignalName();

// The start-up before the training loop (configuration, device, rendezvous with the other
// ranks) can block for minutes, e.g. waiting at the rendezvous for a rank that never comes. A
// stop there must not wait for it: while armed, a thread checks `stop` every 20 ms and, once it
// is set, writes one line to stderr ("<who>stopped by SIGTERM during start-up (<phase>): nothing
// was trained, so no checkpoint was written (none needed)") and ends the process at once with
// kStoppedNothingTrainedExitCode (79). Nothing of the job has been written by then. Disarm()
// (or the destructor) ends the watch before the trainer is built; once it returns, the watch
// never ends the process.
class StartupStopWatch {
 public:
  StartupStopWatch(const std::atomic<bool>* stop, std::string who);
  ~StartupStopWatch();
  StartupStopWatch(const StartupStopWatch&) = delete;
  StartupStopWatch& operator=(const StartupStopWatch&) = delete;

  // What start-up is doing now, for the message (e.g. "waiting at the rendezvous").
  void SetPhase(const std::string& phase);
  // The message's prefix, e.g. "deepnet train: rank 1: ".
  void SetWho(const std::string& who);
  void Disarm();

 private:
  void Watch();

  const std::atomic<bool>* stop_;
  std::string who_;  // Guarded by mu_.
  std::mutex mu_;
  std::condition_variable wake_;
  bool armed_ = true;  // Guarded by mu_.
  std::string phase_;  // Guarded by mu_.
  std::thread thread_;
};

// The ending of a training run that a signal stopped (TrainSummary::stop_reason == "signal"),
// from its summary's start_step, final_step and last_checkpoint (LibTorch-free here).
struct StopEnding {
  int exit_code = 0;
  std::string message;  // One line without the "deepnet train: " prefix.
};
// `checkpointing`: checkpoint.dir is set. Trained steps and a checkpoint: 143, "... checkpoint
// written"; nothing trained since a resumed checkpoint: 143, "no checkpoint written: its state
// is the checkpoint of step S, unchanged"; nothing trained from scratch: 79; trained steps but
// no checkpoint.dir: 80.
StopEnding DescribeSignalStop(int64_t start_step, int64_t final_step,
                              const std::string& last_checkpoint, bool checkpointing);

}  // namespace deepnet::cli
