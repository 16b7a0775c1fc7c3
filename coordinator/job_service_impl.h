#pragma once

#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "deepnet/v1/job_service.grpc.pb.h"

namespace deepnet::coordinator {

// deepnet.v1.JobService over the Coordinator (synchronous gRPC API: the two server streams
// hold a thread each while they wait, which is fine for the hundreds of watchers a cluster
// has). Every call authenticates its bearer token first; calls on a job check that the
// caller owns it (or is an admin); ListWorkers shows which job holds a slot only where the
// caller may see that job. Thread-safe.
class JobServiceImpl final : public v1::JobService::Service {
 public:
  JobServiceImpl(Coordinator& coordinator, const Authenticator& auth)
      : coordinator_(coordinator), auth_(auth) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::WatchJobResponse>* writer) override;
  grpc::Status StreamMetrics(grpc::ServerContext* context,
                             const v1::StreamMetricsRequest* request,
                             grpc::ServerWriter<v1::StreamMetricsResponse>* writer) override;
  grpc::Status GetJobLogs(grpc::ServerContext* context, const v1::GetJobLogsRequest* request,
                          grpc::ServerWriter<v1::GetJobLogsResponse>* writer) override;
  grpc::Status ListCheckpoints(grpc::ServerContext* context,
                               const v1::ListCheckpointsRequest* request,
                               v1::ListCheckpointsResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;

 private:
  // Authenticates the caller and, when job_id is set, checks access to that job, whose view
  // (read for the check) goes to *job when job is not null.
  absl::StatusOr<Principal> Admit(grpc::ServerContext* context, const std::string& job_id,
                                  JobView* job = nullptr);

  Coordinator& coordinator_;
  const Authenticator& auth_;
};

}  // namespace deepnet::coordinator
