#pragma once
// Per-user limits on the calls that write to the job store (SubmitJob, CancelJob): a token
// bucket per user, `burst` calls at once and `per_second` sustained. Without it a user could
// submit-then-cancel 1 MiB specs as fast as the network allows and fill the store and its
// synced writes for everyone. Admins are not limited (operators cleaning up).

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace deepnet::coordinator {

struct WriteRateLimits {
  double per_second = 20;  // Sustained writes per user; 0: no limit.
  double burst = 200;      // Writes a user may make at once.
};

class WriteRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit WriteRateLimiter(WriteRateLimits limits) : limits_(limits) {}

  // Takes one write for `user` at `now`: OK, or RESOURCE_EXHAUSTED naming the user, the limit
  // and when the next write will be allowed. Thread-safe.
  absl::Status Take(const std::string& user, Clock::time_point now = Clock::now());

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point at;
  };
  const WriteRateLimits limits_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;  // Guarded by mu_; one per user who wrote.
};

}  // namespace deepnet::coordinator
