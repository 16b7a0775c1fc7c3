#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace deepnet::comm {

/// The group of one rank: collectives leave tensors as they are, Send/Recv to rank 0 (oneself)
/// pass through a FIFO per tag. A receive posted before its send completes when the send comes;
/// waiting on it earlier fails at once (no other thread could ever send). Works on tensors of
/// any device. Not thread-safe (see Communicator).
class LoopbackCommunicator final : public Communicator {
 public:
  LoopbackCommunicator();
  ~LoopbackCommunicator() override;
  LoopbackCommunicator(const LoopbackCommunicator&) = delete;
  LoopbackCommunicator& operator=(const LoopbackCommunicator&) = delete;

  // Communicator:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "loopback"; }
  // Tensors of any device and dtype (nothing travels); sends are buffered, so a group's
  // operations never wait for each other.
  CommCapabilities capabilities() const override {
    return {/*host_tensors=*/true, /*device_tensors=*/true, /*bf16_sums=*/true,
            /*grouped_p2p=*/false};
  }
  [[nodiscard]] absl::Status AllReduceSum(torch::Tensor& tensor) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> AllReduceSumAsync(
      torch::Tensor tensor) override;
  [[nodiscard]] absl::Status Broadcast(torch::Tensor& tensor, int root) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> SendAsync(torch::Tensor tensor, int dst,
                                                                    int tag) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> RecvAsync(torch::Tensor tensor, int src,
                                                                    int tag) override;
  [[nodiscard]] absl::Status Barrier() override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override;
  void Abort(const std::string& reason) override;

  // Shared with the works it hands out, which may outlive it.
  struct State;

 private:
  [[nodiscard]] absl::Status CheckUsable(const std::string& op) const;

  std::shared_ptr<State> state_;
};

}  // namespace deepnet::comm
