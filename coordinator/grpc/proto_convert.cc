#include "coordinator/grpc/proto_convert.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace deepnet::coordinator {
namespace {

using google::protobuf::util::TimeUtil;

void SetTime(int64_t ms, google::protobuf::Timestamp* out) {
  *out = TimeUtil::MillisecondsToTimestamp(ms);
}

int64_t Ms(const google::protobuf::Timestamp& t) { return TimeUtil::TimestampToMilliseconds(t); }

// A Duration of `ms` milliseconds, clamped to the range protobuf accepts (+-10,000 years), whose
// TimeUtil aborts beyond it. The spec's bounds keep every value far inside; this keeps a future
// field or a bug from turning into a crash.
google::protobuf::Duration SafeDuration(double ms) {
  constexpr double kMaxMs = 315576000000.0 * 1000;
  if (!(ms > -kMaxMs)) ms = ms != ms ? 0 : -kMaxMs;  // NaN becomes 0.
  if (ms > kMaxMs) ms = kMaxMs;
  return TimeUtil::MillisecondsToDuration(static_cast<int64_t>(ms));
}

TaskPhase FromProto(v1::TaskState state) {
  switch (state) {
    case v1::TASK_STATE_RUNNING: return TaskPhase::kRunning;
    case v1::TASK_STATE_STOPPING: return TaskPhase::kStopping;
    case v1::TASK_STATE_EXITED: return TaskPhase::kExited;
    default: return TaskPhase::kStarting;
  }
}

v1::JobEventType ToProto(EventType type) {
  switch (type) {
    case EventType::kStateChanged: return v1::JOB_EVENT_TYPE_STATE_CHANGED;
    case EventType::kPlaced: return v1::JOB_EVENT_TYPE_PLACED;
    case EventType::kRankExited: return v1::JOB_EVENT_TYPE_RANK_EXITED;
    case EventType::kWorkerLost: return v1::JOB_EVENT_TYPE_WORKER_LOST;
    case EventType::kCheckpointSaved: return v1::JOB_EVENT_TYPE_CHECKPOINT_SAVED;
    case EventType::kHangDetected: return v1::JOB_EVENT_TYPE_HANG_DETECTED;
    case EventType::kCancelRequested: return v1::JOB_EVENT_TYPE_CANCEL_REQUESTED;
    case EventType::kGuardRollback: return v1::JOB_EVENT_TYPE_GUARD_ROLLBACK;
    case EventType::kGuardFailed: return v1::JOB_EVENT_TYPE_GUARD_FAILED;
    case EventType::kPlateau: return v1::JOB_EVENT_TYPE_PLATEAU;
    case EventType::kFailRequested: return v1::JOB_EVENT_TYPE_FAIL_REQUESTED;
    case EventType::kOther: break;
  }
  return v1::JOB_EVENT_TYPE_UNSPECIFIED;
}

}  // namespace

