#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace deepnet::comm {

/// Lets a backend that moves CPU tensors only (Gloo, MPI) serve a trainer whose tensors live on
/// a GPU: every device tensor is copied to host memory, the wrapped communicator moves the copy,
/// and what came back is copied onto the device tensor when the work is waited for. CPU tensors
/// pass straight through. Several ranks can so share one GPU (NCCL refuses two ranks on one
/// device). Split groups are staged too. Thread-compatible like the wrapped communicator.
class HostStagedCommunicator final : public Communicator {
 public:
  explicit HostStagedCommunicator(std::unique_ptr<Communicator> inner);

  // Communicator:
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  CommCapabilities capabilities() const override { return inner_->capabilities(); }
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
  std::unique_ptr<Communicator> inner_;
};

}  // namespace deepnet::comm
