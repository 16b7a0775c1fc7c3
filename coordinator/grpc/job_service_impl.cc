#include "coordinator/grpc/job_service_impl.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/grpc/job_log_stream.h"
#include "coordinator/grpc/job_streams.h"
#include "coordinator/grpc/proto_convert.h"
#include "rpc/request_check.h"
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

rpc::RequestCheckOptions CheckOptions() {
  rpc::RequestCheckOptions options;
  options.long_fields = {"deepnet.v1.JobSpec.config_yaml"};  // SubmitJob checks its size
  return options;
}

}  // namespace

JobServiceImpl::JobServiceImpl(Coordinator& coordinator, const Authenticator& auth,
                               JobServiceOptions options)
    : coordinator_(coordinator), auth_(auth), hub_(options.streams), writes_(options.writes) {
  hub_.SetValidator([this](const Principal& who) { return auth_.StillValid(who); });
  coordinator_.SetFeedListener([this](const std::string& job_id) { hub_.Notify(job_id); });
}

JobServiceImpl::~JobServiceImpl() { coordinator_.SetFeedListener(nullptr); }

grpc::Status JobServiceImpl::Accept(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer& raw,
                                    google::protobuf::Message* request) const {
  static const rpc::RequestCheckOptions options = CheckOptions();
  absl::StatusOr<Principal> principal = auth_.Authenticate(*context);
  if (!principal.ok()) return ToGrpc(principal.status());
  return ToGrpc(rpc::ParseRequest(raw, request, options));
}

template <class Request, class Response>
grpc::ServerUnaryReactor* JobServiceImpl::Unary(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw, grpc::ByteBuffer* out,
    grpc::Status (JobServiceImpl::*call)(grpc::ServerContextBase*, const Request*, Response*)) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Request request;
  grpc::Status status = Accept(context, *raw, &request);
  if (status.ok()) {
    Response response;
    status = (this->*call)(context, &request, &response);
    if (status.ok()) rpc::SerializeResponse(response, out);
  }
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return Unary<v1::SubmitJobRequest, v1::SubmitJobResponse>(context, request, response,
                                                            &JobServiceImpl::SubmitJob);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  return Unary<v1::GetJobRequest, v1::Job>(context, request, response, &JobServiceImpl::GetJob);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return Unary<v1::ListJobsRequest, v1::ListJobsResponse>(context, request, response,
                                                          &JobServiceImpl::ListJobs);
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return Unary<v1::CancelJobRequest, v1::Job>(context, request, response,
                                              &JobServiceImpl::CancelJob);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListCheckpoints(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return Unary<v1::ListCheckpointsRequest, v1::ListCheckpointsResponse>(
      context, request, response, &JobServiceImpl::ListCheckpoints);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return Unary<v1::ListWorkersRequest, v1::ListWorkersResponse>(context, request, response,
                                                                &JobServiceImpl::ListWorkers);
}

