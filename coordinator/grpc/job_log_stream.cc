#include "coordinator/grpc/job_log_stream.h"

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

absl::Status JobLogCursor::Open() {
  if (absl::Status s = CheckRequest(request_); !s.ok()) return s;
  absl::StatusOr<LogSource> source =
      coordinator_.FindLogSource(request_.job_id, request_.attempt, request_.rank);
  if (!source.ok()) return source.status();
  source_ = *std::move(source);
  offset_ = request_.offset;
  tail_bytes_ = request_.tail_bytes;
  return absl::OkStatus();
}

absl::StatusOr<JobLogCursor::Step> JobLogCursor::Read() {
  LogRequestCommand read;
  read.stream = request_.stream;
  read.offset = offset_;
  read.tail_bytes = tail_bytes_;
  read.max_bytes = kLogPartBytes;
  absl::StatusOr<LogChunkReport> chunk = coordinator_.ReadLog(source_, read);
  if (!chunk.ok()) return chunk.status();
  tail_bytes_ = 0;  // Only the first read starts from the end.
  Step step;
  LogPart& part = step.part;
  part.source = source_;
  part.stream = request_.stream;
  part.offset = chunk->offset;
  part.size = chunk->size;
  part.data = std::move(chunk->data);
  offset_ = part.offset + static_cast<int64_t>(part.data.size());
  sent_ += static_cast<int64_t>(part.data.size());
  // An empty part before the end (the log shrank meanwhile) counts as the end, so a call
  // never spins.
  const bool at_end = offset_ >= part.size || part.data.empty();
  part.truncated = !request_.follow && !at_end && sent_ >= kMaxLogBytesPerCall;
  step.write = first_ || !part.data.empty();
  first_ = false;
  if (part.truncated) {
    step.then = Then::kEnd;
  } else if (!at_end) {
    step.then = Then::kRead;
  } else {
    // `running` was checked before the read: a trainer not running then had written it all.
    step.then = request_.follow && chunk->running ? Then::kWait : Then::kEnd;
  }
  return step;
}

absl::Status StreamJobLogs(Coordinator& coordinator, const LogCallRequest& request,
                           const LogCallHooks& hooks) {
  JobLogCursor cursor(coordinator, request);
  if (absl::Status s = cursor.Open(); !s.ok()) return s;
  while (true) {
    if (hooks.cancelled()) return absl::CancelledError("the client cancelled the log stream");
    absl::StatusOr<JobLogCursor::Step> step = cursor.Read();
    if (!step.ok()) return step.status();
    if (step->write && !hooks.write(step->part)) return absl::OkStatus();
    switch (step->then) {
      case JobLogCursor::Then::kEnd:
        return absl::OkStatus();
      case JobLogCursor::Then::kWait:
        hooks.sleep(kLogFollowInterval);
        break;
      case JobLogCursor::Then::kRead:
        break;
    }
  }
}

}  // namespace deepnet::coordinator
