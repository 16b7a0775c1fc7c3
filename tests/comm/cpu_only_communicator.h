#pragma once
// A one-rank communicator that, like Gloo and MPI, refuses tensors that are not on the CPU:
// for testing StagedCommunicator.

#include <memory>
#include <string>
#include <utility>

#include "comm/communicator.h"
#include "comm/loopback_communicator.h"

namespace deepnet::testing {

class CpuOnlyCommunicator final : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "cpu-only"; }
  comm::CommCapabilities capabilities() const override {
    return {/*host_tensors=*/true, /*device_tensors=*/false, /*bf16_sums=*/false,
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
    return std::unique_ptr<comm::Communicator>(new CpuOnlyCommunicator());
  }
  void Abort(const std::string& reason) override { loopback_.Abort(reason); }

  int calls = 0;  // Tensors it was given.

 private:
  absl::Status Check(const torch::Tensor& tensor) {
    ++calls;
    if (!tensor.device().is_cpu()) {
      return absl::InvalidArgumentError("tensor is on " + tensor.device().str() +
                                        "; this backend moves CPU tensors only");
    }
    return absl::OkStatus();
  }

  comm::LoopbackCommunicator loopback_;
};

}  // namespace deepnet::testing
