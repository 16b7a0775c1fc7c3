// The op census: ATen ops counted (nested ones apart), kinds, user scopes, the CPU allocator's
// temporaries, differences and the Chrome trace.
#include "profiling/op_census.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace deepnet::profiling {
namespace {

TEST(OpKindsTest, NamesOpsAndKernelsByWhatTheySpendTimeOn) {
  EXPECT_EQ(KindOfOp("aten::addmm"), OpKind::kGemm);
  EXPECT_EQ(KindOfOp("aten::bmm"), OpKind::kGemm);
  EXPECT_EQ(KindOfOp("aten::_scaled_dot_product_flash_attention"), OpKind::kAttention);
  EXPECT_EQ(KindOfOp("aten::_softmax"), OpKind::kAttention);
  EXPECT_EQ(KindOfOp("aten::native_layer_norm_backward"), OpKind::kNorm);
  EXPECT_EQ(KindOfOp("aten::add_"), OpKind::kElementwise);
  EXPECT_EQ(KindOfOp("aten::native_dropout"), OpKind::kElementwise);
  EXPECT_EQ(KindOfOp("aten::_to_copy"), OpKind::kCopy);
  EXPECT_EQ(KindOfOp("aten::cat"), OpKind::kCopy);
  EXPECT_EQ(KindOfOp("aten::_log_softmax"), OpKind::kLoss);
  EXPECT_EQ(KindOfOp("aten::sum"), OpKind::kReduction);
  EXPECT_EQ(KindOfOp("aten::unbind"), OpKind::kView);
  EXPECT_EQ(KindOfOp("aten::empty"), OpKind::kAllocation);
  EXPECT_EQ(KindOfOp("aten::_fused_adamw_"), OpKind::kOptimizer);
  EXPECT_EQ(KindOfOp("aten::something_new"), OpKind::kOther);
  EXPECT_EQ(KindOfKernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            OpKind::kGemm);
  EXPECT_EQ(KindOfKernel("void pytorch_flash::flash_fwd_kernel<...>"), OpKind::kAttention);
  EXPECT_EQ(KindOfKernel("void at::native::vectorized_elementwise_kernel<4, ...>"),
            OpKind::kElementwise);
  EXPECT_EQ(KindOfKernel("Memcpy DtoH (Device -> Pinned)"), OpKind::kCopy);
  EXPECT_EQ(KindOfKernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), OpKind::kCommunication);
  EXPECT_EQ(KindOfKernel("void at::native::(anonymous namespace)::fused_adamw_kernel"),
            OpKind::kOptimizer);
  EXPECT_EQ(ToString(OpKind::kGemm), "gemm");
}

TEST(OpCensusTest, CountsTopLevelAndNestedOpsAndTheirTemporaries) {
  torch::Tensor a = torch::ones({64, 64}), b = torch::ones({64, 64});
  OpCensus census;
  torch::Tensor sum = a + b;                              // 1 top-level op, 16 KiB
  torch::Tensor product = torch::mm(a, b);                // 1 top-level op, 16 KiB
  torch::Tensor projected = torch::linear(a, b, sum[0]);  // linear (and what it calls)
  CensusResult r = census.Stop();
  EXPECT_EQ(r.calls_by_op["aten::add"], 1);
  EXPECT_EQ(r.calls_by_op["aten::mm"], 1);
  EXPECT_EQ(r.calls_by_op["aten::linear"], 1);
  EXPECT_EQ(r.calls_by_op.count("aten::addmm"), 0u) << "nested in linear, not top level";
  EXPECT_GT(r.ops, r.top_level_ops);
  EXPECT_EQ(r.calls_by_kind[static_cast<int>(OpKind::kGemm)], 2);  // mm, linear
  EXPECT_GE(r.allocations, 3);
  EXPECT_GE(r.allocated_bytes, 3 * 64 * 64 * 4);
  EXPECT_GE(r.peak_live_bytes, 3 * 64 * 64 * 4);
  EXPECT_GT(r.wall_s, 0.0);
  EXPECT_TRUE(r.events.empty()) << "no trace unless asked";
  // Nothing is counted once stopped, and a second census may start.
  torch::Tensor after = a * b;
  EXPECT_EQ(census.Stop().ops, 0);
  OpCensus again;
  torch::Tensor more = a * b;
  EXPECT_EQ(again.Stop().calls_by_op["aten::mul"], 1);
}

TEST(OpCensusTest, UserScopesNameTheOptimizerAndCollectivesWhateverTheirOps) {
  torch::Tensor a = torch::ones({8});
  OpCensus census;
  {
    RECORD_USER_SCOPE("deepnet::optimizer");
    a.mul_(2.0);
    a.add_(1.0);
  }
  {
    RECORD_USER_SCOPE("deepnet::collective.all_reduce");
    a.div_(2.0);
  }
  a.sub_(1.0);
  CensusResult r = census.Stop();
  EXPECT_EQ(r.calls_by_kind[static_cast<int>(OpKind::kOptimizer)], 2);
  EXPECT_EQ(r.calls_by_kind[static_cast<int>(OpKind::kCommunication)], 1);
  EXPECT_EQ(r.calls_by_kind[static_cast<int>(OpKind::kElementwise)], 1);
}

TEST(OpCensusTest, CountsAutogradNodesAndTheOpsTheyRun) {
  torch::Tensor w = torch::randn({16, 16}, torch::requires_grad());
  torch::Tensor x = torch::randn({4, 16});
  OpCensus census;
  torch::mm(x, w).relu().sum().backward();
  CensusResult r = census.Stop();
  EXPECT_GE(r.autograd_nodes, 3);  // SumBackward, ReluBackward, MmBackward (+ accumulate)
  EXPECT_GE(r.calls_by_op["aten::mm"], 2) << "forward and the weight's gradient";
  EXPECT_GE(r.calls_by_op["aten::threshold_backward"], 1);
}

TEST(OpCensusTest, OnlyOneCensusAtATime) {
  OpCensus first;
  EXPECT_THROW(OpCensus second, c10::Error);
  first.Stop();
}

TEST(OpCensusTest, DifferenceAndReport) {
  torch::Tensor a = torch::ones({32});
  OpCensus small(OpCensus::Options{/*trace=*/true, /*memory=*/true});
  torch::Tensor x = a + a;
  CensusResult one = small.Stop();
  OpCensus large;
  torch::Tensor y = a + a;
  torch::Tensor z = y * a;
  CensusResult two = large.Stop();
  CensusResult d = Difference(two, one);
  EXPECT_EQ(d.top_level_ops, 1);
  EXPECT_EQ(d.calls_by_op.size(), 1u);
  EXPECT_EQ(d.calls_by_op["aten::mul"], 1);
  const std::string text = FormatCensus(two);
  EXPECT_NE(text.find("elementwise"), std::string::npos) << text;
  EXPECT_NE(text.find("aten::add 1"), std::string::npos) << text;
  ASSERT_EQ(one.events.size(), 1u);
  EXPECT_EQ(one.events[0].name, "aten::add");
  const std::string trace = ChromeTrace(one.events);
  EXPECT_NE(trace.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(trace.find("\"name\":\"aten::add\""), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"ph\":\"X\""), std::string::npos);
}

}  // namespace
}  // namespace deepnet::profiling
