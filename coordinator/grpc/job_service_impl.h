#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "coordinator/auth/auth.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/grpc/stream_hub.h"
#include "coordinator/grpc/write_rate_limiter.h"
#include "deepnet/v1/job_service.grpc.pb.h"

namespace deepnet::coordinator {

namespace internal {
using svc = v1::JobService;
// Every JobService method on gRPC's callback API with raw request bytes: the service parses
// them itself (rpc::ParseRequest) to name a field holding invalid UTF-8, a NUL byte or too
// many bytes, where gRPC's own parsing answers INTERNAL with an empty message.
using RawCallbackJobService =
    svc::WithRawCallbackMethod_SubmitJob<svc::WithRawCallbackMethod_GetJob<
        svc::WithRawCallbackMethod_ListJobs<svc::WithRawCallbackMethod_CancelJob<
            svc::WithRawCallbackMethod_WatchJob<svc::WithRawCallbackMethod_StreamMetrics<
                svc::WithRawCallbackMethod_GetJobLogs<svc::WithRawCallbackMethod_ListCheckpoints<
                    svc::WithRawCallbackMethod_ListWorkers<svc::Service>>>>>>>>>;
}  // namespace internal

struct JobServiceOptions {
  StreamLimits streams;
  WriteRateLimits writes;  // SubmitJob and CancelJob per user (admins are not limited).
};

// deepnet.v1.JobService over the Coordinator, on gRPC's callback API: no call holds a thread
// while it waits, so open streams (WatchJob, StreamMetrics, GetJobLogs) cost memory, not
// threads; a user may hold options.streams.per_user of them (admins per_admin). Every call
// authenticates its bearer token first, then its request is parsed (INVALID_ARGUMENT naming
// a string field with invalid UTF-8, a NUL byte or more than 4 KiB, spec.config_yaml
// excepted); calls on a job check that the caller owns it (or is an admin); ListWorkers shows
// which job holds a slot only where the caller may see that job. Thread-safe. Destroy it only
// after the server serving it has shut down.
class JobServiceImpl final : public internal::RawCallbackJobService {
 public:
  JobServiceImpl(Coordinator& coordinator, const Authenticator& auth,
                 JobServiceOptions options = {});
  ~JobServiceImpl() override;

  // Open streams of all users (tests).
  int open_streams() const { return hub_.open_streams(); }

  // --- Raw callback methods (what gRPC calls). ---
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchJob(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamMetrics(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GetJobLogs(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* ListCheckpoints(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

 private:
  // The unary calls on parsed requests.
  grpc::Status SubmitJob(grpc::ServerContextBase* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response);
  grpc::Status GetJob(grpc::ServerContextBase* context, const v1::GetJobRequest* request,
                      v1::Job* response);
  grpc::Status ListJobs(grpc::ServerContextBase* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response);
  grpc::Status CancelJob(grpc::ServerContextBase* context, const v1::CancelJobRequest* request,
                         v1::Job* response);
  grpc::Status ListCheckpoints(grpc::ServerContextBase* context,
                               const v1::ListCheckpointsRequest* request,
                               v1::ListCheckpointsResponse* response);
  grpc::Status ListWorkers(grpc::ServerContextBase* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response);

  // Authenticates, then parses the raw request: the status to answer with when either fails.
  grpc::Status Accept(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw,
                      google::protobuf::Message* request) const;
  template <class Request, class Response>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw,
                                  grpc::ByteBuffer* out,
                                  grpc::Status (JobServiceImpl::*call)(grpc::ServerContextBase*,
                                                                       const Request*, Response*));

  // Authenticates the caller and, when job_id is set, checks access to that job, whose view
  // (read for the check) goes to *job when job is not null.
  absl::StatusOr<Principal> Admit(grpc::ServerContextBase* context, const std::string& job_id,
                                  JobView* job = nullptr);
  // Takes one of the principal's writes (WriteRateLimiter); admins are not limited.
  absl::Status TakeWrite(const Principal& principal);

  Coordinator& coordinator_;
  const Authenticator& auth_;
  StreamHub hub_;
  WriteRateLimiter writes_;
};

}  // namespace deepnet::coordinator
