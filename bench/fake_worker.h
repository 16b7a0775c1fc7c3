#pragma once
// A simulated deepnet-worker for the control-plane benchmarks: registers, then keeps one
// WorkerService.Session open with gRPC's callback API (no thread per stream, so one process
// simulates 1,000 workers), sends what the bench asks for (heartbeats, metric reports, command
// results) with one write in flight at a time, and times every heartbeat from StartWrite to the
// LeaseRenewal that answers it (matched by CoordinatorMessage.ack_sequence).
//
// Thread-safe: the Send* calls may come from any thread; gRPC reactions run on its threads.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "deepnet/v1/worker_service.grpc.pb.h"

namespace deepnet::bench {

class FakeWorker final
    : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on a gRPC thread for every command that is not a lease renewal.
  using CommandHandler = std::function<void(FakeWorker&, const v1::CoordinatorMessage&)>;

  FakeWorker(std::string name, int slots);
  ~FakeWorker() override;
  FakeWorker(const FakeWorker&) = delete;
  FakeWorker& operator=(const FakeWorker&) = delete;

  // RegisterWorker over `stub` (blocking); false with the status on stderr on failure.
  [[nodiscard]] bool Register(v1::WorkerService::Stub& stub);
  // Opens the session (first message: SessionStart with the registration's epoch).
  void OpenSession(v1::WorkerService::Stub& stub, CommandHandler on_command = nullptr);
  void SendHeartbeat(const std::vector<v1::TaskStatus>& tasks);
  void SendMetrics(const v1::MetricReport& report);
  void SendCommandResult(int64_t command_sequence, bool accepted);
  // Half-closes the stream and waits up to `limit` for it to end; true if it ended.
  bool Close(std::chrono::seconds limit);

  // Heartbeat -> lease latencies (ms) since the last call, cleared by the call.
  std::vector<double> TakeLatencies();
  // Whether the session ended before Close() (the coordinator closed it), and its status.
  bool ended_early() const;
  std::string end_status() const;
  // Heartbeats not sent at once because the previous write was still in flight.
  int64_t queued_behind() const;
  const std::string& worker_id() const { return worker_id_; }
  int64_t epoch() const { return epoch_; }

  // grpc::ClientBidiReactor:
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void Enqueue(v1::WorkerMessage message);
  // The next queued message to write (nullptr: none), marking a write in flight; mu_ held.
  // The caller starts the write after releasing mu_ (a reaction may run inline).
  const v1::WorkerMessage* NextLocked();

  const std::string name_;
  const int slots_;
  std::string worker_id_;
  int64_t epoch_ = 0;
  std::string session_secret_;  // Echoed in the SessionStart.
  grpc::ClientContext context_;
  CommandHandler on_command_;
  v1::CoordinatorMessage incoming_;

  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  std::deque<v1::WorkerMessage> queue_;  // front() is in flight while writing_
  bool writing_ = false;
  bool closing_ = false;
  bool done_ = false;
  bool holding_ = false;
  bool ended_early_ = false;  // the read side ended before Close()
  grpc::Status status_;
  int64_t next_sequence_ = 1;
  int64_t queued_behind_ = 0;
  std::map<int64_t, Clock::time_point> heartbeat_sent_;  // sequence -> StartWrite time
  std::vector<double> latencies_ms_;
};

}  // namespace deepnet::bench
