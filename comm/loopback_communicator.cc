#include "comm/loopback_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/communicator_checks.h"
#include "comm/wait_once_work.h"

namespace deepnet::comm {

using internal::CheckPeer;
using internal::CheckTensor;
using internal::DescribeTensor;

// One posted receive: done once a send for its tag copied into `tensor`. In a named namespace,
// not an anonymous one: LoopbackCommunicator::State (external linkage) holds it.
namespace loopback_internal {

struct PendingRecv {
  torch::Tensor tensor;
  int tag = 0;
  bool done = false;
  absl::Status status;
};

}  // namespace loopback_internal

using loopback_internal::PendingRecv;

struct LoopbackCommunicator::State {
  internal::AbortLatch abort;
  std::map<int, std::deque<torch::Tensor>> messages;                // [tag] sent, unreceived
  std::map<int, std::deque<std::shared_ptr<PendingRecv>>> pending;  // [tag] posted receives
};

namespace {

constexpr char kLabel[] = "rank 0/1";

class DoneWork final : public CommWork {
 public:
  explicit DoneWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait() override { return status_; }

 private:
  absl::Status status_;
};

// Never blocks, so no deadline.
class RecvWork final : public internal::WaitOnceWork {
 public:
  RecvWork(std::shared_ptr<PendingRecv> recv, std::shared_ptr<LoopbackCommunicator::State> state)
      : recv_(std::move(recv)), state_(std::move(state)) {}

 private:
  absl::Status WaitUntil(Clock::time_point) override {
    if (recv_->done) return recv_->status;
    // Single-threaded: nobody can send while we wait, so this receive can never complete.
    state_->abort.Trip(absl::StrCat("recv from 0 tag ", recv_->tag, " had no matching send"));
    return absl::FailedPreconditionError(absl::StrCat(
        kLabel, ": recv of ", DescribeTensor(recv_->tensor), " from rank 0 tag ", recv_->tag,
        " has no matching send; with one rank and one thread it would wait forever"));
  }

  std::shared_ptr<PendingRecv> recv_;
  std::shared_ptr<LoopbackCommunicator::State> state_;
};

// Copies a sent tensor into a receive buffer after checking that they match.
absl::Status Deliver(const torch::Tensor& sent, torch::Tensor& target, int tag) {
  if (sent.scalar_type() != target.scalar_type() || sent.numel() != target.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(kLabel, ": recv from rank 0 tag ", tag,
                                                   " expects ", DescribeTensor(target),
                                                   " but the send has ", DescribeTensor(sent)));
  }
  target.view(sent.sizes()).copy_(sent);
  return absl::OkStatus();
}

}  // namespace

LoopbackCommunicator::LoopbackCommunicator() : state_(std::make_shared<State>()) {}
LoopbackCommunicator::~LoopbackCommunicator() = default;

absl::Status LoopbackCommunicator::CheckUsable(const std::string& op) const {
  return state_->abort.Check(kLabel, op);
}

absl::Status LoopbackCommunicator::AllReduceSum(torch::Tensor& tensor) {
  if (absl::Status s = CheckUsable("all_reduce"); !s.ok()) return s;
  return CheckTensor(tensor, /*require_cpu=*/false, absl::StrCat(kLabel, ": all_reduce"));
}

absl::StatusOr<std::unique_ptr<CommWork>> LoopbackCommunicator::AllReduceSumAsync(
    torch::Tensor tensor) {
  if (absl::Status s = AllReduceSum(tensor); !s.ok()) return s;
  return std::make_unique<DoneWork>(absl::OkStatus());
}

absl::Status LoopbackCommunicator::Broadcast(torch::Tensor& tensor, int root) {
  if (absl::Status s = CheckUsable("broadcast"); !s.ok()) return s;
  const std::string what = absl::StrCat(kLabel, ": broadcast from root ", root);
  if (root != 0) return absl::InvalidArgumentError(what + ": root is outside the group of 1");
  return CheckTensor(tensor, /*require_cpu=*/false, what);
}

absl::StatusOr<std::unique_ptr<CommWork>> LoopbackCommunicator::SendAsync(torch::Tensor tensor,
                                                                          int dst, int tag) {
  if (absl::Status s = CheckUsable("send"); !s.ok()) return s;
  const std::string what = absl::StrCat(kLabel, ": send to rank ", dst, " tag ", tag);
  if (absl::Status s = CheckPeer(dst, tag, 1, what); !s.ok()) return s;
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/false, what); !s.ok()) return s;
  auto& waiting = state_->pending[tag];
  if (!waiting.empty()) {
    std::shared_ptr<PendingRecv> recv = std::move(waiting.front());
    waiting.pop_front();
    recv->status = Deliver(tensor, recv->tensor, tag);
    recv->done = true;
    return std::make_unique<DoneWork>(recv->status);
  }
  // The sender may reuse its tensor once Wait() returns, so keep a copy.
  state_->messages[tag].push_back(tensor.clone());
  return std::make_unique<DoneWork>(absl::OkStatus());
}

absl::StatusOr<std::unique_ptr<CommWork>> LoopbackCommunicator::RecvAsync(torch::Tensor tensor,
                                                                          int src, int tag) {
  if (absl::Status s = CheckUsable("recv"); !s.ok()) return s;
  const std::string what = absl::StrCat(kLabel, ": recv from rank ", src, " tag ", tag);
  if (absl::Status s = CheckPeer(src, tag, 1, what); !s.ok()) return s;
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/false, what); !s.ok()) return s;
  auto recv = std::make_shared<PendingRecv>();
  recv->tensor = tensor;
  recv->tag = tag;
  auto& queue = state_->messages[tag];
  if (!queue.empty()) {
    torch::Tensor sent = std::move(queue.front());
    queue.pop_front();
    recv->status = Deliver(sent, recv->tensor, tag);
    recv->done = true;
  } else {
    state_->pending[tag].push_back(recv);
  }
  return std::make_unique<RecvWork>(std::move(recv), state_);
}

absl::Status LoopbackCommunicator::Barrier() { return CheckUsable("barrier"); }

absl::StatusOr<std::unique_ptr<Communicator>> LoopbackCommunicator::Split(int color, int key) {
  if (absl::Status s = CheckUsable("split"); !s.ok()) return s;
  if (color < 0) return std::unique_ptr<Communicator>();
  return std::unique_ptr<Communicator>(std::make_unique<LoopbackCommunicator>());
}

void LoopbackCommunicator::Abort(const std::string& reason) {
  state_->abort.Trip(reason);
}

}  // namespace deepnet::comm
