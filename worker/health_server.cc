#include "worker/health_server.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "rpc/rpc_util.h"

namespace deepnet::worker {

absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(const std::string& listen,
                                                                int* bound_port) {
  if (listen.empty()) return absl::InvalidArgumentError("--listen: no address given");
  rpc::EnableHealthAndReflection();
  grpc::ServerBuilder builder;
  // A second worker on the same --listen must fail, not share the port (gRPC's default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen ", listen,
                     ": cannot serve health checks there (address in use "
                     "or not host:port)"));
  }
  if (bound_port != nullptr) *bound_port = port;
  return server;
}

}  // namespace deepnet::worker
