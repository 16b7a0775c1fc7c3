#include "comm/mpi_communicator.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/comm_log.h"
#include "comm/communicator_checks.h"
#include "comm/wait_once_work.h"

namespace deepnet::comm {

using internal::CheckPeer;
using internal::CheckTensor;
using internal::DescribeTensor;
using Clock = std::chrono::steady_clock;

struct MpiCommunicator::State {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int tag_ub = 32767;  // MPI guarantees at least this.
  std::chrono::milliseconds timeout{0};
  // MPI_Issend instead of MPI_Isend: a send completes only once its receive is posted.
  bool synchronous_sends = false;
  internal::AbortLatch abort;  // After a failed operation: every later call fails.
  // Buffers of requests that timed out: MPI may still write into them (MPI cannot cancel a
  // started collective), so they are never freed.
  std::vector<torch::Tensor> orphaned;

  std::string Label() const { return internal::RankLabel(rank, size); }
  absl::Status CheckUsable(const std::string& op) const {
    return abort.Check(Label(), op);
  }
  // Records a failure; returns it.
  absl::Status Fail(absl::Status status) {
    abort.Trip(std::string(status.message()));
    return status;
  }
};

namespace {

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return absl::StrCat("MPI error ", code);
  return std::string(text, length);
}

// Internal "<what>: <call> failed: <MPI's text>".
absl::Status MpiError(const std::string& what, const char* call, int code) {
  return absl::InternalError(absl::StrCat(what, ": ", call, " failed: ", MpiErrorText(code)));
}

std::optional<MPI_Datatype> ReduceType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return MPI_FLOAT;
    case c10::ScalarType::Double:
      return MPI_DOUBLE;
    case c10::ScalarType::Long:
      return MPI_INT64_T;
    case c10::ScalarType::Int:
      return MPI_INT32_T;
    case c10::ScalarType::Short:
      return MPI_INT16_T;
    case c10::ScalarType::Char:
      return MPI_INT8_T;
    case c10::ScalarType::Byte:
      return MPI_UINT8_T;
    default:
      return std::nullopt;
  }
}

// Byte count of `tensor` as an MPI count; InvalidArgument past INT_MAX.
absl::StatusOr<int> ByteCount(const torch::Tensor& tensor, const std::string& what) {
  const int64_t bytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
  if (bytes > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", bytes, " bytes exceed MPI's int count; split the tensor"));
  }
  return static_cast<int>(bytes);
}

// Polls `request` until it completes or `deadline` passes. Backs off from spinning to 1 ms
// sleeps so that oversubscribed ranks leave the CPU to their peers.
absl::Status WaitRequest(MpiCommunicator::State& state, MPI_Request& request, MPI_Status& status,
                         const std::string& what, Clock::time_point deadline) {
  auto sleep = std::chrono::microseconds(0);
  for (int polls = 0;; ++polls) {
    int done = 0;
    int rc = MPI_Test(&request, &done, &status);
    if (rc != MPI_SUCCESS) {
      const int code = rc == MPI_ERR_IN_STATUS ? status.MPI_ERROR : rc;
      return state.Fail(MpiError(what, "MPI_Test", code));
    }
    if (done) return absl::OkStatus();
    if (Clock::now() >= deadline) {
      // MPI cannot cancel a started collective: the request stays pending, and the
      // communicator is unusable from now on.
      return state.Fail(internal::DeadlineError(what, state.timeout));
    }
    if (polls < 64) {
      std::this_thread::yield();
    } else {
      sleep = std::min<std::chrono::microseconds>(std::chrono::microseconds(1000),
                                                  sleep + std::chrono::microseconds(20));
      std::this_thread::sleep_for(sleep);
    }
  }
}

// One started MPI request and the tensor it reads or writes.
class MpiWork final : public internal::WaitOnceWork {
 public:
  MpiWork(std::shared_ptr<MpiCommunicator::State> state, MPI_Request request, torch::Tensor tensor,
          std::string what, int expected_bytes)
      : WaitOnceWork(state->timeout),
        state_(std::move(state)),
        request_(request),
        tensor_(std::move(tensor)),
        what_(std::move(what)),
        expected_bytes_(expected_bytes) {}
  ~MpiWork() override { (void)Wait(); }

 private:
  absl::Status WaitUntil(Clock::time_point deadline) override {
    MPI_Status status;
    absl::Status result = WaitRequest(*state_, request_, status, what_, deadline);
    if (absl::IsDeadlineExceeded(result) && tensor_.defined()) {
      state_->orphaned.push_back(tensor_);
    }
    if (result.ok() && expected_bytes_ >= 0) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      if (count != expected_bytes_) {
        result = state_->Fail(absl::InvalidArgumentError(
            absl::StrCat(what_, ": received ", count, " bytes, expected ", expected_bytes_)));
      }
    }
    return result;
  }

  std::shared_ptr<MpiCommunicator::State> state_;
  MPI_Request request_;
  torch::Tensor tensor_;  // Keeps the buffer alive until the request completes.
  std::string what_;
  int expected_bytes_;  // Receives: the byte count the message must have; else -1.
};

}  // namespace

