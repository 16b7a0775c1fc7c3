#include "ctl/commands.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "ctl/exit_codes.h"
#include "ctl/format.h"
#include "ctl/worker_table.h"
#include "rpc/rpc_util.h"

namespace deepnet::ctl {
namespace {

int Fail(const grpc::Status& status, const CommandContext& ctx) {
  *ctx.err << "deepnetctl: " << rpc::Describe(status) << std::endl;
  return ExitCodeFor(status.error_code());
}

int LocalError(const std::string& message, const CommandContext& ctx) {
  *ctx.err << "deepnetctl: " << message << std::endl;
  return kExitUsage;
}

}  // namespace

int RunSubmit(const SubmitArgs& args, const CommandContext& ctx) {
  std::ifstream in(args.file, std::ios::binary);
  if (!in) return LocalError(absl::StrCat(args.file, ": cannot be read"), ctx);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return LocalError(absl::StrCat(args.file, ": read failed"), ctx);
  // The coordinator validates the spec; only a file that is not YAML at all stops here.
  try {
    const YAML::Node root = YAML::Load(text.str());
    if (!root.IsMap()) return LocalError(absl::StrCat(args.file, ": not a YAML mapping"), ctx);
  } catch (const YAML::Exception& e) {
    return LocalError(absl::StrCat(args.file, ":", e.mark.line + 1, ":", e.mark.column + 1,
                                   ": invalid YAML: ", e.msg),
                      ctx);
  }
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_config_yaml(text.str());
  request.set_validate_only(args.validate_only);
  // One key for every retry of this submission, so a retry after a lost answer returns the
  // job the first attempt created.
  request.set_idempotency_key(args.idempotency_key.empty() ? NewIdempotencyKey()
                                                           : args.idempotency_key);
  v1::SubmitJobResponse response;
  const grpc::Status status = ctx.client->Submit(request, &response);
  if (!status.ok()) return Fail(status, ctx);
  const v1::Job& job = response.job();
  if (ctx.format != OutputFormat::kTable) {
    PrintStructured(response, ctx.format, *ctx.out);
  } else if (args.validate_only) {
    const v1::JobSpec& spec = job.spec();
    *ctx.out << "spec valid: " << (spec.name().empty() ? "(unnamed)" : spec.name()) << ", "
             << spec.pipeline_stages() << " stages x " << spec.data_parallel() << " replicas";
    if (spec.device() != 0) *ctx.out << " (" << DeviceName(spec.device()) << ")";
    *ctx.out << ", " << spec.max_steps() << " steps (nothing stored)" << std::endl;
  } else if (response.created()) {
    *ctx.out << "job " << job.job_id() << " created (" << StateName(job.state()) << ")"
             << std::endl;
  } else {
    *ctx.out << "job " << job.job_id() << " already submitted with idempotency key "
             << request.idempotency_key() << ": returned the earlier job ("
             << StateName(job.state()) << ")" << std::endl;
  }
  if (!args.watch || args.validate_only) return kExitOk;
  return RunWatch(job.job_id(), ctx);
}

int RunGet(const std::string& job_id, const CommandContext& ctx) {
  v1::Job job;
  const grpc::Status status = ctx.client->Get(job_id, &job);
  if (!status.ok()) return Fail(status, ctx);
  if (ctx.format == OutputFormat::kTable) {
    PrintJobDetail(job, ctx.now_s(), *ctx.out);
  } else {
    PrintStructured(job, ctx.format, *ctx.out);
  }
  return kExitOk;
}

int RunList(const ListArgs& args, const CommandContext& ctx) {
  v1::ListJobsRequest request;
  for (v1::JobState state : args.states) request.add_states(state);
  request.set_owner(args.owner);
  for (const auto& [key, value] : args.labels) (*request.mutable_labels())[key] = value;
  request.set_name_prefix(args.name_prefix);
  request.set_page_size(args.page_size);
  v1::ListJobsResponse response;
  const grpc::Status status = ctx.client->ListAll(request, args.limit, &response);
  if (!status.ok()) return Fail(status, ctx);
  if (ctx.format == OutputFormat::kTable) {
    std::vector<const v1::Job*> jobs;
    for (const v1::Job& job : response.jobs()) jobs.push_back(&job);
    PrintJobTable(jobs, ctx.now_s(), *ctx.out);
  } else {
    PrintStructured(response, ctx.format, *ctx.out);
  }
  return kExitOk;
}

int RunCancel(const std::string& job_id, const std::string& reason, const CommandContext& ctx) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason(reason);
  v1::Job job;
  const grpc::Status status = ctx.client->Cancel(request, &job);
  if (!status.ok()) return Fail(status, ctx);
  if (ctx.format == OutputFormat::kTable) {
    *ctx.out << "job " << job.job_id() << ": cancellation requested (state "
             << StateName(job.state()) << ")" << std::endl;
  } else {
    PrintStructured(job, ctx.format, *ctx.out);
  }
  return kExitOk;
}

