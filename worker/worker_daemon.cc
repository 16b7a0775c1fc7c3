#include "worker/worker_daemon.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "deepnet/v1/worker_service.grpc.pb.h"
#include "rpc/rpc_util.h"
#include "worker/log_request_answer.h"

namespace deepnet::worker {

namespace v1 = deepnet::v1;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;

namespace {

// Unsent trainer exits and metric reports kept while the coordinator is away; older reports
// are dropped first when this fills up (exits are never dropped).
constexpr size_t kMaxOutbox = 4096;
constexpr milliseconds kInitialBackoff{100};

void SetTime(SystemClock::time_point time, google::protobuf::Timestamp* out) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

milliseconds ToMillis(const google::protobuf::Duration& d) {
  return milliseconds(d.seconds() * 1000 + d.nanos() / 1000000);
}

v1::TaskStatus ToProto(const TaskSnapshot& task) {
  v1::TaskStatus out;
  out.set_job_id(task.job_id);
  out.set_attempt(task.attempt);
  out.set_rank(task.rank);
  out.set_state(task.phase == TaskPhase::kStopping ? v1::TASK_STATE_STOPPING
                                                   : v1::TASK_STATE_RUNNING);
  out.set_pid(task.pid);
  out.set_step(task.step);
  out.set_slot_index(task.slot_index);
  if (task.start_step) out.set_resumed_step(*task.start_step);
  return out;
}

AssignmentSpec FromProto(const v1::Assignment& a) {
  AssignmentSpec spec;
  spec.job_id = a.job_id();
  spec.job_uid = a.job_uid();
  spec.attempt = a.attempt();
  for (const v1::RankAssignment& r : a.ranks()) {
    spec.ranks.push_back({r.rank(), r.slot_index(), r.rendezvous_credential()});
  }
  spec.world_size = a.world_size();
  spec.config_yaml = a.config_yaml();
  spec.rendezvous_address = a.rendezvous_address();
  for (const auto& [name, value] : a.env()) spec.env[name] = value;
  spec.owner = a.owner();
  spec.owner_teams.assign(a.owner_teams().begin(), a.owner_teams().end());
  spec.uid = a.has_uid() ? a.uid() : -1;
  spec.gid = a.has_gid() ? a.gid() : -1;
  return spec;
}

void SetSummary(const job::LayerSummary& s, v1::LayerSummary* out) {
  out->set_min(s.min);
  out->set_max(s.max);
  out->set_mean(s.mean);
  out->set_p50(s.p50);
  out->set_p90(s.p90);
}

// MetricPoint fields 14-23 from the probe and diagnostics lines merged into the step. The proto
// flattens them into the point, hence its prefixed names: the probe line's update_norm is
// probe_update_norm, the diagnostics summary's grad_norm is layer_grad_norm.
void SetProbeAndDiagnostics(const TrainerStep& step, v1::MetricPoint* point) {
  if (const auto& p = step.probe) {
    point->set_probe_step(p->step);
    point->set_probe_update_norm(p->update_norm);
    point->set_f0_norm(p->f0_norm);
    point->set_update_norm_relative(p->update_norm_relative.value_or(0.0));
    point->set_logits_update_norm(p->logits_update_norm.value_or(0.0));
    point->set_logits_f0_norm(p->logits_f0_norm.value_or(0.0));
    point->set_logits_update_norm_relative(p->logits_update_norm_relative.value_or(0.0));
  }
  if (const auto& d = step.diagnostics) {
    point->set_diagnostics_step(d->step);
    SetSummary(d->ln_input_norm, point->mutable_ln_input_norm());
    SetSummary(d->grad_norm, point->mutable_layer_grad_norm());
  }
}

v1::WorkerMessage ToProto(const MetricReport& metrics) {
  v1::WorkerMessage message;
  v1::MetricReport* report = message.mutable_metrics();
  report->set_job_id(metrics.job_id);
  report->set_attempt(metrics.attempt);
  report->set_rank(metrics.rank);
  for (const MetricPoint& p : metrics.points) {
    v1::MetricPoint* point = report->add_points();
    point->set_step(p.values.step);
    point->set_loss(p.values.loss);
    point->set_nll(p.values.nll);
    point->set_lr(p.values.lr);
    point->set_grad_norm(p.values.grad_norm);
    point->set_tokens_per_s(p.values.tokens_per_s);
    point->set_update_norm(p.values.update_norm.value_or(0.0));
    SetTime(p.time, point->mutable_time());
    point->set_attempt(metrics.attempt);
    point->set_memory_bytes(p.memory_bytes);
    point->set_gpu_allocated_bytes(p.values.gpu_allocated_bytes);
    point->set_gpu_reserved_bytes(p.values.gpu_reserved_bytes);
    point->set_gpu_peak_allocated_bytes(p.values.gpu_peak_allocated_bytes);
    SetProbeAndDiagnostics(p.values, point);
    if (p.guard) {
      point->set_guard_event(p.guard->kind);
      point->set_guard_trigger(p.guard->trigger);
      point->set_guard_to_step(p.guard->to_step);
      point->set_guard_retries(p.guard->retries);
      point->set_guard_message(p.guard->message);
    }
  }
  for (int64_t step : metrics.checkpoint_steps) report->add_checkpoint_steps(step);
  return message;
}

v1::WorkerMessage ToProto(const TaskExit& exit) {
  v1::WorkerMessage message;
  v1::TrainerExit* out = message.mutable_trainer_exit();
  out->set_job_id(exit.job_id);
  out->set_attempt(exit.attempt);
  out->set_rank(exit.rank);
  out->set_exit_code(exit.exit_code);
  out->set_signal(exit.signal);
  SetTime(exit.time, out->mutable_time());
  out->set_message(exit.message);
  out->set_requested(exit.requested);
  switch (exit.checkpoint) {
    case StopCheckpoint::kUnspecified:
      break;
    case StopCheckpoint::kSaved:
      out->set_checkpoint(v1::STOP_CHECKPOINT_SAVED);
      break;
    case StopCheckpoint::kNotNeeded:
      out->set_checkpoint(v1::STOP_CHECKPOINT_NOT_NEEDED);
      break;
    case StopCheckpoint::kNotSaved:
      out->set_checkpoint(v1::STOP_CHECKPOINT_NOT_SAVED);
      break;
  }
  out->set_checkpoint_step(exit.checkpoint_step);
  return message;
}

}  // namespace

struct WorkerDaemon::Rpc {
  std::unique_ptr<v1::WorkerService::Stub> stub;
};

struct WorkerDaemon::Session {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream;
  std::string worker_id;
  int64_t epoch = 0;
  int64_t sequence = 0;
};

struct WorkerDaemon::Outbox {
  std::deque<v1::WorkerMessage> messages;
  // Trainer exits written to a session and not yet acknowledged by it (its epoch and the
  // message's sequence): an exit lost with a session would leave its rank running for ever in
  // the coordinator's books, so it is sent again on the next session (the coordinator takes
  // a repeated exit once).
  struct Sent {
    int64_t epoch = 0;
    int64_t sequence = 0;
    v1::WorkerMessage message;
  };
  std::deque<Sent> unacked;
};

absl::Status Validate(const WorkerDaemonOptions& o) {
  if (o.coordinator.empty()) return absl::InvalidArgumentError("--coordinator: no address given");
  if (o.worker_name.empty()) return absl::InvalidArgumentError("--name: empty worker name");
  if (o.supervisor.trainer.empty()) return absl::InvalidArgumentError("--trainer: no path given");
  if (o.supervisor.work_dir.empty())
    return absl::InvalidArgumentError("--work-dir: no folder given");
  if (o.supervisor.slots.empty()) return absl::InvalidArgumentError("--slots: no slots");
  if (o.rpc_timeout.count() <= 0 || o.max_backoff.count() <= 0 || o.poll_interval.count() <= 0 ||
      o.default_heartbeat_interval.count() <= 0) {
    return absl::InvalidArgumentError(
        "worker daemon: rpc_timeout, max_backoff, poll_interval and default_heartbeat_interval "
        "must be > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WorkerDaemon>> WorkerDaemon::Create(
    const WorkerDaemonOptions& options) {
  if (absl::Status status = Validate(options); !status.ok()) return status;
  rpc::ChannelOptions channel_options;
  channel_options.address = options.coordinator;
  channel_options.ca_cert_file = options.ca_cert_file;
  channel_options.tls_server_name = options.tls_server_name;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = rpc::MakeChannel(channel_options);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<WorkerDaemon>(new WorkerDaemon(options, *std::move(channel)));
}

WorkerDaemon::WorkerDaemon(const WorkerDaemonOptions& options,
                           std::shared_ptr<grpc::Channel> channel)
    : options_(options),
      channel_(std::move(channel)),
      rpc_(new Rpc{v1::WorkerService::NewStub(channel_)}),
      supervisor_(options.supervisor),
      outbox_(new Outbox) {}

WorkerDaemon::~WorkerDaemon() { Shutdown(milliseconds(0)); }

void WorkerDaemon::Start() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (started_ || shut_down_) return;
  started_ = true;
  session_thread_ = std::thread([this] { SessionLoop(); });
  supervision_thread_ = std::thread([this] { SupervisionLoop(); });
}

WorkerStopSummary WorkerDaemon::Shutdown(milliseconds grace, const std::string& reason) {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return WorkerStopSummary{};
  shut_down_ = true;
  stopping_.store(true);
  if (started_) {
    // First, so that the coordinator places nothing here from now on (the exits follow on the
    // same stream). Not connected: a registration already under way says draining; no new one
    // starts (the session loop ends), and the coordinator finds the worker LOST later.
    v1::WorkerMessage draining;
    draining.mutable_draining()->set_reason(reason);
    google::protobuf::Duration* period = draining.mutable_draining()->mutable_grace_period();
    period->set_seconds(grace.count() / 1000);
    period->set_nanos(static_cast<int32_t>(grace.count() % 1000 * 1000000));
    if (Send(draining)) spdlog::info("told the coordinator this worker is draining ({})", reason);
  }
  supervisor_.StopAll(grace);
  if (started_) {
    // The supervision thread reaps the trainers and sends their exits while connected.
    const auto deadline = SteadyClock::now() + grace + std::chrono::seconds(5);
    while (SteadyClock::now() < deadline) {
      bool outbox_empty = false;
      {
        std::lock_guard<std::mutex> outbox_lock(outbox_mu_);
        outbox_empty = outbox_->messages.empty();
      }
      if (supervisor_.size() == 0 && (outbox_empty || !state().connected)) break;
      std::this_thread::sleep_for(options_.poll_interval);
    }
    supervision_stop_.store(true);
    supervision_thread_.join();
    CancelSession("worker shutting down");
    wake_.notify_all();
    session_thread_.join();
  }
  WorkerStopSummary summary;
  summary.trainers = stopped_trainers_.load();
  summary.unsaved = stopped_unsaved_.load();
  summary.left = static_cast<int>(supervisor_.size());
  spdlog::info(
      "stopped ({} trainer(s) ended, {} without their state in a checkpoint; {} left to "
      "kill)",
      summary.trainers, summary.unsaved, summary.left);
  return summary;
}

WorkerDaemonState WorkerDaemon::state() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return state_;
}

std::vector<TaskSnapshot> WorkerDaemon::Tasks() const { return supervisor_.Tasks(); }

void WorkerDaemon::WaitFor(milliseconds delay) {
  std::unique_lock<std::mutex> lock(wait_mu_);
  wake_.wait_for(lock, delay, [this] { return stopping_.load(); });
}

void WorkerDaemon::CancelSession(const char* why) {
  std::lock_guard<std::mutex> lock(cancel_mu_);
  if (active_context_ == nullptr) return;
  spdlog::info("closing the session: {}", why);
  active_context_->TryCancel();
}

void WorkerDaemon::SessionLoop() {
  milliseconds backoff = kInitialBackoff;
  while (!stopping_.load()) {
    if (RunSession()) backoff = kInitialBackoff;
    if (stopping_.load()) break;
    WaitFor(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

bool WorkerDaemon::RunSession() {
  v1::RegisterWorkerRequest request;
  request.set_worker_name(options_.worker_name);
  v1::HostInfo* host = request.mutable_host();
  host->set_hostname(options_.host.hostname);
  host->set_address(options_.host.address);
  host->set_cpu_count(options_.host.cpu_count);
  host->set_memory_bytes(options_.host.memory_bytes);
  host->set_gpu_count(static_cast<int32_t>(options_.host.gpu_names.size()));
  for (const std::string& name : options_.host.gpu_names) host->add_gpu_names(name);
  host->set_version(options_.host.version);
  host->set_torch_version(options_.host.torch_version);
  host->set_slot_memory_source(options_.host.slot_memory_source);
  for (const SlotInfo& slot : options_.supervisor.slots) {
    v1::WorkerSlot* out = request.add_slots();
    out->set_index(slot.index);
    out->set_kind(slot.cuda ? v1::DEVICE_KIND_CUDA : v1::DEVICE_KIND_CPU);
    out->set_device_index(slot.device_index);
    out->set_memory_bytes(slot.memory_bytes);
  }
  for (const TaskSnapshot& task : supervisor_.Tasks()) *request.add_running_tasks() = ToProto(task);
  request.set_draining(stopping_.load());

  v1::RegisterWorkerResponse response;
  {
    grpc::ClientContext context;
    rpc::PrepareContext(&context, options_.token, options_.rpc_timeout);
    const grpc::Status status = rpc_->stub->RegisterWorker(&context, request, &response);
    if (!status.ok()) {
      // The first failure of a streak, then about once a minute at the capped backoff.
      if (register_failures_++ % 30 == 0) {
        spdlog::warn("RegisterWorker at {} failed ({} time(s) in a row, retrying): {}",
                     options_.coordinator, register_failures_, rpc::Describe(status));
      }
      return false;
    }
    register_failures_ = 0;
  }
  // Trainers of attempts the coordinator gave up on while this worker was cut off go first,
  // before the session (and with it any new assignment) starts. Their checkpoint commits are
  // refused anyway (storage/checkpoint_fence.h); this stops them wasting the slot.
  for (const v1::Cancellation& c : response.stale_tasks()) {
    const int stopped = supervisor_.Cancel(c.job_id(), c.attempt(), ToMillis(c.grace_period()));
    spdlog::warn("stale task: job {} attempt {} is no longer current ({}): stopping {} rank(s)",
                 c.job_id(), c.attempt(), c.reason(), stopped);
  }
  auto session = std::make_unique<Session>();
  session->context = std::make_unique<grpc::ClientContext>();
  rpc::PrepareContext(session->context.get(), options_.token, milliseconds(0));  // Long-lived.
  session->worker_id = response.worker_id();
  session->epoch = response.epoch();
  session->stream = rpc_->stub->Session(session->context.get());
  auto* stream = session->stream.get();
  {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    active_context_ = session->context.get();
  }
  {
    std::lock_guard<std::mutex> lock(timing_mu_);
    heartbeat_interval_ =
        response.has_heartbeat_interval() && ToMillis(response.heartbeat_interval()).count() > 0
            ? ToMillis(response.heartbeat_interval())
            : options_.default_heartbeat_interval;
    lease_duration_ = ToMillis(response.lease_duration());
    next_heartbeat_ = SteadyClock::now();  // A heartbeat right after the start.
    last_heard_ = SteadyClock::now();
  }
  epoch_.store(response.epoch());
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    session_ = std::move(session);
  }
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    state_.worker_id = response.worker_id();
    state_.epoch = response.epoch();
    state_.connected = true;
    ++state_.registrations;
  }
  spdlog::info("registered as {} (epoch {}) with {} running task(s)", response.worker_id(),
               response.epoch(), request.running_tasks_size());
  if (stopping_.load()) CancelSession("worker shutting down");

  v1::WorkerMessage start;
  start.mutable_start()->set_session_secret(response.session_secret());
  if (Send(start)) {
    RequeueUnacknowledged();
    v1::CoordinatorMessage message;
    while (stream->Read(&message)) {
      {
        std::lock_guard<std::mutex> lock(timing_mu_);
        last_heard_ = SteadyClock::now();
      }
      Acknowledge(message.epoch(), message.ack_sequence());
      HandleCommand(message);
    }
  }
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    state_.connected = false;
  }
  std::unique_ptr<Session> ended;
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    ended = std::move(session_);
  }
  {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    active_context_ = nullptr;
  }
  // Read() failed, so the call is over (or cancelled): Finish() returns its status at once.
  ended->context->TryCancel();
  const grpc::Status status = ended->stream->Finish();
  spdlog::warn("session (epoch {}) ended: {}; trainers keep running", ended->epoch,
               rpc::Describe(status));
  return true;
}

