#pragma once

#include "coordinator/auth/auth.h"
#include "coordinator/core/coordinator.h"
#include "deepnet/v1/worker_service.grpc.pb.h"

namespace deepnet::coordinator {

// deepnet.v1.WorkerService over the Coordinator (callback API). Every call needs a worker (or
// admin) token that may act as the worker it names (MayActAsWorker): RegisterWorker's
// worker_name, the session's worker id. A session also needs the secret its registration
// returned. Thread-safe.
class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  WorkerServiceImpl(Coordinator& coordinator, const Authenticator& auth)
      : coordinator_(coordinator), auth_(auth) {}

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* context,
                                           const v1::RegisterWorkerRequest* request,
                                           v1::RegisterWorkerResponse* response) override;
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Session(
      grpc::CallbackServerContext* context) override;

 private:
  // The caller, when it holds a worker or admin token.
  absl::StatusOr<Principal> Admit(const grpc::CallbackServerContext& context) const;

  Coordinator& coordinator_;
  const Authenticator& auth_;
};

}  // namespace deepnet::coordinator