int RunCheckpoints(const std::string& job_id, const CommandContext& ctx) {
  v1::ListCheckpointsResponse response;
  const grpc::Status status = ctx.client->ListCheckpoints(job_id, &response);
  if (!status.ok()) return Fail(status, ctx);
  if (ctx.format == OutputFormat::kTable) {
    PrintCheckpointTable(response, *ctx.out);
  } else {
    PrintStructured(response, ctx.format, *ctx.out);
  }
  return kExitOk;
}

int RunWorkers(const CommandContext& ctx) {
  v1::ListWorkersResponse response;
  const grpc::Status status = ctx.client->ListWorkers(&response);
  if (!status.ok()) return Fail(status, ctx);
  if (ctx.format == OutputFormat::kTable) {
    PrintWorkerTable(response, *ctx.out);
  } else {
    PrintStructured(response, ctx.format, *ctx.out);
  }
  return kExitOk;
}

int RunWatch(const std::string& job_id, const CommandContext& ctx) {
  WatchOptions options = ctx.watch;
  options.format = ctx.format;
  JobWatcher watcher(ctx.client, options, *ctx.out, *ctx.err,
                     ctx.terminal != nullptr ? ctx.terminal : ctx.out);
  return watcher.Run(job_id);
}

int RunMetrics(const MetricsArgs& args, const CommandContext& ctx) {
  v1::StreamMetricsRequest request;
  request.set_job_id(args.job_id);
  request.set_from_step(args.from_step);
  request.set_live_only(args.live_only);
  grpc::ClientContext context;
  auto reader = ctx.client->StreamMetrics(&context, request);
  v1::StreamMetricsResponse response;
  bool header = false;
  while (reader->Read(&response)) {
    for (const v1::MetricPoint& point : response.points()) {
      switch (ctx.format) {
        case OutputFormat::kTable:
          if (!header) *ctx.out << MetricHeaderRow() << '\n';
          header = true;
          *ctx.out << MetricRow(point) << '\n';
          break;
        case OutputFormat::kJson:
          *ctx.out << ToJson(point, /*pretty=*/false) << '\n';
          break;
        case OutputFormat::kYaml:
          *ctx.out << "---\n" << JsonToYaml(ToJson(point, /*pretty=*/false));
          break;
      }
    }
    *ctx.out << std::flush;
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return Fail(status, ctx);
  return kExitOk;
}

int RunLogs(const LogsArgs& args, const CommandContext& ctx) {
  v1::GetJobLogsRequest request;
  request.set_job_id(args.job_id);
  request.set_attempt(args.attempt);
  if (args.rank.has_value()) request.set_rank(*args.rank);
  request.set_stream(args.stdout_stream ? v1::LOG_STREAM_STDOUT : v1::LOG_STREAM_STDERR);
  request.set_tail_bytes(args.tail_bytes);
  request.set_offset(args.offset);
  request.set_follow(args.follow);
  grpc::ClientContext context;
  auto reader = ctx.client->Logs(&context, request);
  v1::GetJobLogsResponse response;
  bool first = true;
  while (reader->Read(&response)) {
    if (first && !args.rank.has_value()) {
      *ctx.err << "deepnetctl: job " << args.job_id << " attempt " << response.attempt()
               << " rank " << response.rank() << " (worker " << response.worker_id() << "), "
               << (args.stdout_stream ? "stdout" : "stderr") << std::endl;
    }
    first = false;
    ctx.out->write(response.data().data(), static_cast<std::streamsize>(response.data().size()));
    ctx.out->flush();
    if (response.truncated()) {
      *ctx.err << "deepnetctl: stopped after the per-call limit at byte "
               << response.offset() + static_cast<int64_t>(response.data().size()) << " of "
               << response.size() << "; continue with --offset "
               << response.offset() + static_cast<int64_t>(response.data().size()) << std::endl;
    }
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return Fail(status, ctx);
  return kExitOk;
}

}  // namespace deepnet::ctl