bool WorkerDaemon::Send(v1::WorkerMessage& message) {
  std::lock_guard<std::mutex> lock(session_mu_);
  if (!session_) return false;
  message.set_worker_id(session_->worker_id);
  message.set_epoch(session_->epoch);
  message.set_sequence(++session_->sequence);
  return session_->stream->Write(message);
}

void WorkerDaemon::HandleCommand(const v1::CoordinatorMessage& message) {
  if (message.body_case() == v1::CoordinatorMessage::kLease) return;  // last_heard_ is enough.
  if (message.body_case() == v1::CoordinatorMessage::kLogRequest) {
    AnswerLog(message);
    return;
  }
  const bool assignment = message.body_case() == v1::CoordinatorMessage::kAssignment;
  if (!assignment && message.body_case() != v1::CoordinatorMessage::kCancellation) {
    spdlog::warn("ignoring coordinator message {} with no known body", message.sequence());
    return;
  }
  const std::string& job_id =
      assignment ? message.assignment().job_id() : message.cancellation().job_id();
  const int attempt =
      assignment ? message.assignment().attempt() : message.cancellation().attempt();
  const std::string what = absl::StrCat(assignment ? "assignment" : "cancellation", " of job ",
                                        job_id, " attempt ", attempt);
  v1::WorkerMessage reply;
  v1::CommandResult* result = reply.mutable_command_result();
  result->set_command_sequence(message.sequence());
  const int64_t epoch = epoch_.load();
  if (message.epoch() != epoch) {
    result->set_accepted(false);
    result->set_error(absl::StrCat(what, " refused: it carries epoch ", message.epoch(),
                                   " but this worker's registration is epoch ", epoch,
                                   message.epoch() < epoch ? " (stale command)" : ""));
  } else if (assignment) {
    const absl::Status status = supervisor_.Assign(FromProto(message.assignment()));
    result->set_accepted(status.ok());
    if (!status.ok()) result->set_error(std::string(status.message()));
    // A slot still stopping its previous trainer, a failed fork: passes by itself.
    result->set_retry(absl::IsUnavailable(status) || absl::IsResourceExhausted(status));
  } else {
    const v1::Cancellation& c = message.cancellation();
    const int stopped = supervisor_.Cancel(c.job_id(), c.attempt(), ToMillis(c.grace_period()));
    spdlog::info("{}: stopping {} rank(s) ({}), grace {} ms", what, stopped, c.reason(),
                 ToMillis(c.grace_period()).count());
    result->set_accepted(true);
  }
  if (!result->accepted()) spdlog::warn("{}", result->error());
  Send(reply);
}

