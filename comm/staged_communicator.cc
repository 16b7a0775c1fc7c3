#include "comm/host_staged_communicator.h"

#include <utility>

namespace deepnet::comm {
namespace {

// Waits for the wrapped work, then copies the host tensor back onto the device tensor (for
// receives and reductions; a send keeps only its host copy alive).
class StagedWork final : public CommWork {
 public:
  StagedWork(std::unique_ptr<CommWork> inner, torch::Tensor host, torch::Tensor device)
      : inner_(std::move(inner)), host_(std::move(host)), device_(std::move(device)) {}

  absl::Status Wait() override {
    if (absl::Status s = inner_->Wait(); !s.ok()) return s;
    if (device_.defined()) device_.copy_(host_);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<CommWork> inner_;
  torch::Tensor host_;
  torch::Tensor device_;
};

bool OnDevice(const torch::Tensor& tensor) { return tensor.defined() && !tensor.device().is_cpu(); }

}  // namespace

HostStagedCommunicator::HostStagedCommunicator(std::unique_ptr<Communicator> inner)
    : inner_(std::move(inner)) {}

absl::StatusOr<std::unique_ptr<CommWork>> HostStagedCommunicator::AllReduceSumAsync(
    torch::Tensor tensor) {
  if (!OnDevice(tensor)) return inner_->AllReduceSumAsync(std::move(tensor));
  torch::Tensor host = tensor.to(torch::kCPU).contiguous();
  absl::StatusOr<std::unique_ptr<CommWork>> work = inner_->AllReduceSumAsync(host);
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(
      new StagedWork(*std::move(work), std::move(host), std::move(tensor)));
}

absl::Status HostStagedCommunicator::Broadcast(torch::Tensor& tensor, int root) {
  if (!OnDevice(tensor)) return inner_->Broadcast(tensor, root);
  torch::Tensor host = tensor.to(torch::kCPU).contiguous();
  if (absl::Status s = inner_->Broadcast(host, root); !s.ok()) return s;
  tensor.copy_(host);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CommWork>> HostStagedCommunicator::SendAsync(torch::Tensor tensor,
                                                                            int dst, int tag) {
  if (!OnDevice(tensor)) return inner_->SendAsync(std::move(tensor), dst, tag);
  torch::Tensor host = tensor.to(torch::kCPU).contiguous();
  absl::StatusOr<std::unique_ptr<CommWork>> work = inner_->SendAsync(host, dst, tag);
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(new StagedWork(*std::move(work), std::move(host), {}));
}

absl::StatusOr<std::unique_ptr<CommWork>> HostStagedCommunicator::RecvAsync(torch::Tensor tensor,
                                                                            int src, int tag) {
  if (!OnDevice(tensor)) return inner_->RecvAsync(std::move(tensor), src, tag);
  torch::Tensor host = torch::empty(tensor.sizes(), tensor.options().device(torch::kCPU));
  absl::StatusOr<std::unique_ptr<CommWork>> work = inner_->RecvAsync(host, src, tag);
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(
      new StagedWork(*std::move(work), std::move(host), std::move(tensor)));
}

absl::StatusOr<std::unique_ptr<Communicator>> HostStagedCommunicator::Split(int color, int key) {
  absl::StatusOr<std::unique_ptr<Communicator>> group = inner_->Split(color, key);
  if (!group.ok() || *group == nullptr) return group;
  return std::unique_ptr<Communicator>(new HostStagedCommunicator(*std::move(group)));
}

}  // namespace deepnet::comm
