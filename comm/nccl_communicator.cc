#include "comm/nccl_communicator.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/comm_log.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/communicator_checks.h"
#include "comm/wait_once_work.h"

namespace deepnet::comm {

using internal::CheckPeer;
using internal::CheckTensor;
using internal::DescribeTensor;
using Clock = std::chrono::steady_clock;

struct NcclCommunicator::State {
  c10::intrusive_ptr<c10d::Store> store;  // This group's keys; splits use sub-prefixes.
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  int splits = 0;
  internal::AbortLatch abort;

  std::string Label() const { return internal::RankLabel(rank, size); }
  absl::Status CheckUsable(const std::string& op) const {
    return abort.Check(Label(), op);
  }
  // ncclCommAbort so that kernels stuck waiting for peers return; every later call fails.
  absl::Status Fail(absl::Status status) {
    if (abort.Trip(std::string(status.message())) && comm != nullptr) ncclCommAbort(comm);
    return status;
  }
};

namespace {

absl::Status NcclError(const std::string& what, const char* call, ncclResult_t result) {
  return absl::UnavailableError(
      absl::StrCat(what, ": ", call, " failed: ", ncclGetErrorString(result)));
}

absl::Status CudaError(const std::string& what, const char* call, cudaError_t error) {
  return absl::InternalError(
      absl::StrCat(what, ": ", call, " failed: ", cudaGetErrorString(error)));
}

std::optional<ncclDataType_t> NcclType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return ncclFloat32;
    case c10::ScalarType::Double:
      return ncclFloat64;
    case c10::ScalarType::Half:
      return ncclFloat16;
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case c10::ScalarType::BFloat16:
      return ncclBfloat16;
#endif
    case c10::ScalarType::Long:
      return ncclInt64;
    case c10::ScalarType::Int:
      return ncclInt32;
    case c10::ScalarType::Char:
      return ncclInt8;
    case c10::ScalarType::Byte:
      return ncclUint8;
    default:
      return std::nullopt;
  }
}

// A CUDA event recorded on the communicator's stream after one operation.
class NcclWork final : public internal::WaitOnceWork {
 public:
  NcclWork(std::shared_ptr<NcclCommunicator::State> state, cudaEvent_t done,
           std::vector<torch::Tensor> tensors, std::string what)
      : WaitOnceWork(state->timeout),
        state_(std::move(state)),
        done_(done),
        tensors_(std::move(tensors)),
        what_(std::move(what)) {}
  ~NcclWork() override {
    (void)Wait();
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(state_->device));
    cudaEventDestroy(done_);
  }

 private:
  // Polls the event (and NCCL's asynchronous error) until it completes or `deadline` passes.
  absl::Status WaitUntil(Clock::time_point deadline) override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(state_->device));
    auto sleep = std::chrono::microseconds(0);
    for (;;) {
      const cudaError_t query = cudaEventQuery(done_);
      if (query == cudaSuccess) return absl::OkStatus();
      if (query != cudaErrorNotReady) {
        return state_->Fail(CudaError(what_, "cudaEventQuery", query));
      }
      if (state_->abort.tripped()) {
        return state_->abort.Check(state_->Label(), what_);
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(state_->comm, &async);
      if (async != ncclSuccess) {
        return state_->Fail(NcclError(what_, "NCCL (asynchronous error)", async));
      }
      if (Clock::now() >= deadline) {
        return state_->Fail(internal::DeadlineError(what_, state_->timeout));
      }
      sleep = std::min<std::chrono::microseconds>(std::chrono::microseconds(1000),
                                                  sleep + std::chrono::microseconds(10));
      std::this_thread::sleep_for(sleep);
    }
  }

  std::shared_ptr<NcclCommunicator::State> state_;
  cudaEvent_t done_;
  std::vector<torch::Tensor> tensors_;  // Keep the buffers alive until the stream is done.
  std::string what_;
};