void WorkerDaemon::AnswerLog(const v1::CoordinatorMessage& message) {
  const v1::LogRequest& request = message.log_request();
  v1::WorkerMessage reply;
  const int64_t epoch = epoch_.load();
  if (message.epoch() != epoch) {
    v1::LogChunk* chunk = reply.mutable_log_chunk();
    chunk->set_request_id(request.request_id());
    chunk->set_error_code(static_cast<int32_t>(absl::StatusCode::kFailedPrecondition));
    chunk->set_error(absl::StrCat("log request carries epoch ", message.epoch(),
                                  " but this worker's registration is epoch ", epoch));
  } else {
    // Checked before the read: a trainer not running then has written all it ever will.
    bool running = false;
    for (const TaskSnapshot& task : supervisor_.Tasks()) {
      running = running || (task.job_id == request.job_id() && task.attempt == request.attempt() &&
                            task.rank == request.rank());
    }
    *reply.mutable_log_chunk() = AnswerLogRequest(request, options_.supervisor.work_dir, running);
  }
  if (reply.log_chunk().error_code() != 0) {
    spdlog::info("log request {} refused: {}", request.request_id(), reply.log_chunk().error());
  }
  Send(reply);
}

void WorkerDaemon::SupervisionLoop() {
  while (!supervision_stop_.load()) {
    TrainerSupervisor::Events events = supervisor_.Poll();
    if (!events.metrics.empty() || !events.exits.empty()) {
      std::lock_guard<std::mutex> lock(outbox_mu_);
      // Reports first: the coordinator sees a rank's last points before its exit.
      for (const MetricReport& report : events.metrics)
        outbox_->messages.push_back(ToProto(report));
      for (const TaskExit& exit : events.exits) {
        outbox_->messages.push_back(ToProto(exit));
        if (!stopping_.load()) continue;
        stopped_trainers_.fetch_add(1);
        // Under Slurm a trainer may have the step's SIGTERM before this worker's, so its stop
        // is told by the exit code whether or not this worker requested it; one that finished
        // (exit 0, not requested) lost nothing.
        const bool finished = !exit.requested && exit.exit_code == 0 && exit.signal == 0;
        if (!finished &&
            StopCheckpointOf(exit.exit_code, exit.signal) == StopCheckpoint::kNotSaved) {
          stopped_unsaved_.fetch_add(1);
        }
      }
      while (outbox_->messages.size() > kMaxOutbox) {
        auto report = std::find_if(outbox_->messages.begin(), outbox_->messages.end(),
                                   [](const v1::WorkerMessage& m) { return m.has_metrics(); });
        if (report == outbox_->messages.end()) break;
        outbox_->messages.erase(report);
      }
    }
    FlushOutbox();
    SendHeartbeatIfDue();
    Watchdog();
    std::this_thread::sleep_for(options_.poll_interval);
  }
}

