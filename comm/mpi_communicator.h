#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/mpi_session.h"

namespace deepnet::comm {

/// Communicator over an Open MPI communicator of its own (a duplicate of MPI_COMM_WORLD for the
/// world, MPI_Comm_split for sub-groups), with MPI_ERRORS_RETURN. Every operation is
/// non-blocking underneath (MPI_Iallreduce, MPI_Ibcast, MPI_Isend/Irecv, MPI_Ibarrier); waits
/// poll MPI_Test until the operation completes or the timeout passes. CPU tensors only;
/// all-reduce takes float32, float64, int64, int32, int16, int8 and uint8, broadcast and
/// send/recv any dtype (as bytes, at most 2 GiB per call). With DEEPNET_MPI_SYNC_SEND=1 in the
/// environment at CreateWorld, sends are synchronous (MPI_Issend: complete only once the receive
/// is posted, inherited by Split), the rendezvous semantics of the Communicator contract; the
/// `mpi` tests run so, so that code relying on buffered sends fails there (with the timeout)
/// instead of passing. StartGroup posts every Isend/Irecv, then waits for all. Split first
/// exchanges (color, key) with a timed all-gather, then calls the blocking MPI_Comm_split. Not
/// thread-safe; must be destroyed before the MpiSession.
class MpiCommunicator final : public Communicator {
 public:
  // Duplicates MPI_COMM_WORLD. `timeout` > 0 bounds every later operation.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MpiCommunicator>> CreateWorld(
      const MpiSession& mpi, std::chrono::milliseconds timeout);
  ~MpiCommunicator() override;  // MPI_Comm_free unless aborted or failed.
  // True when DEEPNET_MPI_SYNC_SEND is "1".
  static bool SynchronousSendsRequested();
  bool synchronous_sends() const;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // Communicator:
  int rank() const override;
  int size() const override;
  std::string backend() const override { return "mpi"; }
  // Host tensors only; no bfloat16 all-reduce (see above); each operation of a group progresses
  // on its own.
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
  // Logs `reason` and calls MPI_Abort, which ends every process of the MPI job (mpirun exits
  // non-zero): it does not return.
  void Abort(const std::string& reason) override;

  // Shared with the works it hands out.
  struct State;

 private:
  // SendAsync and RecvAsync: checks, then MPI_Isend / MPI_Irecv of the tensor's bytes.
  absl::StatusOr<std::unique_ptr<CommWork>> PointToPoint(bool send, torch::Tensor tensor,
                                                         int peer, int tag);
  explicit MpiCommunicator(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
};

}  // namespace deepnet::comm
