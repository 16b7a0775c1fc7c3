#include "comm/gloo_communicator.h"

// ProcessGroupGloo.hpp is empty unless USE_C10D_GLOO is defined (worker/CMakeLists.txt).

#include <algorithm>
#include <exception>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/comm_log.h"
#include "absl/strings/str_split.h"
#include "comm/communicator_checks.h"
#include "comm/wait_once_work.h"

namespace deepnet::comm {

using internal::CheckPeer;
using internal::CheckTensor;
using internal::DescribeTensor;
using Clock = std::chrono::steady_clock;

struct GlooCommunicator::State {
  c10::intrusive_ptr<c10d::Store> store;  // This group's keys; children use sub-prefixes.
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;  // Null after Abort.
  std::string hostname;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  int splits = 0;  // Split() calls so far; names each split's keys.
  internal::AbortLatch abort;

  std::string Label() const { return internal::RankLabel(rank, size); }
  absl::Status CheckUsable(const std::string& op) const {
    return abort.Check(Label(), op);
  }
  // Marks the group failed and drops the process group so that peers see closed sockets.
  absl::Status Fail(absl::Status status) {
    if (abort.Trip(std::string(status.message()))) group.reset();
    return status;
  }
};

namespace {

std::string ExceptionText(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

// Turns a failure reported by Gloo into a Status: DeadlineExceeded once the deadline has passed
// (or Gloo says it timed out), else Unavailable (a peer closed its sockets, the transport broke).
absl::Status GlooFailure(const GlooCommunicator::State& state, const std::string& what,
                         const std::string& text, Clock::time_point deadline) {
  if (Clock::now() >= deadline || absl::StrContains(text, "imed out")) {
    return absl::DeadlineExceededError(absl::StrCat(what, " did not complete within ",
                                                    internal::FormatDuration(state.timeout),
                                                    " (gloo: ", text, ")"));
  }
  return absl::UnavailableError(absl::StrCat(what, " failed (gloo: ", text, ")"));
}

// Runs `start` (which calls into the process group); converts what it throws into a Status.
template <typename Start>
absl::StatusOr<c10::intrusive_ptr<c10d::Work>> StartOp(GlooCommunicator::State& state,
                                                       const std::string& what, Start start) {
  try {
    return start(*state.group);
  } catch (const std::exception& e) {
    // Argument errors (an unsupported dtype) surface here, before anything was sent, so the
    // group stays usable.
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", ExceptionText(std::current_exception())));
  }
}

class GlooWork final : public internal::WaitOnceWork {
 public:
  GlooWork(std::shared_ptr<GlooCommunicator::State> state, c10::intrusive_ptr<c10d::Work> work,
           torch::Tensor tensor, std::string what)
      : WaitOnceWork(state->timeout),
        state_(std::move(state)),
        work_(std::move(work)),
        tensor_(std::move(tensor)),
        what_(std::move(what)) {}
  ~GlooWork() override { (void)Wait(); }

 private:
  absl::Status WaitUntil(Clock::time_point deadline) override {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    absl::Status result;
    try {
      // At least 1 ms: 0 means "no timeout" to c10d.
      work_->wait(std::max(left, std::chrono::milliseconds(1)));
    } catch (const std::exception&) {
      result = state_->Fail(
          GlooFailure(*state_, what_, ExceptionText(std::current_exception()), deadline));
    }
    work_.reset();
    return result;
  }

  std::shared_ptr<GlooCommunicator::State> state_;
  c10::intrusive_ptr<c10d::Work> work_;
  torch::Tensor tensor_;  // Keeps the buffer alive until the work completes.
  std::string what_;
};

absl::StatusOr<c10::intrusive_ptr<c10d::ProcessGroupGloo>> ConnectGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, const std::string& hostname, const std::string& label) {
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(hostname.empty()
                                   ? c10d::ProcessGroupGloo::createDefaultDevice()
                                   : c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
    // The process group keeps its rendezvous keys under "pg/" of the group's store.
    auto pg_store = c10::make_intrusive<c10d::PrefixStore>("pg", store);
    return c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, rank, size, options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(label, ": connecting the gloo group of ", size,
                                               " (sockets on \"", hostname, "\") failed within ",
                                               internal::FormatDuration(timeout), ": ",
                                               ExceptionText(std::current_exception())));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout,
    const std::string& hostname) {
  const std::string label = internal::RankLabel(rank, size);
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(label + ": not a rank of the group");
  }
  if (timeout.count() <= 0) {
    return absl::InvalidArgumentError(label + ": gloo communicator timeout must be > 0");
  }
  if (!store) return absl::InvalidArgumentError(label + ": gloo communicator needs a store");
  auto group = ConnectGroup(store, rank, size, timeout, hostname, label);
  if (!group.ok()) return group.status();
  auto state = std::make_shared<State>();
  state->store = std::move(store);
  state->group = *std::move(group);
  state->hostname = hostname;
  state->rank = rank;
  state->size = size;
  state->timeout = timeout;
  return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(std::move(state)));
}

