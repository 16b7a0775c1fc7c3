#include "ctl/health_check.h"

#include "ctl/exit_codes.h"
#include "rpc/health_check_client.h"

namespace deepnet::ctl {

int RunHealth(const std::shared_ptr<grpc::Channel>& channel, std::chrono::milliseconds timeout,
              std::ostream& out, std::ostream& err) {
  rpc::HealthCheckClient client(channel);
  const rpc::HealthAnswer answer =
      client.Check(std::chrono::system_clock::now() +
                   (timeout.count() > 0 ? timeout : std::chrono::seconds(30)));
  if (!answer.status.ok()) {
    err << "deepnetctl: health: " << answer.status.error_message() << std::endl;
    return ExitCodeFor(answer.status.error_code());
  }
  if (!answer.serving()) {
    err << "deepnetctl: health: the server answered "
        << rpc::ServingStatusName(answer.serving_status) << std::endl;
    return kExitOther;
  }
  out << "SERVING" << std::endl;
  return kExitOk;
}

}  // namespace deepnet::ctl
