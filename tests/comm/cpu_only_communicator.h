#pragma once
// One-rank communicators whose transport moves one kind of memory only and refuses tensors in
// the other, as they declare in capabilities(): CpuOnlyCommunicator like Gloo and MPI,
// CudaOnlyCommunicator like NCCL. For testing StagedCommunicator and StageWhereNeeded.

#include <memory>
#include <string>
#include <utility>

#include "comm/communicator.h"
#include "comm/loopback_communicator.h"

namespace deepnet::testing {

template <bool kOnDevice>
class OneMemoryCommunicator final : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return kOnDevice ? "cuda-only" : "cpu-only"; }
  comm::CommCapabilities capabilities() const override {
    return {/*host_tensors=*/!kOnDevice, /*device_tensors=*/kOnDevice, /*bf16_sums=*/false,
            /*grouped_p2p=*/false};
  }
  absl::StatusOr<std::unique_ptr<comm::CommWork>> AllReduceSumAsync(torch::Tensor tensor) override {
    if (auto s = Check(tensor); !s.ok()) return s;
    tensor.mul_(2);  // As if a second rank had contributed the same values.
    return loopback_.AllReduceSumAsync(std::move(tensor));
  }
  absl::Status Broadcast(torch::Tensor& tensor, int root) override {
    if (auto s = Check(tensor); !s.ok()) return s;
    return loopback_.Broadcast(tensor, root);
  }
  absl::StatusOr<std::unique_ptr<comm::CommWork>> SendAsync(torch::Tensor tensor, int dst,
                                                            int tag) override {
    if (auto s = Check(tensor); !s.ok()) return s;
    return loopback_.SendAsync(std::move(tensor), dst, tag);
  }
  absl::StatusOr<std::unique_ptr<comm::CommWork>> RecvAsync(torch::Tensor tensor, int src,
                                                            int tag) override {
    if (auto s = Check(tensor); !s.ok()) return s;
    return loopback_.RecvAsync(std::move(tensor), src, tag);
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<comm::Communicator>> Split(int color, int) override {
    if (color < 0) return std::unique_ptr<comm::Communicator>();
    return std::unique_ptr<comm::Communicator>(new OneMemoryCommunicator());
  }
  void Abort(const std::string& reason) override { loopback_.Abort(reason); }

  int calls = 0;  // Tensors it was given.

 private:
  absl::Status Check(const torch::Tensor& tensor) {
    ++calls;
    if (tensor.device().is_cpu() == kOnDevice) {
      return absl::InvalidArgumentError("tensor is on " + tensor.device().str() +
                                        "; this backend moves " +
                                        (kOnDevice ? "CUDA" : "CPU") + " tensors only");
    }
    return absl::OkStatus();
  }

  comm::LoopbackCommunicator loopback_;
};

using CpuOnlyCommunicator = OneMemoryCommunicator<false>;
using CudaOnlyCommunicator = OneMemoryCommunicator<true>;

}  // namespace deepnet::testing
