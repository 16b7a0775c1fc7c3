#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm/communicator.h"

namespace deepnet::comm {

/// Communicator over LibTorch's c10d::ProcessGroupGloo (TCP sockets between every pair of
/// ranks), bootstrapped from a c10d::Store shared by the group. CPU tensors only; all-reduce
/// takes float32, float64, float16, int64, int32, int8 and uint8. Every operation waits at most
/// the timeout (Gloo's own timeout is set to the same value); Gloo errors (a peer that died
/// closes its sockets) come back as Unavailable naming rank, operation and peer. Split
/// exchanges (color, key) through the store and connects a new process group under a key
/// prefix unique to that split. Abort drops the process group: its sockets close, so peers
/// blocked on this rank fail at once; dropping it waits for an operation already running inside
/// Gloo (bounded by the timeout). Not thread-safe.
class GlooCommunicator final : public Communicator {
 public:
  // Connects rank `rank` of `size` to its peers through `store` (the same store, or stores with
  // the same keys, on every rank). `hostname` is the address Gloo's sockets bind to and that
  // peers connect to (e.g. "127.0.0.1" on one machine); empty resolves this machine's hostname.
  // Blocks until every rank has connected or `timeout` passes.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(
      c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout,
      const std::string& hostname);
  ~GlooCommunicator() override;
  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  // Communicator:
  int rank() const override;
  int size() const override;
  std::string backend() const override { return "gloo"; }
  // Host tensors only; sums are not taken in bfloat16 (LibTorch 1.13's Gloo has no bfloat16);
  // each operation of a group progresses on its own.
  CommCapabilities capabilities() const override {
    return {/*host_tensors=*/true, /*device_tensors=*/false, /*bf16_sums=*/false,
            /*grouped_p2p=*/false};
  }
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

  // The process group and the group's state, shared with the works it hands out.
  struct State;

 private:
  explicit GlooCommunicator(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
};

}  // namespace deepnet::comm
