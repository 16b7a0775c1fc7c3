#include "comm/staged_communicator.h"

#include <utility>

#include "comm/wait_once_work.h"

namespace deepnet::comm {
namespace {

// Waits for the wrapped work (within its deadline), then copies the staged tensor back into the
// caller's tensor (for receives and reductions; a send keeps only its staged copy alive).
class StagedWork final : public internal::WaitOnceWork {
 public:
  StagedWork(std::unique_ptr<CommWork> inner, torch::Tensor staged, torch::Tensor target)
      : inner_(std::move(inner)), staged_(std::move(staged)), target_(std::move(target)) {}

 private:
  absl::Status WaitUntil(Clock::time_point) override {
    if (absl::Status s = inner_->Wait(); !s.ok()) return s;
    if (target_.defined()) target_.copy_(staged_);
    return absl::OkStatus();
  }

  std::unique_ptr<CommWork> inner_;
  torch::Tensor staged_;
  torch::Tensor target_;
};

// A copy of `tensor` on `device`, as the transports need it (contiguous).
torch::Tensor StagedCopy(const torch::Tensor& tensor, torch::Device device) {
  return tensor.to(device).contiguous();
}

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner, torch::Device device)
    : inner_(std::move(inner)), capabilities_(inner_->capabilities()), device_(device) {}

std::optional<torch::Device> StagedCommunicator::StagingDevice(const torch::Tensor& tensor) const {
  if (!tensor.defined()) return std::nullopt;
  if (tensor.device().is_cpu()) {
    return capabilities_.host_tensors ? std::nullopt : std::optional<torch::Device>(device_);
  }
  return capabilities_.device_tensors ? std::nullopt
                                      : std::optional<torch::Device>(torch::kCPU);
}

absl::StatusOr<std::unique_ptr<CommWork>> StagedCommunicator::AllReduceSumAsync(
    torch::Tensor tensor) {
  const std::optional<torch::Device> staging = StagingDevice(tensor);
  if (!staging) return inner_->AllReduceSumAsync(std::move(tensor));
  torch::Tensor staged = StagedCopy(tensor, *staging);
  absl::StatusOr<std::unique_ptr<CommWork>> work = inner_->AllReduceSumAsync(staged);
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(
      new StagedWork(*std::move(work), std::move(staged), std::move(tensor)));
}

absl::Status StagedCommunicator::Broadcast(torch::Tensor& tensor, int root) {
  const std::optional<torch::Device> staging = StagingDevice(tensor);
  if (!staging) return inner_->Broadcast(tensor, root);
  torch::Tensor staged = StagedCopy(tensor, *staging);
  if (absl::Status s = inner_->Broadcast(staged, root); !s.ok()) return s;
  tensor.copy_(staged);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CommWork>> StagedCommunicator::SendAsync(torch::Tensor tensor,
                                                                        int dst, int tag) {
  const std::optional<torch::Device> staging = StagingDevice(tensor);
  if (!staging) return inner_->SendAsync(std::move(tensor), dst, tag);
  torch::Tensor staged = StagedCopy(tensor, *staging);
  absl::StatusOr<std::unique_ptr<CommWork>> work = inner_->SendAsync(staged, dst, tag);
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(new StagedWork(*std::move(work), std::move(staged), {}));
}

absl::StatusOr<std::unique_ptr<CommWork>> StagedCommunicator::RecvAsync(torch::Tensor tensor,
                                                                        int src, int tag) {
  const std::optional<torch::Device> staging = StagingDevice(tensor);
  if (!staging) return inner_->RecvAsync(std::move(tensor), src, tag);
  torch::Tensor staged = torch::empty(tensor.sizes(), tensor.options().device(*staging));
  absl::StatusOr<std::unique_ptr<CommWork>> work = inner_->RecvAsync(staged, src, tag);
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(
      new StagedWork(*std::move(work), std::move(staged), std::move(tensor)));
}

absl::StatusOr<std::unique_ptr<Communicator>> StagedCommunicator::Split(int color, int key) {
  absl::StatusOr<std::unique_ptr<Communicator>> group = inner_->Split(color, key);
  if (!group.ok() || *group == nullptr) return group;
  return std::unique_ptr<Communicator>(new StagedCommunicator(*std::move(group), device_));
}

std::unique_ptr<Communicator> StageWhereNeeded(std::unique_ptr<Communicator> comm,
                                               int cuda_device) {
  if (cuda_device < 0) return comm;
  const CommCapabilities capabilities = comm->capabilities();
  if (capabilities.host_tensors && capabilities.device_tensors) return comm;
  return std::make_unique<StagedCommunicator>(
      std::move(comm), torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(cuda_device)));
}

}  // namespace deepnet::comm