GlooCommunicator::GlooCommunicator(std::shared_ptr<State> state) : state_(std::move(state)) {}

GlooCommunicator::~GlooCommunicator() = default;

int GlooCommunicator::rank() const { return state_->rank; }
int GlooCommunicator::size() const { return state_->size; }

absl::StatusOr<std::unique_ptr<CommWork>> GlooCommunicator::AllReduceSumAsync(
    torch::Tensor tensor) {
  if (absl::Status s = state_->CheckUsable("all_reduce"); !s.ok()) return s;
  const std::string what =
      absl::StrCat(state_->Label(), ": all_reduce of ", DescribeTensor(tensor));
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/true, what); !s.ok()) return s;
  auto work = StartOp(*state_, what, [&](c10d::ProcessGroupGloo& group) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return group.allreduce(tensors, options);
  });
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(
      std::make_unique<GlooWork>(state_, *std::move(work), std::move(tensor), what));
}

absl::Status GlooCommunicator::Broadcast(torch::Tensor& tensor, int root) {
  if (absl::Status s = state_->CheckUsable("broadcast"); !s.ok()) return s;
  const std::string what =
      absl::StrCat(state_->Label(), ": broadcast of ", DescribeTensor(tensor), " from root ", root);
  if (root < 0 || root >= state_->size) {
    return absl::InvalidArgumentError(what + ": root is outside the group");
  }
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/true, what); !s.ok()) return s;
  auto work = StartOp(*state_, what, [&](c10d::ProcessGroupGloo& group) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return group.broadcast(tensors, options);
  });
  if (!work.ok()) return work.status();
  return GlooWork(state_, *std::move(work), tensor, what).Wait();
}

absl::StatusOr<std::unique_ptr<CommWork>> GlooCommunicator::SendAsync(torch::Tensor tensor, int dst,
                                                                      int tag) {
  if (absl::Status s = state_->CheckUsable("send"); !s.ok()) return s;
  const std::string what = absl::StrCat(state_->Label(), ": send of ", DescribeTensor(tensor),
                                        " to rank ", dst, " tag ", tag);
  if (absl::Status s = CheckPeer(dst, tag, state_->size, what); !s.ok()) return s;
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/true, what); !s.ok()) return s;
  auto work = StartOp(*state_, what, [&](c10d::ProcessGroupGloo& group) {
    std::vector<at::Tensor> tensors{tensor};
    return group.send(tensors, dst, tag);
  });
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(
      std::make_unique<GlooWork>(state_, *std::move(work), std::move(tensor), what));
}

