#include "comm/communicator.h"

#include "absl/strings/str_cat.h"

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
