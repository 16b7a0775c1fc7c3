// Coordinator: trainer logs. FindLogSource and LogReads (log_reads.h) do the work under the
// coordinator's mutex; a read waits on its condition without holding it.
#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {

absl::StatusOr<LogSource> Coordinator::FindLogSource(const std::string& job_id, int attempt,
                                                     std::optional<int> rank) const {
  absl::MutexLock lock(&mu_);
  const JobRun* job = FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
  return coordinator::FindLogSource(*job, attempt, rank);
}

absl::StatusOr<LogChunkReport> Coordinator::ReadLog(const LogSource& source,
                                                    LogRequestCommand request) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  return log_reads_.Read(source, std::move(request), &shutting_down_);
}

absl::Status Coordinator::OnLogChunk(const std::string& worker_id, int64_t epoch,
                                     const LogChunkReport& chunk) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRegistry::Worker*> worker = workers_.Heard(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  log_reads_.OnChunk(worker_id, chunk);
  return absl::OkStatus();
}

}  // namespace deepnet::coordinator