absl::StatusOr<std::unique_ptr<CommWork>> GlooCommunicator::RecvAsync(torch::Tensor tensor, int src,
                                                                      int tag) {
  if (absl::Status s = state_->CheckUsable("recv"); !s.ok()) return s;
  const std::string what = absl::StrCat(state_->Label(), ": recv of ", DescribeTensor(tensor),
                                        " from rank ", src, " tag ", tag);
  if (absl::Status s = CheckPeer(src, tag, state_->size, what); !s.ok()) return s;
  if (absl::Status s = CheckTensor(tensor, /*require_cpu=*/true, what); !s.ok()) return s;
  auto work = StartOp(*state_, what, [&](c10d::ProcessGroupGloo& group) {
    std::vector<at::Tensor> tensors{tensor};
    return group.recv(tensors, src, tag);
  });
  if (!work.ok()) return work.status();
  return std::unique_ptr<CommWork>(
      std::make_unique<GlooWork>(state_, *std::move(work), std::move(tensor), what));
}

absl::Status GlooCommunicator::Barrier() {
  if (absl::Status s = state_->CheckUsable("barrier"); !s.ok()) return s;
  const std::string what = state_->Label() + ": barrier";
  auto work = StartOp(*state_, what, [&](c10d::ProcessGroupGloo& group) {
    return group.barrier(c10d::BarrierOptions());
  });
  if (!work.ok()) return work.status();
  return GlooWork(state_, *std::move(work), torch::Tensor(), what).Wait();
}

absl::StatusOr<std::unique_ptr<Communicator>> GlooCommunicator::Split(int color, int key) {
  if (absl::Status s = state_->CheckUsable("split"); !s.ok()) return s;
  const int split = state_->splits++;
  const std::string what =
      absl::StrCat(state_->Label(), ": split #", split, " (color ", color, ", key ", key, ")");
  // Every rank publishes "color,key" under a prefix unique to this split, then reads everyone's.
  const std::string prefix = absl::StrCat("split/", split, "/");
  std::vector<std::tuple<int, int, int>> members;  // (key, old rank, color) of my color
  try {
    const std::string mine = absl::StrCat(color, ",", key);
    state_->store->set(absl::StrCat(prefix, "rank/", state_->rank),
                       std::vector<uint8_t>(mine.begin(), mine.end()));
    for (int peer = 0; peer < state_->size; ++peer) {
      const std::vector<uint8_t> value = state_->store->get(absl::StrCat(prefix, "rank/", peer));
      const std::string text(value.begin(), value.end());
      std::vector<std::string> fields = absl::StrSplit(text, ',');
      int peer_color = 0;
      int peer_key = 0;
      if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &peer_color) ||
          !absl::SimpleAtoi(fields[1], &peer_key)) {
        return state_->Fail(absl::InternalError(
            absl::StrCat(what, ": rank ", peer, " published \"", text, "\", not \"color,key\"")));
      }
      if (color >= 0 && peer_color == color) members.emplace_back(peer_key, peer, peer_color);
    }
  } catch (const std::exception& e) {
    return state_->Fail(absl::DeadlineExceededError(
        absl::StrCat(what, ": exchanging (color, key) through the store did not complete within ",
                     internal::FormatDuration(state_->timeout), " (",
                     ExceptionText(std::current_exception()), ")")));
  }
  if (color < 0) return std::unique_ptr<Communicator>();
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (std::get<1>(members[new_rank]) != state_->rank) ++new_rank;
  const int new_size = static_cast<int>(members.size());
  auto store =
      c10::make_intrusive<c10d::PrefixStore>(absl::StrCat(prefix, "color/", color), state_->store);
  auto group = ConnectGroup(store, new_rank, new_size, state_->timeout, state_->hostname,
                            absl::StrCat(what, " -> rank ", new_rank, "/", new_size));
  if (!group.ok()) return state_->Fail(group.status());
  auto state = std::make_shared<State>();
  state->store = std::move(store);
  state->group = *std::move(group);
  state->hostname = state_->hostname;
  state->rank = new_rank;
  state->size = new_size;
  state->timeout = state_->timeout;
  return std::unique_ptr<Communicator>(new GlooCommunicator(std::move(state)));
}

void GlooCommunicator::Abort(const std::string& reason) {
  if (state_->abort.tripped()) return;
  LogError(absl::StrCat("[comm] ", state_->Label(), ": aborting the gloo group: ", reason));
  state_->abort.Trip(reason);
  state_->group.reset();
}

}  // namespace deepnet::comm
