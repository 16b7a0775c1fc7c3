#pragma once

#include <torch/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace deepnet::comm {

/// A non-blocking operation started by a Communicator. Wait() must be called (once) before the
/// tensors it was given are read or reused; destroying an unwaited work waits for it.
class CommWork {
 public:
  virtual ~CommWork() = default;
  // Blocks until the operation completes. DeadlineExceeded (naming the rank, the operation and
  // the peer) when it does not complete within the communicator's timeout; Unavailable or
  // Internal when a peer died or the transport failed. After an error the communicator is
  // aborted: every later call fails.
  [[nodiscard]] virtual absl::Status Wait() = 0;
};

/// One send or receive of a grouped point-to-point operation (Communicator::StartGroup).
struct P2POp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  torch::Tensor tensor;
  int peer = 0;
  int tag = 0;
};

/// What a communicator's transport can do, declared by each backend. Callers decide from it,
/// never from backend() (a name for logs and errors only). A communicator from
/// CreateWorldCommunicator takes host tensors and tensors on the trainer's GPU whatever these say
/// (StagedCommunicator copies the rest); they tell what travels without a copy and how.
struct CommCapabilities {
  // Moves tensors in host memory (every backend but NCCL).
  bool host_tensors = true;
  // Moves tensors in CUDA memory as they are, without a copy through host memory (NCCL; loopback,
  // which copies on the device).
  bool device_tensors = false;
  // Sums bfloat16 tensors in bfloat16 (NCCL 2.10 and later; loopback). Without it a bfloat16
  // all-reduce is refused or saves nothing: a caller sums the bfloat16-rounded values in float32.
  bool bf16_sums = false;
  // StartGroup is one unit on the transport: an operation started after it runs only once every
  // operation of the group, sends included, has completed (NCCL: one ncclGroupStart/End on the
  // communicator's stream), so all receives of an exchange belong in the same group. Without it
  // each operation of a group progresses on its own and receives may be posted after the group
  // (MPI, Gloo, loopback).
  bool grouped_p2p = false;
};

/// Collectives and point-to-point transfers among the ranks of one group. Implementations:
/// MpiCommunicator (Open MPI, CPU tensors), GlooCommunicator (LibTorch c10d ProcessGroupGloo,
/// CPU tensors), NcclCommunicator (CUDA tensors; compiled with a CUDA LibTorch only) and
/// LoopbackCommunicator (one rank, for single-process runs and tests); StagedCommunicator
/// (comm/staged_communicator.h) wraps a backend so that it takes tensors in either memory.
///
/// Contract shared by every backend:
///  - Tensors are contiguous and dense; collectives work in place. Every rank of the group
///    calls every collective (and Split) in the same order with tensors of the same dtype and
///    number of elements.
///  - Send/Recv match in order per (source, destination, tag); the receiver's tensor must have
///    the sender's dtype and number of elements.
///  - A send may have rendezvous semantics: it may not complete (and, on NCCL, later operations
///    on the communicator's stream may not start) until the peer has posted the matching
///    receive. Two ranks that each send to the other before receiving must post those sends
///    and receives together in one StartGroup, which never waits for one of its operations
///    before posting the next. MPI with DEEPNET_MPI_SYNC_SEND=1 has exactly these semantics.
///  - Every operation completes within the timeout given at creation or fails with a Status
///    naming this rank, the operation and the peer; a failure aborts the communicator.
///  - Not thread-safe: one thread issues all calls on a communicator (works may be waited on
///    from that thread only).
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi", "gloo", "nccl" or "loopback": for logs and error messages only.
  virtual std::string backend() const = 0;
  // What the transport can do (see CommCapabilities); the same for the groups Split makes.
  virtual CommCapabilities capabilities() const = 0;

  // Sums `tensor` element-wise over all ranks, in place. By default AllReduceSumAsync + Wait.
  [[nodiscard]] virtual absl::Status AllReduceSum(torch::Tensor& tensor);
  // Starts the same sum; the result is in `tensor` once the work's Wait() succeeds.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<CommWork>> AllReduceSumAsync(
      torch::Tensor tensor) = 0;
  // Copies `tensor` of rank `root` into `tensor` of every rank.
  [[nodiscard]] virtual absl::Status Broadcast(torch::Tensor& tensor, int root) = 0;

  // Point-to-point; `tag` >= 0 separates independent streams between the same two ranks.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<CommWork>> SendAsync(torch::Tensor tensor,
                                                                          int dst, int tag) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<CommWork>> RecvAsync(torch::Tensor tensor,
                                                                          int src, int tag) = 0;
  // Posts every operation of `ops` before waiting for any, as one grouped operation (NCCL:
  // between ncclGroupStart and ncclGroupEnd), and returns one work that completes when all of
  // them have; sends and receives between the same two ranks still match in order. An empty
  // group completes at once. A failure names this rank, the operation and the peer. The
  // default posts each with SendAsync/RecvAsync, which suits transports whose posting never
  // blocks (MPI, Gloo, loopback).
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<CommWork>> StartGroup(
      std::vector<P2POp> ops);
  [[nodiscard]] absl::Status Send(const torch::Tensor& tensor, int dst, int tag);
  [[nodiscard]] absl::Status Recv(torch::Tensor& tensor, int src, int tag);

  [[nodiscard]] virtual absl::Status Barrier() = 0;

  // Collective over this group, like MPI_Comm_split: ranks passing the same color >= 0 form a
  // new group, ranked by (key, rank); a rank passing a negative color gets nullptr. The new
  // group inherits the timeout.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(int color,
                                                                            int key) = 0;

  // Tears the group down after an error so that peers blocked on us fail fast instead of
  // waiting for their timeout. Safe to call more than once; every later call fails.
  virtual void Abort(const std::string& reason) = 0;
};

/// Which library moves the bytes.
enum class CommBackendKind { kMpi, kGloo, kNccl };

std::string ToString(CommBackendKind kind);
absl::StatusOr<CommBackendKind> ParseCommBackend(const std::string& name);

}  // namespace deepnet::comm
