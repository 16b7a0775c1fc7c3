#pragma once
// The loop behind JobService.GetJobLogs, on the Coordinator's plain types: resolves which
// trainer log to read, reads it from its worker in 64 KiB parts, and with `follow` keeps
// polling for new output until the trainer has exited and everything it wrote was sent.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/core/coordinator.h"

namespace deepnet::coordinator {

// Bytes per part (one response message, one worker round trip).
inline constexpr int64_t kLogPartBytes = kMaxLogChunkBytes;
// Bytes one call without follow sends at most.
inline constexpr int64_t kMaxLogBytesPerCall = 16 * 1024 * 1024;
// How often a following call asks the worker for new output.
inline constexpr absl::Duration kLogFollowInterval = absl::Milliseconds(500);

struct LogCallRequest {
  std::string job_id;
  int attempt = 0;            // 0: the latest
  std::optional<int> rank;    // unset: the failing rank, else 0 (Coordinator::FindLogSource)
  LogStream stream = LogStream::kStderr;
  int64_t tail_bytes = 0;     // > 0: from this many bytes before the end
  int64_t offset = 0;         // where to start otherwise
  bool follow = false;
};

struct LogPart {
  LogSource source;
  LogStream stream = LogStream::kStderr;
  std::string data;
  int64_t offset = 0;
  int64_t size = 0;
  bool truncated = false;  // the call stops here at kMaxLogBytesPerCall, before the end
};

struct LogCallHooks {
  // Sends one part; false when the client is gone (the call then ends OK).
  std::function<bool(const LogPart&)> write;
  // Whether the client cancelled.
  std::function<bool()> cancelled;
  // Waits between polls while following (tests pass one that does not sleep).
  std::function<void(absl::Duration)> sleep;
};

// One GetJobLogs call read part by part, so that a caller can do the waiting (the callback
// server's streams never block a thread between parts). Not thread-safe.
class JobLogCursor {
 public:
  JobLogCursor(Coordinator& coordinator, LogCallRequest request)
      : coordinator_(coordinator), request_(std::move(request)) {}

  // Checks the request (INVALID_ARGUMENT naming attempt, offset or tail_bytes) and finds the
  // trainer log it names.
  [[nodiscard]] absl::Status Open();

  enum class Then {
    kRead,  // read the next part at once
    kWait,  // following: read again after kLogFollowInterval
    kEnd,   // the call is complete (OK)
  };
  struct Step {
    bool write = false;  // `part` is to be sent
    LogPart part;
    Then then = Then::kEnd;
  };
  // One part from the worker (blocks for its round trip; after Open() succeeded).
  [[nodiscard]] absl::StatusOr<Step> Read();

 private:
  Coordinator& coordinator_;
  const LogCallRequest request_;
  LogSource source_;
  int64_t offset_ = 0;
  int64_t tail_bytes_ = 0;
  int64_t sent_ = 0;
  bool first_ = true;
};

// Checks the request (INVALID_ARGUMENT naming attempt, offset or tail_bytes), then streams.
// The first part is always written (maybe empty: it names the log); later parts only with
// data. Ends OK at the end of the log (without follow, or with follow once the trainer is no
// longer running), CANCELLED when the client cancels, or with the first failed read's status.
[[nodiscard]] absl::Status StreamJobLogs(Coordinator& coordinator, const LogCallRequest& request,
                                         const LogCallHooks& hooks);

}  // namespace deepnet::coordinator
