#include "coordinator/core/log_reads.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/job_run.h"

namespace deepnet::coordinator {
namespace {

// Reads waiting for workers at once; each holds at most one 64 KiB answer.
constexpr size_t kMaxLogReadsInFlight = 256;

bool EndsAttempt(const JobEventView& e) {
  switch (e.type) {
    case EventType::kCancelRequested:
    case EventType::kFailRequested:
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

absl::StatusOr<LogSource> FindLogSource(const JobRun& job, int attempt, std::optional<int> rank) {
  const std::string& job_id = job.id();
  const int latest = job.record().attempt;
  if (latest == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " has not started yet (", ToString(job.state()),
        "): its trainers write logs once its first attempt is placed"));
  }
  if (attempt < 0 || attempt > latest) {
    return absl::InvalidArgumentError(absl::StrCat("attempt: job ", job_id, " has attempts 1..",
                                                   latest, " (0 means the latest), not ", attempt));
  }
  LogSource source;
  source.job_id = job_id;
  source.attempt = attempt == 0 ? latest : attempt;
  const int64_t world = job.record().world_size();
  if (rank.has_value() && (*rank < 0 || *rank >= world)) {
    return absl::InvalidArgumentError(absl::StrCat("rank: job ", job_id, " has ranks 0..",
                                                   world - 1, ", not ", *rank));
  }
  std::map<int, std::string> workers;  // rank -> worker id
  std::optional<int> failed_rank;
  bool attempt_ended = false;
  for (const JobEventView& e : job.events().all()) {
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
    for (const RankRun& r : job.ranks()) {
      if (!r.view.worker_id.empty()) workers[r.view.rank] = r.view.worker_id;
    }
    for (const auto& [r, view] : job.reattached()) {
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

LogReads::LogReads(absl::Mutex* mu, const WorkerRegistry* workers,
                   std::chrono::milliseconds timeout)
    : mu_(mu), workers_(workers), timeout_(timeout) {}

absl::StatusOr<LogChunkReport> LogReads::Read(const LogSource& source, LogRequestCommand request,
                                              const bool* shutting_down) {
  const std::string what = absl::StrCat("worker ", source.worker_id, ", which ran rank ",
                                        source.rank, " of job ", source.job_id, " attempt ",
                                        source.attempt);
  const WorkerRegistry::Worker* worker = workers_->Find(source.worker_id);
  if (worker == nullptr || worker->lost) {
    return absl::UnavailableError(absl::StrCat(
        what, ", is lost; its logs stay on that machine (under the worker's --work-dir) until it "
        "registers again"));
  }
  if (worker->sink == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(what, ", has no session with the coordinator now; retry when it is back"));
  }
  if (reads_.size() >= kMaxLogReadsInFlight) {
    return absl::ResourceExhaustedError(
        absl::StrCat(reads_.size(), " log reads are waiting for workers; retry shortly"));
  }
  request.request_id = ++last_request_;
  request.job_id = source.job_id;
  request.attempt = source.attempt;
  request.rank = source.rank;
  if (request.max_bytes <= 0 || request.max_bytes > kMaxLogChunkBytes) {
    request.max_bytes = kMaxLogChunkBytes;
  }
  const int64_t id = request.request_id;
  reads_[id].worker_id = source.worker_id;
  reads_[id].sink = worker->sink;
  reads_[id].request = request;
  if (!worker->sink->SendLogRequest(worker->epoch, request)) {
    reads_.erase(id);
    return absl::UnavailableError(absl::StrCat(what, ": its session cannot carry log requests"));
  }
  auto answered = [this, id, shutting_down]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    return reads_.at(id).done || *shutting_down || !SessionCarries(reads_.at(id));
  };
  mu_->AwaitWithTimeout(absl::Condition(&answered), absl::FromChrono(timeout_));
  PendingRead read = std::move(reads_.at(id));
  reads_.erase(id);
  if (read.done) {
    if (read.result.ok() && !read.result->error.ok()) {
      const absl::Status& e = read.result->error;
      return absl::Status(e.code(), absl::StrCat("worker ", source.worker_id, ": ", e.message()));
    }
    return read.result;
  }
  if (*shutting_down) return absl::UnavailableError("coordinator is shutting down");
  if (!SessionCarries(read)) {
    const WorkerRegistry::Worker* now = workers_->Find(source.worker_id);
    const bool lost = now == nullptr || now->lost;
    return absl::UnavailableError(absl::StrCat(
        "worker ", source.worker_id, " went away before answering the log request: ",
        lost ? "it was lost" : "its session ended or was replaced"));
  }
  return absl::UnavailableError(absl::StrCat(
      what, ", did not answer the log request within ", timeout_.count(),
      " ms (a deepnet-worker older than `deepnetctl logs` never answers)"));
}

void LogReads::OnChunk(const std::string& worker_id, const LogChunkReport& chunk) {
  auto it = reads_.find(chunk.request_id);
  if (it == reads_.end() || it->second.worker_id != worker_id || it->second.done) {
    spdlog::debug("worker {}: log chunk {} answers no waiting read", worker_id, chunk.request_id);
    return;
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
    return;
  }
  it->second.result = chunk;
  if (!chunk.error.ok()) it->second.result->data.clear();  // a refusal carries no log
}

bool LogReads::SessionCarries(const PendingRead& read) const {
  const WorkerRegistry::Worker* worker = workers_->Find(read.worker_id);
  if (worker == nullptr || worker->sink == nullptr) return false;
  return read.sink.lock() == worker->sink;
}

}  // namespace deepnet::coordinator
