#include "coordinator/grpc/audit_interceptor.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "deepnet/v1/job_service.pb.h"

namespace deepnet::coordinator {
namespace {

namespace v1 = deepnet::v1;
using grpc::experimental::InterceptionHookPoints;

constexpr const char* kSubmit = "/deepnet.v1.JobService/SubmitJob";
constexpr const char* kCancel = "/deepnet.v1.JobService/CancelJob";

class AuditInterceptor : public grpc::experimental::Interceptor {
 public:
  AuditInterceptor(grpc::experimental::ServerRpcInfo* info, AuditLog* log,
                   const Authenticator* auth, bool submit)
      : info_(info), log_(log), auth_(auth), submit_(submit) {
    record_.action = submit ? "submit" : "cancel";
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      OnMetadata(methods);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      OnRequest(methods->GetRecvMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      OnResponse(methods->GetSerializedSendMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      OnStatus(methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  void OnMetadata(grpc::experimental::InterceptorBatchMethods* methods) {
    if (grpc::ServerContextBase* context = info_->server_context()) record_.peer = context->peer();
    std::multimap<grpc::string_ref, grpc::string_ref>* metadata = methods->GetRecvInitialMetadata();
    if (metadata == nullptr) return;
    absl::StatusOr<Principal> principal = auth_->Authenticate(*metadata);
    if (!principal.ok()) return;
    record_.user = principal->user;
    record_.role = std::string(RoleName(principal->role));
  }

  // The JobService methods are raw (job_service_impl.h: the service parses its requests to name
  // a bad field), so the messages seen here are the wire bytes. Parsing a copy leaves the
  // call's buffer alone; bytes that do not parse (the service refuses those) add nothing.
  template <typename Message>
  static bool ParseWire(const grpc::ByteBuffer* wire, Message* out) {
    if (wire == nullptr) return false;
    grpc::ByteBuffer copy(*wire);
    return grpc::SerializationTraits<Message>::Deserialize(&copy, out).ok();
  }

  void OnRequest(void* message) {
    const auto* wire = static_cast<const grpc::ByteBuffer*>(message);
    if (submit_) {
      v1::SubmitJobRequest request;
      if (!ParseWire(wire, &request)) return;
      validate_only_ = request.validate_only();
      record_.idempotency_key = request.idempotency_key();
      record_.spec_sha256 = Sha256Hex(request.spec().config_yaml());
    } else {
      v1::CancelJobRequest request;
      if (ParseWire(wire, &request)) record_.job_id = request.job_id();
    }
  }

  void OnResponse(const grpc::ByteBuffer* wire) {
    if (submit_) {
      v1::SubmitJobResponse response;
      if (!ParseWire(wire, &response)) return;
      record_.job_id = response.job().job_id();
      record_.job_owner = response.job().owner();
      record_.created = response.created();
    } else {
      v1::Job job;
      if (ParseWire(wire, &job)) record_.job_owner = job.owner();
    }
  }

  void OnStatus(const grpc::Status& status) {
    if (validate_only_ || written_) return;
    written_ = true;
    record_.time = absl::Now();
    // gRPC's status codes are absl's, value for value.
    record_.outcome = status.ok() ? "ok"
                                  : absl::StatusCodeToString(
                                        static_cast<absl::StatusCode>(status.error_code()));
    record_.message = status.error_message();
    log_->Write(record_);
  }

  grpc::experimental::ServerRpcInfo* const info_;
  AuditLog* const log_;
  const Authenticator* const auth_;
  const bool submit_;
  AuditRecord record_;
  bool validate_only_ = false;
  bool written_ = false;
};

class AuditInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  AuditInterceptorFactory(AuditLog* log, const Authenticator* auth) : log_(log), auth_(auth) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const char* method = info->method();
    if (method == nullptr) return nullptr;
    const bool submit = std::strcmp(method, kSubmit) == 0;
    if (!submit && std::strcmp(method, kCancel) != 0) return nullptr;
    return new AuditInterceptor(info, log_, auth_, submit);
  }

 private:
  AuditLog* const log_;
  const Authenticator* const auth_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeAuditInterceptorFactory(
    AuditLog* log, const Authenticator* auth) {
  return std::make_unique<AuditInterceptorFactory>(log, auth);
}

}  // namespace deepnet::coordinator