// Orders the communicator's stream after the caller's current stream, runs `launch` on it and
// returns a work for the event recorded after it.
template <typename Launch>
absl::StatusOr<std::unique_ptr<CommWork>> Enqueue(
    const std::shared_ptr<NcclCommunicator::State>& state, std::vector<torch::Tensor> tensors,
    const std::string& what, const char* call, Launch launch) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(state->device));
  cudaEvent_t ready = nullptr;
  cudaEvent_t done = nullptr;
  if (cudaError_t e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming); e != cudaSuccess) {
    return CudaError(what, "cudaEventCreateWithFlags", e);
  }
  cudaError_t e = cudaEventRecord(
      ready,
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(state->device)).stream());
  if (e == cudaSuccess) e = cudaStreamWaitEvent(state->stream, ready, 0);
  cudaEventDestroy(ready);  // Safe: destruction is deferred until the event completes.
  if (e != cudaSuccess) return state->Fail(CudaError(what, "ordering after the compute stream", e));
  if (ncclResult_t r = launch(); r != ncclSuccess) return state->Fail(NcclError(what, call, r));
  if (e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming); e != cudaSuccess) {
    return state->Fail(CudaError(what, "cudaEventCreateWithFlags", e));
  }
  if (e = cudaEventRecord(done, state->stream); e != cudaSuccess) {
    cudaEventDestroy(done);
    return state->Fail(CudaError(what, "cudaEventRecord", e));
  }
  return std::unique_ptr<CommWork>(
      std::make_unique<NcclWork>(state, done, std::move(tensors), what));
}

absl::Status CheckCudaTensor(const NcclCommunicator::State& state, const torch::Tensor& tensor,
                             const std::string& what) {
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/false, what); !s.ok()) return s;
  if (!tensor.is_cuda() || tensor.device().index() != state.device) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": tensor is on ", tensor.device().str(),
                                                   ", this communicator uses cuda:", state.device));
  }
  return absl::OkStatus();
}

// Creates the NCCL communicator of `rank` in `size` over `store`: rank 0 publishes the unique
// id; all ranks first wait (with the timeout) until everyone has arrived, because
// ncclCommInitRank itself has no timeout.
absl::StatusOr<std::shared_ptr<NcclCommunicator::State>> Connect(
    c10::intrusive_ptr<c10d::Store> store, int rank, int size, int device,
    std::chrono::milliseconds timeout) {
  auto state = std::make_shared<NcclCommunicator::State>();
  state->store = std::move(store);
  state->rank = rank;
  state->size = size;
  state->device = device;
  state->timeout = timeout;
  const std::string what = state->Label() + ": connecting the nccl group";
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  ncclUniqueId id;
  try {
    if (rank == 0) {
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
        return NcclError(what, "ncclGetUniqueId", r);
      }
      const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
      state->store->set("nccl_id", std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    }
    state->store->set(absl::StrCat("arrived/", rank), std::vector<uint8_t>{1});
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat("arrived/", r));
    state->store->wait(keys, timeout);
    const std::vector<uint8_t> value = state->store->get("nccl_id");
    if (value.size() != sizeof(id)) {
      return absl::InternalError(absl::StrCat(what, ": the store's nccl_id has ", value.size(),
                                              " bytes, expected ", sizeof(id)));
    }
    std::memcpy(&id, value.data(), sizeof(id));
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": not every rank arrived within ",
                                                    internal::FormatDuration(timeout), " (",
                                                    e.what(), ")"));
  }
  if (cudaError_t e = cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError(what, "cudaStreamCreateWithFlags", e);
  }
  if (ncclResult_t r = ncclCommInitRank(&state->comm, size, id, rank); r != ncclSuccess) {
    cudaStreamDestroy(state->stream);
    state->stream = nullptr;
    state->comm = nullptr;
    return NcclError(what, "ncclCommInitRank", r);
  }
  return state;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    c10::intrusive_ptr<c10d::Store> store, int rank, int size, int device_index,
    std::chrono::milliseconds timeout) {
  const std::string label = internal::RankLabel(rank, size);
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(label + ": not a rank of the group");
  }
  if (timeout.count() <= 0) return absl::InvalidArgumentError(label + ": timeout must be > 0");
  if (!store) return absl::InvalidArgumentError(label + ": nccl communicator needs a store");
  auto state = Connect(std::move(store), rank, size, device_index, timeout);
  if (!state.ok()) return state.status();
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(*std::move(state)));
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<State> state) : state_(std::move(state)) {}

NcclCommunicator::~NcclCommunicator() {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(state_->device));
  if (!state_->abort.tripped() && state_->comm != nullptr) ncclCommDestroy(state_->comm);
  if (state_->stream != nullptr) cudaStreamDestroy(state_->stream);
}

int NcclCommunicator::rank() const { return state_->rank; }
int NcclCommunicator::size() const { return state_->size; }

