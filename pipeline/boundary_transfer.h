#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"

namespace deepnet::pipeline {

// Message kinds between neighbouring stages; also the communicator tag of their transfers.
inline constexpr int kActivationMessage = 1;
inline constexpr int kGradientMessage = 2;

/// The dtype a boundary tensor travels in: `wire` when given, else its own dtype. The one place
/// where the wire format of pipeline messages is decided (e.g. bf16 activations).
torch::Tensor ToWire(const torch::Tensor& tensor,
                     std::optional<c10::ScalarType> wire = std::nullopt);
/// A received wire tensor in the dtype the stage computes in.
torch::Tensor FromWire(const torch::Tensor& wire, c10::ScalarType compute);

/// One message to a neighbour: the tensors of one micro-batch's activation or gradient.
struct OutgoingMessage {
  std::vector<torch::Tensor> tensors;
  int peer_rank = 0;
  int kind = kActivationMessage;
  int64_t step = 0;
  int micro_batch = 0;
};

/// One message expected from a neighbour, with the shapes this stage derives from its batch.
struct IncomingMessage {
  int peer_rank = 0;
  int peer_stage = 0;  // For error messages.
  int kind = kActivationMessage;
  int64_t step = 0;
  int micro_batch = 0;
  std::vector<std::vector<int64_t>> shapes;
};

/// Moves pipeline messages of one rank. Each message is a header (magic, step, micro-batch,
/// kind, tensor count, element counts), checked by the receiver so that stages that disagree
/// fail naming the batch, followed by its tensors in the wire dtype. Exchange runs all sends and
/// receives of one schedule tick together and returns when all are done, so it completes on
/// transports with rendezvous semantics whenever CheckSchedule accepts the schedule: on NCCL as
/// one Communicator::StartGroup (the header is checked afterwards); on host transports the sends
/// and the header receives are posted as one group and each message's tensors are received as
/// soon as its header has arrived and agrees (so a disagreement never reaches the transport as a
/// size mismatch), which completes a send exactly when its receiver has posted its group.
///
/// Where the tensors live: CPU tensors go as they are; CUDA tensors go directly from and into
/// device memory when the communicator takes device tensors (NCCL, loopback); otherwise (Gloo
/// or MPI with CUDA tensors) they are staged through pinned host buffers, one per message slot
/// and shape, allocated once and reused: device-to-host copies are queued without blocking and
/// the stream is synchronised once per tick before the transport reads them; host-to-device
/// copies of received tensors are queued without blocking and a buffer is reused only after its
/// copy has finished. Not thread-safe.
class BoundaryTransfer {
 public:
  BoundaryTransfer(comm::Communicator* world, torch::Device device);
  ~BoundaryTransfer();
  BoundaryTransfer(const BoundaryTransfer&) = delete;
  BoundaryTransfer& operator=(const BoundaryTransfer&) = delete;

  // The dtype boundary tensors travel in (default: their own) and the dtype received tensors
  // are returned in (default float32).
  void set_wire_dtype(std::optional<c10::ScalarType> wire) { wire_dtype_ = wire; }
  void set_compute_dtype(c10::ScalarType compute) { compute_dtype_ = compute; }
  // True when CUDA tensors are staged through pinned host memory.
  bool stages_through_host() const { return stage_through_host_; }

  // Sends `outgoing` and receives `incoming` as one grouped operation and waits for it. Returns
  // the received tensors on this rank's device, one vector per incoming message, in order.
  // `where` prefixes errors ("rank 3 (stage 1, replica 1)").
  absl::StatusOr<std::vector<std::vector<torch::Tensor>>> Exchange(
      const std::vector<OutgoingMessage>& outgoing, const std::vector<IncomingMessage>& incoming,
      const std::string& where);

 private:
  struct Staging;
  // A pinned host buffer for (direction, peer, kind, slot, shape, dtype), ready to be written.
  torch::Tensor HostBuffer(bool send, int peer, int kind, size_t slot, c10::IntArrayRef shape,
                           c10::ScalarType dtype);
  // Records that `buffer` is read by a copy queued on the current stream.
  void MarkInUse(const torch::Tensor& buffer);
  // The tensor the transport moves for a payload of `shape` and `dtype`.
  torch::Tensor Buffer(bool send, int peer, int kind, size_t slot, c10::IntArrayRef shape,
                       c10::ScalarType dtype);
  torch::TensorOptions TransportOptions(c10::ScalarType dtype) const;
  // InternalError naming both batches unless `received` is the header `in` expects.
  absl::Status CheckHeader(const torch::Tensor& received, const IncomingMessage& in,
                           const std::string& where) const;

  comm::Communicator* world_;
  torch::Device device_;
  bool stage_through_host_ = false;
  std::optional<c10::ScalarType> wire_dtype_;
  c10::ScalarType compute_dtype_ = c10::ScalarType::Float;
  std::unique_ptr<Staging> staging_;
};

}  // namespace deepnet::pipeline