void WorkerDaemon::FlushOutbox() {
  std::lock_guard<std::mutex> lock(outbox_mu_);
  while (!outbox_->messages.empty()) {
    v1::WorkerMessage message = outbox_->messages.front();
    if (!Send(message)) return;  // Kept for the next session.
    if (message.has_trainer_exit()) {
      outbox_->unacked.push_back({message.epoch(), message.sequence(), message});
      if (outbox_->unacked.size() > kMaxOutbox) outbox_->unacked.pop_front();
    }
    outbox_->messages.pop_front();
  }
}

void WorkerDaemon::Acknowledge(int64_t epoch, int64_t sequence) {
  std::lock_guard<std::mutex> lock(outbox_mu_);
  auto& unacked = outbox_->unacked;
  unacked.erase(std::remove_if(unacked.begin(), unacked.end(),
                               [&](const Outbox::Sent& sent) {
                                 return sent.epoch == epoch && sent.sequence <= sequence;
                               }),
                unacked.end());
}

void WorkerDaemon::RequeueUnacknowledged() {
  std::lock_guard<std::mutex> lock(outbox_mu_);
  auto& unacked = outbox_->unacked;
  if (unacked.empty()) return;
  spdlog::info("sending {} trainer exit(s) again that the last session did not acknowledge",
               unacked.size());
  for (auto it = unacked.rbegin(); it != unacked.rend(); ++it) {
    outbox_->messages.push_front(std::move(it->message));
  }
  unacked.clear();
}

