#include "coordinator/grpc/worker_service_impl.h"

#include <google/protobuf/util/time_util.h>

#include "coordinator/grpc/proto_convert.h"
#include "coordinator/grpc/worker_session.h"
#include "rpc/rpc_util.h"

namespace deepnet::coordinator {

absl::StatusOr<Principal> WorkerServiceImpl::Admit(
    const grpc::CallbackServerContext& context) const {
  absl::StatusOr<Principal> principal = auth_.Authenticate(context);
  if (!principal.ok()) return principal.status();
  if (absl::Status s = CheckWorkerAccess(*principal); !s.ok()) return s;
  return principal;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::RegisterWorker(
    grpc::CallbackServerContext* context, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Principal> principal = Admit(*context);
  absl::Status admitted = principal.status();
  if (admitted.ok()) admitted = MayActAsWorker(*principal, request->worker_name());
  if (!admitted.ok()) {
    reactor->Finish(rpc::ToGrpc(admitted));
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
  response->set_session_secret(result->session_secret);
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
  absl::StatusOr<Principal> principal = Admit(*context);
  if (!principal.ok()) return new WorkerSession(coordinator_, principal.status());
  return new WorkerSession(
      coordinator_, absl::OkStatus(), [this, who = *principal] { return auth_.StillValid(who); },
      [who = *principal](absl::string_view worker) { return MayActAsWorker(who, worker); });
}

}  // namespace deepnet::coordinator
