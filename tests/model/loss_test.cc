#include "model/loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

namespace deepnet::model {
namespace {

TEST(LossTest, MatchesHandComputedLabelSmoothing) {
  auto logits = torch::tensor({{1.0, 2.0, 0.5, -1.0}}).to(torch::kFloat);  // V = 4
  auto target = torch::tensor({1}, torch::kLong);
  const double eps = 0.1;
  auto out = LabelSmoothedCrossEntropy(logits, target, eps, /*pad_id=*/0);
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(0.5) + std::exp(-1.0);
  double lp[4] = {1.0 - std::log(z), 2.0 - std::log(z), 0.5 - std::log(z), -1.0 - std::log(z)};
  const double nll = -lp[1];
  const double smooth = -(lp[0] + lp[1] + lp[2] + lp[3]);
  const double eps_i = eps / 3.0;
  EXPECT_NEAR(out.nll.item<double>(), nll, 1e-5);
  EXPECT_NEAR(out.loss.item<double>(), (1 - eps - eps_i) * nll + eps_i * smooth, 1e-5);
  EXPECT_EQ(out.tokens, 1);
}

TEST(LossTest, PaddingIsIgnored) {
  torch::manual_seed(1);
  auto logits = torch::randn({2, 3, 10});
  auto target = torch::tensor({{4, 5, 0}, {6, 0, 0}}, torch::kLong);
  auto out = LabelSmoothedCrossEntropy(logits, target, 0.1, 0);
  EXPECT_EQ(out.tokens, 3);
  auto changed = logits.clone();
  changed[0][2].fill_(100.0);  // A padded position's logits do not matter.
  changed[1][1].normal_();
  auto out2 = LabelSmoothedCrossEntropy(changed, target, 0.1, 0);
  EXPECT_NEAR(out.loss.item<double>(), out2.loss.item<double>(), 1e-6);
}

TEST(LossTest, ZeroSmoothingIsCrossEntropy) {
  torch::manual_seed(2);
  auto logits = torch::randn({5, 7});
  auto target = torch::randint(1, 7, {5}, torch::kLong);
  auto out = LabelSmoothedCrossEntropy(logits, target, 0.0, 0);
  auto expected = torch::nn::functional::cross_entropy(
      logits, target, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  EXPECT_NEAR(out.loss.item<double>(), expected.item<double>(), 1e-4);
}

TEST(LossTest, GradientFlows) {
  auto logits = torch::randn({2, 4, 9}, torch::requires_grad());
  auto target = torch::randint(1, 9, {2, 4}, torch::kLong);
  LabelSmoothedCrossEntropy(logits, target, 0.1, 0).loss.backward();
  EXPECT_TRUE(logits.grad().defined());
  EXPECT_GT(logits.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace deepnet::model