bool MpiCommunicator::SynchronousSendsRequested() {
  const char* value = std::getenv("DEEPNET_MPI_SYNC_SEND");
  return value != nullptr && std::string(value) == "1";
}

absl::StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::CreateWorld(
    const MpiSession& mpi, std::chrono::milliseconds timeout) {
  const std::string label = internal::RankLabel(mpi.world_rank(), mpi.world_size());
  if (timeout.count() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": MPI communicator timeout must be > 0"));
  }
  auto state = std::make_shared<State>();
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, &state->comm); rc != MPI_SUCCESS) {
    return MpiError(label, "MPI_Comm_dup(MPI_COMM_WORLD)", rc);
  }
  MPI_Comm_set_errhandler(state->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(state->comm, &state->rank);
  MPI_Comm_size(state->comm, &state->size);
  void* tag_ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  if (flag) state->tag_ub = *static_cast<int*>(tag_ub);
  state->timeout = timeout;
  state->synchronous_sends = SynchronousSendsRequested();
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(state)));
}

MpiCommunicator::MpiCommunicator(std::shared_ptr<State> state) : state_(std::move(state)) {}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // A failed communicator may still have requests in flight; leave it to MPI_Finalize/Abort.
  if (!state_->abort.tripped() && !finalized && state_->comm != MPI_COMM_NULL) {
    MPI_Comm_free(&state_->comm);
  }
  if (!state_->orphaned.empty()) {
    // Deliberately leaked: pending requests may write into them until MPI_Abort/Finalize.
    static_cast<void>(new std::vector<torch::Tensor>(std::move(state_->orphaned)));
  }
}

int MpiCommunicator::rank() const { return state_->rank; }
int MpiCommunicator::size() const { return state_->size; }
bool MpiCommunicator::synchronous_sends() const { return state_->synchronous_sends; }

absl::StatusOr<std::unique_ptr<CommWork>> MpiCommunicator::AllReduceSumAsync(torch::Tensor tensor) {
  if (absl::Status s = state_->CheckUsable("all_reduce"); !s.ok()) return s;
  const std::string what =
      absl::StrCat(state_->Label(), ": all_reduce of ", DescribeTensor(tensor));
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/true, what); !s.ok()) return s;
  std::optional<MPI_Datatype> type = ReduceType(tensor.scalar_type());
  if (!type) {
    return absl::InvalidArgumentError(
        what + ": MPI sums float32, float64, int64, int32, int16, int8 and uint8 only");
  }
  if (tensor.numel() > INT_MAX) {
    return absl::InvalidArgumentError(what + ": more elements than MPI's int count");
  }
  MPI_Request request;
  if (int rc = MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()),
                              *type, MPI_SUM, state_->comm, &request);
      rc != MPI_SUCCESS) {
    return state_->Fail(MpiError(what, "MPI_Iallreduce", rc));
  }
  return std::unique_ptr<CommWork>(
      std::make_unique<MpiWork>(state_, request, std::move(tensor), what, -1));
}

absl::Status MpiCommunicator::Broadcast(torch::Tensor& tensor, int root) {
  if (absl::Status s = state_->CheckUsable("broadcast"); !s.ok()) return s;
  const std::string what =
      absl::StrCat(state_->Label(), ": broadcast of ", DescribeTensor(tensor), " from root ", root);
  if (root < 0 || root >= state_->size) {
    return absl::InvalidArgumentError(what + ": root is outside the group");
  }
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/true, what); !s.ok()) return s;
  absl::StatusOr<int> bytes = ByteCount(tensor, what);
  if (!bytes.ok()) return bytes.status();
  MPI_Request request;
  if (int rc = MPI_Ibcast(tensor.data_ptr(), *bytes, MPI_BYTE, root, state_->comm, &request);
      rc != MPI_SUCCESS) {
    return state_->Fail(MpiError(what, "MPI_Ibcast", rc));
  }
  return MpiWork(state_, request, tensor, what, -1).Wait();
}

absl::StatusOr<std::unique_ptr<CommWork>> MpiCommunicator::SendAsync(torch::Tensor tensor, int dst,
                                                                     int tag) {
  return PointToPoint(/*send=*/true, std::move(tensor), dst, tag);
}

absl::StatusOr<std::unique_ptr<CommWork>> MpiCommunicator::RecvAsync(torch::Tensor tensor, int src,
                                                                     int tag) {
  return PointToPoint(/*send=*/false, std::move(tensor), src, tag);
}

