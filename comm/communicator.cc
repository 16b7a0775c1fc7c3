#include "comm/communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/wait_once_work.h"

namespace deepnet::comm {

std::string ToString(CommBackendKind kind) {
  switch (kind) {
    case CommBackendKind::kMpi:
      return "mpi";
    case CommBackendKind::kGloo:
      return "gloo";
    case CommBackendKind::kNccl:
      return "nccl";
  }
  return "unknown";
}

absl::StatusOr<CommBackendKind> ParseCommBackend(const std::string& name) {
  if (name == "mpi") return CommBackendKind::kMpi;
  if (name == "gloo") return CommBackendKind::kGloo;
  if (name == "nccl") return CommBackendKind::kNccl;
  return absl::InvalidArgumentError(absl::StrCat("unknown communication backend \"", name,
                                                 "\"; expected one of: mpi, gloo, nccl"));
}

absl::Status Communicator::AllReduceSum(torch::Tensor& tensor) {
  absl::StatusOr<std::unique_ptr<CommWork>> work = AllReduceSumAsync(tensor);
  if (!work.ok()) return work.status();
  return (*work)->Wait();
}

namespace {

// The works of a group's operations; waits for all of them (each within its own deadline),
// returns the first failure.
class GroupWork final : public internal::WaitOnceWork {
 public:
  explicit GroupWork(std::vector<std::unique_ptr<CommWork>> works) : works_(std::move(works)) {}

 private:
  absl::Status WaitUntil(Clock::time_point) override {
    absl::Status result;
    for (auto& work : works_) {
      if (absl::Status s = work->Wait(); !s.ok() && result.ok()) result = s;
    }
    works_.clear();
    return result;
  }

  std::vector<std::unique_ptr<CommWork>> works_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CommWork>> Communicator::StartGroup(std::vector<P2POp> ops) {
  std::vector<std::unique_ptr<CommWork>> works;
  works.reserve(ops.size());
  for (P2POp& op : ops) {
    absl::StatusOr<std::unique_ptr<CommWork>> work =
        op.kind == P2POp::Kind::kSend ? SendAsync(std::move(op.tensor), op.peer, op.tag)
                                      : RecvAsync(std::move(op.tensor), op.peer, op.tag);
    // The operations already posted are waited for (within the timeout) as `works` goes.
    if (!work.ok()) return work.status();
    works.push_back(*std::move(work));
  }
  return std::unique_ptr<CommWork>(std::make_unique<GroupWork>(std::move(works)));
}

absl::Status Communicator::Send(const torch::Tensor& tensor, int dst, int tag) {
  absl::StatusOr<std::unique_ptr<CommWork>> work = SendAsync(tensor, dst, tag);
  if (!work.ok()) return work.status();
  return (*work)->Wait();
}

absl::Status Communicator::Recv(torch::Tensor& tensor, int src, int tag) {
  absl::StatusOr<std::unique_ptr<CommWork>> work = RecvAsync(tensor, src, tag);
  if (!work.ok()) return work.status();
  return (*work)->Wait();
}

}  // namespace deepnet::comm
