#include "ctl/job_client.h"

#include <algorithm>
#include <random>
#include <thread>

#include "absl/strings/str_format.h"
#include "rpc/rpc_util.h"

namespace deepnet::ctl {

std::string NewIdempotencyKey() {
  std::random_device device;
  std::uniform_int_distribution<uint32_t> word;
  uint32_t w[4];
  for (uint32_t& x : w) x = word(device);
  w[1] = (w[1] & 0xffff0fffu) | 0x00004000u;  // Version 4.
  w[2] = (w[2] & 0x3fffffffu) | 0x80000000u;  // Variant 10.
  return absl::StrFormat("%08x-%04x-%04x-%04x-%04x%08x", w[0], w[1] >> 16, w[1] & 0xffffu,
                         w[2] >> 16, w[2] & 0xffffu, w[3]);
}

JobClient::JobClient(std::unique_ptr<v1::JobService::StubInterface> stub,
                     const JobClientOptions& options)
    : stub_(std::move(stub)), options_(options) {}

grpc::Status JobClient::WithRetry(const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  std::chrono::milliseconds backoff = options_.initial_backoff;
  const int attempts = std::max(1, options_.max_attempts);
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, options_.token, options_.timeout);
    grpc::Status status = call(&context);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || attempt >= attempts) {
      return status;
    }
    std::this_thread::sleep_for(backoff);
    backoff *= 2;
  }
}

grpc::Status JobClient::Submit(const v1::SubmitJobRequest& request,
                               v1::SubmitJobResponse* response) {
  return WithRetry(
      [&](grpc::ClientContext* context) { return stub_->SubmitJob(context, request, response); });
}

grpc::Status JobClient::Get(const std::string& job_id, v1::Job* job) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  return WithRetry(
      [&](grpc::ClientContext* context) { return stub_->GetJob(context, request, job); });
}

grpc::Status JobClient::Cancel(const v1::CancelJobRequest& request, v1::Job* job) {
  return WithRetry(
      [&](grpc::ClientContext* context) { return stub_->CancelJob(context, request, job); });
}

grpc::Status JobClient::ListCheckpoints(const std::string& job_id,
                                        v1::ListCheckpointsResponse* response) {
  v1::ListCheckpointsRequest request;
  request.set_job_id(job_id);
  return WithRetry([&](grpc::ClientContext* context) {
    return stub_->ListCheckpoints(context, request, response);
  });
}

grpc::Status JobClient::ListWorkers(v1::ListWorkersResponse* response) {
  return WithRetry([&](grpc::ClientContext* context) {
    response->Clear();
    return stub_->ListWorkers(context, v1::ListWorkersRequest(), response);
  });
}

grpc::Status JobClient::ListAll(v1::ListJobsRequest request, int limit,
                                v1::ListJobsResponse* response) {
  response->Clear();
  while (true) {
    if (limit > 0) {
      const int remaining = limit - response->jobs_size();
      if (request.page_size() <= 0 || request.page_size() > remaining) {
        request.set_page_size(remaining);
      }
    }
    v1::ListJobsResponse page;
    grpc::Status status = WithRetry([&](grpc::ClientContext* context) {
      page.Clear();
      return stub_->ListJobs(context, request, &page);
    });
    if (!status.ok()) return status;
    for (v1::Job& job : *page.mutable_jobs()) {
      if (limit > 0 && response->jobs_size() >= limit) break;
      *response->add_jobs() = std::move(job);
    }
    response->set_next_page_token(page.next_page_token());
    if (page.next_page_token().empty() || (limit > 0 && response->jobs_size() >= limit)) {
      return grpc::Status::OK;
    }
    // A server that returns the token it was given would page forever.
    if (page.next_page_token() == request.page_token()) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "ListJobs returned the same page token twice: " + request.page_token());
    }
    request.set_page_token(page.next_page_token());
  }
}

std::unique_ptr<grpc::ClientReaderInterface<v1::WatchJobResponse>> JobClient::Watch(
    grpc::ClientContext* context, const v1::WatchJobRequest& request) {
  rpc::PrepareContext(context, options_.token, std::chrono::milliseconds(0));
  return stub_->WatchJob(context, request);
}

std::unique_ptr<grpc::ClientReaderInterface<v1::StreamMetricsResponse>> JobClient::StreamMetrics(
    grpc::ClientContext* context, const v1::StreamMetricsRequest& request) {
  rpc::PrepareContext(context, options_.token, std::chrono::milliseconds(0));
  return stub_->StreamMetrics(context, request);
}

std::unique_ptr<grpc::ClientReaderInterface<v1::GetJobLogsResponse>> JobClient::Logs(
    grpc::ClientContext* context, const v1::GetJobLogsRequest& request) {
  rpc::PrepareContext(context, options_.token, std::chrono::milliseconds(0));
  return stub_->GetJobLogs(context, request);
}

}  // namespace deepnet::ctl
