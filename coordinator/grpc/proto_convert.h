#pragma once
// Conversions between the coordinator's plain types and the deepnet.v1 protos; used only by
// the gRPC services (proto types stop there).

#include "coordinator/core/coordinator_types.h"
#include "deepnet/v1/job_service.pb.h"
#include "deepnet/v1/worker_service.pb.h"

namespace deepnet::coordinator {

v1::JobState ToProto(JobState state);
// JOB_STATE_UNSPECIFIED and unknown values: INVALID_ARGUMENT naming `field`.
absl::StatusOr<JobState> FromProto(v1::JobState state, const std::string& field);
v1::RecoveryCause ToProto(RecoveryCause cause);
v1::PendingCode ToProto(PendingCode code);
v1::WorkerState ToProto(WorkerState state);

v1::Job ToProto(const JobView& job);
v1::JobEvent ToProto(const JobEventView& event);
v1::MetricPoint ToProto(const MetricPoint& point);
v1::LayerSummary ToProto(const LayerSummaryValues& summary);
v1::Checkpoint ToProto(const CheckpointView& checkpoint);
// SlotStatus.task is set where the view's slot has a task (clear it first to hide the job).
v1::Worker ToProto(const WorkerView& worker);
// The parsed spec fields of JobSpec (config_yaml left to the caller).
void FillSpec(const JobSpecInfo& spec, v1::JobSpec* out);

MetricPoint FromProto(const v1::MetricPoint& point);
LayerSummaryValues FromProto(const v1::LayerSummary& summary);
TaskReport FromProto(const v1::TaskStatus& task);
Registration FromProto(const v1::RegisterWorkerRequest& request);
TrainerExitReport FromProto(const v1::TrainerExit& exit);
MetricReport FromProto(const v1::MetricReport& report);

v1::Assignment ToProto(const AssignmentCommand& command);
v1::Cancellation ToProto(const CancellationCommand& command);

v1::LogStream ToProto(LogStream stream);
// UNSPECIFIED is stderr; unknown values: INVALID_ARGUMENT naming `field`.
absl::StatusOr<LogStream> FromProto(v1::LogStream stream, const std::string& field);
v1::LogRequest ToProto(const LogRequestCommand& request);
LogChunkReport FromProto(const v1::LogChunk& chunk);

}  // namespace deepnet::coordinator
