#pragma once

#include "coordinator/auth/auth.h"
#include "coordinator/auth/trainer_credentials.h"
#include "coordinator/rendezvous/rendezvous_store.h"
#include "deepnet/v1/rendezvous.grpc.pb.h"

namespace deepnet::coordinator {

/// The deepnet.v1.Rendezvous gRPC service over a RendezvousStore (callback API). No reactor
/// blocks a thread: Get and Wait register a wait in the store and finish when it completes,
/// at min(now + request timeout, the client's deadline) at the latest, or when the client
/// cancels. Shutting down: call store.Shutdown() before grpc::Server::Shutdown(), so that calls
/// still waiting end Unavailable instead of holding the server's shutdown. The store must
/// outlive the service.
///
/// When `auth` is set, every call needs either the trainer credential of the scope it names
/// (minted by `credentials` for a rank of that job attempt; coordinator/auth/
/// trainer_credentials.h) or an admin token: UNAUTHENTICATED for an unknown or forged one,
/// PERMISSION_DENIED for another scope's credential and for user and worker tokens (worker
/// daemons never call the rendezvous; their token never reaches a trainer). `auth` null means no
/// authentication. Both must outlive the service. Safe for concurrent use.
class RendezvousService final : public deepnet::v1::Rendezvous::CallbackService {
 public:
  explicit RendezvousService(RendezvousStore& store, const Authenticator* auth = nullptr,
                             const TrainerCredentials* credentials = nullptr)
      : store_(store), auth_(auth), credentials_(credentials) {}

  // Rendezvous::CallbackService:
  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context,
                                const deepnet::v1::RendezvousSetRequest* request,
                                deepnet::v1::RendezvousSetResponse* response) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const deepnet::v1::RendezvousGetRequest* request,
                                deepnet::v1::RendezvousGetResponse* response) override;
  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context,
                                const deepnet::v1::RendezvousAddRequest* request,
                                deepnet::v1::RendezvousAddResponse* response) override;
  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const deepnet::v1::RendezvousWaitRequest* request,
                                 deepnet::v1::RendezvousWaitResponse* response) override;
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const deepnet::v1::RendezvousCheckRequest* request,
                                  deepnet::v1::RendezvousCheckResponse* response) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const deepnet::v1::RendezvousDeleteRequest* request,
                                   deepnet::v1::RendezvousDeleteResponse* response) override;
  grpc::ServerUnaryReactor* CompareSet(
      grpc::CallbackServerContext* context, const deepnet::v1::RendezvousCompareSetRequest* request,
      deepnet::v1::RendezvousCompareSetResponse* response) override;
  grpc::ServerUnaryReactor* NumKeys(grpc::CallbackServerContext* context,
                                    const deepnet::v1::RendezvousNumKeysRequest* request,
                                    deepnet::v1::RendezvousNumKeysResponse* response) override;

 private:
  // OK when the call may use `scope` (see the class comment).
  absl::Status Authorize(const grpc::CallbackServerContext& context,
                         const deepnet::v1::RendezvousScope& scope) const;

  RendezvousStore& store_;
  const Authenticator* const auth_;
  const TrainerCredentials* const credentials_;
};

}  // namespace deepnet::coordinator