size_t WorkerDaemon::unacknowledged_exits() const {
  std::lock_guard<std::mutex> lock(outbox_mu_);
  return outbox_->unacked.size();
}

void WorkerDaemon::SendHeartbeatIfDue() {
  const auto now = SteadyClock::now();
  {
    std::lock_guard<std::mutex> lock(timing_mu_);
    if (now < next_heartbeat_) return;
    next_heartbeat_ = now + heartbeat_interval_;
  }
  v1::WorkerMessage message;
  v1::Heartbeat* heartbeat = message.mutable_heartbeat();
  SetTime(SystemClock::now(), heartbeat->mutable_time());
  for (const TaskSnapshot& task : supervisor_.Tasks()) *heartbeat->add_tasks() = ToProto(task);
  Send(message);
}

void WorkerDaemon::Watchdog() {
  if (!state().connected) return;
  {
    std::lock_guard<std::mutex> lock(timing_mu_);
    // LeaseRenewal answers every heartbeat: silence for two leases means the coordinator (or
    // the path to it) is gone even though the stream looks open.
    if (lease_duration_.count() <= 0 || SteadyClock::now() - last_heard_ < 2 * lease_duration_) {
      return;
    }
    last_heard_ = SteadyClock::now();  // Cancel once.
  }
  CancelSession("no message from the coordinator for two lease durations");
}

}  // namespace deepnet::worker
