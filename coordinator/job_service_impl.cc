#include "coordinator/job_service_impl.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/job_log_stream.h"
#include "coordinator/proto_convert.h"
#include "rpc/rpc_util.h"

namespace deepnet::coordinator {
namespace {

using rpc::ToGrpc;

constexpr size_t kMaxIdempotencyKey = 128;
constexpr size_t kMaxSpecBytes = 1 << 20;
// A ListJobs page stops before this many bytes (docs/OPERATIONS.md), well under gRPC's default
// 4 MB message limit: two full-size specs fit with include_spec, thousands of summaries without.
constexpr int64_t kMaxListBytes = 2 << 20;
constexpr int kReplayBatch = 500;

}  // namespace

absl::StatusOr<Principal> JobServiceImpl::Admit(grpc::ServerContext* context,
                                                const std::string& job_id, JobView* job_out) {
  absl::StatusOr<Principal> principal = auth_.Authenticate(*context);
  if (!principal.ok()) return principal;
  if (principal->role == Role::kWorker) {
    return absl::PermissionDeniedError(absl::StrCat(
        "user ", principal->user, " holds a worker token, which is for WorkerService and the "
        "rendezvous only; use a user token for jobs"));
  }
  if (job_id.empty()) return principal;
  absl::StatusOr<JobView> job = coordinator_.GetJob(job_id);
  if (!job.ok()) return job.status();
  if (absl::Status s = CheckJobAccess(*principal, job->record.owner, job_id); !s.ok()) return s;
  if (job_out != nullptr) *job_out = *std::move(job);
  return principal;
}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context,
                                       const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  absl::StatusOr<Principal> principal = Admit(context, "");
  if (!principal.ok()) return ToGrpc(principal.status());
  const std::string& yaml = request->spec().config_yaml();
  if (yaml.empty()) {
    return ToGrpc(absl::InvalidArgumentError("spec.config_yaml: empty (send the job YAML)"));
  }
  if (yaml.size() > kMaxSpecBytes) {
    return ToGrpc(absl::InvalidArgumentError(absl::StrCat(
        "spec.config_yaml: ", yaml.size(), " bytes, more than the ", kMaxSpecBytes, " allowed")));
  }
  if (request->idempotency_key().size() > kMaxIdempotencyKey) {
    return ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("idempotency_key: longer than ", kMaxIdempotencyKey, " characters")));
  }
  absl::StatusOr<JobSpecInfo> spec =
      coordinator_.ParseSpec(yaml, principal->user, principal->teams);
  if (!spec.ok()) return ToGrpc(spec.status());
  // The other JobSpec fields are output only: whatever the client sent there is ignored.
  if (request->validate_only()) {
    const bool admin = principal->role == Role::kAdmin;  // the limits a submit would meet
    const absl::Status allowed =
        coordinator_.CheckLimits({principal->user, "", "", *spec, admin, principal->teams});
    if (!allowed.ok()) return ToGrpc(allowed);
    v1::Job* job = response->mutable_job();
    job->set_owner(principal->user);
    job->mutable_spec()->set_config_yaml(yaml);
    FillSpec(*spec, job->mutable_spec());
    response->set_created(false);
    return grpc::Status::OK;
  }
  SubmitRequestData submit;
  submit.owner = principal->user;
  submit.idempotency_key = request->idempotency_key();
  submit.config_yaml = yaml;
  submit.spec = *spec;
  submit.admin = principal->role == Role::kAdmin;
  submit.teams = principal->teams;
  absl::StatusOr<SubmitResultData> result = coordinator_.Submit(submit);
  if (!result.ok()) return ToGrpc(result.status());
  *response->mutable_job() = ToProto(result->job);
  response->set_created(result->created);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                    v1::Job* response) {
  if (request->job_id().empty()) return ToGrpc(absl::InvalidArgumentError("job_id: empty"));
  JobView job;
  absl::StatusOr<Principal> principal = Admit(context, request->job_id(), &job);
  if (!principal.ok()) return ToGrpc(principal.status());
  *response = ToProto(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context,
                                      const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  absl::StatusOr<Principal> principal = Admit(context, "");
  if (!principal.ok()) return ToGrpc(principal.status());
  ListRequestData list;
  const std::string& owner = request->owner();
  if (owner.empty()) {
    list.owner = principal->user;
  } else if (owner == "*" || owner != principal->user) {
    if (principal->role != Role::kAdmin) {
      return ToGrpc(absl::PermissionDeniedError(absl::StrCat(
          "owner: user ", principal->user, " may list only their own jobs (an admin may use '",
          owner, "')")));
    }
    list.owner = owner == "*" ? "" : owner;
  } else {
    list.owner = owner;
  }
  for (int i = 0; i < request->states_size(); ++i) {
    absl::StatusOr<JobState> s =
        FromProto(request->states(i), absl::StrCat("states[", i, "]"));
    if (!s.ok()) return ToGrpc(s.status());
    list.states.push_back(*s);
  }
  list.labels.insert(request->labels().begin(), request->labels().end());
  list.name_prefix = request->name_prefix();
  list.page_size = request->page_size();
  list.page_token = request->page_token();
  list.include_spec = request->include_spec();
  list.max_bytes = kMaxListBytes;
  auto page = coordinator_.ListJobs(list);
  if (!page.ok()) return ToGrpc(page.status());
  for (const JobView& job : page->first) *response->add_jobs() = ToProto(job);
  response->set_next_page_token(page->second);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const v1::CancelJobRequest* request, v1::Job* response) {
  if (request->job_id().empty()) return ToGrpc(absl::InvalidArgumentError("job_id: empty"));
  absl::StatusOr<Principal> principal = Admit(context, request->job_id());
  if (!principal.ok()) return ToGrpc(principal.status());
  absl::StatusOr<JobView> job =
      coordinator_.Cancel(request->job_id(), request->reason(), principal->user);
  if (!job.ok()) return ToGrpc(job.status());
  *response = ToProto(*job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::WatchJobResponse>* writer) {
  if (request->job_id().empty()) return ToGrpc(absl::InvalidArgumentError("job_id: empty"));
  if (request->from_sequence() < 0) {
    return ToGrpc(absl::InvalidArgumentError("from_sequence: must be >= 0"));
  }
  JobView job;
  absl::StatusOr<Principal> principal = Admit(context, request->job_id(), &job);
  if (!principal.ok()) return ToGrpc(principal.status());
  v1::WatchJobResponse first;
  *first.mutable_snapshot() = ToProto(job);
  if (!writer->Write(first)) return grpc::Status::OK;
  int64_t after = request->from_sequence() > 0 ? request->from_sequence() - 1 : job.last_event_seq;
  bool terminal = IsTerminal(job.record.state);
  while (!context->IsCancelled()) {
    absl::StatusOr<EventBatch> batch =
        coordinator_.WaitEvents(request->job_id(), after, absl::Seconds(1));
    if (!batch.ok()) return ToGrpc(batch.status());
    for (const JobEventView& e : batch->events) {
      v1::WatchJobResponse out;
      *out.mutable_event() = ToProto(e);
      if (!writer->Write(out)) return grpc::Status::OK;
      after = e.sequence;
    }
    if (batch->terminal || terminal) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the watch");
}

grpc::Status JobServiceImpl::StreamMetrics(grpc::ServerContext* context,
                                           const v1::StreamMetricsRequest* request,
                                           grpc::ServerWriter<v1::StreamMetricsResponse>* writer) {
  if (request->job_id().empty()) return ToGrpc(absl::InvalidArgumentError("job_id: empty"));
  if (request->from_step() < 0) return ToGrpc(absl::InvalidArgumentError("from_step: must be >= 0"));
  absl::StatusOr<Principal> principal = Admit(context, request->job_id());
  if (!principal.ok()) return ToGrpc(principal.status());
  absl::StatusOr<int64_t> cursor =
      coordinator_.PointCursor(request->job_id(), request->from_step(), request->live_only());
  if (!cursor.ok()) return ToGrpc(cursor.status());
  while (!context->IsCancelled()) {
    absl::StatusOr<PointBatch> batch =
        coordinator_.WaitPoints(request->job_id(), *cursor, absl::Seconds(1));
    if (!batch.ok()) return ToGrpc(batch.status());
    for (size_t i = 0; i < batch->points.size(); i += kReplayBatch) {
      v1::StreamMetricsResponse out;
      const size_t end = std::min(batch->points.size(), i + kReplayBatch);
      for (size_t j = i; j < end; ++j) *out.add_points() = ToProto(batch->points[j]);
      if (!writer->Write(out)) return grpc::Status::OK;
    }
    *cursor = batch->next_cursor;
    if (batch->terminal && batch->points.empty()) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream");
}

grpc::Status JobServiceImpl::GetJobLogs(grpc::ServerContext* context,
                                        const v1::GetJobLogsRequest* request,
                                        grpc::ServerWriter<v1::GetJobLogsResponse>* writer) {
  if (request->job_id().empty()) return ToGrpc(absl::InvalidArgumentError("job_id: empty"));
  absl::StatusOr<LogStream> stream = FromProto(request->stream(), "stream");
  if (!stream.ok()) return ToGrpc(stream.status());
  absl::StatusOr<Principal> principal = Admit(context, request->job_id());
  if (!principal.ok()) return ToGrpc(principal.status());
  LogCallRequest call;
  call.job_id = request->job_id();
  call.attempt = request->attempt();
  if (request->has_rank()) call.rank = request->rank();
  call.stream = *stream;
  call.tail_bytes = request->tail_bytes();
  call.offset = request->offset();
  call.follow = request->follow();
  LogCallHooks hooks;
  hooks.write = [writer](const LogPart& part) {
    v1::GetJobLogsResponse out;
    out.set_data(part.data);
    out.set_offset(part.offset);
    out.set_size(part.size);
    out.set_attempt(part.source.attempt);
    out.set_rank(part.source.rank);
    out.set_worker_id(part.source.worker_id);
    out.set_stream(ToProto(part.stream));
    out.set_truncated(part.truncated);
    return writer->Write(out);
  };
  hooks.cancelled = [context] { return context->IsCancelled(); };
  hooks.sleep = [](absl::Duration d) { absl::SleepFor(d); };
  return ToGrpc(StreamJobLogs(coordinator_, call, hooks));
}

grpc::Status JobServiceImpl::ListCheckpoints(grpc::ServerContext* context,
                                             const v1::ListCheckpointsRequest* request,
                                             v1::ListCheckpointsResponse* response) {
  if (request->job_id().empty()) return ToGrpc(absl::InvalidArgumentError("job_id: empty"));
  absl::StatusOr<Principal> principal = Admit(context, request->job_id());
  if (!principal.ok()) return ToGrpc(principal.status());
  absl::StatusOr<std::vector<CheckpointView>> found =
      coordinator_.ListCheckpoints(request->job_id());
  if (!found.ok()) return ToGrpc(found.status());
  for (const CheckpointView& c : *found) *response->add_checkpoints() = ToProto(c);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListWorkers(grpc::ServerContext* context,
                                         const v1::ListWorkersRequest* /*request*/,
                                         v1::ListWorkersResponse* response) {
  absl::StatusOr<Principal> principal = Admit(context, "");
  if (!principal.ok()) return ToGrpc(principal.status());
  for (WorkerView& worker : coordinator_.ListWorkers()) {
    for (SlotView& slot : worker.slots) {
      if (slot.task.has_value() &&
          !CheckJobAccess(*principal, slot.task->owner, slot.task->job_id).ok()) {
        slot.task.reset();  // still shown as used, without the job
      }
    }
    *response->add_workers() = ToProto(worker);
  }
  return grpc::Status::OK;
}

}  // namespace deepnet::coordinator