CommCapabilities NcclCommunicator::capabilities() const {
  return {/*host_tensors=*/false, /*device_tensors=*/true,
          /*bf16_sums=*/NcclType(c10::ScalarType::BFloat16).has_value(), /*grouped_p2p=*/true};
}

absl::StatusOr<std::unique_ptr<CommWork>> NcclCommunicator::AllReduceSumAsync(
    torch::Tensor tensor) {
  if (absl::Status s = state_->CheckUsable("all_reduce"); !s.ok()) return s;
  const std::string what =
      absl::StrCat(state_->Label(), ": all_reduce of ", DescribeTensor(tensor));
  if (absl::Status s = CheckCudaTensor(*state_, tensor, what); !s.ok()) return s;
  std::optional<ncclDataType_t> type = NcclType(tensor.scalar_type());
  if (!type) return absl::InvalidArgumentError(what + ": dtype not supported by NCCL");
  void* data = tensor.data_ptr();
  const size_t count = static_cast<size_t>(tensor.numel());
  return Enqueue(state_, {std::move(tensor)}, what, "ncclAllReduce", [&] {
    return ncclAllReduce(data, data, count, *type, ncclSum, state_->comm, state_->stream);
  });
}

absl::Status NcclCommunicator::Broadcast(torch::Tensor& tensor, int root) {
  if (absl::Status s = state_->CheckUsable("broadcast"); !s.ok()) return s;
  const std::string what =
      absl::StrCat(state_->Label(), ": broadcast of ", DescribeTensor(tensor), " from root ", root);
  if (root < 0 || root >= state_->size) {
    return absl::InvalidArgumentError(what + ": root is outside the group");
  }
  if (absl::Status s = CheckCudaTensor(*state_, tensor, what); !s.ok()) return s;
  void* data = tensor.data_ptr();
  const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
  auto work = Enqueue(state_, {tensor}, what, "ncclBroadcast", [&] {
    return ncclBroadcast(data, data, bytes, ncclUint8, root, state_->comm, state_->stream);
  });
  if (!work.ok()) return work.status();
  return (*work)->Wait();
}

absl::StatusOr<std::unique_ptr<CommWork>> NcclCommunicator::SendAsync(torch::Tensor tensor, int dst,
                                                                      int tag) {
  if (absl::Status s = state_->CheckUsable("send"); !s.ok()) return s;
  const std::string what = absl::StrCat(state_->Label(), ": send of ", DescribeTensor(tensor),
                                        " to rank ", dst, " tag ", tag);
  if (absl::Status s = CheckPeer(dst, tag, state_->size, what); !s.ok()) return s;
  if (absl::Status s = CheckCudaTensor(*state_, tensor, what); !s.ok()) return s;
  void* data = tensor.data_ptr();
  const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
  return Enqueue(state_, {std::move(tensor)}, what, "ncclSend", [&] {
    return ncclSend(data, bytes, ncclUint8, dst, state_->comm, state_->stream);
  });
}

absl::StatusOr<std::unique_ptr<CommWork>> NcclCommunicator::RecvAsync(torch::Tensor tensor, int src,
                                                                      int tag) {
  if (absl::Status s = state_->CheckUsable("recv"); !s.ok()) return s;
  const std::string what = absl::StrCat(state_->Label(), ": recv of ", DescribeTensor(tensor),
                                        " from rank ", src, " tag ", tag);
  if (absl::Status s = CheckPeer(src, tag, state_->size, what); !s.ok()) return s;
  if (absl::Status s = CheckCudaTensor(*state_, tensor, what); !s.ok()) return s;
  void* data = tensor.data_ptr();
  const size_t bytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
  return Enqueue(state_, {std::move(tensor)}, what, "ncclRecv", [&] {
    return ncclRecv(data, bytes, ncclUint8, src, state_->comm, state_->stream);
  });
}

