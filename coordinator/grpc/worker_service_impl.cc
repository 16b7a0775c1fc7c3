#include "coordinator/grpc/worker_service_impl.h"

#include <google/protobuf/util/time_util.h>

#include "coordinator/grpc/proto_convert.h"
#include "coordinator/grpc/worker_session.h"
#include "rpc/rpc_util.h"

namespace deepnet::coordinator {

absl::Status WorkerServiceImpl::Admit(const grpc::CallbackServerContext& context) const {
  absl::StatusOr<Principal> principal = auth_.Authenticate(context);
  if (!principal.ok()) return principal.status();
  return CheckWorkerAccess(*principal);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RegisterWorker(
    grpc::CallbackServerContext* context, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = Admit(*context); !s.ok()) {
    reactor->Finish(rpc::ToGrpc(s));
    return reactor;
  }
  absl::StatusOr<RegistrationResult> result = coordinator_.Register(FromProto(*request));
  if (!result.ok()) {
    reactor->Finish(rpc::ToGrpc(result.status()));
    return reactor;
  }
  using google::protobuf::util::TimeUtil;
  response->set_worker_id(result->worker_id);
  response->set_epoch(result->epoch);
  *response->mutable_heartbeat_interval() =
      TimeUtil::MillisecondsToDuration(result->heartbeat_interval_ms);
  *response->mutable_lease_duration() = TimeUtil::MillisecondsToDuration(result->lease_ms);
  for (const CancellationCommand& c : result->stale_tasks)
    *response->add_stale_tasks() = ToProto(c);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* WorkerServiceImpl::Session(
    grpc::CallbackServerContext* context) {
  absl::StatusOr<Principal> principal = auth_.Authenticate(*context);
  if (!principal.ok()) return new WorkerSession(coordinator_, principal.status());
  return new WorkerSession(coordinator_, CheckWorkerAccess(*principal),
                           [this, who = *principal] { return auth_.StillValid(who); });
}

}  // namespace deepnet::coordinator
