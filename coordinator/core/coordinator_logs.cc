// Coordinator: trainer logs. The worker daemon that ran a rank keeps its output; a read is a
// LogRequest over that worker's session, answered by a LogChunk matched by request id. The
// reading thread waits on the coordinator's mutex condition (not holding it) until the answer
// arrives, the worker's session ends, or log_request_timeout passes.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {
namespace {

// Reads waiting for workers at once; each holds at most one 64 KiB answer.
constexpr size_t kMaxLogReadsInFlight = 256;

bool EndsAttempt(const JobEventView& e) {
  switch (e.type) {
    case EventType::kCancelRequested:
    case EventType::kHangDetected:
    case EventType::kWorkerLost:
      return true;
    case EventType::kStateChanged:
      return e.to_state == JobState::kRecovering || IsTerminal(e.to_state);
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<LogSource> Coordinator::FindLogSource(const std::string& job_id, int attempt,
                                                     std::optional<int> rank) const {
  absl::MutexLock lock(&mu_);
  const JobRuntime* job = FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " does not exist"));
  const int latest = job->record.attempt;
  if (latest == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " has not started yet (", ToString(job->record.state),
        "): its trainers write logs once its first attempt is placed"));
  }
  if (attempt < 0 || attempt > latest) {
    return absl::InvalidArgumentError(absl::StrCat("attempt: job ", job_id, " has attempts 1..",
                                                   latest, " (0 means the latest), not ", attempt));
  }
  LogSource source;
  source.job_id = job_id;
  source.attempt = attempt == 0 ? latest : attempt;
  const int world = job->record.pipeline_stages * job->record.data_parallel;
  if (rank.has_value() && (*rank < 0 || *rank >= world)) {
    return absl::InvalidArgumentError(absl::StrCat("rank: job ", job_id, " has ranks 0..",
                                                   world - 1, ", not ", *rank));
  }
  std::map<int, std::string> workers;  // rank -> worker id
  std::optional<int> failed_rank;
  bool attempt_ended = false;
  for (const JobEventView& e : job->events) {
    if (e.attempt != source.attempt) continue;
    if (e.type == EventType::kPlaced) {
      for (size_t r = 0; r < e.rank_workers.size(); ++r) {
        if (!e.rank_workers[r].empty()) workers[static_cast<int>(r)] = e.rank_workers[r];
      }
    }
    if (e.type == EventType::kRankExited && !e.worker_id.empty()) {
      workers.try_emplace(e.rank, e.worker_id);
      // The first failing exit before anything else stopped the attempt is why it ended.
      if (!attempt_ended && !failed_rank.has_value() && (e.exit_code != 0 || e.signal != 0)) {
        failed_rank = e.rank;
      }
    }
    attempt_ended = attempt_ended || EndsAttempt(e);
  }
  if (source.attempt == latest) {
    // The live placement (after a restart: the workers reattaching their ranks); an empty
    // worker id never hides the one the events recorded.
    for (const RankRuntime& r : job->ranks) {
      if (!r.view.worker_id.empty()) workers[r.view.rank] = r.view.worker_id;
    }
    for (const auto& [r, view] : job->reattached) {
      if (!view.worker_id.empty()) workers[r] = view.worker_id;
    }
  }
  source.rank = rank.value_or(failed_rank.value_or(0));
  auto it = workers.find(source.rank);
  if (it == workers.end() || it->second.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " attempt ", source.attempt, ": it is not recorded which worker ran rank ",
        source.rank, " (attempts placed by a coordinator older than GetJobLogs)"));
  }
  source.worker_id = it->second;
  return source;
}

