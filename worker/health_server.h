#pragma once
// The worker daemon's own gRPC server: health checking and reflection only. Torch-free.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace deepnet::worker {

// Serves grpc.health.v1.Health (SERVING) and server reflection on `listen` (host:port; port 0
// lets the OS pick, reported in *bound_port when non-null). InvalidArgument naming --listen
// when it cannot bind. The caller owns the server (Shutdown() then destroy).
[[nodiscard]] absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(
    const std::string& listen, int* bound_port);

}  // namespace deepnet::worker
