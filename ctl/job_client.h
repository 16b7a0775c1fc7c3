#pragma once
// deepnetctl's client of the coordinator's JobService: every unary call with the bearer token
// and a deadline, retried with exponential backoff while the coordinator is UNAVAILABLE (safe:
// reads are idempotent, SubmitJob carries one idempotency key across its retries, and cancelling
// twice is a no-op); ListJobs followed across pages. Streams get the token and no deadline.
// Safe for concurrent use (the gRPC stub is).

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "deepnet/v1/job_service.grpc.pb.h"

namespace deepnet::ctl {

struct JobClientOptions {
  // Sent as "authorization: Bearer <token>"; empty sends no credentials.
  std::string token;
  // Deadline of each unary call attempt; zero: none.
  std::chrono::milliseconds timeout{30000};
  // Attempts of a unary call while it fails UNAVAILABLE; 1: no retry.
  int max_attempts = 4;
  // Wait before the first retry; doubled before each further one.
  std::chrono::milliseconds initial_backoff{250};
};

// A fresh random idempotency key (a version-4 UUID, 122 random bits).
std::string NewIdempotencyKey();

class JobClient {
 public:
  JobClient(std::unique_ptr<v1::JobService::StubInterface> stub, const JobClientOptions& options);

  // Unary calls; the status is the last attempt's.
  grpc::Status Submit(const v1::SubmitJobRequest& request, v1::SubmitJobResponse* response);
  grpc::Status Get(const std::string& job_id, v1::Job* job);
  grpc::Status Cancel(const v1::CancelJobRequest& request, v1::Job* job);
  grpc::Status ListCheckpoints(const std::string& job_id, v1::ListCheckpointsResponse* response);
  grpc::Status ListWorkers(v1::ListWorkersResponse* response);
  // Follows next_page_token from `request` until the last page or until `limit` jobs were
  // collected (0: no limit); `response` gets the jobs of every page and an empty token (or the
  // token of the next page when `limit` cut the listing short).
  grpc::Status ListAll(v1::ListJobsRequest request, int limit, v1::ListJobsResponse* response);

  // Server streams without deadline. `context` must outlive the reader; it gets the token.
  std::unique_ptr<grpc::ClientReaderInterface<v1::WatchJobResponse>> Watch(
      grpc::ClientContext* context, const v1::WatchJobRequest& request);
  std::unique_ptr<grpc::ClientReaderInterface<v1::StreamMetricsResponse>> StreamMetrics(
      grpc::ClientContext* context, const v1::StreamMetricsRequest& request);
  std::unique_ptr<grpc::ClientReaderInterface<v1::GetJobLogsResponse>> Logs(
      grpc::ClientContext* context, const v1::GetJobLogsRequest& request);

  const JobClientOptions& options() const { return options_; }

 private:
  // Runs `call` with a fresh context per attempt until it returns anything but UNAVAILABLE or
  // the attempts are used up.
  grpc::Status WithRetry(const std::function<grpc::Status(grpc::ClientContext*)>& call);

  std::unique_ptr<v1::JobService::StubInterface> stub_;
  const JobClientOptions options_;
};

}  // namespace deepnet::ctl
