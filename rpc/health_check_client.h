#pragma once
// The client side of the standard gRPC health check (grpc.health.v1.Health/Check for the whole
// server, as kubelet's gRPC probes ask it): `deepnetctl health`, the control-plane benchmark's
// reference round trip and the health-server tests all call it. The request is the empty
// HealthCheckRequest and the answer has one varint field, so both are written here by hand
// instead of generating grpc/health/v1/health.proto.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <memory>

namespace deepnet::rpc {

// grpc.health.v1.HealthCheckResponse.ServingStatus.
inline constexpr int kServingStatusUnknown = 0;
inline constexpr int kServingStatusServing = 1;

// "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN", else "an unknown status".
const char* ServingStatusName(int serving_status);

// One Health/Check answer: the call's status and, when it succeeded, the response's `status`
// field (kServingStatusUnknown when absent).
struct HealthAnswer {
  grpc::Status status;
  int serving_status = kServingStatusUnknown;

  bool serving() const { return status.ok() && serving_status == kServingStatusServing; }
};

// Health checks over one channel, through the callback API (GenericStub::UnaryCall). Needs no
// token. Thread-safe: every Check has its own call.
class HealthCheckClient {
 public:
  explicit HealthCheckClient(std::shared_ptr<grpc::Channel> channel);

  // Asks whether the whole server (service "") serves; blocks until the answer or `deadline`.
  [[nodiscard]] HealthAnswer Check(std::chrono::system_clock::time_point deadline);

 private:
  grpc::GenericStub stub_;
};

}  // namespace deepnet::rpc
