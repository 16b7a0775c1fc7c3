#pragma once

// The part of a CommWork every backend shares: wait once, within a deadline.

#include <chrono>

#include "absl/status/status.h"
#include "comm/communicator.h"

namespace deepnet::comm::internal {

/// Base of the backends' works. The deadline is fixed when the operation starts (the
/// communicator's timeout from then); Wait() runs the backend's WaitUntil the first time and
/// returns that result on every later call. A backend's work calls Wait() in its destructor, so
/// that destroying an unwaited work waits for it (nothing happens once it was waited for).
class WaitOnceWork : public CommWork {
 public:
  using Clock = std::chrono::steady_clock;

  [[nodiscard]] absl::Status Wait() final {
    if (!waited_) {
      waited_ = true;
      result_ = WaitUntil(deadline_);
    }
    return result_;
  }

 protected:
  // An operation that must complete within `timeout` from now.
  explicit WaitOnceWork(std::chrono::milliseconds timeout) : deadline_(Clock::now() + timeout) {}
  // A work with no deadline of its own: it waits for works that have theirs, or never blocks.
  WaitOnceWork() : deadline_(Clock::time_point::max()) {}

  // Blocks until the operation has completed (OK) or failed, at the latest at `deadline`
  // (DeadlineExceeded naming the operation). Called once.
  [[nodiscard]] virtual absl::Status WaitUntil(Clock::time_point deadline) = 0;

 private:
  Clock::time_point deadline_;
  bool waited_ = false;
  absl::Status result_;
};

}  // namespace deepnet::comm::internal
