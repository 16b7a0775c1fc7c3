#pragma once

// Compiled only when DEEPNET_HAVE_NCCL (a CUDA LibTorch and NCCL found by CMake).

#include <chrono>
#include <memory>
#include <string>
#include <vector>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm/communicator.h"

namespace deepnet::comm {

/// Communicator over NCCL for CUDA tensors on one device. Owns its ncclComm_t and a CUDA stream
/// of its own: each operation first waits (on the GPU) for the caller's current stream, runs on
/// the own stream, and records an event that CommWork::Wait() polls together with
/// ncclCommGetAsyncError until it completes or the timeout passes; a timeout or an NCCL error
/// calls ncclCommAbort. The unique id travels through the c10d store (rank 0 creates it).
/// Send/Recv: NCCL matches point-to-point transfers between two ranks in issue order; the tag
/// is only checked, not used, so both sides must issue them in the same order, and a send
/// blocks the stream until the peer's receive is posted (rendezvous), so a send followed by a
/// receive on the same stream deadlocks against a peer doing the same: StartGroup puts a tick's
/// sends and receives between ncclGroupStart and ncclGroupEnd, one event for all of them.
/// Split builds a new communicator
/// through the store. Not thread-safe.
class NcclCommunicator final : public Communicator {
 public:
  // Blocks until all `size` ranks have joined through `store` or `timeout` passes. Uses CUDA
  // device `device_index` (the local rank).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      c10::intrusive_ptr<c10d::Store> store, int rank, int size, int device_index,
      std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;  // ncclCommDestroy unless aborted; destroys the stream.
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Communicator:
  int rank() const override;
  int size() const override;
  std::string backend() const override { return "nccl"; }
  // CUDA tensors only; bfloat16 sums with NCCL 2.10 and later; StartGroup is one NCCL group.
  CommCapabilities capabilities() const override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> AllReduceSumAsync(
      torch::Tensor tensor) override;
  [[nodiscard]] absl::Status Broadcast(torch::Tensor& tensor, int root) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> SendAsync(torch::Tensor tensor, int dst,
                                                                    int tag) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> RecvAsync(torch::Tensor tensor, int src,
                                                                    int tag) override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<CommWork>> StartGroup(
      std::vector<P2POp> ops) override;
  [[nodiscard]] absl::Status Barrier() override;
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override;
  void Abort(const std::string& reason) override;  // ncclCommAbort; safe on error paths.

  // The NCCL communicator and stream, shared with the works it hands out.
  struct State;

 private:
  explicit NcclCommunicator(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
};

}  // namespace deepnet::comm
