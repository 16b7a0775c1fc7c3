// BoundaryTransfer on the CPU: messages to oneself through one grouped operation, the header
// check, the wire dtype, and that CPU tensors are never staged.
#include "pipeline/boundary_transfer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "tests/pipeline/transfer_test_backend.h"

namespace deepnet::pipeline {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::RecordingCommunicator;

OutgoingMessage Activation(std::vector<torch::Tensor> tensors, int64_t step, int micro_batch) {
  return OutgoingMessage{std::move(tensors), 0, kActivationMessage, step, micro_batch};
}

IncomingMessage ExpectActivation(std::vector<std::vector<int64_t>> shapes, int64_t step,
                                 int micro_batch) {
  IncomingMessage in;
  in.kind = kActivationMessage;
  in.step = step;
  in.micro_batch = micro_batch;
  in.shapes = std::move(shapes);
  return in;
}

TEST(BoundaryTransferTest, SendsAndHeaderReceivesOfOneTickArePostedTogether) {
  RecordingCommunicator comm(testing::LikeGloo());
  BoundaryTransfer transfer(&comm, torch::kCPU);
  EXPECT_FALSE(transfer.stages_through_host());
  const torch::Tensor a = torch::randn({2, 3}, torch::requires_grad());
  const torch::Tensor b = torch::randn({4});
  auto got = transfer.Exchange({Activation({a, b}, 5, 1)}, {ExpectActivation({{2, 3}, {4}}, 5, 1)},
                               "rank 0");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(comm.groups, 2);          // Sends + header receives, then the tensors once checked.
  EXPECT_EQ(comm.handed.size(), 6u);  // Header and two tensors, each way.
  ASSERT_EQ(got->size(), 1u);
  ASSERT_EQ((*got)[0].size(), 2u);
  EXPECT_TRUE(torch::equal((*got)[0][0], a.detach()));
  EXPECT_FALSE((*got)[0][0].requires_grad());
  EXPECT_TRUE(torch::equal((*got)[0][1], b));
  for (const torch::Tensor& t : comm.handed) EXPECT_FALSE(t.is_pinned());
}

// The shape of an exchange follows the transport's declared grouped_p2p, not its name: a
// transport whose group is one unit (NCCL) gets every send and receive in one group.
TEST(BoundaryTransferTest, GroupedTransportGetsTheWholeExchangeInOneGroup) {
  comm::CommCapabilities grouped = testing::LikeGloo();
  grouped.grouped_p2p = true;
  RecordingCommunicator comm(grouped);
  BoundaryTransfer transfer(&comm, torch::kCPU);
  const torch::Tensor a = torch::randn({2, 3});
  auto got = transfer.Exchange({Activation({a}, 5, 1)}, {ExpectActivation({{2, 3}}, 5, 1)},
                               "rank 0");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(comm.groups, 1);
  EXPECT_EQ(comm.handed.size(), 4u);  // Header and tensor, each way.
  EXPECT_TRUE(torch::equal((*got)[0][0], a));
}

TEST(BoundaryTransferTest, HeaderMismatchNamesBothBatches) {
  RecordingCommunicator comm(testing::LikeGloo());
  BoundaryTransfer transfer(&comm, torch::kCPU);
  auto got = transfer.Exchange({Activation({torch::zeros({3})}, 5, 1)},
                               {ExpectActivation({{3}}, 5, 2)}, "rank 0 (stage 1, replica 0)");
  EXPECT_THAT(std::string(got.status().message()),
              AllOf(HasSubstr("rank 0 (stage 1, replica 0)"),
                    HasSubstr("expected the activation of micro-batch 2 of step 5"),
                    HasSubstr("received micro-batch 1 of step 5")));
}

TEST(BoundaryTransferTest, WireDtypeIsWhatTravelsAndReceiversGetTheComputeDtype) {
  RecordingCommunicator comm(testing::LikeGloo());
  BoundaryTransfer transfer(&comm, torch::kCPU);
  transfer.set_wire_dtype(torch::kBFloat16);
  const torch::Tensor a = torch::randn({8});
  auto got = transfer.Exchange({Activation({a}, 0, 0)}, {ExpectActivation({{8}}, 0, 0)}, "r");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(comm.handed[1].scalar_type(), torch::kBFloat16);  // The payload on the wire.
  EXPECT_EQ((*got)[0][0].scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal((*got)[0][0], a.to(torch::kBFloat16).to(torch::kFloat32)));
  EXPECT_EQ(ToWire(a).scalar_type(), torch::kFloat32);  // Default: the tensor's own dtype.
  EXPECT_TRUE(FromWire(a, torch::kFloat32).is_same(a));
}

TEST(BoundaryTransferTest, SendOnlyAndReceiveOnlyExchanges) {
  RecordingCommunicator comm(testing::LikeLoopback());
  BoundaryTransfer transfer(&comm, torch::kCPU);
  // A send with no receive completes (loopback buffers it); the receive then finds it.
  ASSERT_TRUE(transfer.Exchange({Activation({torch::ones({2})}, 1, 0)}, {}, "r").ok());
  auto got = transfer.Exchange({}, {ExpectActivation({{2}}, 1, 0)}, "r");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(torch::equal((*got)[0][0], torch::ones({2})));
}

}  // namespace
}  // namespace deepnet::pipeline
