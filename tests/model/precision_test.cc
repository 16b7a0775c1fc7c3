// Mixed precision (model/precision.h): bf16 autocast scopes, LayerNorm statistics and the loss
// in fp32 under bf16, and the fused fp32 kernels staying out of bf16 work.
#include "model/precision.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/deepnet.h"
#include "model/initialization.h"
#include "model/kernels/fused_kernels.h"
#include "model/loss.h"

namespace deepnet::model {
namespace {

constexpr auto kCpu = c10::DeviceType::CPU;

TEST(PrecisionTest, NamesParseAndPrint) {
  for (auto p : {ComputePrecision::kFp32, ComputePrecision::kBf16, ComputePrecision::kTf32}) {
    EXPECT_EQ(ParseComputePrecision(ToString(p)), p);
  }
  EXPECT_FALSE(ParseComputePrecision("auto").has_value());  // resolved by the job config
  EXPECT_FALSE(ParseComputePrecision("fp16").has_value());
}

TEST(PrecisionTest, AutocastScopeTurnsBf16OnAndRestoresWhatWasThere) {
  torch::Tensor a = torch::randn({4, 4});
  ASSERT_FALSE(AutocastEnabled(kCpu));
  {
    Bf16AutocastScope outer(kCpu, true);
    EXPECT_TRUE(AutocastEnabled(kCpu));
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
    // The fused kernels are fp32-only: bf16 work takes the ATen ops.
    EXPECT_FALSE(kernels::UseFusedKernels(a));
    {
      Bf16AutocastScope disabled(kCpu, false);  // does nothing
      EXPECT_TRUE(AutocastEnabled(kCpu));
    }
    { Bf16AutocastScope inner(kCpu, true); }
    EXPECT_TRUE(AutocastEnabled(kCpu));  // the inner scope restored "on"
  }
  EXPECT_FALSE(AutocastEnabled(kCpu));
  EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat);
  EXPECT_EQ(kernels::UseFusedKernels(a), kernels::FusedKernelsEnabled());
}

// Autocast keeps one bf16 cast per leaf weight for reuse, also for a parameter whose data is a
// view of a flat buffer (pipeline/flat_parameters.cc); after an in-place update the kept cast
// is stale until ClearAutocastCache. (LibTorch 1.13 on CPU casts linear's weight through a
// transposed view, which it never caches, so only the CUDA path of the model reuses casts.)
TEST(PrecisionTest, ClearAutocastCacheMakesProductsSeeUpdatedWeights) {
  torch::Tensor x = torch::ones({2, 4});
  torch::Tensor flat = torch::ones({16});
  torch::Tensor w = torch::ones({4, 4}, torch::requires_grad());
  w.set_data(flat.narrow(0, 0, 16).view({4, 4}));
  Bf16AutocastScope scope(kCpu, true);
  ClearAutocastCache();
  torch::Tensor before = torch::mm(x, w);
  flat.add_(1.0);  // an optimiser step
  const bool cached = torch::equal(torch::mm(x, w), before);
  std::printf("autocast weight cache on CPU: %s\n", cached ? "yes" : "no");
  ClearAutocastCache();
  EXPECT_FALSE(torch::equal(torch::mm(x, w), before));
  ClearAutocastCache();
}

// Rows 256, 258, 256, 258, ...: exact in bf16 (spacing 2 there), mean 257 and variance 1, so
// the normalised row is -1, +1, ... A mean held in bf16 rounds to 256 or 258 and the row comes
// out as 0, 2 (or -2, 0): every element off by 1. LayerNormFp32 must give +-1.
TEST(PrecisionTest, LayerNormStatisticsAreFp32ForBf16Inputs) {
  const int64_t d = 512;
  torch::Tensor row = 256 + 2 * (torch::arange(d) % 2).to(torch::kFloat);
  torch::Tensor x = row.repeat({3, 1}).to(torch::kBFloat16);
  torch::Tensor expected = (2 * (torch::arange(d) % 2) - 1).to(torch::kFloat).repeat({3, 1});

  // The failure mode: statistics in bf16.
  torch::Tensor mean_bf16 = x.mean(-1, /*keepdim=*/true);
  ASSERT_EQ(mean_bf16.scalar_type(), torch::kBFloat16);
  torch::Tensor naive = (x - mean_bf16) * torch::rsqrt(x.var(-1, false, true) + 1e-5);
  EXPECT_GE((naive.to(torch::kFloat) - expected).abs().max().item<double>(), 0.9);

  // LayerNormFp32 (sub-layer norms) and StreamLayerNorm (the residual stream's, which keeps a
  // bf16 input bf16; on CUDA it takes the native bf16 kernel, checked with the same rows by
  // GpuTest.StreamLayerNormKeepsFp32StatisticsOnCuda).
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({d}));
  for (auto* layer_norm : {&LayerNormFp32, &StreamLayerNorm}) {
    for (bool autocast : {false, true}) {
      Bf16AutocastScope scope(kCpu, autocast);
      torch::Tensor y = layer_norm(norm, x);
      EXPECT_EQ(y.scalar_type(), torch::kBFloat16) << "autocast " << autocast;
      EXPECT_LE((y.to(torch::kFloat) - expected).abs().max().item<double>(), 1e-2)
          << "autocast " << autocast;
      ClearAutocastCache();
    }
  }
}

