#pragma once
// An in-process JobService for deepnetctl's tests: records every request and the authorization
// header it came with, answers with canned jobs, pages and streams, and can fail the next calls
// with a chosen status. Served on 127.0.0.1 at a port the OS picks. Safe for concurrent use.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <climits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deepnet/v1/job_service.grpc.pb.h"

namespace deepnet::ctl::testing {

class FakeJobService final : public v1::JobService::Service {
 public:
  // One WatchJob call's answer: these messages, then `end`.
  struct WatchScript {
    std::vector<v1::WatchJobResponse> messages;
    grpc::Status end = grpc::Status::OK;
  };

  // Everything below is guarded by mu; tests set it before the call and read it after.
  std::mutex mu;
  // The next `fail_count` calls (of any method) fail with `fail_status`.
  int fail_count = 0;
  grpc::Status fail_status{grpc::StatusCode::UNAVAILABLE, "coordinator restarting"};
  // Canned answers.
  v1::Job job;
  bool created = true;
  std::vector<v1::ListJobsResponse> pages;  // Page i answers the token "" (i = 0) or "t<i>".
  v1::ListCheckpointsResponse checkpoints;
  v1::ListWorkersResponse workers;
  std::vector<WatchScript> watch_scripts;  // Call i gets script min(i, size - 1).
  std::vector<v1::StreamMetricsResponse> metric_messages;
  // After the metric messages: end with OK (false: wait until the client cancels).
  bool metrics_end = true;
  // GetJobLogs answers these messages, then ends with logs_end.
  std::vector<v1::GetJobLogsResponse> log_messages;
  grpc::Status logs_end = grpc::Status::OK;
  // Recorded requests, and the authorization header of every call ("" when absent).
  std::vector<v1::SubmitJobRequest> submits;
  std::vector<v1::GetJobRequest> gets;
  std::vector<v1::ListJobsRequest> lists;
  std::vector<v1::CancelJobRequest> cancels;
  std::vector<v1::ListCheckpointsRequest> checkpoint_requests;
  int worker_lists = 0;
  std::vector<v1::WatchJobRequest> watches;
  std::vector<v1::StreamMetricsRequest> metric_requests;
  std::vector<v1::GetJobLogsRequest> log_requests;
  std::vector<std::string> authorization;

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    submits.push_back(*request);
    if (grpc::Status s = Begin(context); !s.ok()) return s;
    *response->mutable_job() = job;
    response->set_created(created);
    return grpc::Status::OK;
  }
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override {
    std::lock_guard<std::mutex> lock(mu);
    gets.push_back(*request);
    if (grpc::Status s = Begin(context); !s.ok()) return s;
    *response = job;
    return grpc::Status::OK;
  }
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    lists.push_back(*request);
    if (grpc::Status s = Begin(context); !s.ok()) return s;
    size_t page = 0;
    if (!request->page_token().empty()) page = std::stoul(request->page_token().substr(1));
    if (page >= pages.size()) return {grpc::StatusCode::INVALID_ARGUMENT, "bad page token"};
    *response = pages[page];
    // Honour page_size like a real server would.
    while (request->page_size() > 0 && response->jobs_size() > request->page_size()) {
      response->mutable_jobs()->RemoveLast();
    }
    return grpc::Status::OK;
  }
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::Job* response) override {
    std::lock_guard<std::mutex> lock(mu);
    cancels.push_back(*request);
    if (grpc::Status s = Begin(context); !s.ok()) return s;
    *response = job;
    return grpc::Status::OK;
  }
  grpc::Status ListCheckpoints(grpc::ServerContext* context,
                               const v1::ListCheckpointsRequest* request,
                               v1::ListCheckpointsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    checkpoint_requests.push_back(*request);
    if (grpc::Status s = Begin(context); !s.ok()) return s;
    *response = checkpoints;
    return grpc::Status::OK;
  }
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* /*request*/,
                           v1::ListWorkersResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    ++worker_lists;
    if (grpc::Status s = Begin(context); !s.ok()) return s;
    *response = workers;
    return grpc::Status::OK;
  }
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::WatchJobResponse>* writer) override {
    WatchScript script;
    {
      std::lock_guard<std::mutex> lock(mu);
      watches.push_back(*request);
      if (grpc::Status s = Begin(context); !s.ok()) return s;
      if (watch_scripts.empty()) return {grpc::StatusCode::INTERNAL, "no watch script"};
      script = watch_scripts[std::min(watches.size(), watch_scripts.size()) - 1];
    }
    for (const auto& message : script.messages) writer->Write(message);
    return script.end;
  }
  grpc::Status StreamMetrics(grpc::ServerContext* context, const v1::StreamMetricsRequest* request,
                             grpc::ServerWriter<v1::StreamMetricsResponse>* writer) override {
    std::vector<v1::StreamMetricsResponse> messages;
    bool end;
    {
      std::lock_guard<std::mutex> lock(mu);
      metric_requests.push_back(*request);
      if (grpc::Status s = Begin(context); !s.ok()) return s;
      messages = metric_messages;
      end = metrics_end;
    }
    for (const auto& message : messages) writer->Write(message);
    // A live stream: open until the client goes (bounded, so a broken client cannot hang us).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!end && !context->IsCancelled() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return grpc::Status::OK;
  }

  grpc::Status GetJobLogs(grpc::ServerContext* context, const v1::GetJobLogsRequest* request,
                          grpc::ServerWriter<v1::GetJobLogsResponse>* writer) override {
    std::vector<v1::GetJobLogsResponse> messages;
    grpc::Status end;
    {
      std::lock_guard<std::mutex> lock(mu);
      log_requests.push_back(*request);
      if (grpc::Status s = Begin(context); !s.ok()) return s;
      messages = log_messages;
      end = logs_end;
    }
    for (const auto& message : messages) writer->Write(message);
    return end;
  }

 private:
  // With mu held: records the caller's token and consumes one injected failure.
  grpc::Status Begin(grpc::ServerContext* context) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("authorization");
    authorization.push_back(
        it == metadata.end() ? "" : std::string(it->second.data(), it->second.size()));
    if (fail_count > 0) {
      if (fail_count != INT_MAX) --fail_count;
      return fail_status;
    }
    return grpc::Status::OK;
  }
};

