#pragma once
// `deepnetctl health [ADDRESS]`: the standard gRPC health check (grpc.health.v1.Health/Check for
// the whole server), as kubelet's gRPC probes ask it, of a coordinator (port 7070) or a worker
// daemon's health port (7071). Needs no token. Blocking.

#include <grpcpp/channel.h>

#include <chrono>
#include <memory>
#include <ostream>

namespace deepnet::ctl {

// Prints "SERVING" (exit kExitOk), or what the server answered instead (NOT_SERVING, UNKNOWN:
// kExitOther) or why the call failed (unreachable in `timeout`: kExitUnreachable) on `err`.
[[nodiscard]] int RunHealth(const std::shared_ptr<grpc::Channel>& channel,
                            std::chrono::milliseconds timeout, std::ostream& out,
                            std::ostream& err);

}  // namespace deepnet::ctl
