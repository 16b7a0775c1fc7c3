#include "coordinator/job_log_stream.h"

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {
namespace {

absl::Status CheckRequest(const LogCallRequest& request) {
  if (request.job_id.empty()) return absl::InvalidArgumentError("job_id: empty");
  if (request.attempt < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attempt: ", request.attempt, " (must be >= 1, or 0 for the latest)"));
  }
  if (request.offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("offset: ", request.offset, " (must be >= 0)"));
  }
  if (request.tail_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tail_bytes: ", request.tail_bytes, " (must be >= 0)"));
  }
  if (request.tail_bytes > 0 && request.offset > 0) {
    return absl::InvalidArgumentError("offset and tail_bytes: give at most one of them");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status StreamJobLogs(Coordinator& coordinator, const LogCallRequest& request,
                           const LogCallHooks& hooks) {
  if (absl::Status s = CheckRequest(request); !s.ok()) return s;
  absl::StatusOr<LogSource> source =
      coordinator.FindLogSource(request.job_id, request.attempt, request.rank);
  if (!source.ok()) return source.status();
  int64_t offset = request.offset;
  int64_t tail_bytes = request.tail_bytes;
  int64_t sent = 0;
  bool first = true;
  while (true) {
    if (hooks.cancelled()) return absl::CancelledError("the client cancelled the log stream");
    LogRequestCommand read;
    read.stream = request.stream;
    read.offset = offset;
    read.tail_bytes = tail_bytes;
    read.max_bytes = kLogPartBytes;
    absl::StatusOr<LogChunkReport> chunk = coordinator.ReadLog(*source, read);
    if (!chunk.ok()) return chunk.status();
    tail_bytes = 0;  // Only the first read starts from the end.
    LogPart part;
    part.source = *source;
    part.stream = request.stream;
    part.offset = chunk->offset;
    part.size = chunk->size;
    part.data = std::move(chunk->data);
    offset = part.offset + static_cast<int64_t>(part.data.size());
    sent += static_cast<int64_t>(part.data.size());
    // An empty part before the end (the log shrank meanwhile) counts as the end, so a call
    // never spins.
    const bool at_end = offset >= part.size || part.data.empty();
    part.truncated = !request.follow && !at_end && sent >= kMaxLogBytesPerCall;
    if (first || !part.data.empty()) {
      if (!hooks.write(part)) return absl::OkStatus();
    }
    first = false;
    if (part.truncated) return absl::OkStatus();
    if (!at_end) continue;
    // `running` was checked before the read: a trainer not running then had written it all.
    if (!request.follow || !chunk->running) return absl::OkStatus();
    hooks.sleep(kLogFollowInterval);
  }
}

}  // namespace deepnet::coordinator
