#include "bench/fake_worker.h"

#include <google/protobuf/util/time_util.h>

#include <iostream>

namespace deepnet::bench {

using google::protobuf::util::TimeUtil;

FakeWorker::FakeWorker(std::string name, int slots) : name_(std::move(name)), slots_(slots) {}

FakeWorker::~FakeWorker() { Close(std::chrono::seconds(5)); }

bool FakeWorker::Register(v1::WorkerService::Stub& stub) {
  v1::RegisterWorkerRequest request;
  request.set_worker_name(name_);
  request.mutable_host()->set_hostname(name_);
  request.mutable_host()->set_address("127.0.0.1");
  request.mutable_host()->set_cpu_count(slots_);
  request.mutable_host()->set_version("bench");
  for (int i = 0; i < slots_; ++i) {
    v1::WorkerSlot* slot = request.add_slots();
    slot->set_index(i);
    slot->set_kind(v1::DEVICE_KIND_CPU);
    slot->set_device_index(-1);
  }
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  const grpc::Status status = stub.RegisterWorker(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "RegisterWorker " << name_ << ": " << status.error_code() << " "
              << status.error_message() << "\n";
    return false;
  }
  worker_id_ = response.worker_id();
  epoch_ = response.epoch();
  session_secret_ = response.session_secret();
  return true;
}

void FakeWorker::OpenSession(v1::WorkerService::Stub& stub, CommandHandler on_command) {
  on_command_ = std::move(on_command);
  stub.async()->Session(&context_, this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = true;
  }
  AddHold();  // Writes come from outside reactions (the bench's driver thread).
  StartRead(&incoming_);
  StartCall();
  v1::WorkerMessage start;
  start.mutable_start()->set_session_secret(session_secret_);
  Enqueue(std::move(start));
}

void FakeWorker::SendHeartbeat(const std::vector<v1::TaskStatus>& tasks) {
  v1::WorkerMessage message;
  v1::Heartbeat* heartbeat = message.mutable_heartbeat();
  *heartbeat->mutable_time() = TimeUtil::GetCurrentTime();
  for (const v1::TaskStatus& t : tasks) *heartbeat->add_tasks() = t;
  Enqueue(std::move(message));
}

void FakeWorker::SendMetrics(const v1::MetricReport& report) {
  v1::WorkerMessage message;
  *message.mutable_metrics() = report;
  Enqueue(std::move(message));
}

void FakeWorker::SendCommandResult(int64_t command_sequence, bool accepted) {
  v1::WorkerMessage message;
  message.mutable_command_result()->set_command_sequence(command_sequence);
  message.mutable_command_result()->set_accepted(accepted);
  Enqueue(std::move(message));
}

void FakeWorker::Enqueue(v1::WorkerMessage message) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closing_ || done_ || ended_early_) return;
  message.set_worker_id(worker_id_);
  message.set_epoch(epoch_);
  message.set_sequence(next_sequence_++);
  if (writing_ && message.has_heartbeat()) ++queued_behind_;
  queue_.push_back(std::move(message));
  if (writing_) return;
  const v1::WorkerMessage* next = NextLocked();
  lock.unlock();
  if (next != nullptr) StartWrite(next);
}

const v1::WorkerMessage* FakeWorker::NextLocked() {
  if (queue_.empty() || closing_) {
    writing_ = false;
    return nullptr;
  }
  writing_ = true;
  const v1::WorkerMessage& next = queue_.front();  // deque: stays put while others are added
  if (next.has_heartbeat()) heartbeat_sent_[next.sequence()] = Clock::now();
  return &next;
}

void FakeWorker::OnWriteDone(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  queue_.pop_front();
  if (!ok) {
    queue_.clear();
    writing_ = false;
    return;
  }
  const v1::WorkerMessage* next = NextLocked();
  lock.unlock();
  if (next != nullptr) StartWrite(next);
}

void FakeWorker::OnReadDone(bool ok) {
  const Clock::time_point now = Clock::now();
  if (!ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closing_) ended_early_ = true;
    return;
  }
  if (incoming_.has_lease()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = heartbeat_sent_.find(incoming_.ack_sequence());
    if (it != heartbeat_sent_.end()) {
      latencies_ms_.push_back(std::chrono::duration<double, std::milli>(now - it->second).count());
      heartbeat_sent_.erase(heartbeat_sent_.begin(), std::next(it));
    }
  } else if (on_command_) {
    on_command_(*this, incoming_);
  }
  StartRead(&incoming_);
}

void FakeWorker::OnDone(const grpc::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  status_ = status;
  done_ = true;
  done_cv_.notify_all();
}

bool FakeWorker::Close(std::chrono::seconds limit) {
  bool release = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!holding_) return true;
    closing_ = true;
    release = holding_;
    holding_ = false;
  }
  context_.TryCancel();
  if (release) RemoveHold();
  std::unique_lock<std::mutex> lock(mu_);
  return done_cv_.wait_for(lock, limit, [&] { return done_; });
}

std::vector<double> FakeWorker::TakeLatencies() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<double> out;
  out.swap(latencies_ms_);
  return out;
}

bool FakeWorker::ended_early() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_early_;
}

std::string FakeWorker::end_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ ? std::to_string(status_.error_code()) + " " + status_.error_message() : "open";
}

int64_t FakeWorker::queued_behind() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_behind_;
}

}  // namespace deepnet::bench
