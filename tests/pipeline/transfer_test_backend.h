#pragma once

// A Communicator for BoundaryTransfer tests: one rank (a LoopbackCommunicator underneath) that
// declares the capabilities of the backend it imitates (LikeGloo, LikeNccl, LikeLoopback) and,
// like Gloo and MPI, refuses non-CPU tensors unless it declares device tensors; it remembers
// every tensor it was handed.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "comm/loopback_communicator.h"

namespace deepnet::pipeline::testing {

// What Gloo and MPI declare: host tensors, each operation of a group on its own.
inline comm::CommCapabilities LikeGloo() {
  return {/*host_tensors=*/true, /*device_tensors=*/false, /*bf16_sums=*/false,
          /*grouped_p2p=*/false};
}
// What NCCL declares: device tensors, one group as one unit.
inline comm::CommCapabilities LikeNccl() {
  return {/*host_tensors=*/false, /*device_tensors=*/true, /*bf16_sums=*/true,
          /*grouped_p2p=*/true};
}
inline comm::CommCapabilities LikeLoopback() { return comm::LoopbackCommunicator().capabilities(); }

class RecordingCommunicator final : public comm::Communicator {
 public:
  explicit RecordingCommunicator(comm::CommCapabilities capabilities)
      : capabilities_(capabilities) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "recording"; }
  comm::CommCapabilities capabilities() const override { return capabilities_; }
  absl::StatusOr<std::unique_ptr<comm::CommWork>> AllReduceSumAsync(torch::Tensor t) override {
    return loopback_.AllReduceSumAsync(std::move(t));
  }
  absl::Status Broadcast(torch::Tensor& t, int root) override {
    return loopback_.Broadcast(t, root);
  }
  absl::StatusOr<std::unique_ptr<comm::CommWork>> SendAsync(torch::Tensor t, int dst,
                                                            int tag) override {
    if (absl::Status s = Record(t, "send"); !s.ok()) return s;
    return loopback_.SendAsync(std::move(t), dst, tag);
  }
  absl::StatusOr<std::unique_ptr<comm::CommWork>> RecvAsync(torch::Tensor t, int src,
                                                            int tag) override {
    if (absl::Status s = Record(t, "recv"); !s.ok()) return s;
    return loopback_.RecvAsync(std::move(t), src, tag);
  }
  absl::StatusOr<std::unique_ptr<comm::CommWork>> StartGroup(
      std::vector<comm::P2POp> ops) override {
    ++groups;
    return Communicator::StartGroup(std::move(ops));
  }
  absl::Status Barrier() override { return loopback_.Barrier(); }
  absl::StatusOr<std::unique_ptr<comm::Communicator>> Split(int color, int key) override {
    return loopback_.Split(color, key);
  }
  void Abort(const std::string& reason) override { loopback_.Abort(reason); }

  std::vector<torch::Tensor> handed;  // Every tensor given to SendAsync/RecvAsync.
  int groups = 0;

 private:
  absl::Status Record(const torch::Tensor& t, const char* op) {
    handed.push_back(t);
    if (!capabilities_.device_tensors && !t.device().is_cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": tensor on ", t.device().str(), "; this backend moves CPU tensors"));
    }
    return absl::OkStatus();
  }

  comm::CommCapabilities capabilities_;
  comm::LoopbackCommunicator loopback_;
};

}  // namespace deepnet::pipeline::testing
