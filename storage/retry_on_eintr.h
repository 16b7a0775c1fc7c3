#pragma once

// The project's one EINTR retry for system calls that report failure as -1 with errno.

#include <cerrno>

namespace deepnet::storage {

/// Calls `f` until it returns something other than a failure with errno EINTR (open, fsync,
/// flock ... interrupted by a signal such as SIGTERM) and returns that result; errno is kept
/// from the last call. Not for close(): on Linux the descriptor is released even when close()
/// reports EINTR, so a retry could close another thread's file.
template <typename F>
int RetryOnEintr(F f) {
  int rc;
  do {
    rc = f();
  } while (rc < 0 && errno == EINTR);
  return rc;
}

}  // namespace deepnet::storage
