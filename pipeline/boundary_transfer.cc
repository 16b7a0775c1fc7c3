#include "pipeline/boundary_transfer.h"

#include <utility>

#include "absl/strings/str_cat.h"

#ifdef DEEPNET_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace deepnet::pipeline {
namespace {

constexpr int64_t kMagic = 0x44454550;  // "DEEP"
constexpr int kHeaderSize = 8;
constexpr size_t kHeaderTensors = 3;  // Element counts the header carries.

#ifdef DEEPNET_HAVE_CUDA
// Copies between pinned host memory and the device are queued; events say when they are done.
constexpr bool kNonBlockingCopies = true;
#else
// Without the CUDA headers nothing tracks a queued copy: copy synchronously.
constexpr bool kNonBlockingCopies = false;
#endif

const char* KindName(int kind) { return kind == kActivationMessage ? "activation" : "gradient"; }

}  // namespace

torch::Tensor ToWire(const torch::Tensor& tensor, std::optional<c10::ScalarType> wire) {
  // Only values travel: the receiver's autograd graph starts at what it receives.
  const torch::Tensor values = tensor.detach();
  return (wire && *wire != values.scalar_type() ? values.to(*wire) : values).contiguous();
}

torch::Tensor FromWire(const torch::Tensor& wire, c10::ScalarType compute) {
  return wire.scalar_type() == compute ? wire : wire.to(compute);
}

struct BoundaryTransfer::Staging {
  struct Slot {
    torch::Tensor host;  // Pinned.
#ifdef DEEPNET_HAVE_CUDA
    // Recorded after the last queued copy that reads `host`; waited before it is written again.
    std::unique_ptr<at::cuda::CUDAEvent> read_done;
#endif
  };
  // (send, peer, kind, slot, shape, dtype) -> buffer.
  std::map<std::tuple<bool, int, int, size_t, std::vector<int64_t>, int>, Slot> slots;
  std::map<const void*, Slot*> by_data;
};

BoundaryTransfer::BoundaryTransfer(comm::Communicator* world, torch::Device device)
    : world_(world),
      device_(device),
      stage_through_host_(device.is_cuda() && !world->capabilities().device_tensors),
      staging_(std::make_unique<Staging>()) {}

BoundaryTransfer::~BoundaryTransfer() = default;

torch::TensorOptions BoundaryTransfer::TransportOptions(c10::ScalarType dtype) const {
  const bool on_device = device_.is_cuda() && !stage_through_host_;
  return torch::TensorOptions().dtype(dtype).device(on_device ? device_
                                                              : torch::Device(torch::kCPU));
}

torch::Tensor BoundaryTransfer::HostBuffer(bool send, int peer, int kind, size_t slot,
                                           c10::IntArrayRef shape, c10::ScalarType dtype) {
  auto key = std::make_tuple(send, peer, kind, slot, shape.vec(), static_cast<int>(dtype));
  auto [it, added] = staging_->slots.try_emplace(std::move(key));
  Staging::Slot& buffer = it->second;
  if (added) {
    buffer.host = torch::empty(shape, torch::TensorOptions().dtype(dtype).pinned_memory(true));
    staging_->by_data[buffer.host.data_ptr()] = &buffer;
  }
#ifdef DEEPNET_HAVE_CUDA
  if (buffer.read_done) buffer.read_done->synchronize();  // Its last upload must be finished.
#endif
  return buffer.host;
}

void BoundaryTransfer::MarkInUse(const torch::Tensor& buffer) {
#ifdef DEEPNET_HAVE_CUDA
  auto it = staging_->by_data.find(buffer.data_ptr());
  if (it == staging_->by_data.end()) return;
  if (!it->second->read_done) it->second->read_done = std::make_unique<at::cuda::CUDAEvent>();
  it->second->read_done->record(c10::cuda::getCurrentCUDAStream(device_.index()));
#endif
}

torch::Tensor BoundaryTransfer::Buffer(bool send, int peer, int kind, size_t slot,
                                       c10::IntArrayRef shape, c10::ScalarType dtype) {
  if (stage_through_host_) return HostBuffer(send, peer, kind, slot, shape, dtype);
  return torch::empty(shape, TransportOptions(dtype));
}

absl::Status BoundaryTransfer::CheckHeader(const torch::Tensor& received, const IncomingMessage& in,
                                           const std::string& where) const {
  const torch::Tensor header = received.cpu();
  auto h = header.accessor<int64_t, 1>();
  bool ok = h[0] == kMagic && h[1] == in.step && h[2] == in.micro_batch && h[3] == in.kind &&
            h[4] == static_cast<int64_t>(in.shapes.size());
  for (size_t i = 0; ok && i < in.shapes.size() && i < kHeaderTensors; ++i) {
    int64_t numel = 1;
    for (int64_t d : in.shapes[i]) numel *= d;
    ok = h[5 + i] == numel;
  }
  if (ok) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(where, ": expected the ", KindName(in.kind), " of micro-batch ", in.micro_batch,
                   " of step ", in.step, " from stage ", in.peer_stage, " (", in.shapes.size(),
                   " tensor(s)) but received micro-batch ", h[2], " of step ", h[1], " kind ", h[3],
                   " with ", h[4], " tensor(s); the stages disagree on the batches"));
}

