// Depth tests: a 100L-100L DeepNet trains, a 500L-500L (1,000-layer) DeepNet runs forward and
// backward. Widths are small so that they finish in seconds on two cores.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/deepnet.h"
#include "model/initialization.h"
#include "model/loss.h"

namespace deepnet::model {
namespace {

TEST(DeepModelTest, HundredLayerModelTrainsFiftyStepsWithFallingLoss) {
  torch::manual_seed(0);
  auto c = DeepNetConfig()
               .encoder_layers(100)
               .decoder_layers(100)
               .d_model(16)
               .heads(2)
               .ffn_dim(32)
               .vocab_size(24)
               .dropout(0.0);
  DeepNet model(c);
  InitializeParameters(*model, 1);
  torch::optim::Adam adam(model->parameters(),
                          torch::optim::AdamOptions(2e-3).betas({0.9, 0.98}).eps(1e-8));
  // Copy task on a fixed batch: target = source.
  auto src = torch::randint(4, 24, {8, 6}, torch::kLong);
  auto tgt_in = torch::cat({torch::ones({8, 1}, torch::kLong), src}, 1);
  auto tgt_out = torch::cat({src, torch::full({8, 1}, 2, torch::kLong)}, 1);
  std::vector<double> losses;
  for (int step = 0; step < 50; ++step) {
    adam.zero_grad();
    auto out = LabelSmoothedCrossEntropy(model->forward(src, tgt_in), tgt_out, 0.1, 0);
    auto loss = out.loss / static_cast<double>(out.tokens);
    loss.backward();
    adam.step();
    losses.push_back(loss.item<double>());
    ASSERT_TRUE(std::isfinite(losses.back())) << "step " << step;
  }
  auto mean = [&](int from, int to) {
    double s = 0;
    for (int i = from; i < to; ++i) s += losses[i];
    return s / (to - from);
  };
  EXPECT_LT(mean(40, 50), mean(0, 10) - 0.5) << "first " << losses.front() << " last "
                                              << losses.back();
}

TEST(DeepModelTest, ThousandLayerModelRunsForwardAndBackward) {
  torch::manual_seed(0);
  auto c = DeepNetConfig()
               .encoder_layers(500)
               .decoder_layers(500)
               .d_model(8)
               .heads(2)
               .ffn_dim(16)
               .vocab_size(16)
               .dropout(0.0);
  DeepNet model(c);
  InitializeParameters(*model, 1);
  auto src = torch::randint(4, 16, {2, 4}, torch::kLong);
  auto tgt = torch::randint(4, 16, {2, 4}, torch::kLong);
  auto out = LabelSmoothedCrossEntropy(model->forward(src, tgt), tgt, 0.1, 0);
  ASSERT_TRUE(std::isfinite(out.loss.item<double>()));
  out.loss.backward();
  auto params = model->named_parameters();
  for (const char* name : {"encoder.layers.0.fc1.weight", "encoder.layers.499.fc2.weight",
                           "decoder.layers.0.encoder_attn.v_proj.weight",
                           "decoder.layers.499.self_attn.q_proj.weight"}) {
    auto grad = params[name].grad();
    ASSERT_TRUE(grad.defined()) << name;
    EXPECT_TRUE(torch::isfinite(grad).all().item<bool>()) << name;
    EXPECT_GT(grad.abs().sum().item<double>(), 0.0) << name;
  }
}

}  // namespace
}  // namespace deepnet::model
