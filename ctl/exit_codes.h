#pragma once
// The exit codes of deepnetctl, which scripts rely on (documented in `deepnetctl --help` and
// docs/CLI.md), and the mapping from a gRPC status to them. Pure functions; thread-safe.

#include <grpcpp/support/status_code_enum.h>

#include <string>

namespace deepnet::ctl {

enum ExitCode : int {
  kExitOk = 0,
  // The watched job ended FAILED or CANCELLED.
  kExitJobFailed = 1,
  // Bad command line, or a local file (job YAML, token file, CA certificate) is unusable.
  kExitUsage = 2,
  // The coordinator rejected the request: INVALID_ARGUMENT, FAILED_PRECONDITION,
  // ALREADY_EXISTS, OUT_OF_RANGE.
  kExitRejected = 3,
  // NOT_FOUND.
  kExitNotFound = 4,
  // UNAUTHENTICATED or PERMISSION_DENIED.
  kExitDenied = 5,
  // The coordinator could not be reached in time: UNAVAILABLE, DEADLINE_EXCEEDED.
  kExitUnreachable = 6,
  // Any other error.
  kExitOther = 7,
};

// The exit code for a call that ended with `code` (kExitOk for OK).
ExitCode ExitCodeFor(grpc::StatusCode code);

// The exit-code table as printed at the end of `deepnetctl --help`.
std::string ExitCodeHelp();

}  // namespace deepnet::ctl
