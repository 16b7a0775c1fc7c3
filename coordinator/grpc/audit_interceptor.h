#pragma once
// Feeds the audit log from a gRPC server interceptor, so the JobService implementation needs no
// change: it sees who called (the bearer token, as the service authenticates it), the request,
// the response and the final status of every SubmitJob and CancelJob call. Validate-only submits
// change nothing and are not recorded. The record is written when the call's status is sent:
// after the action took effect, and a failed write never changes the call's outcome.

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "coordinator/auth/audit_log.h"
#include "coordinator/auth/auth.h"

namespace deepnet::coordinator {

// For ServerBuilder::experimental().SetInterceptorCreators. `log` and `auth` must outlive the
// server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAuditInterceptorFactory(
    AuditLog* log, const Authenticator* auth);

}  // namespace deepnet::coordinator
