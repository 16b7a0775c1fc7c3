#pragma once

#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.h"

namespace deepnet::comm {

/// The one place where tensors are staged: lets a trainer hand a communicator tensors in host
/// memory and on its GPU whatever memory the wrapped transport moves (its CommCapabilities). A
/// tensor the transport cannot take is copied into memory it can (a GPU tensor into host memory
/// for Gloo and MPI, a host tensor onto `device` for NCCL), the copy is moved, and what came back
/// is copied into the caller's tensor when the work is waited for. Tensors the transport takes
/// pass straight through. Several ranks can so share one GPU over Gloo or MPI (NCCL refuses two
/// ranks on one device), and the trainer's bookkeeping sums host tensors over NCCL. Split groups
/// are staged too. capabilities() are the wrapped transport's. Thread-compatible like the
/// wrapped communicator.
class StagedCommunicator final : public Communicator {
 public:
  // `device`: where host tensors go when `inner` moves device tensors only (its CUDA device);
  // not used when `inner` moves host tensors.
  StagedCommunicator(std::unique_ptr<Communicator> inner, torch::Device device);

  // Communicator:
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  CommCapabilities capabilities() const override { return capabilities_; }
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> AllReduceSumAsync(
      torch::Tensor tensor) override;
  [[nodiscard]] absl::Status Broadcast(torch::Tensor& tensor, int root) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> SendAsync(torch::Tensor tensor, int dst,
                                                                    int tag) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> RecvAsync(torch::Tensor tensor, int src,
                                                                    int tag) override;
  [[nodiscard]] absl::Status Barrier() override { return inner_->Barrier(); }
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override;
  void Abort(const std::string& reason) override { inner_->Abort(reason); }

 private:
  // Where `tensor` is copied before the transport moves it; nullopt when it moves it as it is.
  std::optional<torch::Device> StagingDevice(const torch::Tensor& tensor) const;

  std::unique_ptr<Communicator> inner_;
  CommCapabilities capabilities_;
  torch::Device device_;
};

/// `comm` ready for a trainer on CUDA device `cuda_device` (-1: it trains on the CPU): on a GPU,
/// `comm` in a StagedCommunicator unless its transport moves both host and device tensors;
/// otherwise `comm` itself (on the CPU there is nowhere else to stage to). How
/// CreateWorldCommunicator decides, from capabilities() alone.
std::unique_ptr<Communicator> StageWhereNeeded(std::unique_ptr<Communicator> comm,
                                               int cuda_device);

}  // namespace deepnet::comm