absl::StatusOr<std::vector<std::vector<torch::Tensor>>> BoundaryTransfer::Exchange(
    const std::vector<OutgoingMessage>& outgoing, const std::vector<IncomingMessage>& incoming,
    const std::string& where) {
  // Sends: every message's header and tensors.
  std::vector<comm::P2POp> sends;
  bool queued_downloads = false;
  for (const OutgoingMessage& out : outgoing) {
    torch::Tensor header = torch::zeros({kHeaderSize}, torch::kLong);
    auto h = header.accessor<int64_t, 1>();
    h[0] = kMagic, h[1] = out.step, h[2] = out.micro_batch, h[3] = out.kind;
    h[4] = static_cast<int64_t>(out.tensors.size());
    for (size_t i = 0; i < out.tensors.size() && i < kHeaderTensors; ++i) {
      h[5 + i] = out.tensors[i].numel();
    }
    sends.push_back({comm::P2POp::Kind::kSend, header.to(TransportOptions(torch::kLong).device()),
                     out.peer_rank, out.kind});
    for (size_t i = 0; i < out.tensors.size(); ++i) {
      torch::Tensor wire = ToWire(out.tensors[i], wire_dtype_);
      if (stage_through_host_) {
        torch::Tensor host =
            HostBuffer(true, out.peer_rank, out.kind, i, wire.sizes(), wire.scalar_type());
        host.copy_(wire, kNonBlockingCopies);
        queued_downloads = true;
        wire = host;
      }
      sends.push_back({comm::P2POp::Kind::kSend, wire, out.peer_rank, out.kind});
    }
  }
#ifdef DEEPNET_HAVE_CUDA
  // The host transport reads the staged bytes: the queued downloads must have landed. The one
  // host synchronisation of a tick, and only when staging.
  if (queued_downloads) c10::cuda::getCurrentCUDAStream(device_.index()).synchronize();
#endif
  (void)queued_downloads;
  const c10::ScalarType wire_in = wire_dtype_.value_or(compute_dtype_);
  std::vector<torch::Tensor> headers;
  std::vector<std::vector<torch::Tensor>> buffers(incoming.size());
  auto add_buffers = [&](size_t m, std::vector<comm::P2POp>& ops) {
    const IncomingMessage& in = incoming[m];
    for (size_t i = 0; i < in.shapes.size(); ++i) {
      buffers[m].push_back(Buffer(false, in.peer_rank, in.kind, i, in.shapes[i], wire_in));
      ops.push_back({comm::P2POp::Kind::kRecv, buffers[m].back(), in.peer_rank, in.kind});
    }
  };
  std::vector<comm::P2POp> ops = std::move(sends);
  for (const IncomingMessage& in : incoming) {
    headers.push_back(torch::zeros({kHeaderSize}, TransportOptions(torch::kLong)));
    ops.push_back({comm::P2POp::Kind::kRecv, headers.back(), in.peer_rank, in.kind});
  }
  if (world_->capabilities().grouped_p2p) {
    // NCCL: everything in one group (a later operation would start only after this group, sends
    // included, has finished). Sizes are checked against the header afterwards.
    for (size_t m = 0; m < incoming.size(); ++m) add_buffers(m, ops);
    auto group = world_->StartGroup(std::move(ops));
    if (!group.ok()) return group.status();
    if (absl::Status s = (*group)->Wait(); !s.ok()) return s;
    for (size_t m = 0; m < incoming.size(); ++m) {
      if (absl::Status s = CheckHeader(headers[m], incoming[m], where); !s.ok()) return s;
    }
  } else {
    // Host transports: the sends and the header receives are posted together; each message's
    // tensors are received once its header has arrived and agrees, so a disagreement is an
    // error naming the batch instead of a transport receiving more bytes than it expects. A
    // header arrives as soon as its sender has posted, so a send still completes exactly when
    // its receiver has posted its group: the rendezvous model of CheckSchedule.
    const size_t header_start = ops.size() - incoming.size();
    std::vector<std::unique_ptr<comm::CommWork>> works;
    std::vector<comm::P2POp> header_receives(ops.begin() + header_start, ops.end());
    ops.resize(header_start);
    auto sent = world_->StartGroup(std::move(ops));
    if (!sent.ok()) return sent.status();
    works.push_back(*std::move(sent));
    std::vector<std::unique_ptr<comm::CommWork>> header_works;
    for (comm::P2POp& op : header_receives) {
      auto work = world_->RecvAsync(op.tensor, op.peer, op.tag);
      if (!work.ok()) return work.status();
      header_works.push_back(*std::move(work));
    }
    for (size_t m = 0; m < incoming.size(); ++m) {
      if (absl::Status s = header_works[m]->Wait(); !s.ok()) return s;
      if (absl::Status s = CheckHeader(headers[m], incoming[m], where); !s.ok()) return s;
      std::vector<comm::P2POp> receives;
      add_buffers(m, receives);
      auto work = world_->StartGroup(std::move(receives));
      if (!work.ok()) return work.status();
      works.push_back(*std::move(work));
    }
    for (size_t k = works.size(); k-- > 0;) {  // Receives first, then the sends.
      if (absl::Status s = works[k]->Wait(); !s.ok()) return s;
    }
  }

  std::vector<std::vector<torch::Tensor>> received;
  for (const std::vector<torch::Tensor>& message : buffers) {
    std::vector<torch::Tensor> tensors;
    for (const torch::Tensor& buffer : message) {
      torch::Tensor local = buffer;
      if (stage_through_host_) {
        local = torch::empty(buffer.sizes(),
                             torch::TensorOptions().dtype(buffer.scalar_type()).device(device_));
        local.copy_(buffer, kNonBlockingCopies);
        MarkInUse(buffer);
      }
      tensors.push_back(FromWire(local, compute_dtype_));
    }
    received.push_back(std::move(tensors));
  }
  return received;
}

}  // namespace deepnet::pipeline