absl::StatusOr<std::unique_ptr<CommWork>> MpiCommunicator::PointToPoint(bool send,
                                                                        torch::Tensor tensor,
                                                                        int peer, int tag) {
  const char* op = send ? "send" : "recv";
  if (absl::Status s = state_->CheckUsable(op); !s.ok()) return s;
  const std::string what = absl::StrCat(state_->Label(), ": ", op, " of ", DescribeTensor(tensor),
                                        send ? " to rank " : " from rank ", peer, " tag ", tag);
  if (absl::Status s = CheckPeer(peer, tag, state_->size, what); !s.ok()) return s;
  if (tag > state_->tag_ub) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": tag exceeds MPI_TAG_UB ", state_->tag_ub));
  }
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/true, what); !s.ok()) return s;
  absl::StatusOr<int> bytes = ByteCount(tensor, what);
  if (!bytes.ok()) return bytes.status();
  MPI_Request request;
  const bool sync = send && state_->synchronous_sends;
  const int rc =
      sync   ? MPI_Issend(tensor.data_ptr(), *bytes, MPI_BYTE, peer, tag, state_->comm, &request)
      : send ? MPI_Isend(tensor.data_ptr(), *bytes, MPI_BYTE, peer, tag, state_->comm, &request)
             : MPI_Irecv(tensor.data_ptr(), *bytes, MPI_BYTE, peer, tag, state_->comm, &request);
  if (rc != MPI_SUCCESS) {
    return state_->Fail(MpiError(what, sync ? "MPI_Issend" : send ? "MPI_Isend" : "MPI_Irecv", rc));
  }
  // A receive checks the size that arrived; a send has nothing to check.
  return std::unique_ptr<CommWork>(
      std::make_unique<MpiWork>(state_, request, std::move(tensor), what, send ? -1 : *bytes));
}

absl::Status MpiCommunicator::Barrier() {
  if (absl::Status s = state_->CheckUsable("barrier"); !s.ok()) return s;
  const std::string what = state_->Label() + ": barrier";
  MPI_Request request;
  if (int rc = MPI_Ibarrier(state_->comm, &request); rc != MPI_SUCCESS) {
    return state_->Fail(MpiError(what, "MPI_Ibarrier", rc));
  }
  return MpiWork(state_, request, torch::Tensor(), what, -1).Wait();
}

absl::StatusOr<std::unique_ptr<Communicator>> MpiCommunicator::Split(int color, int key) {
  if (absl::Status s = state_->CheckUsable("split"); !s.ok()) return s;
  const std::string what =
      absl::StrCat(state_->Label(), ": split (color ", color, ", key ", key, ")");
  // MPI_Comm_split blocks without a timeout; a timed all-gather first makes sure every rank
  // has arrived, so a missing rank shows as DeadlineExceeded instead of a hang.
  // [0, 2): this rank's (color, key); [2, 2 + 2 * size): everyone's.
  torch::Tensor buffer = torch::empty({2 + 2 * static_cast<int64_t>(state_->size)}, torch::kInt32);
  int* pairs = buffer.data_ptr<int32_t>();
  pairs[0] = color;
  pairs[1] = key;
  MPI_Request request;
  if (int rc = MPI_Iallgather(pairs, 2, MPI_INT, pairs + 2, 2, MPI_INT, state_->comm, &request);
      rc != MPI_SUCCESS) {
    return state_->Fail(MpiError(what, "MPI_Iallgather", rc));
  }
  if (absl::Status s = MpiWork(state_, request, buffer, what, -1).Wait(); !s.ok()) {
    return s;
  }
  MPI_Comm comm = MPI_COMM_NULL;
  if (int rc = MPI_Comm_split(state_->comm, color < 0 ? MPI_UNDEFINED : color, key, &comm);
      rc != MPI_SUCCESS) {
    return state_->Fail(MpiError(what, "MPI_Comm_split", rc));
  }
  if (color < 0) return std::unique_ptr<Communicator>();
  auto state = std::make_shared<State>();
  state->comm = comm;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &state->rank);
  MPI_Comm_size(comm, &state->size);
  state->tag_ub = state_->tag_ub;
  state->timeout = state_->timeout;
  state->synchronous_sends = state_->synchronous_sends;
  return std::unique_ptr<Communicator>(new MpiCommunicator(std::move(state)));
}

void MpiCommunicator::Abort(const std::string& reason) {
  LogError(absl::StrCat("[comm] ", state_->Label(), ": aborting the MPI job: ", reason));
  state_->abort.Trip(reason);
  MPI_Abort(state_->comm == MPI_COMM_NULL ? MPI_COMM_WORLD : state_->comm, 1);
}

}  // namespace deepnet::comm
