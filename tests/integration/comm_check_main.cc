// Multi-process check of a Communicator backend. Run one process per rank, e.g.
//   mpirun --oversubscribe --allow-run-as-root -np 3 comm_check --backend mpi
//   DEEPNET_RANK=i DEEPNET_WORLD_SIZE=3 comm_check --backend gloo --rendezvous file:///tmp/x
// Default mode: all-reduce (float32/int64, 1 and 1M elements, sync and async), broadcast from
// the last rank, a ring of sends/receives with two tags in flight, Split into two groups with an
// all-reduce in each, what the backend's capabilities() declare, barrier; prints "N passed, M
// failed" and exits 1 on any failure.
// --fail_mode ungrouped_exchange: send to the next rank, wait, then receive (see
// RunUngroupedExchange).
// --fail_mode skip_collective|sigkill: a loop of all-reduces in which --fail_rank skips one
// (then sleeps) or SIGKILLs itself; the others must report the failure and exit non-zero.
#include <signal.h>
#include <torch/torch.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "comm/communicator_factory.h"
#include "comm/launch_env.h"
#include "comm/mpi_communicator.h"

namespace deepnet::comm {
namespace {

struct Flags {
  std::string backend = "gloo";
  std::string rendezvous;
  std::string rendezvous_dir = "/tmp";
  int timeout_ms = 60000;
  std::string fail_mode = "none";
  int fail_rank = -1;  // -1: the last rank.
  int fail_iteration = 3;
  int iterations = 20;
  std::string marker;  // Only marks the command line, so tests can find leftover processes.
};

std::string label;  // "rank R/N", set once in Run().

void Log(const std::string& line) {
  std::fprintf(stderr, "[comm_check] %s: %s\n", label.c_str(), line.c_str());
  std::fflush(stderr);
}

absl::Status Mismatch(const std::string& what, const torch::Tensor& got,
                      const torch::Tensor& expected) {
  if (torch::equal(got, expected)) return absl::OkStatus();
  const int64_t bad = (got != expected).nonzero().index({0, 0}).item<int64_t>();
  return absl::InternalError(absl::StrCat(what, ": element ", bad, " is ", got[bad].item<double>(),
                                          ", expected ", expected[bad].item<double>()));
}

// Each rank contributes (rank + 1) + i % 7 at index i: exact in float32.
torch::Tensor FloatInput(int64_t n, int rank) {
  return torch::arange(n, torch::kInt64).remainder(7).to(torch::kFloat32) + (rank + 1);
}
torch::Tensor FloatSum(int64_t n, int size) {
  return torch::arange(n, torch::kInt64).remainder(7).to(torch::kFloat32) * size +
         size * (size + 1) / 2;
}
// Values beyond 32 bits so that a truncating transport shows.
torch::Tensor IntInput(int64_t n, int rank) {
  return torch::arange(n, torch::kInt64) + static_cast<int64_t>(rank * 5'000'000'000LL);
}
torch::Tensor IntSum(int64_t n, int size) {
  return torch::arange(n, torch::kInt64) * size +
         static_cast<int64_t>(size * (size - 1) / 2 * 5'000'000'000LL);
}

absl::Status CheckAllReduce(Communicator& comm, bool integer, int64_t n) {
  torch::Tensor t = integer ? IntInput(n, comm.rank()) : FloatInput(n, comm.rank());
  if (absl::Status s = comm.AllReduceSum(t); !s.ok()) return s;
  return Mismatch("all_reduce", t, integer ? IntSum(n, comm.size()) : FloatSum(n, comm.size()));
}

absl::Status CheckAsyncAllReduce(Communicator& comm) {
  const int64_t n = 4096;
  torch::Tensor f = FloatInput(n, comm.rank());
  torch::Tensor i = IntInput(n, comm.rank());
  auto first = comm.AllReduceSumAsync(f);
  if (!first.ok()) return first.status();
  auto second = comm.AllReduceSumAsync(i);
  if (!second.ok()) return second.status();
  if (absl::Status s = (*first)->Wait(); !s.ok()) return s;
  if (absl::Status s = (*second)->Wait(); !s.ok()) return s;
  if (absl::Status s = Mismatch("async float32", f, FloatSum(n, comm.size())); !s.ok()) return s;
  return Mismatch("async int64", i, IntSum(n, comm.size()));
}

absl::Status CheckBroadcast(Communicator& comm) {
  const int root = comm.size() - 1;
  const torch::Tensor expected = torch::arange(1000, torch::kFloat64) * 3 + 1;
  torch::Tensor t = comm.rank() == root ? expected.clone() : torch::zeros({1000}, torch::kFloat64);
  if (absl::Status s = comm.Broadcast(t, root); !s.ok()) return s;
  return Mismatch(absl::StrCat("broadcast from ", root), t, expected);
}

// Sends tag 1 and tag 2 to the next rank, receives them from the previous one in the opposite
// order: the tags must keep the two streams apart.
absl::Status CheckRing(Communicator& comm) {
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  torch::Tensor out1 = torch::full({100}, comm.rank() * 10 + 1, torch::kInt32);
  torch::Tensor out2 = torch::full({50000}, comm.rank() * 10.0 + 2, torch::kFloat32);
  torch::Tensor in1 = torch::zeros({100}, torch::kInt32);
  torch::Tensor in2 = torch::zeros({50000}, torch::kFloat32);
  std::vector<absl::StatusOr<std::unique_ptr<CommWork>>> started;
  started.push_back(comm.RecvAsync(in2, prev, 2));
  started.push_back(comm.RecvAsync(in1, prev, 1));
  started.push_back(comm.SendAsync(out1, next, 1));
  started.push_back(comm.SendAsync(out2, next, 2));
  std::vector<std::unique_ptr<CommWork>> works;
  for (auto& work : started) {
    if (!work.ok()) return work.status();
    works.push_back(*std::move(work));
  }
  for (auto& work : works) {
    if (absl::Status s = work->Wait(); !s.ok()) return s;
  }
  if (absl::Status s =
          Mismatch("ring tag 1", in1, torch::full({100}, prev * 10 + 1, torch::kInt32));
      !s.ok()) {
    return s;
  }
  return Mismatch("ring tag 2", in2, torch::full({50000}, prev * 10.0 + 2, torch::kFloat32));
}

// Every rank sends to both neighbours and receives from both in one group, sends listed first:
// with synchronous sends (DEEPNET_MPI_SYNC_SEND=1, NCCL) posting them one by one and waiting on
// each would deadlock, as a group it must complete.
absl::Status CheckGroupExchange(Communicator& comm) {
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  const int64_t n = 300000;  // Beyond eager limits: a rendezvous on every transport.
  torch::Tensor from_prev = torch::zeros({n}, torch::kFloat32);
  torch::Tensor from_next = torch::zeros({n}, torch::kFloat32);
  std::vector<P2POp> ops;
  ops.push_back({P2POp::Kind::kSend, torch::full({n}, comm.rank() + 0.5f), next, 3});
  ops.push_back({P2POp::Kind::kSend, torch::full({n}, comm.rank() + 0.25f), prev, 4});
  ops.push_back({P2POp::Kind::kRecv, from_prev, prev, 3});
  ops.push_back({P2POp::Kind::kRecv, from_next, next, 4});
  auto group = comm.StartGroup(std::move(ops));
  if (!group.ok()) return group.status();
  if (absl::Status s = (*group)->Wait(); !s.ok()) return s;
  if (absl::Status s =
          Mismatch("group from previous rank", from_prev, torch::full({n}, prev + 0.5f));
      !s.ok()) {
    return s;
  }
  return Mismatch("group from next rank", from_next, torch::full({n}, next + 0.25f));
}

// What callers rely on when a backend declares it (CommCapabilities): without grouped_p2p a
// receive posted after the group that holds the sends it pairs with still lets that group
// complete, synchronous sends included (BoundaryTransfer posts its header receives so); with
// bf16_sums a bfloat16 all-reduce sums (small integers: exact).
absl::Status CheckCapabilities(Communicator& comm) {
  const CommCapabilities capabilities = comm.capabilities();
  if (!capabilities.grouped_p2p) {
    const int next = (comm.rank() + 1) % comm.size();
    const int prev = (comm.rank() + comm.size() - 1) % comm.size();
    const int64_t n = 300000;  // Beyond eager limits: a rendezvous on every transport.
    std::vector<P2POp> sends{{P2POp::Kind::kSend, torch::full({n}, comm.rank() + 0.5f), next, 7}};
    auto group = comm.StartGroup(std::move(sends));
    if (!group.ok()) return group.status();
    torch::Tensor in = torch::zeros({n}, torch::kFloat32);
    auto received = comm.RecvAsync(in, prev, 7);
    if (!received.ok()) return received.status();
    if (absl::Status s = (*received)->Wait(); !s.ok()) return s;
    if (absl::Status s = (*group)->Wait(); !s.ok()) return s;
    if (absl::Status s = Mismatch("receive after the group", in, torch::full({n}, prev + 0.5f));
        !s.ok()) {
      return s;
    }
  }
  if (capabilities.bf16_sums) {
    torch::Tensor t = torch::full({64}, comm.rank() + 1, torch::kBFloat16);
    if (absl::Status s = comm.AllReduceSum(t); !s.ok()) return s;
    const int sum = comm.size() * (comm.size() + 1) / 2;
    return Mismatch("bfloat16 all_reduce", t.to(torch::kFloat32), torch::full({64}, sum * 1.0f));
  }
  return absl::OkStatus();
}

// Even and odd ranks form two groups, ordered by descending old rank (key = -rank).
absl::Status CheckSplit(Communicator& comm) {
  const int color = comm.rank() % 2;
  auto sub = comm.Split(color, -comm.rank());
  if (!sub.ok()) return sub.status();
  if (*sub == nullptr) return absl::InternalError("split returned no group for color >= 0");
  std::vector<int> members;
  for (int r = comm.size() - 1; r >= 0; --r) {
    if (r % 2 == color) members.push_back(r);
  }
  const int expected_rank =
      static_cast<int>(std::find(members.begin(), members.end(), comm.rank()) - members.begin());
  if ((*sub)->size() != static_cast<int>(members.size()) || (*sub)->rank() != expected_rank) {
    return absl::InternalError(absl::StrCat("split group is rank ", (*sub)->rank(), "/",
                                            (*sub)->size(), ", expected ", expected_rank, "/",
                                            members.size()));
  }
  torch::Tensor t = torch::full({8}, comm.rank(), torch::kInt64);
  if (absl::Status s = (*sub)->AllReduceSum(t); !s.ok()) return s;
  int64_t sum = 0;
  for (int r : members) sum += r;
  if (absl::Status s =
          Mismatch("all_reduce in split group", t, torch::full({8}, sum, torch::kInt64));
      !s.ok()) {
    return s;
  }
  // A rank opting out gets no group; everyone must still take part.
  auto none = comm.Split(comm.rank() == 0 ? -1 : 0, 0);
  if (!none.ok()) return none.status();
  if ((comm.rank() == 0) != (*none == nullptr)) {
    return absl::InternalError("split with color -1 must give nullptr, others a group");
  }
  return absl::OkStatus();
}

int RunChecks(Communicator& comm) {
  const std::vector<std::pair<std::string, std::function<absl::Status()>>> checks = {
      {"all_reduce float32 x1", [&] { return CheckAllReduce(comm, false, 1); }},
      {"all_reduce float32 x1M", [&] { return CheckAllReduce(comm, false, 1 << 20); }},
      {"all_reduce int64 x1", [&] { return CheckAllReduce(comm, true, 1); }},
      {"all_reduce int64 x1M", [&] { return CheckAllReduce(comm, true, 1 << 20); }},
      {"async all_reduce", [&] { return CheckAsyncAllReduce(comm); }},
      {"broadcast from last rank", [&] { return CheckBroadcast(comm); }},
      {"ring send/recv, two tags", [&] { return CheckRing(comm); }},
      {"grouped exchange with both neighbours", [&] { return CheckGroupExchange(comm); }},
      {"split", [&] { return CheckSplit(comm); }},
      {"declared capabilities", [&] { return CheckCapabilities(comm); }},
      {"barrier", [&] { return comm.Barrier(); }},
  };
  int passed = 0;
  int failed = 0;
  for (const auto& [name, check] : checks) {
    const absl::Status status = check();
    if (status.ok()) {
      ++passed;
      Log("PASS " + name);
    } else {
      ++failed;
      Log("FAIL " + name + ": " + status.ToString());
    }
  }
  std::printf("%s: %d passed, %d failed\n", label.c_str(), passed, failed);
  std::fflush(stdout);
  if (failed > 0) comm.Abort("comm_check failed");
  return failed == 0 ? 0 : 1;
}

int RunFailureLoop(Communicator& comm, const Flags& flags) {
  const int fail_rank = flags.fail_rank >= 0 ? flags.fail_rank : comm.size() - 1;
  for (int i = 0; i < flags.iterations; ++i) {
    if (comm.rank() == fail_rank && i == flags.fail_iteration) {
      if (flags.fail_mode == "sigkill") {
        Log(absl::StrCat("iteration ", i, ": killing myself"));
        raise(SIGKILL);
      }
      Log(absl::StrCat("iteration ", i, ": skipping the all_reduce"));
      // Stay alive (sockets open) so that the others must time out rather than see us leave.
      std::this_thread::sleep_for(std::chrono::milliseconds(3 * flags.timeout_ms));
      return 0;
    }
    torch::Tensor t = FloatInput(1024, comm.rank());
    absl::Status status = comm.AllReduceSum(t);
    if (status.ok()) status = Mismatch("all_reduce", t, FloatSum(1024, comm.size()));
    if (!status.ok()) {
      Log(absl::StrCat("iteration ", i, " failed: ", status.ToString()));
      comm.Abort(status.ToString());
      return 1;
    }
  }
  Log(absl::StrCat("all ", flags.iterations, " iterations passed"));
  return flags.fail_mode == "none" ? 0 : 3;  // A failure mode that did not fail is a bug.
}

// Every rank sends a small tensor to the next rank and waits for that send before receiving from
// the previous one: fine with buffered sends (exit 3, "did not fail"), a deadlock that ends in
// DeadlineExceeded (exit 1) with synchronous ones, the order StartGroup exists to avoid.
int RunUngroupedExchange(Communicator& comm) {
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  absl::Status status = comm.Send(torch::full({16}, comm.rank(), torch::kFloat32), next, 6);
  torch::Tensor in = torch::zeros({16}, torch::kFloat32);
  if (status.ok()) status = comm.Recv(in, prev, 6);
  if (!status.ok()) {
    Log("ungrouped exchange failed: " + status.ToString());
    comm.Abort(status.ToString());
    return 1;
  }
  Log("ungrouped exchange completed (buffered sends)");
  return 3;
}

int Run(const Flags& flags) {
  label = "rank ?/?";
  absl::StatusOr<LaunchEnv> env = DetectLaunchEnv();
  if (!env.ok()) {
    Log(env.status().ToString());
    return 2;
  }
  label = absl::StrCat("rank ", env->rank, "/", env->world_size);
  CommOptions options;
  absl::StatusOr<CommBackendKind> backend = ParseCommBackend(flags.backend);
  if (!backend.ok()) {
    Log(backend.status().ToString());
    return 2;
  }
  options.backend = *backend;
  options.timeout = std::chrono::milliseconds(flags.timeout_ms);
  options.rendezvous = flags.rendezvous;
  options.rendezvous_dir = flags.rendezvous_dir;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<World> comm = OpenWorld(options, *env);
  if (!comm.ok()) {
    Log("creating the communicator failed: " + comm.status().ToString());
    return 2;
  }
  if (options.backend == CommBackendKind::kMpi && MpiCommunicator::SynchronousSendsRequested()) {
    Log("synchronous sends (DEEPNET_MPI_SYNC_SEND=1): every send completes only at its receive");
  }
  const CommCapabilities capabilities = comm->comm->capabilities();
  Log(absl::StrCat("declares host_tensors=", capabilities.host_tensors,
                   " device_tensors=", capabilities.device_tensors,
                   " bf16_sums=", capabilities.bf16_sums,
                   " grouped_p2p=", capabilities.grouped_p2p));
  Log(absl::StrCat("connected (", comm->comm->backend(), ") in ",
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count(),
                   " ms"));
  if (flags.fail_mode == "none") return RunChecks(*comm->comm);
  if (flags.fail_mode == "ungrouped_exchange") return RunUngroupedExchange(*comm->comm);
  return RunFailureLoop(*comm->comm, flags);
}

}  // namespace
}  // namespace deepnet::comm

int main(int argc, char** argv) {
  deepnet::comm::Flags flags;
  CLI::App app{"Multi-process check of a DeepNet communicator backend"};
  app.add_option("--backend", flags.backend, "mpi or gloo")
      ->check(CLI::IsMember({"mpi", "gloo", "nccl"}));
  app.add_option("--rendezvous", flags.rendezvous, "tcp://HOST:PORT, file:///PATH or empty");
  app.add_option("--rendezvous_dir", flags.rendezvous_dir, "folder of the job-id FileStore");
  app.add_option("--timeout_ms", flags.timeout_ms, "per-operation timeout")
      ->check(CLI::PositiveNumber);
  app.add_option("--fail_mode", flags.fail_mode,
                 "none, skip_collective, sigkill or ungrouped_exchange")
      ->check(CLI::IsMember({"none", "skip_collective", "sigkill", "ungrouped_exchange"}));
  app.add_option("--fail_rank", flags.fail_rank, "rank that fails (-1: the last)");
  app.add_option("--fail_iteration", flags.fail_iteration, "loop iteration at which it fails");
  app.add_option("--iterations", flags.iterations, "all-reduces in the failure loop");
  app.add_option("--marker", flags.marker, "ignored; marks the command line");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  return deepnet::comm::Run(flags);
}