// For an fp32 input the residual stream's LayerNorm is the module's own.
TEST(PrecisionTest, StreamLayerNormOfFp32IsTheModule) {
  const int64_t d = 512;
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({d}));
  torch::Tensor f = torch::randn({2, d});
  EXPECT_TRUE(torch::equal(StreamLayerNorm(norm, f), norm->forward(f)));  // the module itself
}

DeepNetConfig SmallDeepNorm() {
  return DeepNetConfig()
      .encoder_layers(2)
      .decoder_layers(2)
      .d_model(32)
      .heads(4)
      .ffn_dim(64)
      .vocab_size(50)
      .dropout(0.0)
      .max_positions(32);
}

// Under bf16 autocast the residual stream is bf16 from the embeddings on (no fp32 copy for each
// sub-layer to re-cast); without autocast, and for fp32 tensors outside it, nothing changes.
TEST(PrecisionTest, TheResidualStreamIsBf16UnderAutocast) {
  torch::Tensor f = torch::randn({2, 3});
  EXPECT_TRUE(ToStreamDtype(f).is_same(f));
  {
    Bf16AutocastScope scope(kCpu, true);
    EXPECT_EQ(ToStreamDtype(f).scalar_type(), torch::kBFloat16);
    torch::Tensor b = f.to(torch::kBFloat16);
    EXPECT_TRUE(ToStreamDtype(b).is_same(b));
  }
  DeepNet model(SmallDeepNorm());
  InitializeParameters(*model, 3);
  model->train();
  torch::Tensor src = torch::randint(4, 50, {2, 5}, torch::kLong);
  for (bool bf16 : {false, true}) {
    Bf16AutocastScope scope(kCpu, bf16);
    const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
    torch::Tensor h = model->embed_source(src);
    EXPECT_EQ(h.scalar_type(), dtype);
    h = model->run_encoder_layers(h, model->padding_mask(src));
    EXPECT_EQ(h.scalar_type(), dtype);
    EXPECT_EQ(model->finish_encoder(h).scalar_type(), dtype);
    ClearAutocastCache();
  }
}

// Under bf16 autocast the products run in bf16 (bf16 logits), the loss is fp32 and gradients
// land in the fp32 parameters, close to the fp32 ones.
TEST(PrecisionTest, Bf16ForwardGivesFp32LossAndFp32GradientsCloseToFp32) {
  torch::manual_seed(1);
  for (NormVariant norm : {NormVariant::kDeepNorm, NormVariant::kDeepNormPreLn}) {
    DeepNet model(SmallDeepNorm().norm(norm));
    InitializeParameters(*model, 3);
    model->train();
    torch::Tensor src = torch::randint(4, 50, {4, 9}, torch::kLong);
    torch::Tensor tgt = torch::randint(4, 50, {4, 8}, torch::kLong);
    std::vector<double> losses;
    std::vector<torch::Tensor> grads;
    for (bool bf16 : {false, true}) {
      model->zero_grad();
      Bf16AutocastScope scope(kCpu, bf16);
      torch::Tensor logits = model->forward(src, tgt);
      EXPECT_EQ(logits.scalar_type(), bf16 ? torch::kBFloat16 : torch::kFloat);
      LossOutput out = LabelSmoothedCrossEntropy(logits, tgt, 0.1, model->config().pad_id());
      EXPECT_EQ(out.loss.scalar_type(), torch::kFloat);
      EXPECT_EQ(out.nll.scalar_type(), torch::kFloat);
      out.loss.backward();
      losses.push_back(out.loss.item<double>());
      std::vector<torch::Tensor> flat;
      for (const auto& p : model->parameters()) {
        EXPECT_EQ(p.scalar_type(), torch::kFloat);
        ASSERT_TRUE(p.grad().defined());
        EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
        flat.push_back(p.grad().flatten());
      }
      grads.push_back(torch::cat(flat));
      ClearAutocastCache();
    }
    EXPECT_NEAR(losses[1], losses[0], 0.01 * losses[0]);
    const double cosine = (grads[0] * grads[1]).sum().item<double>() /
                          (grads[0].norm() * grads[1].norm()).item<double>();
    EXPECT_GT(cosine, 0.99);
  }
}

}  // namespace
}  // namespace deepnet::model