absl::StatusOr<std::unique_ptr<CommWork>> NcclCommunicator::StartGroup(std::vector<P2POp> ops) {
  if (absl::Status s = state_->CheckUsable("group"); !s.ok()) return s;
  std::vector<std::string> parts;
  std::vector<torch::Tensor> tensors;
  for (const P2POp& op : ops) {
    const bool send = op.kind == P2POp::Kind::kSend;
    const std::string part =
        absl::StrCat(send ? "send of " : "recv of ", DescribeTensor(op.tensor),
                     send ? " to rank " : " from rank ", op.peer, " tag ", op.tag);
    const std::string what = absl::StrCat(state_->Label(), ": group: ", part);
    if (absl::Status s = CheckPeer(op.peer, op.tag, state_->size, what); !s.ok()) return s;
    if (absl::Status s = CheckCudaTensor(*state_, op.tensor, what); !s.ok()) return s;
    parts.push_back(part);
    tensors.push_back(op.tensor);
  }
  const std::string what =
      absl::StrCat(state_->Label(), ": group (", absl::StrJoin(parts, ", "), ")");
  // Between ncclGroupStart and ncclGroupEnd nothing blocks: NCCL launches the sends and receives
  // of the group together, so a send never waits on the stream for a receive queued behind it.
  return Enqueue(
      state_, std::move(tensors), what, "ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd",
      [&]() -> ncclResult_t {
        if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) return r;
        for (const P2POp& op : ops) {
          void* data = op.tensor.data_ptr();
          const size_t bytes = static_cast<size_t>(op.tensor.numel()) * op.tensor.element_size();
          const ncclResult_t r =
              op.kind == P2POp::Kind::kSend
                  ? ncclSend(data, bytes, ncclUint8, op.peer, state_->comm, state_->stream)
                  : ncclRecv(data, bytes, ncclUint8, op.peer, state_->comm, state_->stream);
          if (r != ncclSuccess) {
            (void)ncclGroupEnd();
            return r;
          }
        }
        return ncclGroupEnd();
      });
}

absl::Status NcclCommunicator::Barrier() {
  if (absl::Status s = state_->CheckUsable("barrier"); !s.ok()) return s;
  const std::string what = state_->Label() + ": barrier";
  // NCCL has no barrier: a one-element all-reduce that every rank must join.
  torch::Tensor token = torch::zeros(
      {1}, torch::TensorOptions().dtype(torch::kInt32).device(torch::kCUDA, state_->device));
  void* data = token.data_ptr();
  auto work = Enqueue(state_, {token}, what, "ncclAllReduce", [&] {
    return ncclAllReduce(data, data, 1, ncclInt32, ncclSum, state_->comm, state_->stream);
  });
  if (!work.ok()) return work.status();
  return (*work)->Wait();
}

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Split(int color, int key) {
  if (absl::Status s = state_->CheckUsable("split"); !s.ok()) return s;
  const int split = state_->splits++;
  const std::string what =
      absl::StrCat(state_->Label(), ": split #", split, " (color ", color, ", key ", key, ")");
  const std::string prefix = absl::StrCat("split/", split, "/");
  std::vector<std::tuple<int, int>> members;  // (key, old rank) of my color
  try {
    const std::string mine = absl::StrCat(color, ",", key);
    state_->store->set(absl::StrCat(prefix, "rank/", state_->rank),
                       std::vector<uint8_t>(mine.begin(), mine.end()));
    for (int peer = 0; peer < state_->size; ++peer) {
      const std::vector<uint8_t> value = state_->store->get(absl::StrCat(prefix, "rank/", peer));
      std::vector<std::string> fields =
          absl::StrSplit(std::string(value.begin(), value.end()), ',');
      int peer_color = 0;
      int peer_key = 0;
      if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &peer_color) ||
          !absl::SimpleAtoi(fields[1], &peer_key)) {
        return state_->Fail(absl::InternalError(
            absl::StrCat(what, ": rank ", peer, " published no \"color,key\"")));
      }
      if (color >= 0 && peer_color == color) members.emplace_back(peer_key, peer);
    }
  } catch (const std::exception& e) {
    return state_->Fail(absl::DeadlineExceededError(
        absl::StrCat(what, ": exchanging (color, key) through the store failed: ", e.what())));
  }
  if (color < 0) return std::unique_ptr<Communicator>();
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (std::get<1>(members[new_rank]) != state_->rank) ++new_rank;
  auto store =
      c10::make_intrusive<c10d::PrefixStore>(absl::StrCat(prefix, "color/", color), state_->store);
  auto state =
      Connect(store, new_rank, static_cast<int>(members.size()), state_->device, state_->timeout);
  if (!state.ok()) return state_->Fail(state.status());
  return std::unique_ptr<Communicator>(new NcclCommunicator(*std::move(state)));
}

void NcclCommunicator::Abort(const std::string& reason) {
  if (state_->abort.tripped()) return;
  LogError(absl::StrCat("[comm] ", state_->Label(), ": aborting the nccl communicator: ", reason));
  (void)state_->Fail(absl::AbortedError(reason));
}

}  // namespace deepnet::comm
