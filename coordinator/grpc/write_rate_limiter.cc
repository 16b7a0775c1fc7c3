#include "coordinator/grpc/write_rate_limiter.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace deepnet::coordinator {

absl::Status WriteRateLimiter::Take(const std::string& user, Clock::time_point now) {
  if (limits_.per_second <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = buckets_.try_emplace(user);
  Bucket& bucket = it->second;
  if (fresh) {
    bucket.tokens = limits_.burst;
  } else {
    const double elapsed = std::chrono::duration<double>(now - bucket.at).count();
    bucket.tokens =
        std::min(limits_.burst, bucket.tokens + std::max(0.0, elapsed) * limits_.per_second);
  }
  bucket.at = now;
  if (bucket.tokens >= 1) {
    bucket.tokens -= 1;
    return absl::OkStatus();
  }
  const double wait_s = (1 - bucket.tokens) / limits_.per_second;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "user %s: too many job submissions and cancellations (at most %g at once, then %g a "
      "second: the coordinator's --write-burst and --write-rate); try again in %.2f s",
      user, limits_.burst, limits_.per_second, wait_s));
}

}  // namespace deepnet::coordinator
