// NcclCommunicator at world size 1 on the first CUDA device (ctest label `gpu`): all-reduce, and
// a send to itself paired with the receive in one group call, in both listing orders. Skipped
// (not passed) in builds without NCCL and on machines without a CUDA device.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <vector>

#include "comm/communicator.h"

#ifdef DEEPNET_HAVE_NCCL
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "comm/nccl_communicator.h"
#endif

namespace deepnet::comm {
namespace {

#ifdef DEEPNET_HAVE_NCCL
std::unique_ptr<NcclCommunicator> CreateOneRank() {
  auto comm = NcclCommunicator::Create(c10::make_intrusive<c10d::HashStore>(), 0, 1, 0,
                                       std::chrono::milliseconds(60000));
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? *std::move(comm) : nullptr;
}
#endif

// Skips with the reason when this build or machine cannot run NCCL.
#define DEEPNET_REQUIRE_NCCL_DEVICE()                                                    \
  do {                                                                                   \
    if (!kBuiltWithNccl) {                                                               \
      GTEST_SKIP() << "built without NCCL (needs a CUDA LibTorch and nccl.h/libnccl at " \
                      "configure time; DEEPNET_HAVE_NCCL is off)";                       \
    }                                                                                    \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";  \
  } while (false)

#ifdef DEEPNET_HAVE_NCCL
constexpr bool kBuiltWithNccl = true;
#else
constexpr bool kBuiltWithNccl = false;
#endif

TEST(NcclCommunicatorTest, AllReduceOfOneRankKeepsTheValues) {
  DEEPNET_REQUIRE_NCCL_DEVICE();
#ifdef DEEPNET_HAVE_NCCL
  auto comm = CreateOneRank();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->backend(), "nccl");
  const auto cuda = torch::TensorOptions().device(torch::kCUDA, 0);
  torch::Tensor t = torch::arange(1000, cuda.dtype(torch::kFloat32));
  ASSERT_TRUE(comm->AllReduceSum(t).ok());
  EXPECT_TRUE(torch::equal(t.cpu(), torch::arange(1000, torch::kFloat32)));
  torch::Tensor i = torch::full({7}, 5, cuda.dtype(torch::kInt64));
  auto work = comm->AllReduceSumAsync(i);
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_TRUE((*work)->Wait().ok());
  EXPECT_TRUE(torch::equal(i.cpu(), torch::full({7}, 5, torch::kInt64)));
  ASSERT_TRUE(comm->Barrier().ok());
#endif
}

TEST(NcclCommunicatorTest, SendToItselfPairedWithItsReceiveInOneGroup) {
  DEEPNET_REQUIRE_NCCL_DEVICE();
#ifdef DEEPNET_HAVE_NCCL
  auto comm = CreateOneRank();
  ASSERT_NE(comm, nullptr);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA, 0);
  for (bool receive_first : {false, true}) {
    SCOPED_TRACE(receive_first ? "receive listed first" : "send listed first");
    torch::Tensor out = torch::randn({1 << 20}, cuda);  // 4 MiB: beyond NCCL's eager size.
    torch::Tensor header = torch::arange(8, cuda.dtype(torch::kInt64));
    torch::Tensor in = torch::zeros({1 << 20}, cuda);
    torch::Tensor in_header = torch::zeros({8}, cuda.dtype(torch::kInt64));
    std::vector<P2POp> sends{{P2POp::Kind::kSend, header, 0, 1}, {P2POp::Kind::kSend, out, 0, 1}};
    std::vector<P2POp> receives{{P2POp::Kind::kRecv, in_header, 0, 1},
                                {P2POp::Kind::kRecv, in, 0, 1}};
    std::vector<P2POp> ops = receive_first ? receives : sends;
    for (const P2POp& op : receive_first ? sends : receives) ops.push_back(op);
    auto group = comm->StartGroup(std::move(ops));
    ASSERT_TRUE(group.ok()) << group.status();
    ASSERT_TRUE((*group)->Wait().ok());
    EXPECT_TRUE(torch::equal(in_header.cpu(), header.cpu()));
    EXPECT_TRUE(torch::equal(in.cpu(), out.cpu()));
  }
  // A CPU tensor is refused naming the operation and the device.
  std::vector<P2POp> cpu{{P2POp::Kind::kSend, torch::zeros({2}), 0, 1}};
  auto refused = comm->StartGroup(std::move(cpu));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("send of 2 float32 to rank 0"), std::string::npos)
      << refused.status();
#endif
}

}  // namespace
}  // namespace deepnet::comm