v1::JobState ToProto(JobState state) {
  switch (state) {
    case JobState::kQueued: return v1::JOB_STATE_QUEUED;
    case JobState::kPlacing: return v1::JOB_STATE_PLACING;
    case JobState::kStarting: return v1::JOB_STATE_STARTING;
    case JobState::kRunning: return v1::JOB_STATE_RUNNING;
    case JobState::kRecovering: return v1::JOB_STATE_RECOVERING;
    case JobState::kSucceeded: return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed: return v1::JOB_STATE_FAILED;
    case JobState::kCancelled: return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

absl::StatusOr<JobState> FromProto(v1::JobState state, const std::string& field) {
  for (JobState s : AllJobStates()) {
    if (ToProto(s) == state) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", static_cast<int>(state), " is not a job state"));
}

v1::RecoveryCause ToProto(RecoveryCause cause) {
  switch (cause) {
    case RecoveryCause::kWorkerExit: return v1::RECOVERY_CAUSE_RANK_EXIT;
    case RecoveryCause::kWorkerLost: return v1::RECOVERY_CAUSE_WORKER_LOST;
    case RecoveryCause::kHang: return v1::RECOVERY_CAUSE_HANG;
    case RecoveryCause::kStartTimeout: return v1::RECOVERY_CAUSE_START_TIMEOUT;
    case RecoveryCause::kWorkerDrained:
      return v1::RECOVERY_CAUSE_WORKER_DRAINED;
    case RecoveryCause::kPlacementRefused:
      return v1::RECOVERY_CAUSE_PLACEMENT_REFUSED;
  }
  return v1::RECOVERY_CAUSE_UNSPECIFIED;
}

v1::PendingCode ToProto(PendingCode code) {
  switch (code) {
    case PendingCode::kSchedulable: return v1::PENDING_CODE_SCHEDULABLE;
    case PendingCode::kInsufficientSlots: return v1::PENDING_CODE_INSUFFICIENT_SLOTS;
    case PendingCode::kBehindJob: return v1::PENDING_CODE_BEHIND_JOB;
    case PendingCode::kExceedsRegistered: return v1::PENDING_CODE_EXCEEDS_REGISTERED;
    case PendingCode::kExceedsSlotMemory: return v1::PENDING_CODE_EXCEEDS_SLOT_MEMORY;
    case PendingCode::kUserRankLimit: return v1::PENDING_CODE_USER_RANK_LIMIT;
    case PendingCode::kTeamRankLimit: return v1::PENDING_CODE_TEAM_RANK_LIMIT;
  }
  return v1::PENDING_CODE_UNSPECIFIED;
}

v1::WorkerState ToProto(WorkerState state) {
  switch (state) {
    case WorkerState::kReady: return v1::WORKER_STATE_READY;
    case WorkerState::kDraining: return v1::WORKER_STATE_DRAINING;
    case WorkerState::kLost: return v1::WORKER_STATE_LOST;
  }
  return v1::WORKER_STATE_UNSPECIFIED;
}

void FillSpec(const JobSpecInfo& spec, v1::JobSpec* out) {
  out->set_name(spec.name);
  out->set_pipeline_stages(spec.pipeline_stages);
  out->set_data_parallel(spec.data_parallel);
  out->set_device(spec.cuda ? v1::DEVICE_KIND_CUDA : v1::DEVICE_KIND_CPU);
  out->set_priority(spec.priority);
  out->set_max_restarts(spec.max_restarts);
  if (spec.hang_timeout_s > 0) {
    *out->mutable_hang_timeout() = SafeDuration(spec.hang_timeout_s * 1000);
  }
  out->set_max_steps(spec.max_steps);
  out->set_checkpoint_dir(spec.checkpoint_dir);
  for (const auto& [k, v] : spec.labels) (*out->mutable_labels())[k] = v;
}

v1::Job ToProto(const JobView& job) {
  v1::Job out;
  const JobRecord& r = job.record;
  out.set_job_id(r.id);
  out.set_job_uid(JobUid(r));
  out.set_owner(r.owner);
  out.mutable_spec()->set_config_yaml(r.spec_yaml);
  FillSpec(job.spec, out.mutable_spec());
  out.set_state(ToProto(r.state));
  if (r.last_recovery_cause.has_value()) out.set_recovery_cause(ToProto(*r.last_recovery_cause));
  if (r.state == JobState::kQueued || r.state == JobState::kPlacing) {
    out.set_pending_reason(r.state_reason);
  }
  if (r.state == JobState::kQueued && job.pending_code.has_value()) {
    out.set_pending_code(ToProto(*job.pending_code));
  }
  out.set_message(r.state_reason);
  out.set_memory_per_rank_bytes(job.spec.memory_per_rank_bytes);
  out.set_memory_biggest_part(job.spec.memory_biggest_part);
  out.set_attempt(r.attempt);
  out.set_restarts(r.restarts);
  out.set_step(r.last_step);
  out.set_latest_checkpoint_step(job.latest_checkpoint_step);
  for (const RankView& p : job.placement) {
    v1::RankPlacement* rp = out.add_placement();
    rp->set_rank(p.rank);
    rp->set_stage(p.stage);
    rp->set_replica(p.replica);
    rp->set_worker_id(p.worker_id);
    rp->set_slot_index(p.slot);
  }
  out.set_idempotency_key(r.idempotency_key);
  SetTime(r.created_ms, out.mutable_create_time());
  if (job.start_time_ms > 0) SetTime(job.start_time_ms, out.mutable_start_time());
  if (job.end_time_ms > 0) SetTime(job.end_time_ms, out.mutable_end_time());
  SetTime(r.updated_ms, out.mutable_update_time());
  return out;
}

v1::Worker ToProto(const WorkerView& w) {
  v1::Worker out;
  out.set_name(w.id);
  out.set_worker_id(w.id);
  out.set_state(ToProto(w.state));
  out.set_slots_total(static_cast<int32_t>(w.slots.size()));
  out.set_slots_used(w.slots_used);
  out.set_slots_free(w.slots_free);
  for (const SlotView& s : w.slots) {
    v1::SlotStatus* slot = out.add_slots();
    slot->set_index(s.facts.index);
    slot->set_kind(s.facts.cuda ? v1::DEVICE_KIND_CUDA : v1::DEVICE_KIND_CPU);
    slot->set_device_index(s.facts.device_index);
    if (s.facts.cuda && s.facts.device_index >= 0 &&
        s.facts.device_index < static_cast<int>(w.host.gpu_names.size())) {
      slot->set_device_name(w.host.gpu_names[static_cast<size_t>(s.facts.device_index)]);
    }
    slot->set_used(s.used);
    if (s.task.has_value()) {
      v1::SlotTask* task = slot->mutable_task();
      task->set_job_id(s.task->job_id);
      task->set_attempt(s.task->attempt);
      task->set_rank(s.task->rank);
    }
  }
  // Built by hand: the age is bounded by the coordinator's uptime, never out of Duration's range.
  out.mutable_last_heartbeat_age()->set_seconds(w.heartbeat_age_ms / 1000);
  out.mutable_last_heartbeat_age()->set_nanos(static_cast<int32_t>(w.heartbeat_age_ms % 1000) *
                                              1000000);
  out.set_hostname(w.host.hostname);
  out.set_address(w.host.address);
  out.set_cpu_count(w.host.cpu_count);
  out.set_memory_bytes(w.host.memory_bytes);
  for (const std::string& name : w.host.gpu_names) out.add_gpu_names(name);
  out.set_version(w.host.version);
  return out;
}

v1::JobEvent ToProto(const JobEventView& e) {
  v1::JobEvent out;
  out.set_job_id(e.job_id);
  out.set_sequence(e.sequence);
  SetTime(e.time_ms, out.mutable_time());
  out.set_type(ToProto(e.type));
  out.set_attempt(e.attempt);
  if (e.type == EventType::kStateChanged) {
    if (e.from_state.has_value()) out.set_from_state(ToProto(*e.from_state));
    out.set_to_state(ToProto(e.to_state));
    if (e.cause.has_value()) out.set_recovery_cause(ToProto(*e.cause));
  }
  out.set_rank(e.rank);
  out.set_exit_code(e.exit_code);
  out.set_signal(e.signal);
  out.set_worker_id(e.worker_id);
  out.set_checkpoint_step(e.checkpoint_step);
  out.set_message(e.message);
  out.set_guard_trigger(e.guard_trigger);
  out.set_guard_to_step(e.guard_to_step);
  out.set_guard_retries(e.guard_retries);
  return out;
}

v1::LayerSummary ToProto(const LayerSummaryValues& s) {
  v1::LayerSummary out;
  out.set_min(s.min);
  out.set_max(s.max);
  out.set_mean(s.mean);
  out.set_p50(s.p50);
  out.set_p90(s.p90);
  return out;
}

LayerSummaryValues FromProto(const v1::LayerSummary& s) {
  return {s.min(), s.max(), s.mean(), s.p50(), s.p90()};
}

v1::MetricPoint ToProto(const MetricPoint& p) {
  v1::MetricPoint out;
  out.set_step(p.step);
  out.set_loss(p.loss);
  out.set_nll(p.nll);
  out.set_lr(p.lr);
  out.set_grad_norm(p.grad_norm);
  out.set_tokens_per_s(p.tokens_per_s);
  out.set_update_norm(p.update_norm);
  if (p.time_ms > 0) SetTime(p.time_ms, out.mutable_time());
  out.set_attempt(p.attempt);
  out.set_memory_bytes(p.memory_bytes);
  out.set_gpu_allocated_bytes(p.gpu_allocated_bytes);
  out.set_gpu_reserved_bytes(p.gpu_reserved_bytes);
  out.set_gpu_peak_allocated_bytes(p.gpu_peak_allocated_bytes);
  out.set_probe_step(p.probe_step);
  out.set_probe_update_norm(p.probe_update_norm);
  out.set_f0_norm(p.f0_norm);
  out.set_update_norm_relative(p.update_norm_relative);
  out.set_logits_update_norm(p.logits_update_norm);
  out.set_logits_f0_norm(p.logits_f0_norm);
  out.set_logits_update_norm_relative(p.logits_update_norm_relative);
  out.set_diagnostics_step(p.diagnostics_step);
  if (p.diagnostics_step > 0) {
    *out.mutable_ln_input_norm() = ToProto(p.ln_input_norm);
    *out.mutable_layer_grad_norm() = ToProto(p.layer_grad_norm);
  }
  out.set_guard_event(p.guard_event);
  out.set_guard_trigger(p.guard_trigger);
  out.set_guard_to_step(p.guard_to_step);
  out.set_guard_retries(p.guard_retries);
  out.set_guard_message(p.guard_message);
  return out;
}

v1::Checkpoint ToProto(const CheckpointView& c) {
  v1::Checkpoint out;
  out.set_step(c.step);
  out.set_path(c.path);
  SetTime(c.time_ms, out.mutable_time());
  out.set_size_bytes(c.size_bytes);
  out.set_latest(c.latest);
  out.set_attempt(c.attempt);
  return out;
}

MetricPoint FromProto(const v1::MetricPoint& p) {
  MetricPoint out;
  out.step = p.step();
  out.loss = p.loss();
  out.nll = p.nll();
  out.lr = p.lr();
  out.grad_norm = p.grad_norm();
  out.tokens_per_s = p.tokens_per_s();
  out.update_norm = p.update_norm();
  out.time_ms = p.has_time() ? Ms(p.time()) : 0;
  out.attempt = p.attempt();
  out.memory_bytes = p.memory_bytes();
  out.gpu_allocated_bytes = p.gpu_allocated_bytes();
  out.gpu_reserved_bytes = p.gpu_reserved_bytes();
  out.gpu_peak_allocated_bytes = p.gpu_peak_allocated_bytes();
  out.probe_step = p.probe_step();
  out.probe_update_norm = p.probe_update_norm();
  out.f0_norm = p.f0_norm();
  out.update_norm_relative = p.update_norm_relative();
  out.logits_update_norm = p.logits_update_norm();
  out.logits_f0_norm = p.logits_f0_norm();
  out.logits_update_norm_relative = p.logits_update_norm_relative();
  out.diagnostics_step = p.diagnostics_step();
  out.ln_input_norm = FromProto(p.ln_input_norm());
  out.layer_grad_norm = FromProto(p.layer_grad_norm());
  // Bounded like a trainer's exit message: the worker is trusted, but stores are not unbounded.
  out.guard_event = p.guard_event().substr(0, 16);
  out.guard_trigger = p.guard_trigger().substr(0, 64);
  out.guard_to_step = p.guard_to_step();
  out.guard_retries = p.guard_retries();
  out.guard_message = p.guard_message().substr(0, 4096);
  return out;
}

TaskReport FromProto(const v1::TaskStatus& t) {
  TaskReport out;
  out.job_id = t.job_id();
  out.attempt = t.attempt();
  out.rank = t.rank();
  out.phase = FromProto(t.state());
  out.pid = t.pid();
  out.step = t.step();
  out.slot_index = t.slot_index();
  if (t.has_resumed_step()) out.resumed_step = t.resumed_step();
  return out;
}

Registration FromProto(const v1::RegisterWorkerRequest& request) {
  Registration out;
  out.worker_name = request.worker_name();
  const v1::HostInfo& h = request.host();
  out.host.hostname = h.hostname();
  out.host.address = h.address();
  out.host.cpu_count = h.cpu_count();
  out.host.memory_bytes = h.memory_bytes();
  out.host.gpu_count = h.gpu_count();
  out.host.gpu_names.assign(h.gpu_names().begin(), h.gpu_names().end());
  out.host.version = h.version();
  out.host.torch_version = h.torch_version();
  for (const v1::WorkerSlot& s : request.slots()) {
    out.slots.push_back(
        {s.index(), s.kind() == v1::DEVICE_KIND_CUDA, s.device_index(), s.memory_bytes()});
  }
  for (const v1::TaskStatus& t : request.running_tasks()) out.running_tasks.push_back(FromProto(t));
  out.draining = request.draining();
  return out;
}

TrainerExitReport FromProto(const v1::TrainerExit& e) {
  TrainerExitReport out;
  out.job_id = e.job_id();
  out.attempt = e.attempt();
  out.rank = e.rank();
  out.exit_code = e.exit_code();
  out.signal = e.signal();
  out.message = e.message();
  out.requested = e.requested();
  switch (e.checkpoint()) {
    case v1::STOP_CHECKPOINT_SAVED:
      out.checkpoint = StopCheckpoint::kSaved;
      break;
    case v1::STOP_CHECKPOINT_NOT_NEEDED:
      out.checkpoint = StopCheckpoint::kNotNeeded;
      break;
    case v1::STOP_CHECKPOINT_NOT_SAVED:
      out.checkpoint = StopCheckpoint::kNotSaved;
      break;
    default:
      out.checkpoint = StopCheckpoint::kUnspecified;
      break;
  }
  out.checkpoint_step = std::max<int64_t>(0, e.checkpoint_step());
  return out;
}

MetricReport FromProto(const v1::MetricReport& r) {
  MetricReport out;
  out.job_id = r.job_id();
  out.attempt = r.attempt();
  out.rank = r.rank();
  for (const v1::MetricPoint& p : r.points()) out.points.push_back(FromProto(p));
  out.checkpoint_steps.assign(r.checkpoint_steps().begin(), r.checkpoint_steps().end());
  return out;
}

v1::Assignment ToProto(const AssignmentCommand& c) {
  v1::Assignment out;
  out.set_job_id(c.job_id);
  out.set_attempt(c.attempt);
  for (const RankAssignmentData& r : c.ranks) {
    v1::RankAssignment* ra = out.add_ranks();
    ra->set_rank(r.rank);
    ra->set_slot_index(r.slot_index);
    ra->set_rendezvous_credential(r.rendezvous_credential);
  }
  out.set_world_size(c.world_size);
  out.set_config_yaml(c.config_yaml);
  out.set_rendezvous_address(c.rendezvous_address);
  out.set_owner(c.owner);
  out.set_job_uid(c.job_uid);
  for (const std::string& team : c.owner_teams) out.add_owner_teams(team);
  if (c.uid >= 0) out.set_uid(c.uid);
  if (c.gid >= 0) out.set_gid(c.gid);
  return out;
}

v1::Cancellation ToProto(const CancellationCommand& c) {
  v1::Cancellation out;
  out.set_job_id(c.job_id);
  out.set_attempt(c.attempt);
  out.set_reason(c.reason);
  *out.mutable_grace_period() = SafeDuration(static_cast<double>(c.grace_ms));
  return out;
}

v1::LogStream ToProto(LogStream stream) {
  return stream == LogStream::kStdout ? v1::LOG_STREAM_STDOUT : v1::LOG_STREAM_STDERR;
}

absl::StatusOr<LogStream> FromProto(v1::LogStream stream, const std::string& field) {
  switch (stream) {
    case v1::LOG_STREAM_UNSPECIFIED:
    case v1::LOG_STREAM_STDERR:
      return LogStream::kStderr;
    case v1::LOG_STREAM_STDOUT:
      return LogStream::kStdout;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": unknown log stream ", static_cast<int>(stream)));
  }
}

v1::LogRequest ToProto(const LogRequestCommand& r) {
  v1::LogRequest out;
  out.set_request_id(r.request_id);
  out.set_job_id(r.job_id);
  out.set_attempt(r.attempt);
  out.set_rank(r.rank);
  out.set_stream(ToProto(r.stream));
  out.set_offset(r.offset);
  out.set_tail_bytes(r.tail_bytes);
  out.set_max_bytes(r.max_bytes);
  return out;
}

LogChunkReport FromProto(const v1::LogChunk& chunk) {
  LogChunkReport out;
  out.request_id = chunk.request_id();
  out.data = chunk.data();
  out.offset = chunk.offset();
  out.size = chunk.size();
  out.running = chunk.running();
  if (chunk.error_code() != 0) {
    // Codes outside google.rpc.Code's range become UNKNOWN.
    const int code = chunk.error_code();
    out.error = absl::Status(
        code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
        chunk.error().empty() ? "the worker refused the log request" : chunk.error());
  }
  return out;
}

}  // namespace deepnet::coordinator
