#pragma once
// An in-process stand-in for the coordinator's WorkerService: it records what a worker sends,
// answers heartbeats with lease renewals and sends the commands a test queues.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deepnet/v1/worker_service.grpc.pb.h"
#include "tests/worker/worker_test_util.h"

namespace deepnet::worker::testing {

// Thread-safety: safe for concurrent use (gRPC handler threads and the test thread).
class FakeWorkerService final : public deepnet::v1::WorkerService::Service {
 public:
  // Epochs handed out start after `last_epoch` (a restarted coordinator continues its count).
  explicit FakeWorkerService(int64_t last_epoch = 0) : epoch_(last_epoch) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const deepnet::v1::RegisterWorkerRequest* request,
                              deepnet::v1::RegisterWorkerResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    registrations_.push_back(*request);
    auto auth = context->client_metadata().find("authorization");
    if (auth != context->client_metadata().end()) {
      authorization_ = std::string(auth->second.data(), auth->second.size());
    }
    response->set_worker_id("w-" + request->worker_name());
    response->set_epoch(++epoch_);
    response->set_session_secret("secret-" + std::to_string(epoch_));
    response->mutable_heartbeat_interval()->set_nanos(100 * 1000 * 1000);
    response->mutable_lease_duration()->set_seconds(2);
    for (const deepnet::v1::Cancellation& c : stale_tasks_) *response->add_stale_tasks() = c;
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Session(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<deepnet::v1::CoordinatorMessage,
                                                deepnet::v1::WorkerMessage>* stream) override {
    bool reader_done = false;
    std::thread reader([&] {
      deepnet::v1::WorkerMessage message;
      while (stream->Read(&message)) {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(message);
        if (message.has_heartbeat()) {
          deepnet::v1::CoordinatorMessage renewal;
          renewal.set_epoch(message.epoch());
          // Like the coordinator: everything received so far is acknowledged.
          if (acknowledge_) renewal.set_ack_sequence(message.sequence());
          renewal.mutable_lease()->mutable_valid_for()->set_seconds(2);
          renewal.set_sequence(++sequence_);
          outgoing_.push_back(renewal);
        }
        cv_.notify_all();
      }
      std::lock_guard<std::mutex> lock(mu_);
      reader_done = true;
      cv_.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu_);
    ++sessions_;
    while (!reader_done && !context->IsCancelled()) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      while (!outgoing_.empty()) {
        deepnet::v1::CoordinatorMessage message = outgoing_.front();
        outgoing_.pop_front();
        lock.unlock();
        stream->Write(message);
        lock.lock();
      }
    }
    lock.unlock();
    reader.join();
    return grpc::Status::OK;
  }

  // Whether lease renewals acknowledge what was received (the coordinator's ack_sequence).
  void set_acknowledge(bool acknowledge) {
    std::lock_guard<std::mutex> lock(mu_);
    acknowledge_ = acknowledge;
  }

  // Queues a command for the open session; sets the epoch to the current one unless given.
  // Returns the command's sequence number.
  int64_t Send(deepnet::v1::CoordinatorMessage message, bool keep_epoch = false) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!keep_epoch) message.set_epoch(epoch_);
    message.set_sequence(++sequence_);
    outgoing_.push_back(message);
    cv_.notify_all();
    return message.sequence();
  }

  // Waits (up to kLiveness) until `done(received messages)` holds.
  bool WaitFor(const std::function<bool(const std::vector<deepnet::v1::WorkerMessage>&)>& done) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kLiveness, [&] { return done(received_); });
  }
  bool WaitForRegistrations(size_t count) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kLiveness, [&] { return registrations_.size() >= count; });
  }

  std::vector<deepnet::v1::WorkerMessage> received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  std::vector<deepnet::v1::RegisterWorkerRequest> registrations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  int64_t epoch() const {
    std::lock_guard<std::mutex> lock(mu_);
    return epoch_;
  }
  // Every later registration is answered with these stale tasks to stop.
  void SetStaleTasks(std::vector<deepnet::v1::Cancellation> tasks) {
    std::lock_guard<std::mutex> lock(mu_);
    stale_tasks_ = std::move(tasks);
  }
  std::string authorization() const {
    std::lock_guard<std::mutex> lock(mu_);
    return authorization_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t epoch_;
  int64_t sequence_ = 0;
  bool acknowledge_ = true;
  int sessions_ = 0;
  std::string authorization_;
  std::vector<deepnet::v1::RegisterWorkerRequest> registrations_;
  std::vector<deepnet::v1::WorkerMessage> received_;
  std::deque<deepnet::v1::CoordinatorMessage> outgoing_;
  std::vector<deepnet::v1::Cancellation> stale_tasks_;
};

// The fake service served on 127.0.0.1 (port 0 picks one; a restart reuses the port).
class FakeCoordinator {
 public:
  explicit FakeCoordinator(int64_t last_epoch = 0, int port = 0)
      : service_(std::make_unique<FakeWorkerService>(last_epoch)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
  }
  ~FakeCoordinator() { Stop(); }
  void Stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    server_.reset();
  }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeWorkerService& service() { return *service_; }

 private:
  std::unique_ptr<FakeWorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace deepnet::worker::testing
