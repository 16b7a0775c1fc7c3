#include "coordinator/grpc/worker_session.h"

#include <google/protobuf/util/time_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "coordinator/grpc/proto_convert.h"
#include "rpc/rpc_util.h"

namespace deepnet::coordinator {

using google::protobuf::util::TimeUtil;

WorkerSession::WorkerSession(Coordinator& coordinator, absl::Status admitted,
                             std::function<absl::Status()> still_valid, IdentityCheck may_act_as)
    : coordinator_(coordinator),
      outbox_(std::make_shared<Outbox>(this)),
      token_(std::move(still_valid)),
      may_act_as_(std::move(may_act_as)) {
  if (!admitted.ok()) {
    outbox_->Close(admitted);
    return;
  }
  StartRead(&incoming_);
}

void WorkerSession::OnReadDone(bool ok) {
  if (!ok) {
    // The worker closed its side or the connection broke: end our side too.
    outbox_->Close(absl::OkStatus());
    return;
  }
  // A worker token revoked (SIGHUP) or expired ends the session: the worker cannot register
  // again with it, so its lease runs out and its jobs restart elsewhere.
  if (absl::Status valid = token_.Check(); !valid.ok()) {
    outbox_->Close(valid);
    return;
  }
  // Acknowledged once handled, not before: the worker forgets an exit report on this ack, so a
  // coordinator that died while handling it must not have acknowledged it. What the handling
  // sends (a lease renewal) waits for it and carries the ack.
  outbox_->Hold();
  Handle(incoming_);
  outbox_->Release(incoming_.sequence());
  if (!outbox_->closing()) StartRead(&incoming_);
}

void WorkerSession::Handle(const v1::WorkerMessage& message) {
  if (!started_) {
    if (!message.has_start()) {
      outbox_->Close(absl::FailedPreconditionError(
          "the first message of a session must be a SessionStart"));
      return;
    }
    absl::Status attached =
        may_act_as_ ? may_act_as_(message.worker_id()) : absl::OkStatus();
    if (attached.ok()) {
      attached = coordinator_.AttachSession(message.worker_id(), message.epoch(),
                                            message.start().session_secret(), outbox_);
    }
    if (!attached.ok()) {
      outbox_->Close(attached);
      return;
    }
    started_ = true;
    worker_id_ = message.worker_id();
    epoch_ = message.epoch();
    return;
  }
  if (message.worker_id() != worker_id_ || message.epoch() != epoch_) {
    outbox_->Close(absl::InvalidArgumentError(absl::StrCat(
        "message for worker ", message.worker_id(), " epoch ", message.epoch(),
        " on the session of ", worker_id_, " epoch ", epoch_)));
    return;
  }
  absl::Status status;
  switch (message.body_case()) {
    case v1::WorkerMessage::kHeartbeat: {
      std::vector<TaskReport> tasks;
      for (const v1::TaskStatus& t : message.heartbeat().tasks()) tasks.push_back(FromProto(t));
      status = coordinator_.OnHeartbeat(worker_id_, epoch_, tasks);
      break;
    }
    case v1::WorkerMessage::kTrainerExit:
      status = coordinator_.OnTrainerExit(worker_id_, epoch_, FromProto(message.trainer_exit()));
      break;
    case v1::WorkerMessage::kMetrics:
      status = coordinator_.OnMetrics(worker_id_, epoch_, FromProto(message.metrics()));
      break;
    case v1::WorkerMessage::kCommandResult: {
      const v1::CommandResult& result = message.command_result();
      if (result.accepted()) break;
      std::optional<std::pair<std::string, int>> assignment =
          outbox_->AssignmentOf(result.command_sequence());
      if (assignment.has_value()) {
        status = coordinator_.OnAssignmentRefused(worker_id_, epoch_, assignment->first,
                                                  assignment->second, result.error(),
                                                  result.retry());
      } else {
        spdlog::warn("worker {} refused command {}: {}", worker_id_, result.command_sequence(),
                     result.error());
      }
      break;
    }
    case v1::WorkerMessage::kDraining: {
      const v1::WorkerDraining& d = message.draining();
      const int64_t grace_ms =
          google::protobuf::util::TimeUtil::DurationToMilliseconds(d.grace_period());
      status = coordinator_.OnDraining(worker_id_, epoch_, d.reason(),
                                       std::chrono::milliseconds(std::max<int64_t>(0, grace_ms)));
      break;
    }
    case v1::WorkerMessage::kLogChunk:
      status = coordinator_.OnLogChunk(worker_id_, epoch_, FromProto(message.log_chunk()));
      break;
    case v1::WorkerMessage::kStart:
      status = absl::FailedPreconditionError("SessionStart sent twice");
      break;
    default:
      status = absl::InvalidArgumentError("empty worker message");
      break;
  }
  if (!status.ok()) outbox_->Close(status);
}

void WorkerSession::OnWriteDone(bool ok) { outbox_->WriteDone(ok); }

void WorkerSession::OnCancel() { outbox_->Close(absl::CancelledError("session cancelled")); }

void WorkerSession::OnDone() {
  outbox_->Detach();
  if (started_) coordinator_.DetachSession(worker_id_, epoch_, outbox_.get());
  delete this;
}

void WorkerSession::Outbox::SendAssignment(int64_t epoch, const AssignmentCommand& command) {
  v1::CoordinatorMessage message;
  message.set_epoch(epoch);
  *message.mutable_assignment() = ToProto(command);
  Push(std::move(message), command.job_id, command.attempt);
}

void WorkerSession::Outbox::SendCancellation(int64_t epoch, const CancellationCommand& command) {
  v1::CoordinatorMessage message;
  message.set_epoch(epoch);
  *message.mutable_cancellation() = ToProto(command);
  Push(std::move(message), "", 0);
}

void WorkerSession::Outbox::SendLease(int64_t epoch, int64_t valid_for_ms, int64_t expire_time_ms) {
  v1::CoordinatorMessage message;
  message.set_epoch(epoch);
  *message.mutable_lease()->mutable_valid_for() = TimeUtil::MillisecondsToDuration(valid_for_ms);
  *message.mutable_lease()->mutable_expire_time() =
      TimeUtil::MillisecondsToTimestamp(expire_time_ms);
  Push(std::move(message), "", 0);
}

bool WorkerSession::Outbox::SendLogRequest(int64_t epoch, const LogRequestCommand& command) {
  v1::CoordinatorMessage message;
  message.set_epoch(epoch);
  *message.mutable_log_request() = ToProto(command);
  Push(std::move(message), "", 0);
  return true;
}

void WorkerSession::Outbox::Push(v1::CoordinatorMessage message, const std::string& assignment_job,
                                 int attempt) {
  const v1::CoordinatorMessage* to_write = nullptr;
  WorkerSession* session = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (session_ == nullptr || finish_requested_) return;
    message.set_sequence(next_sequence_++);
    if (!assignment_job.empty()) {
      assignments_[message.sequence()] = {assignment_job, attempt};
      // Keep the map bounded: results arrive promptly or never.
      while (assignments_.size() > 1024) assignments_.erase(assignments_.begin());
    }
    queue_.push_back(std::move(message));
    to_write = NextWriteLocked();
    session = session_;
  }
  if (to_write != nullptr) session->StartWrite(to_write);
}