absl::StatusOr<LogChunkReport> Coordinator::ReadLog(const LogSource& source,
                                                    LogRequestCommand request) {
  const std::string what = absl::StrCat("worker ", source.worker_id, ", which ran rank ",
                                        source.rank, " of job ", source.job_id, " attempt ",
                                        source.attempt);
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  auto worker = workers_.find(source.worker_id);
  if (worker == workers_.end() || worker->second.lost) {
    return absl::UnavailableError(absl::StrCat(
        what, ", is lost; its logs stay on that machine (under the worker's --work-dir) until it "
        "registers again"));
  }
  if (worker->second.sink == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(what, ", has no session with the coordinator now; retry when it is back"));
  }
  if (log_reads_.size() >= kMaxLogReadsInFlight) {
    return absl::ResourceExhaustedError(
        absl::StrCat(log_reads_.size(), " log reads are waiting for workers; retry shortly"));
  }
  request.request_id = ++last_log_request_;
  request.job_id = source.job_id;
  request.attempt = source.attempt;
  request.rank = source.rank;
  if (request.max_bytes <= 0 || request.max_bytes > kMaxLogChunkBytes) {
    request.max_bytes = kMaxLogChunkBytes;
  }
  const int64_t id = request.request_id;
  log_reads_[id].worker_id = source.worker_id;
  log_reads_[id].sink = worker->second.sink;
  log_reads_[id].request = request;
  if (!worker->second.sink->SendLogRequest(worker->second.epoch, request)) {
    log_reads_.erase(id);
    return absl::UnavailableError(absl::StrCat(what, ": its session cannot carry log requests"));
  }
  auto answered = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return log_reads_.at(id).done || shutting_down_ || !SessionCarries(log_reads_.at(id));
  };
  mu_.AwaitWithTimeout(absl::Condition(&answered),
                       absl::FromChrono(options_.log_request_timeout));
  PendingLogRead read = std::move(log_reads_.at(id));
  log_reads_.erase(id);
  if (read.done) {
    if (read.result.ok() && !read.result->error.ok()) {
      const absl::Status& e = read.result->error;
      return absl::Status(e.code(), absl::StrCat("worker ", source.worker_id, ": ", e.message()));
    }
    return read.result;
  }
  if (shutting_down_) return absl::UnavailableError("coordinator is shutting down");
  if (!SessionCarries(read)) {
    const auto now = workers_.find(source.worker_id);
    const bool lost = now == workers_.end() || now->second.lost;
    return absl::UnavailableError(absl::StrCat(
        "worker ", source.worker_id, " went away before answering the log request: ",
        lost ? "it was lost" : "its session ended or was replaced"));
  }
  return absl::UnavailableError(absl::StrCat(
      what, ", did not answer the log request within ", options_.log_request_timeout.count(),
      " ms (a deepnet-worker older than `deepnetctl logs` never answers)"));
}

absl::Status Coordinator::OnLogChunk(const std::string& worker_id, int64_t epoch,
                                     const LogChunkReport& chunk) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRuntime*> worker = CheckEpoch(worker_id, epoch);
  if (!worker.ok()) return worker.status();
  (*worker)->last_heard = Clock::now();
  auto it = log_reads_.find(chunk.request_id);
  if (it == log_reads_.end() || it->second.worker_id != worker_id || it->second.done) {
    spdlog::debug("worker {}: log chunk {} answers no waiting read", worker_id, chunk.request_id);
    return absl::OkStatus();
  }
  it->second.done = true;
  const LogRequestCommand& asked = it->second.request;
  const int64_t got = static_cast<int64_t>(chunk.data.size());
  // Only an answer that fits what was asked is kept (and so held in memory): a worker that
  // breaks the contract fails the read instead of growing the coordinator or looping a stream.
  if (chunk.error.ok() &&
      (got > asked.max_bytes || chunk.offset < 0 || chunk.size < chunk.offset ||
       got > chunk.size - chunk.offset ||
       (asked.tail_bytes <= 0 && chunk.offset != asked.offset))) {
    it->second.result = absl::InternalError(absl::StrCat(
        "worker ", worker_id, " answered log request ", chunk.request_id, " for offset ",
        asked.offset, ", tail ", asked.tail_bytes, ", at most ", asked.max_bytes, " bytes with ",
        got, " bytes at offset ", chunk.offset, " of a ", chunk.size, "-byte log"));
    return absl::OkStatus();
  }
  it->second.result = chunk;
  if (!chunk.error.ok()) it->second.result->data.clear();  // a refusal carries no log
  return absl::OkStatus();
}

bool Coordinator::SessionCarries(const PendingLogRead& read) const {
  const auto worker = workers_.find(read.worker_id);
  if (worker == workers_.end() || worker->second.sink == nullptr) return false;
  return read.sink.lock() == worker->second.sink;
}

}  // namespace deepnet::coordinator