// Serves a FakeJobService on 127.0.0.1:<port chosen by the OS> for the object's lifetime.
class FakeServer {
 public:
  FakeServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { Stop(); }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  // Stops serving; calls in flight are cancelled.
  void Stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    server_->Wait();
    server_.reset();
  }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeJobService& service() { return service_; }

 private:
  FakeJobService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Test data: a job, a metric point and watch messages.
inline v1::Job MakeJob(const std::string& id, v1::JobState state) {
  v1::Job job;
  job.set_job_id(id);
  job.set_owner("alice");
  job.set_state(state);
  job.set_attempt(1);
  job.set_step(40);
  job.mutable_spec()->set_name("wmt-deepnet");
  job.mutable_spec()->set_config_yaml("name: wmt-deepnet\ntrain:\n  max_steps: 100\n");
  job.mutable_spec()->set_max_steps(100);
  job.mutable_spec()->set_pipeline_stages(2);
  job.mutable_spec()->set_data_parallel(2);
  job.mutable_spec()->set_device(v1::DEVICE_KIND_CPU);
  (*job.mutable_spec()->mutable_labels())["team"] = "mt";
  (*job.mutable_spec()->mutable_labels())["run"] = "123";
  job.mutable_create_time()->set_seconds(1'790'000'000);
  job.mutable_start_time()->set_seconds(1'790'000'100);
  auto* placement = job.add_placement();
  placement->set_rank(1);
  placement->set_stage(0);
  placement->set_replica(1);
  placement->set_worker_id("w-1");
  return job;
}

inline v1::WatchJobResponse Snapshot(const v1::Job& job) {
  v1::WatchJobResponse response;
  *response.mutable_snapshot() = job;
  return response;
}

inline v1::WatchJobResponse StateChange(int64_t sequence, v1::JobState from, v1::JobState to,
                                        const std::string& message = "") {
  v1::WatchJobResponse response;
  v1::JobEvent* event = response.mutable_event();
  event->set_sequence(sequence);
  event->set_type(v1::JOB_EVENT_TYPE_STATE_CHANGED);
  event->set_from_state(from);
  event->set_to_state(to);
  event->set_attempt(1);
  event->set_message(message);
  return response;
}

inline v1::MetricPoint Point(int64_t step, double loss) {
  v1::MetricPoint point;
  point.set_step(step);
  point.set_loss(loss);
  point.set_nll(loss - 0.1);
  point.set_lr(3e-4);
  point.set_tokens_per_s(12345);
  point.set_attempt(1);
  return point;
}

// A ready CPU worker with `slots` slots; the first `used` are held by ranks 0.. of job-1
// (shown with the job, as to its owner).
inline v1::Worker MakeWorker(const std::string& name, int slots, int used) {
  v1::Worker w;
  w.set_name(name);
  w.set_worker_id(name);
  w.set_state(v1::WORKER_STATE_READY);
  w.set_slots_total(slots);
  w.set_slots_used(used);
  w.set_slots_free(slots - used);
  w.set_hostname("host-" + name);
  w.set_cpu_count(8);
  w.set_memory_bytes(int64_t{16} << 30);
  w.mutable_last_heartbeat_age()->set_seconds(2);
  for (int i = 0; i < slots; ++i) {
    v1::SlotStatus* slot = w.add_slots();
    slot->set_index(i);
    slot->set_kind(v1::DEVICE_KIND_CPU);
    slot->set_device_index(-1);
    slot->set_used(i < used);
    if (i < used) {
      slot->mutable_task()->set_job_id("job-1");
      slot->mutable_task()->set_attempt(1);
      slot->mutable_task()->set_rank(i);
    }
  }
  return w;
}

}  // namespace deepnet::ctl::testing
