#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/auth/auth.h"
#include "coordinator/core/coordinator.h"
#include "deepnet/v1/worker_service.grpc.pb.h"

namespace deepnet::coordinator {

// One worker's WorkerService.Session stream (gRPC callback API: no thread waits on it, so a
// coordinator holds thousands). Reads SessionStart, then heartbeats, trainer exits, metric
// reports, command results and log chunks, handing each to the Coordinator; writes the
// commands the Coordinator queues through the session's WorkerCommandSink one at a time, in
// order, each with the next sequence number and the latest ack. Deletes itself when gRPC is
// done with it.
class WorkerSession final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage> {
 public:
  // `admitted` is the result of authenticating the call: an error ends the stream with it.
  // `still_valid` (may be empty) tells whether the token the session opened with is still
  // accepted; asked at most once a second as messages arrive, and a revoked or expired token
  // ends the session with the answer. `may_act_as` (may be empty: any) tells whether the
  // caller may be the worker its SessionStart names; a refusal ends the stream with it.
  using IdentityCheck = std::function<absl::Status(absl::string_view worker_id)>;
  WorkerSession(Coordinator& coordinator, absl::Status admitted,
                std::function<absl::Status()> still_valid = {}, IdentityCheck may_act_as = {});

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // The sink the Coordinator holds; outlives the reactor (the coordinator may still hold it).
  class Outbox final : public WorkerCommandSink {
   public:
    explicit Outbox(WorkerSession* session) : session_(session) {}
    void SendAssignment(int64_t epoch, const AssignmentCommand& command) override;
    void SendCancellation(int64_t epoch, const CancellationCommand& command) override;
    void SendLease(int64_t epoch, int64_t valid_for_ms, int64_t expire_time_ms) override;
    bool SendLogRequest(int64_t epoch, const LogRequestCommand& command) override;
    void Close(const absl::Status& status) override;

    void Push(v1::CoordinatorMessage message, const std::string& assignment_job, int attempt);
    // The write in flight completed; starts the next one or the pending Finish.
    void WriteDone(bool ok);
    // Around the handling of one worker message: writes wait while it is handled, then go out
    // carrying `ack` (its sequence), so the answer it caused (a lease renewal) acknowledges it,
    // and nothing acknowledges it before it was handled.
    void Hold();
    void Release(int64_t ack);
    bool closing();
    // The job attempt of an assignment this session sent with `sequence`, if any.
    std::optional<std::pair<std::string, int>> AssignmentOf(int64_t sequence);
    void Detach();

   private:
    // The queue's front, stamped with the current ack, when a write may start now (writing_ is
    // then set); null otherwise.
    v1::CoordinatorMessage* NextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

    absl::Mutex mu_;
    WorkerSession* session_ ABSL_GUARDED_BY(mu_);
    bool held_ ABSL_GUARDED_BY(mu_) = false;
    std::deque<v1::CoordinatorMessage> queue_ ABSL_GUARDED_BY(mu_);
    bool writing_ ABSL_GUARDED_BY(mu_) = false;
    bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
    bool finished_ ABSL_GUARDED_BY(mu_) = false;
    absl::Status finish_status_ ABSL_GUARDED_BY(mu_);
    int64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
    int64_t ack_ ABSL_GUARDED_BY(mu_) = 0;
    std::map<int64_t, std::pair<std::string, int>> assignments_ ABSL_GUARDED_BY(mu_);
  };

  void Handle(const v1::WorkerMessage& message);

  Coordinator& coordinator_;
  std::shared_ptr<Outbox> outbox_;
  TokenRecheck token_;  // Read-done callbacks run one at a time.
  IdentityCheck may_act_as_;
  v1::WorkerMessage incoming_;
  // Set by the SessionStart (only the reading side touches them).
  bool started_ = false;
  std::string worker_id_;
  int64_t epoch_ = 0;
};

}  // namespace deepnet::coordinator
