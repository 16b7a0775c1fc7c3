#pragma once
// gRPC server reflection behind a caller check (a bearer token): gRPC serves reflection to
// anyone, and a server interceptor cannot refuse a call. The gate leaves reflection out of the
// public server and answers its method itself (a callback generic service, which gets every
// method no service registered): a caller the check refuses gets its status; an accepted
// call is relayed, message by message, to reflection on a private in-process server that
// lists the same services.

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace deepnet::rpc {

class ReflectionGate {
 public:
  using Check = std::function<grpc::Status(const grpc::ServerContextBase& context)>;

  // `listed`: services the public server serves (generated `Service` classes; never called,
  // only listed by reflection's list_services), owned by the gate.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ReflectionGate>> Create(
      std::vector<std::unique_ptr<grpc::Service>> listed, Check check);
  ~ReflectionGate();  // after the public server has shut down

  // Leaves gRPC's own reflection out of `builder` and serves the gated one there instead.
  void AttachTo(grpc::ServerBuilder& builder);

 private:
  class Generic;
  ReflectionGate() = default;

  std::vector<std::unique_ptr<grpc::Service>> listed_;
  std::unique_ptr<grpc::Server> inner_;
  std::unique_ptr<grpc::GenericStub> stub_;
  std::unique_ptr<Generic> generic_;
};

}  // namespace deepnet::rpc