absl::StatusOr<Principal> JobServiceImpl::Admit(grpc::ServerContextBase* context,
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

absl::Status JobServiceImpl::TakeWrite(const Principal& principal) {
  if (principal.role == Role::kAdmin) return absl::OkStatus();
  return writes_.Take(principal.user);
}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContextBase* context,
                                       const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  absl::StatusOr<Principal> principal = Admit(context, "");
  if (!principal.ok()) return ToGrpc(principal.status());
  // Before the spec is parsed: a flood of 1 MiB specs is refused before it costs anything.
  if (absl::Status s = TakeWrite(*principal); !s.ok()) return ToGrpc(s);
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

grpc::Status JobServiceImpl::GetJob(grpc::ServerContextBase* context,
                                    const v1::GetJobRequest* request, v1::Job* response) {
  if (request->job_id().empty()) return ToGrpc(absl::InvalidArgumentError("job_id: empty"));
  JobView job;
  absl::StatusOr<Principal> principal = Admit(context, request->job_id(), &job);
  if (!principal.ok()) return ToGrpc(principal.status());
  *response = ToProto(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContextBase* context,
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

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContextBase* context,
                                       const v1::CancelJobRequest* request, v1::Job* response) {
  if (request->job_id().empty()) return ToGrpc(absl::InvalidArgumentError("job_id: empty"));
  absl::StatusOr<Principal> principal = Admit(context, request->job_id());
  if (!principal.ok()) return ToGrpc(principal.status());
  if (absl::Status s = TakeWrite(*principal); !s.ok()) return ToGrpc(s);
  absl::StatusOr<JobView> job =
      coordinator_.Cancel(request->job_id(), request->reason(), principal->user);
  if (!job.ok()) return ToGrpc(job.status());
  *response = ToProto(*job);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw) {
  v1::WatchJobRequest request;
  if (grpc::Status s = Accept(context, *raw, &request); !s.ok()) return FinishedStream(s);
  if (request.job_id().empty()) {
    return FinishedStream(ToGrpc(absl::InvalidArgumentError("job_id: empty")));
  }
  if (request.from_sequence() < 0) {
    return FinishedStream(ToGrpc(absl::InvalidArgumentError("from_sequence: must be >= 0")));
  }
  JobView job;
  absl::StatusOr<Principal> principal = Admit(context, request.job_id(), &job);
  if (!principal.ok()) return FinishedStream(ToGrpc(principal.status()));
  if (absl::Status s = hub_.Acquire(*principal); !s.ok()) return FinishedStream(ToGrpc(s));
  return StartWatchStream(coordinator_, hub_, *principal, job, request.from_sequence());
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* JobServiceImpl::StreamMetrics(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw) {
  v1::StreamMetricsRequest request;
  if (grpc::Status s = Accept(context, *raw, &request); !s.ok()) return FinishedStream(s);
  if (request.job_id().empty()) {
    return FinishedStream(ToGrpc(absl::InvalidArgumentError("job_id: empty")));
  }
  if (request.from_step() < 0) {
    return FinishedStream(ToGrpc(absl::InvalidArgumentError("from_step: must be >= 0")));
  }
  absl::StatusOr<Principal> principal = Admit(context, request.job_id());
  if (!principal.ok()) return FinishedStream(ToGrpc(principal.status()));
  absl::StatusOr<int64_t> cursor =
      coordinator_.PointCursor(request.job_id(), request.from_step(), request.live_only());
  if (!cursor.ok()) return FinishedStream(ToGrpc(cursor.status()));
  if (absl::Status s = hub_.Acquire(*principal); !s.ok()) return FinishedStream(ToGrpc(s));
  return StartMetricsStream(coordinator_, hub_, *principal, request.job_id(), *cursor);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* JobServiceImpl::GetJobLogs(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw) {
  v1::GetJobLogsRequest request;
  if (grpc::Status s = Accept(context, *raw, &request); !s.ok()) return FinishedStream(s);
  if (request.job_id().empty()) {
    return FinishedStream(ToGrpc(absl::InvalidArgumentError("job_id: empty")));
  }
  absl::StatusOr<LogStream> stream = FromProto(request.stream(), "stream");
  if (!stream.ok()) return FinishedStream(ToGrpc(stream.status()));
  absl::StatusOr<Principal> principal = Admit(context, request.job_id());
  if (!principal.ok()) return FinishedStream(ToGrpc(principal.status()));
  LogCallRequest call;
  call.job_id = request.job_id();
  call.attempt = request.attempt();
  if (request.has_rank()) call.rank = request.rank();
  call.stream = *stream;
  call.tail_bytes = request.tail_bytes();
  call.offset = request.offset();
  call.follow = request.follow();
  auto cursor = std::make_unique<JobLogCursor>(coordinator_, std::move(call));
  if (absl::Status s = cursor->Open(); !s.ok()) return FinishedStream(ToGrpc(s));
  if (absl::Status s = hub_.Acquire(*principal); !s.ok()) return FinishedStream(ToGrpc(s));
  return StartLogStream(hub_, *principal, std::move(cursor));
}

grpc::Status JobServiceImpl::ListCheckpoints(grpc::ServerContextBase* context,
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

grpc::Status JobServiceImpl::ListWorkers(grpc::ServerContextBase* context,
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
