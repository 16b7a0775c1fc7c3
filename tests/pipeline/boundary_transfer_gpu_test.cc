// BoundaryTransfer with CUDA tensors (ctest label `gpu`; skipped without a CUDA device): over a
// backend that moves CPU tensors only (as Gloo, MPI) they are staged through pinned host buffers
// that are reused from tick to tick; over one that takes device tensors (as NCCL) they go as they
// are.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <vector>

#include "pipeline/boundary_transfer.h"
#include "tests/pipeline/transfer_test_backend.h"

namespace deepnet::pipeline {
namespace {

using testing::RecordingCommunicator;

IncomingMessage Expect(std::vector<std::vector<int64_t>> shapes, int kind, int micro_batch) {
  IncomingMessage in;
  in.kind = kind;
  in.micro_batch = micro_batch;
  in.shapes = std::move(shapes);
  return in;
}

TEST(BoundaryTransferGpuTest, CpuBackendStagesThroughReusedPinnedBuffers) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  RecordingCommunicator comm(testing::LikeGloo());
  const torch::Device cuda(torch::kCUDA, 0);
  BoundaryTransfer transfer(&comm, cuda);
  EXPECT_TRUE(transfer.stages_through_host());
  std::vector<const void*> first_buffers;
  for (int tick = 0; tick < 3; ++tick) {
    comm.handed.clear();
    const torch::Tensor activation = torch::randn({64, 256}, cuda);
    const torch::Tensor gradient = torch::randn({64, 256}, cuda);
    // One tick of 1F1B with oneself: activation out + gradient in, both ways.
    auto got = transfer.Exchange({OutgoingMessage{{activation}, 0, kActivationMessage, 0, tick},
                                  OutgoingMessage{{gradient}, 0, kGradientMessage, 0, tick}},
                                 {Expect({{64, 256}}, kActivationMessage, tick),
                                  Expect({{64, 256}}, kGradientMessage, tick)},
                                 "rank 0");
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 2u);
    EXPECT_TRUE((*got)[0][0].is_cuda());
    EXPECT_TRUE(torch::equal((*got)[0][0], activation));
    EXPECT_TRUE(torch::equal((*got)[1][0], gradient));
    std::vector<const void*> buffers;
    for (const torch::Tensor& t : comm.handed) {
      EXPECT_TRUE(t.device().is_cpu());
      if (t.numel() == 64 * 256) {
        EXPECT_TRUE(t.is_pinned());
        buffers.push_back(t.data_ptr());
      }
    }
    ASSERT_EQ(buffers.size(), 4u);
    if (tick == 0) first_buffers = buffers;
    EXPECT_EQ(buffers, first_buffers) << "pinned buffers are allocated once per slot and shape";
  }
}

TEST(BoundaryTransferGpuTest, DeviceBackendGetsDeviceTensorsWithoutAHostCopy) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  RecordingCommunicator comm(testing::LikeNccl());
  const torch::Device cuda(torch::kCUDA, 0);
  BoundaryTransfer transfer(&comm, cuda);
  EXPECT_FALSE(transfer.stages_through_host());
  const torch::Tensor activation = torch::randn({16, 32}, cuda);
  auto got = transfer.Exchange({OutgoingMessage{{activation}, 0, kActivationMessage, 0, 0}},
                               {Expect({{16, 32}}, kActivationMessage, 0)}, "rank 0");
  ASSERT_TRUE(got.ok()) << got.status();
  for (const torch::Tensor& t : comm.handed) EXPECT_TRUE(t.is_cuda());
  EXPECT_TRUE(torch::equal((*got)[0][0], activation));
}

}  // namespace
}  // namespace deepnet::pipeline