v1::CoordinatorMessage* WorkerSession::Outbox::NextWriteLocked() {
  if (writing_ || held_ || queue_.empty() || finish_requested_) return nullptr;
  writing_ = true;
  // Stamped as it goes out, not when queued: it acknowledges everything handled by then.
  queue_.front().set_ack_sequence(ack_);
  return &queue_.front();
}

void WorkerSession::Outbox::Hold() {
  absl::MutexLock lock(&mu_);
  held_ = true;
}

void WorkerSession::Outbox::Release(int64_t ack) {
  const v1::CoordinatorMessage* to_write = nullptr;
  WorkerSession* session = nullptr;
  {
    absl::MutexLock lock(&mu_);
    held_ = false;
    ack_ = std::max(ack_, ack);
    if (session_ == nullptr) return;
    to_write = NextWriteLocked();
    session = session_;
  }
  if (to_write != nullptr) session->StartWrite(to_write);
}

void WorkerSession::Outbox::WriteDone(bool ok) {
  const v1::CoordinatorMessage* to_write = nullptr;
  WorkerSession* session = nullptr;
  bool finish = false;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    queue_.pop_front();
    writing_ = false;
    if (!ok) {
      queue_.clear();
      finish_requested_ = true;
      finish_status_ = absl::UnavailableError("writing to the worker failed");
    }
    session = session_;
    to_write = NextWriteLocked();
    if (to_write == nullptr) {
      if (finish_requested_ && !finished_) {
        finished_ = true;
        finish = true;
        status = finish_status_;
      }
    }
  }
  if (session == nullptr) return;
  if (to_write != nullptr) {
    session->StartWrite(to_write);
  } else if (finish) {
    session->Finish(rpc::ToGrpc(status));
  }
}

void WorkerSession::Outbox::Close(const absl::Status& status) {
  WorkerSession* session = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (finish_requested_ || finished_ || session_ == nullptr) return;
    finish_requested_ = true;
    finish_status_ = status;
    if (writing_) return;  // WriteDone finishes once the write in flight completes
    finished_ = true;
    session = session_;
  }
  session->Finish(rpc::ToGrpc(status));
}

bool WorkerSession::Outbox::closing() {
  absl::MutexLock lock(&mu_);
  return finish_requested_ || finished_;
}

std::optional<std::pair<std::string, int>> WorkerSession::Outbox::AssignmentOf(int64_t sequence) {
  absl::MutexLock lock(&mu_);
  auto it = assignments_.find(sequence);
  if (it == assignments_.end()) return std::nullopt;
  return it->second;
}

void WorkerSession::Outbox::Detach() {
  absl::MutexLock lock(&mu_);
  session_ = nullptr;
  finished_ = true;
}

}  // namespace deepnet::coordinator
