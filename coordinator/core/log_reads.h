#pragma once
// Trainer log reads. The worker daemon that ran a rank keeps its output; a read is a
// LogRequest over that worker's session, answered by a LogChunk matched by request id. The
// reading thread waits on the coordinator's mutex (not holding it) until the answer arrives,
// the worker's session ends, or the timeout passes.
//
// Every method is called with the coordinator's mutex held (the one given here).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/core/coordinator_types.h"
#include "coordinator/core/worker_registry.h"

namespace deepnet::coordinator {

class JobRun;

// The trainer of `rank` (nullopt: the rank whose failure ended the attempt, else 0) of
// `attempt` (0: the latest) of `job`, and the worker that ran it. INVALID_ARGUMENT naming
// attempt or rank; FAILED_PRECONDITION when the job has no attempt yet or the worker of the
// rank was not recorded.
absl::StatusOr<LogSource> FindLogSource(const JobRun& job, int attempt, std::optional<int> rank);

class LogReads {
 public:
  // `mu` guards the reads and the registry; both must outlive this.
  LogReads(absl::Mutex* mu, const WorkerRegistry* workers, std::chrono::milliseconds timeout);

  // Asks the source's worker for part of its log and waits for the answer (see
  // Coordinator::ReadLog). `*shutting_down` ends the wait.
  absl::StatusOr<LogChunkReport> Read(const LogSource& source, LogRequestCommand request,
                                      const bool* shutting_down)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);
  // A worker's answer (an unknown, expired or other worker's request id is ignored).
  void OnChunk(const std::string& worker_id, const LogChunkReport& chunk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);

 private:
  struct PendingRead {
    std::string worker_id;
    // The session the request went out on: once the worker no longer has it (session ended or
    // replaced, re-registered, lost) no answer can come, and the read ends at once.
    std::weak_ptr<WorkerCommandSink> sink;
    LogRequestCommand request;  // what was asked, to check the answer against
    bool done = false;
    absl::StatusOr<LogChunkReport> result;
  };
  // Whether the worker still has the session `read` went out on (an answer can still come).
  bool SessionCarries(const PendingRead& read) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_);

  absl::Mutex* const mu_;
  const WorkerRegistry* const workers_;
  const std::chrono::milliseconds timeout_;
  std::map<int64_t, PendingRead> reads_ ABSL_GUARDED_BY(*mu_);
  int64_t last_request_ ABSL_GUARDED_BY(*mu_) = 0;
};

}  // namespace deepnet::coordinator
