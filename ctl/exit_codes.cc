#include "ctl/exit_codes.h"

namespace deepnet::ctl {

ExitCode ExitCodeFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::OUT_OF_RANGE:
      return kExitRejected;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return kExitDenied;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kExitUnreachable;
    default:
      return kExitOther;
  }
}

std::string ExitCodeHelp() {
  return "Exit codes:\n"
         "  0  success (watch, submit --watch: the job SUCCEEDED)\n"
         "  1  the watched job ended FAILED or CANCELLED\n"
         "  2  usage error, or an unreadable local file (job YAML, token, CA certificate)\n"
         "  3  request rejected: INVALID_ARGUMENT, FAILED_PRECONDITION, ALREADY_EXISTS,\n"
         "     OUT_OF_RANGE\n"
         "  4  NOT_FOUND (no such job)\n"
         "  5  UNAUTHENTICATED or PERMISSION_DENIED\n"
         "  6  coordinator unreachable: UNAVAILABLE, DEADLINE_EXCEEDED\n"
         "  7  any other error\n"
         "Server errors are printed to stderr as `deepnetctl: CODE: message`.\n";
}

}  // namespace deepnet::ctl
