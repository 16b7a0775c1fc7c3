#pragma once

// Helpers shared by the Communicator implementations: message text and argument checks.

#include <torch/types.h>

#include <chrono>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace deepnet::comm::internal {

// "rank 2/8".
std::string RankLabel(int rank, int size);
// "float32", "int64", ...
std::string DtypeName(c10::ScalarType type);
// "1024 float32".
std::string DescribeTensor(const torch::Tensor& tensor);
// "30 s" for whole seconds, else "1500 ms".
std::string FormatDuration(std::chrono::milliseconds duration);

// InvalidArgument unless `tensor` is defined, contiguous, dense and (when `require_cpu`) on the
// CPU. `what` names the call ("rank 1/4: all_reduce").
[[nodiscard]] absl::Status CheckTensor(const torch::Tensor& tensor, bool require_cpu,
                                       const std::string& what);
// InvalidArgument unless 0 <= peer < size and tag >= 0 (transfers to oneself are allowed).
[[nodiscard]] absl::Status CheckPeer(int peer, int tag, int size, const std::string& what);

// DeadlineExceeded "<what> did not complete within <timeout>".
absl::Status DeadlineError(const std::string& what, std::chrono::milliseconds timeout);
// FailedPrecondition for a call on an aborted communicator.
absl::Status AbortedError(const std::string& label, const std::string& op,
                          const std::string& reason);

// The aborted state every communicator keeps: after the first failure (or Abort) every later
// call fails, naming that first failure. Not thread-safe (owned by the communicator's state).
class AbortLatch {
 public:
  bool tripped() const { return tripped_; }
  // Records the first failure; later ones are ignored. True when this call tripped the latch
  // (the caller then tears its transport down).
  bool Trip(std::string reason) {
    if (tripped_) return false;
    tripped_ = true;
    reason_ = std::move(reason);
    return true;
  }
  // OK until tripped; then AbortedError(label, op, first failure).
  [[nodiscard]] absl::Status Check(const std::string& label, const std::string& op) const {
    return tripped_ ? AbortedError(label, op, reason_) : absl::OkStatus();
  }

 private:
  bool tripped_ = false;
  std::string reason_;
};

}  // namespace deepnet::comm::internal
