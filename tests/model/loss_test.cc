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

// The loss as ATen's log_softmax, gather and sum would give it, with autograd's gradient, in
// `dtype` (double: the reference both fp32 computations are held to).
torch::Tensor ReferenceLoss(const torch::Tensor& logits, const torch::Tensor& target, double eps,
                            int64_t pad, torch::ScalarType dtype = torch::kFloat) {
  const int64_t vocab = logits.size(-1);
  auto lprobs = torch::log_softmax(logits.reshape({-1, vocab}).to(dtype), -1);
  auto t = target.reshape({-1, 1});
  auto keep = t.ne(pad);
  auto nll = -lprobs.gather(1, t).masked_fill(~keep, 0.0).sum();
  auto smooth = -lprobs.sum(-1, true).masked_fill(~keep, 0.0).sum();
  const double eps_i = eps / static_cast<double>(vocab - 1);
  return nll * (1.0 - eps - eps_i) + smooth * eps_i;
}

// Forward and the one-pass gradient against the float64 reference, with padding, with and
// without smoothing, in one chunk and across chunks of rows (chunks of 64 logits: 5 rows of 11).
TEST(LossTest, ValueAndGradientMatchLogSoftmaxAcrossChunks) {
  for (int64_t chunk : {int64_t{1} << 24, int64_t{64}}) {
    const int64_t previous = internal::SetLossChunkElements(chunk);
    for (double eps : {0.0, 0.1}) {
      torch::manual_seed(3);
      const int64_t rows = 33, vocab = 11;
      auto base = torch::randn({rows, vocab}) * 3;
      auto target = torch::randint(1, vocab, {rows}, torch::kLong);
      target[1] = 0;  // padding
      target[rows - 1] = 0;
      auto a = base.clone().requires_grad_(true);
      auto b = base.to(torch::kDouble).requires_grad_(true);
      auto ours = LabelSmoothedCrossEntropy(a, target, eps, 0);
      auto ref = ReferenceLoss(b, target, eps, 0, torch::kDouble);
      EXPECT_NEAR(ours.loss.item<double>(), ref.item<double>(), 1e-6 * ref.item<double>())
          << "chunk " << chunk << " eps " << eps;
      EXPECT_NEAR(ours.nll.item<double>(), ReferenceLoss(base, target, 0.0, 0).item<double>(),
                  1e-5 * ref.item<double>());
      ours.loss.mul(1.7).backward();
      ref.mul(1.7).backward();
      EXPECT_TRUE(torch::allclose(a.grad().to(torch::kDouble), b.grad(), 1e-5, 1e-7))
          << "chunk " << chunk << " eps " << eps << ": max difference "
          << (a.grad().to(torch::kDouble) - b.grad()).abs().max().item<double>();
      EXPECT_EQ(a.grad()[1].abs().max().item<double>(), 0.0) << "a padded row has no gradient";
      EXPECT_EQ(ours.tokens, rows - 2);
    }
    internal::SetLossChunkElements(previous);
  }
}

// A large vocabulary (2^18): the one-pass gradient stays within 1e-6 of float64. (At 2^20, fp32
// log_softmax + autograd was 2.5e-4 off float64 on this machine, this loss 2e-7.)
TEST(LossTest, LargeVocabularyGradientStaysCloseToFloat64) {
  torch::manual_seed(6);
  const int64_t rows = 4, vocab = int64_t{1} << 18;
  auto base = torch::randn({rows, vocab}) * 3;
  auto target = torch::randint(1, vocab, {rows}, torch::kLong);
  auto a = base.clone().requires_grad_(true), b = base.to(torch::kDouble).requires_grad_(true);
  LabelSmoothedCrossEntropy(a, target, 0.1, 0).loss.backward();
  ReferenceLoss(b, target, 0.1, 0, torch::kDouble).backward();
  EXPECT_LT((a.grad().to(torch::kDouble) - b.grad()).abs().max().item<double>(), 1e-6);
}

// bf16 logits (autocast's output projection): an fp32 loss, a bf16 gradient close to fp32's.
TEST(LossTest, Bf16LogitsGiveFp32LossAndBf16Gradient) {
  torch::manual_seed(4);
  auto base = torch::randn({8, 50});
  auto target = torch::randint(1, 50, {8}, torch::kLong);
  auto low = base.to(torch::kBFloat16).requires_grad_(true);
  auto full = base.to(torch::kBFloat16).to(torch::kFloat).requires_grad_(true);
  auto ours = LabelSmoothedCrossEntropy(low, target, 0.1, 0);
  auto ref = ReferenceLoss(full, target, 0.1, 0);
  EXPECT_EQ(ours.loss.scalar_type(), torch::kFloat);
  EXPECT_NEAR(ours.loss.item<double>(), ref.item<double>(), 1e-5 * ref.item<double>());
  ours.loss.backward();
  ref.backward();
  EXPECT_EQ(low.grad().scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(low.grad().to(torch::kFloat), full.grad(), 1e-2, 1e-3));
}

}  // namespace
}  // namespace deepnet::model
