// LoopbackCommunicator, backend-name parsing, launch-environment detection and the rendezvous
// options of the communicator factory. Multi-process backends: tests/integration/comm_*.
#include "comm/communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "comm/communicator_factory.h"
#include "comm/launch_env.h"
#include "comm/loopback_communicator.h"
#include "comm/staged_communicator.h"
#include "tests/comm/cpu_only_communicator.h"
#include "tests/temp_dir.h"

namespace deepnet::comm {
namespace {

using ::testing::HasSubstr;

TEST(CommunicatorTest, ParsesBackendNamesAndRoundTrips) {
  for (CommBackendKind kind :
       {CommBackendKind::kMpi, CommBackendKind::kGloo, CommBackendKind::kNccl}) {
    absl::StatusOr<CommBackendKind> parsed = ParseCommBackend(ToString(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(ToString(CommBackendKind::kGloo), "gloo");
}

TEST(CommunicatorTest, RejectsUnknownBackendListingAllowedNames) {
  absl::StatusOr<CommBackendKind> parsed = ParseCommBackend("MPI");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("\"MPI\""));
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("mpi, gloo, nccl"));
}

TEST(LoopbackCommunicatorTest, CollectivesLeaveTensorsUnchanged) {
  LoopbackCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.backend(), "loopback");
  torch::Tensor t = torch::arange(6, torch::kFloat32);
  const torch::Tensor expected = t.clone();
  ASSERT_TRUE(comm.AllReduceSum(t).ok());
  EXPECT_TRUE(torch::equal(t, expected));
  auto work = comm.AllReduceSumAsync(t);
  ASSERT_TRUE(work.ok());
  ASSERT_TRUE((*work)->Wait().ok());
  EXPECT_TRUE(torch::equal(t, expected));
  ASSERT_TRUE(comm.Broadcast(t, 0).ok());
  EXPECT_TRUE(torch::equal(t, expected));
  EXPECT_TRUE(comm.Barrier().ok());
  EXPECT_EQ(comm.Broadcast(t, 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(LoopbackCommunicatorTest, SendRecvToSelfIsFifoPerTag) {
  LoopbackCommunicator comm;
  ASSERT_TRUE(comm.Send(torch::full({3}, 1.0), 0, /*tag=*/7).ok());
  ASSERT_TRUE(comm.Send(torch::full({3}, 2.0), 0, /*tag=*/7).ok());
  ASSERT_TRUE(comm.Send(torch::full({3}, 9.0), 0, /*tag=*/8).ok());
  torch::Tensor out = torch::zeros({3});
  ASSERT_TRUE(comm.Recv(out, 0, 8).ok());
  EXPECT_TRUE(torch::equal(out, torch::full({3}, 9.0)));
  ASSERT_TRUE(comm.Recv(out, 0, 7).ok());
  EXPECT_TRUE(torch::equal(out, torch::full({3}, 1.0)));
  ASSERT_TRUE(comm.Recv(out, 0, 7).ok());
  EXPECT_TRUE(torch::equal(out, torch::full({3}, 2.0)));
}

// CPU tensors pass straight through (device tensors: tests/gpu, label gpu).
TEST(StagedCommunicatorTest, PassesCpuTensorsThrough) {
  auto inner = std::make_unique<testing::CpuOnlyCommunicator>();
  testing::CpuOnlyCommunicator* raw = inner.get();
  StagedCommunicator comm(std::move(inner), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(comm.backend(), "cpu-only");
  torch::Tensor t = torch::full({3}, 1.5);
  ASSERT_TRUE(comm.AllReduceSum(t).ok());
  EXPECT_TRUE(torch::equal(t, torch::full({3}, 3.0)));
  ASSERT_TRUE(comm.Send(torch::full({2}, 4.0), 0, 1).ok());
  torch::Tensor got = torch::zeros({2});
  ASSERT_TRUE(comm.Recv(got, 0, 1).ok());
  EXPECT_TRUE(torch::equal(got, torch::full({2}, 4.0)));
  ASSERT_TRUE(comm.Broadcast(got, 0).ok());
  EXPECT_EQ(raw->calls, 4);
  auto group = comm.Split(0, 0);
  ASSERT_TRUE(group.ok());
  ASSERT_NE(*group, nullptr);
  EXPECT_NE(dynamic_cast<StagedCommunicator*>(group->get()), nullptr);
  auto none = comm.Split(-1, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

// The call sites decide from capabilities() alone (StageWhereNeeded, BoundaryTransfer,
// PipelineEngine); loopback must do what it declares: tensors of any memory (device ones:
// tests/gpu), bfloat16 sums, and a receive posted after the group holding its send.
TEST(CommCapabilitiesTest, LoopbackDoesWhatItDeclares) {
  LoopbackCommunicator comm;
  const CommCapabilities capabilities = comm.capabilities();
  EXPECT_TRUE(capabilities.host_tensors);
  EXPECT_TRUE(capabilities.device_tensors);
  EXPECT_TRUE(capabilities.bf16_sums);
  EXPECT_FALSE(capabilities.grouped_p2p);
  torch::Tensor bf16 = torch::full({5}, 1.5, torch::kBFloat16);
  ASSERT_TRUE(comm.AllReduceSum(bf16).ok());
  EXPECT_EQ(bf16.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(bf16, torch::full({5}, 1.5, torch::kBFloat16)));
  std::vector<P2POp> sends{{P2POp::Kind::kSend, torch::ones({3}), 0, 2}};
  auto sent = comm.StartGroup(std::move(sends));
  ASSERT_TRUE(sent.ok()) << sent.status();
  torch::Tensor in = torch::zeros({3});
  auto received = comm.RecvAsync(in, 0, 2);
  ASSERT_TRUE(received.ok()) << received.status();
  ASSERT_TRUE((*received)->Wait().ok());
  ASSERT_TRUE((*sent)->Wait().ok());
  EXPECT_TRUE(torch::equal(in, torch::ones({3})));
  // Nothing to stage for it, on a GPU either.
  auto world = StageWhereNeeded(std::make_unique<LoopbackCommunicator>(), 0);
  EXPECT_NE(dynamic_cast<LoopbackCommunicator*>(world.get()), nullptr);
}

// Gloo and MPI move host tensors only: a GPU trainer gets them staged; a CPU trainer as they
// are. The staged one still declares its transport's capabilities (BoundaryTransfer then stages
// through its own pinned buffers).
TEST(StageWhereNeededTest, TransportWithoutDeviceTensorsIsStagedForAGpuTrainer) {
  auto staged = StageWhereNeeded(std::make_unique<testing::CpuOnlyCommunicator>(), 0);
  ASSERT_NE(dynamic_cast<StagedCommunicator*>(staged.get()), nullptr);
  EXPECT_EQ(staged->backend(), "cpu-only");
  EXPECT_TRUE(staged->capabilities().host_tensors);
  EXPECT_FALSE(staged->capabilities().device_tensors);
  auto inner = std::make_unique<testing::CpuOnlyCommunicator>();
  const Communicator* raw = inner.get();
  EXPECT_EQ(StageWhereNeeded(std::move(inner), -1).get(), raw);
}

// NCCL moves device tensors only: staged so that the trainer's host-side sums reach it (they
// travel through the device: tests/gpu).
TEST(StageWhereNeededTest, TransportWithoutHostTensorsIsStagedOnItsDevice) {
  auto staged = StageWhereNeeded(std::make_unique<testing::CudaOnlyCommunicator>(), 0);
  ASSERT_NE(dynamic_cast<StagedCommunicator*>(staged.get()), nullptr);
  EXPECT_EQ(staged->backend(), "cuda-only");
  EXPECT_FALSE(staged->capabilities().host_tensors);
  EXPECT_TRUE(staged->capabilities().device_tensors);
  auto group = staged->Split(0, 0);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_NE(dynamic_cast<StagedCommunicator*>(group->get()), nullptr);
}

TEST(LoopbackCommunicatorTest, SendCopiesSoTheSenderMayReuseItsTensor) {
  LoopbackCommunicator comm;
  torch::Tensor t = torch::full({2}, 5.0);
  ASSERT_TRUE(comm.Send(t, 0, 0).ok());
  t.fill_(-1.0);
  torch::Tensor out = torch::zeros({2});
  ASSERT_TRUE(comm.Recv(out, 0, 0).ok());
  EXPECT_TRUE(torch::equal(out, torch::full({2}, 5.0)));
}

TEST(LoopbackCommunicatorTest, ReceivePostedBeforeSendCompletesWhenSendArrives) {
  LoopbackCommunicator comm;
  torch::Tensor out = torch::zeros({4}, torch::kInt64);
  auto recv = comm.RecvAsync(out, 0, 3);
  ASSERT_TRUE(recv.ok());
  auto send = comm.SendAsync(torch::arange(4, torch::kInt64), 0, 3);
  ASSERT_TRUE(send.ok());
  ASSERT_TRUE((*send)->Wait().ok());
  ASSERT_TRUE((*recv)->Wait().ok());
  EXPECT_TRUE(torch::equal(out, torch::arange(4, torch::kInt64)));
}

// A receive listed before its send in one group still completes: the group posts both first.
TEST(LoopbackCommunicatorTest, GroupPostsEveryOperationBeforeWaiting) {
  LoopbackCommunicator comm;
  torch::Tensor a = torch::zeros({4}, torch::kInt64);
  torch::Tensor b = torch::zeros({2});
  std::vector<P2POp> ops;
  ops.push_back({P2POp::Kind::kRecv, a, 0, 1});
  ops.push_back({P2POp::Kind::kRecv, b, 0, 2});
  ops.push_back({P2POp::Kind::kSend, torch::full({2}, 1.5), 0, 2});
  ops.push_back({P2POp::Kind::kSend, torch::arange(4, torch::kInt64), 0, 1});
  auto group = comm.StartGroup(std::move(ops));
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE((*group)->Wait().ok());
  EXPECT_TRUE(torch::equal(a, torch::arange(4, torch::kInt64)));
  EXPECT_TRUE(torch::equal(b, torch::full({2}, 1.5)));
  auto empty = comm.StartGroup({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)->Wait().ok());
}

TEST(LoopbackCommunicatorTest, GroupWithAnUnmatchedReceiveFailsNamingIt) {
  LoopbackCommunicator comm;
  std::vector<P2POp> ops;
  ops.push_back({P2POp::Kind::kRecv, torch::zeros({3}), 0, 5});
  auto group = comm.StartGroup(std::move(ops));
  ASSERT_TRUE(group.ok());
  const absl::Status status = (*group)->Wait();
  EXPECT_THAT(std::string(status.message()), HasSubstr("tag 5"));
  std::vector<P2POp> bad;
  bad.push_back({P2POp::Kind::kSend, torch::zeros({1}), 3, 0});
  EXPECT_FALSE(comm.StartGroup(std::move(bad)).ok());
}

TEST(LoopbackCommunicatorTest, WaitingOnUnmatchedReceiveFailsInsteadOfHanging) {
  LoopbackCommunicator comm;
  torch::Tensor out = torch::zeros({4});
  auto recv = comm.RecvAsync(out, 0, 1);
  ASSERT_TRUE(recv.ok());
  absl::Status status = (*recv)->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank 0/1"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("tag 1"));
  // A failure aborts the communicator.
  EXPECT_FALSE(comm.Barrier().ok());
}

TEST(LoopbackCommunicatorTest, RejectsMismatchedReceiveAndBadPeers) {
  LoopbackCommunicator comm;
  ASSERT_TRUE(comm.Send(torch::zeros({3}), 0, 0).ok());
  torch::Tensor wrong = torch::zeros({4});
  absl::Status status = comm.Recv(wrong, 0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("4 float32"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("3 float32"));

  LoopbackCommunicator other;
  EXPECT_EQ(other.Send(torch::zeros({1}), 1, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.Send(torch::zeros({1}), 0, -1).code(), absl::StatusCode::kInvalidArgument);
  torch::Tensor strided = torch::zeros({4, 4}).t();
  EXPECT_EQ(other.AllReduceSum(strided).code(), absl::StatusCode::kInvalidArgument);
}

TEST(LoopbackCommunicatorTest, SplitGivesNewLoopbackOrNullForNegativeColor) {
  LoopbackCommunicator comm;
  auto sub = comm.Split(3, 0);
  ASSERT_TRUE(sub.ok());
  ASSERT_NE(*sub, nullptr);
  EXPECT_EQ((*sub)->size(), 1);
  EXPECT_EQ((*sub)->backend(), "loopback");
  auto none = comm.Split(-1, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

TEST(LoopbackCommunicatorTest, AbortMakesEveryLaterCallFail) {
  LoopbackCommunicator comm;
  comm.Abort("peer lost");
  comm.Abort("again");
  torch::Tensor t = torch::zeros({1});
  absl::Status status = comm.AllReduceSum(t);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("peer lost"));
  EXPECT_FALSE(comm.Send(t, 0, 0).ok());
  EXPECT_FALSE(comm.Split(0, 0).ok());
}

// A fake environment for DetectLaunchEnv.
class FakeEnv {
 public:
  explicit FakeEnv(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  std::function<const char*(const char*)> Getter() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

absl::StatusOr<LaunchEnv> Detect(std::map<std::string, std::string> vars) {
  FakeEnv env(std::move(vars));
  return DetectLaunchEnv(env.Getter());
}

TEST(CommunicatorFactoryTest, RendezvousHostComesFromTheRendezvousElseMasterAddr) {
  LaunchEnv env;
  env.master_addr = "node1";
  CommOptions options;
  EXPECT_EQ(RendezvousHost(options, env), "node1");
  options.rendezvous = "tcp://node2:29500";
  EXPECT_EQ(RendezvousHost(options, env), "node2");
  options.rendezvous = "grpc://[fd00::1]:50051";
  EXPECT_EQ(RendezvousHost(options, env), "fd00::1");
  options.rendezvous = "file:///shared/rdzv";
  EXPECT_EQ(RendezvousHost(options, env), "node1");
}

TEST(LaunchEnvTest, NoLauncherMeansOneRank) {
  absl::StatusOr<LaunchEnv> env = Detect({});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_size, 1);
  EXPECT_EQ(env->launcher, "none");
  EXPECT_EQ(env->job_id, "");
}

TEST(LaunchEnvTest, ReadsMpirunVariablesAndJobId) {
  absl::StatusOr<LaunchEnv> env = Detect({{"OMPI_COMM_WORLD_RANK", "5"},
                                          {"OMPI_COMM_WORLD_SIZE", "8"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                          {"PMIX_RANK", "5"},
                                          {"OMPI_MCA_ess_base_jobid", "12345"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "mpirun");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_size, 4);
  EXPECT_EQ(env->job_id, "ompi-12345");
}

TEST(LaunchEnvTest, DeepnetVariablesTakePrecedence) {
  absl::StatusOr<LaunchEnv> env = Detect({{"DEEPNET_RANK", "1"},
                                          {"DEEPNET_WORLD_SIZE", "2"},
                                          {"OMPI_COMM_WORLD_RANK", "3"},
                                          {"OMPI_COMM_WORLD_SIZE", "4"},
                                          {"RANK", "0"},
                                          {"WORLD_SIZE", "9"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "deepnet");
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 2);
  EXPECT_EQ(env->local_rank, 1);  // One node assumed when nothing says otherwise.
}

TEST(LaunchEnvTest, SelectsOneCudaDevicePerRank) {
  // mpirun with 4 ranks on a node: local rank modulo the visible GPUs.
  absl::StatusOr<LaunchEnv> env = Detect({{"OMPI_COMM_WORLD_RANK", "7"},
                                          {"OMPI_COMM_WORLD_SIZE", "8"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(*SelectCudaDevice(*env, 8), 3);
  EXPECT_EQ(*SelectCudaDevice(*env, 2), 1);
  EXPECT_EQ(*SelectCudaDevice(*env, 1), 0);  // Four ranks share the one GPU.
  // srun without SLURM_NTASKS_PER_NODE but with a local id.
  env = Detect({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(*SelectCudaDevice(*env, 4), 1);
  // deepnet-worker names the device; it wins over the local rank.
  env = Detect({{"DEEPNET_RANK", "1"},
                {"DEEPNET_WORLD_SIZE", "2"},
                {"DEEPNET_LOCAL_RANK", "1"},
                {"DEEPNET_CUDA_DEVICE", "0"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(*SelectCudaDevice(*env, 1), 0);
  env->cuda_device = 2;
  absl::StatusOr<int> beyond = SelectCudaDevice(*env, 2);
  ASSERT_FALSE(beyond.ok());
  EXPECT_THAT(std::string(beyond.status().message()), HasSubstr("DEEPNET_CUDA_DEVICE=2"));
  absl::StatusOr<int> none = SelectCudaDevice(LaunchEnv{}, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("no CUDA device"));
}

TEST(LaunchEnvTest, PmixTakesSizeFromOtherVariables) {
  absl::StatusOr<LaunchEnv> env = Detect({{"PMIX_RANK", "2"}, {"PMIX_SIZE", "3"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "pmix");
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 3);
  absl::StatusOr<LaunchEnv> missing = Detect({{"PMIX_RANK", "2"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("PMIX_RANK"));
}

TEST(LaunchEnvTest, SrunWithPmixTakesTheSizeAndLocalRankFromSlurm) {
  // srun --mpi=pmix: PMIX_RANK and PMIX_NAMESPACE, no PMIx size; Slurm's variables beside them.
  absl::StatusOr<LaunchEnv> env = Detect({{"PMIX_RANK", "3"},
                                          {"PMIX_NAMESPACE", "slurm.pmix.77.0"},
                                          {"SLURM_PROCID", "3"},
                                          {"SLURM_NTASKS", "4"},
                                          {"SLURM_LOCALID", "1"},
                                          {"SLURM_NODEID", "1"},
                                          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "pmix");
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_size, 2);
}

TEST(LaunchEnvTest, SrunOnSeveralNodesKnowsItsLocalSize) {
  // 5 tasks over 3 nodes, "2(x2),1": the third node runs one task.
  absl::StatusOr<LaunchEnv> last = Detect({{"SLURM_PROCID", "4"},
                                           {"SLURM_NTASKS", "5"},
                                           {"SLURM_LOCALID", "0"},
                                           {"SLURM_NODEID", "2"},
                                           {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"}});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->local_size, 1);
  absl::StatusOr<LaunchEnv> first = Detect({{"SLURM_PROCID", "1"},
                                            {"SLURM_NTASKS", "5"},
                                            {"SLURM_LOCALID", "1"},
                                            {"SLURM_NODEID", "0"},
                                            {"SLURM_TASKS_PER_NODE", "2(x2),1"}});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->local_size, 2);  // < world size: Gloo binds to the host's address.
  for (const char* list : {"2(x", "x", "0", "2(x0)", "2(x2"}) {
    absl::StatusOr<LaunchEnv> bad = Detect({{"SLURM_PROCID", "0"},
                                            {"SLURM_NTASKS", "2"},
                                            {"SLURM_LOCALID", "0"},
                                            {"SLURM_STEP_TASKS_PER_NODE", list}});
    ASSERT_FALSE(bad.ok()) << list;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("SLURM_STEP_TASKS_PER_NODE"));
  }
  absl::StatusOr<LaunchEnv> beyond = Detect({{"SLURM_PROCID", "0"},
                                             {"SLURM_NTASKS", "2"},
                                             {"SLURM_LOCALID", "0"},
                                             {"SLURM_NODEID", "3"},
                                             {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}});
  ASSERT_FALSE(beyond.ok());
  EXPECT_THAT(std::string(beyond.status().message()), HasSubstr("SLURM_NODEID=3"));
}

TEST(LaunchEnvTest, ReadsSlurmAndTorchrunVariables) {
  absl::StatusOr<LaunchEnv> slurm = Detect({{"SLURM_PROCID", "3"},
                                            {"SLURM_NTASKS", "4"},
                                            {"SLURM_LOCALID", "1"},
                                            {"SLURM_JOB_ID", "77"},
                                            {"SLURM_STEP_ID", "2"}});
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  EXPECT_EQ(slurm->launcher, "slurm");
  EXPECT_EQ(slurm->rank, 3);
  EXPECT_EQ(slurm->local_rank, 1);
  EXPECT_EQ(slurm->job_id, "slurm-77.2");

  absl::StatusOr<LaunchEnv> torchrun = Detect({{"RANK", "1"},
                                               {"WORLD_SIZE", "2"},
                                               {"LOCAL_RANK", "1"},
                                               {"MASTER_ADDR", "127.0.0.1"},
                                               {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(torchrun.ok()) << torchrun.status();
  EXPECT_EQ(torchrun->launcher, "torchrun");
  EXPECT_EQ(torchrun->master_addr, "127.0.0.1");
  EXPECT_EQ(torchrun->master_port, 29500);
}

TEST(LaunchEnvTest, RejectsInconsistentValuesNamingTheVariable) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string variable;
  };
  const Case cases[] = {
      {{{"DEEPNET_RANK", "2"}, {"DEEPNET_WORLD_SIZE", "2"}}, "DEEPNET_RANK"},
      {{{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, "OMPI_COMM_WORLD_RANK"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}}, "SLURM_NTASKS"},
      {{{"RANK", "0"}}, "WORLD_SIZE"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}}, "LOCAL_RANK"},
      {{{"MASTER_ADDR", "h"}}, "MASTER_PORT"},
      {{{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LaunchEnv> env = Detect(c.vars);
    ASSERT_FALSE(env.ok()) << c.variable;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(env.status().message()), HasSubstr(c.variable));
  }
}

TEST(LaunchEnvTest, ReadsTheWorkerDaemonVariables) {
  absl::StatusOr<LaunchEnv> env = Detect({{"DEEPNET_RANK", "3"},
                                          {"DEEPNET_WORLD_SIZE", "4"},
                                          {"DEEPNET_LOCAL_RANK", "1"},
                                          {"DEEPNET_LOCAL_SIZE", "2"},
                                          {"DEEPNET_JOB_ID", "j-7"},
                                          {"DEEPNET_ATTEMPT", "2"},
                                          {"DEEPNET_RENDEZVOUS", "grpc://10.0.0.9:7070"},
                                          {"DEEPNET_TOKEN", "secret"},
                                          {"DEEPNET_CA_CERT", "/etc/ca.pem"},
                                          {"DEEPNET_CUDA_DEVICE", "5"},
                                          {"DEEPNET_ADVERTISE_ADDRESS", "10.0.0.2"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "deepnet");
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_size, 2);
  EXPECT_EQ(env->rendezvous, "grpc://10.0.0.9:7070");
  EXPECT_EQ(env->control_job_id, "j-7");
  EXPECT_EQ(env->attempt, 2);
  EXPECT_EQ(env->job_id, "deepnet-j-7.2");
  EXPECT_EQ(env->token, "secret");
  EXPECT_EQ(env->ca_cert_file, "/etc/ca.pem");
  EXPECT_EQ(env->cuda_device, 5);
  EXPECT_EQ(env->advertise_address, "10.0.0.2");
  EXPECT_EQ(Detect({})->cuda_device, -1);

  for (const auto& [vars, variable] :
       std::vector<std::pair<std::map<std::string, std::string>, std::string>>{
           {{{"DEEPNET_CUDA_DEVICE", "gpu0"}}, "DEEPNET_CUDA_DEVICE"},
           {{{"DEEPNET_ATTEMPT", "0"}}, "DEEPNET_ATTEMPT"},
           {{{"DEEPNET_RENDEZVOUS", "grpc://h:1"}}, "DEEPNET_JOB_ID"}}) {
    absl::StatusOr<LaunchEnv> bad = Detect(vars);
    ASSERT_FALSE(bad.ok()) << variable;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(variable));
  }
}

TEST(CommunicatorFactoryTest, GrpcRendezvousNeedsAnAddressAndAScope) {
  LaunchEnv env;
  env.rank = 1;
  env.world_size = 2;
  CommOptions options;
  for (const char* bad : {"grpc://", "grpc://host", "grpc://:7070", "grpc://h:0", "grpc://h:x"}) {
    options.rendezvous = bad;
    EXPECT_EQ(CreateRendezvousStore(options, env).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  options.rendezvous = "grpc://127.0.0.1:7070";
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = CreateRendezvousStore(options, env);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("DEEPNET_ATTEMPT"));
  options.grpc_job_id = "j";
  options.grpc_attempt = 1;
  options.grpc_ca_cert_file = "/nonexistent-deepnet-ca.pem";
  store = CreateRendezvousStore(options, env);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("/nonexistent-deepnet-ca.pem"));
}

TEST(CommunicatorFactoryTest, WorldOfOneIsLoopbackForEveryBackend) {
  for (CommBackendKind kind : {CommBackendKind::kGloo, CommBackendKind::kNccl}) {
    CommOptions options;
    options.backend = kind;
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        CreateWorldCommunicator(options, LaunchEnv(), nullptr);
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ((*comm)->backend(), "loopback");
  }
  CommOptions mpi;
  mpi.backend = CommBackendKind::kMpi;
  EXPECT_EQ(CreateWorldCommunicator(mpi, LaunchEnv(), nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CommunicatorFactoryTest, RendezvousErrorsSayWhatToSet) {
  LaunchEnv env;
  env.rank = 1;
  env.world_size = 2;
  env.launcher = "deepnet";
  CommOptions options;
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = CreateRendezvousStore(options, env);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("parallel.rendezvous"));
  for (const char* bad : {"tcp://host", "tcp://:12", "tcp://h:0", "file://relative", "udp://x:1"}) {
    options.rendezvous = bad;
    EXPECT_EQ(CreateRendezvousStore(options, env).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  options.rendezvous = "file:///nonexistent-deepnet-dir/rdzv";
  store = CreateRendezvousStore(options, env);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("/nonexistent-deepnet-dir"));
}

TEST(CommunicatorFactoryTest, JobIdNamesAFileStoreInTheRendezvousDir) {
  testing::TempDir dir;
  LaunchEnv env;
  env.world_size = 1;  // One worker: the store opens without waiting for peers.
  env.job_id = "ompi-42/x";
  CommOptions options;
  options.rendezvous_dir = dir.path();
  absl::StatusOr<c10::intrusive_ptr<c10d::Store>> store = CreateRendezvousStore(options, env);
  ASSERT_TRUE(store.ok()) << store.status();
  (*store)->set("k", std::vector<uint8_t>{1, 2});
  EXPECT_EQ((*store)->get("k"), (std::vector<uint8_t>{1, 2}));
  EXPECT_TRUE(std::filesystem::exists(dir / "deepnet-rendezvous-ompi-42_x"));
}

}  // namespace
}  // namespace deepnet::comm
