#include "pipeline/adamw.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "profiling/op_census.h"

namespace deepnet::pipeline {
namespace {

struct Net : torch::nn::Module {
  Net() {
    fc = register_module("fc", torch::nn::Linear(6, 4));
    out = register_module("out", torch::nn::Linear(4, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return out(torch::tanh(fc(x))); }
  torch::nn::Linear fc{nullptr}, out{nullptr};
};

TEST(AdamWTest, MatchesLibTorchAdamWithoutWeightDecay) {
  torch::manual_seed(0);
  auto ours = std::make_shared<Net>();
  auto ref = std::make_shared<Net>();
  {
    torch::NoGradGuard g;
    auto src = ours->parameters(), dst = ref->parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  }
  FlatParameters flat(*ours);
  AdamW adam(&flat, AdamWOptions{0.9, 0.98, 1e-8, 0.0});
  torch::optim::AdamW torch_adam(ref->parameters(),
                                 torch::optim::AdamWOptions(1e-2).betas({0.9, 0.98}).eps(1e-8).weight_decay(0.0));
  for (int step = 0; step < 10; ++step) {
    auto x = torch::randn({5, 6});
    flat.ZeroGrad();
    ours->forward(x).pow(2).sum().backward();
    adam.Step(1e-2);
    torch_adam.zero_grad();
    ref->forward(x).pow(2).sum().backward();
    torch_adam.step();
  }
  auto a = ours->named_parameters(), b = ref->named_parameters();
  for (const auto& p : a) {
    EXPECT_TRUE(torch::allclose(p.value(), b[p.key()], 1e-5, 1e-6)) << p.key();
  }
  EXPECT_EQ(adam.step_count(), 10);
}

TEST(AdamWTest, ChunkedUpdateMatchesTheFormulaAcrossChunkBoundaries) {
  // 300x200 + 200 = 60,200 parameters: the CPU kernel's 32k-element chunks split them.
  torch::manual_seed(3);
  torch::nn::Linear layer(300, 200);
  FlatParameters flat(*layer);
  const AdamWOptions o{0.9, 0.98, 1e-8, 0.1};
  AdamW adam(&flat, o);
  auto p = flat.values().clone(), m = torch::zeros_like(p), v = torch::zeros_like(p);
  for (int step = 1; step <= 3; ++step) {
    flat.ZeroGrad();
    layer->forward(torch::randn({4, 300})).pow(2).sum().backward();
    const auto g = flat.grads().clone();
    const double lr = 1e-2;
    adam.Step(lr);
    // torch.optim.AdamW's arithmetic with decay on matrices only, on whole tensors.
    p.addcmul_(p, flat.decay_mask(), -lr * o.weight_decay);
    m.mul_(o.beta1).add_(g, 1 - o.beta1);
    v.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
    const double b1 = 1 - std::pow(o.beta1, step), b2 = 1 - std::pow(o.beta2, step);
    p.addcdiv_(m, v.sqrt().div_(std::sqrt(b2)).add_(o.eps), -lr / b1);
    ASSERT_TRUE(torch::allclose(flat.values(), p, 1e-5, 1e-7)) << "step " << step;
  }
  // Tolerances at float rounding of values up to ~2 (the kernel's fused multiply-adds round once).
  EXPECT_TRUE(torch::allclose(adam.exp_avg(), m, 1e-5, 1e-6))
      << (adam.exp_avg() - m).abs().max().item<double>() << " of " << m.abs().max().item<double>();
  EXPECT_TRUE(torch::allclose(adam.exp_avg_sq(), v, 1e-5, 1e-7));
}

TEST(AdamWTest, AtenOpsPathIsTheFormulaAndAllocatesNothingAfterItsFirstStep) {
  torch::manual_seed(4);
  torch::nn::Linear layer(300, 200);
  FlatParameters flat(*layer);
  const AdamWOptions o{0.9, 0.98, 1e-8, 0.1};
  AdamW aten(&flat, o);
  torch::nn::Linear twin(300, 200);
  {
    torch::NoGradGuard g;
    twin->weight.copy_(layer->weight);
    twin->bias.copy_(layer->bias);
  }
  FlatParameters twin_flat(*twin);
  AdamW kernel(&twin_flat, o);
  auto p = flat.values().clone(), m = torch::zeros_like(p), v = torch::zeros_like(p);
  for (int step = 1; step <= 3; ++step) {
    flat.ZeroGrad();
    twin_flat.ZeroGrad();
    const auto x = torch::randn({4, 300});
    layer->forward(x).pow(2).sum().backward();
    twin->forward(x).pow(2).sum().backward();
    const auto g = flat.grads().clone();
    const double lr = 1e-2;
    profiling::OpCensus census;
    aten.StepWithAtenOps(lr);
    const profiling::CensusResult r = census.Stop();
    kernel.Step(lr);
    // The same ATen ops as the whole-buffer formula, element by element: the same bits.
    p.addcmul_(p, flat.decay_mask(), -lr * o.weight_decay);
    m.mul_(o.beta1).add_(g, 1 - o.beta1);
    v.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
    const double b1 = 1 - std::pow(o.beta1, step), b2 = 1 - std::pow(o.beta2, step);
    p.addcdiv_(m, v.sqrt().div_(std::sqrt(b2)).add_(o.eps), -lr / b1);
    ASSERT_TRUE(torch::equal(flat.values(), p)) << "step " << step;
    ASSERT_TRUE(torch::equal(aten.exp_avg(), m)) << "step " << step;
    ASSERT_TRUE(torch::equal(aten.exp_avg_sq(), v)) << "step " << step;
    // And the CPU kernel within float rounding.
    ASSERT_TRUE(torch::allclose(twin_flat.values(), p, 1e-5, 1e-7)) << "step " << step;
    // The denominators' scratch is made once; later steps allocate nothing the size of the
    // parameters (240 KB here), only the few bytes of ATen's 0-dim wrappers of scalars.
    if (step > 1) EXPECT_LT(r.allocated_bytes, 1024) << "step " << step;
    if (step == 1) EXPECT_GE(r.allocated_bytes, flat.numel() * 4) << "the scratch";
    EXPECT_EQ(r.calls_by_kind[static_cast<int>(profiling::OpKind::kOptimizer)], r.top_level_ops);
  }
  EXPECT_EQ(aten.step_count(), 3);
}

// Clipping as the update's multiplier is the same update as scaling the gradients first, bit
// for bit, on the CPU kernel and on the ATen path.
TEST(AdamWTest, GradientMultiplierIsClippingWithoutItsPass) {
  for (bool aten : {false, true}) {
    torch::manual_seed(5);
    torch::nn::Linear a(300, 200), b(300, 200);
    {
      torch::NoGradGuard g;
      b->weight.copy_(a->weight);
      b->bias.copy_(a->bias);
    }
    FlatParameters fa(*a), fb(*b);
    const AdamWOptions o{0.9, 0.98, 1e-8, 0.1};
    AdamW multiplied(&fa, o), scaled(&fb, o);
    for (int step = 1; step <= 3; ++step) {
      fa.ZeroGrad();
      fb.ZeroGrad();
      const auto x = torch::randn({4, 300});
      a->forward(x).pow(2).sum().backward();
      b->forward(x).pow(2).sum().backward();
      const double clip = 0.37 / step;
      fb.grads().mul_(clip);
      if (aten) {
        multiplied.StepWithAtenOps(1e-2, clip);
        scaled.StepWithAtenOps(1e-2);
      } else {
        multiplied.Step(1e-2, clip);
        scaled.Step(1e-2);
      }
      ASSERT_TRUE(torch::equal(fa.values(), fb.values())) << "aten " << aten << " step " << step;
      ASSERT_TRUE(torch::equal(multiplied.exp_avg_sq(), scaled.exp_avg_sq()));
    }
  }
}

TEST(AdamWTest, WeightDecayHitsMatricesOnly) {
  torch::manual_seed(1);
  Net net;
  FlatParameters flat(net);
  auto before = flat.values().clone();
  AdamW adam(&flat, AdamWOptions{0.9, 0.98, 1e-8, 0.5});
  flat.ZeroGrad();  // Zero gradients: only the decay moves parameters.
  adam.Step(0.1);
  auto w = net.fc->weight, b = net.fc->bias;
  EXPECT_TRUE(torch::allclose(w, before.narrow(0, 0, 24).view({4, 6}) * (1 - 0.1 * 0.5)));
  EXPECT_TRUE(torch::equal(b, before.narrow(0, 24, 4)));
}

TEST(AdamWTest, ExportImportRoundTrip) {
  torch::manual_seed(2);
  Net net;
  FlatParameters flat(net);
  AdamW adam(&flat, {});
  flat.ZeroGrad();
  net.forward(torch::randn({3, 6})).sum().backward();
  adam.Step(1e-3);
  auto state = adam.ExportState();
  ASSERT_EQ(state.size(), 8u);
  EXPECT_EQ(state[0].first, "exp_avg.fc.weight");
  Net other;
  FlatParameters other_flat(other);
  AdamW restored(&other_flat, {});
  ASSERT_TRUE(restored.ImportState(state, adam.step_count()).ok());
  EXPECT_TRUE(torch::equal(restored.exp_avg(), adam.exp_avg()));
  EXPECT_TRUE(torch::equal(restored.exp_avg_sq(), adam.exp_avg_sq()));
  state.pop_back();
  EXPECT_FALSE(restored.ImportState(state, 1).ok());
}

TEST(FlatParametersTest, ParametersAndGradientsAreViewsOfTheFlatBuffers) {
  Net net;
  FlatParameters flat(net);
  EXPECT_EQ(flat.numel(), 6 * 4 + 4 + 4 * 3 + 3);
  flat.ZeroGrad();
  net.forward(torch::randn({2, 6})).sum().backward();
  EXPECT_GT(flat.grads().abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(torch::equal(net.out->bias.grad(), flat.grads().narrow(0, 40, 3)));
  flat.values().fill_(0.25);
  EXPECT_TRUE(net.fc->weight.eq(0.25).all().item<bool>());
  flat.ZeroGrad();
  EXPECT_TRUE(net.fc->weight.grad().eq(0).all().item<bool>());
}

TEST(ScheduleTest, InverseSqrtWithLinearWarmup) {
  EXPECT_NEAR(InverseSqrtLearningRate(1, 1e-3, 100, 0.0), 1e-5, 1e-12);
  EXPECT_NEAR(InverseSqrtLearningRate(50, 1e-3, 100, 0.0), 5e-4, 1e-12);
  EXPECT_NEAR(InverseSqrtLearningRate(100, 1e-3, 100, 0.0), 1e-3, 1e-12);
  EXPECT_NEAR(InverseSqrtLearningRate(400, 1e-3, 100, 0.0), 5e-4, 1e-12);
  EXPECT_NEAR(InverseSqrtLearningRate(7, 2e-3, 0, 0.0), 2e-3, 1e-12);
}

}  // namespace
}  // namespace deepnet::pipeline
