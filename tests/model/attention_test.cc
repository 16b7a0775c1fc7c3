// The attention switch (runtime.attention) and the reference attention's masks on any LibTorch;
// SDPA itself is compared in attention_sdpa_test.cc (LibTorch >= 2.0).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/attention.h"
#include "model/kernels/fused_kernels.h"

namespace deepnet::model {
namespace {

class AttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = GetAttentionBackend();
    torch::manual_seed(0);
  }
  void TearDown() override { SetAttentionBackend(saved_); }

 private:
  AttentionBackend saved_ = AttentionBackend::kAuto;
};

void ExpectAttentionClose(const torch::Tensor& actual, const torch::Tensor& expected, double tol,
                          const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  ASSERT_TRUE(torch::isfinite(actual).all().item<bool>()) << what << ": not finite";
  const double diff = (actual - expected).abs().max().item<double>();
  const double scale = std::max(1.0, expected.abs().max().item<double>());
  EXPECT_LE(diff, tol * scale) << what;
}

TEST_F(AttentionTest, ParsesTheThreeNames) {
  AttentionBackend b = AttentionBackend::kSdpa;
  ASSERT_TRUE(ParseAttentionBackend("auto", &b));
  EXPECT_EQ(b, AttentionBackend::kAuto);
  ASSERT_TRUE(ParseAttentionBackend("sdpa", &b));
  EXPECT_EQ(b, AttentionBackend::kSdpa);
  ASSERT_TRUE(ParseAttentionBackend("reference", &b));
  EXPECT_EQ(b, AttentionBackend::kReference);
  EXPECT_FALSE(ParseAttentionBackend("flash", &b));
  EXPECT_EQ(b, AttentionBackend::kReference);
}

TEST_F(AttentionTest, SdpaNeedsLibTorch2) {
  if (SdpaAvailable()) {
    SetAttentionBackend(AttentionBackend::kSdpa);
    EXPECT_EQ(GetAttentionBackend(), AttentionBackend::kSdpa);
    return;
  }
  try {
    SetAttentionBackend(AttentionBackend::kSdpa);
    FAIL() << "kSdpa accepted on LibTorch 1.x";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("runtime.attention: sdpa needs LibTorch >= 2.0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(GetAttentionBackend(), AttentionBackend::kAuto);
}

// The reference path against the fused CPU kernels (float32 CPU), padding and causal masks
// together, with a query that sees no key (row 0's first key is padding): zeros, no NaN.
TEST_F(AttentionTest, ReferenceMatchesTheFusedKernelsWhereAQuerySeesNoKey) {
  const int64_t b = 2, t = 5, d = 16;
  MultiheadAttention attn(AttentionOptions(d, 4));
  torch::Tensor x = torch::randn({b, t, d});
  torch::Tensor padding = torch::zeros({b, t}, torch::kBool);
  padding[0][0] = true;
  padding[1][4] = true;
  torch::Tensor up = torch::randn({b, t, d});
  std::vector<torch::Tensor> grads[2];
  torch::Tensor outs[2];
  for (int i = 0; i < 2; ++i) {
    SetAttentionBackend(i == 0 ? AttentionBackend::kReference : AttentionBackend::kAuto);
    ASSERT_EQ(UseFusedAttention(x), i == 1 && kernels::FusedKernelsEnabled());
    attn->zero_grad();
    torch::Tensor xi = x.clone().requires_grad_();
    outs[i] = attn(xi, xi, padding, true);
    (outs[i] * up).sum().backward();
    grads[i].push_back(xi.grad());
    for (const auto& p : attn->parameters()) grads[i].push_back(p.grad().clone());
  }
  ExpectAttentionClose(outs[0], outs[1], 1e-5, "output");
  ExpectAttentionClose(outs[0][0][0], attn->out_proj->bias.detach(), 1e-6, "query without keys");
  for (size_t k = 0; k < grads[0].size(); ++k) {
    ExpectAttentionClose(grads[0][k], grads[1][k], 1e-4, "gradient " + std::to_string(k));
  }
}

TEST_F(AttentionTest, ReferenceCachedDecodingMatchesTheFullCausalPass) {
  // Steps of 3, 2 and 1 positions: the causal mask with offsets 0, 3 and none, taken from the
  // per-thread cache and rebuilt as the shape changes.
  SetAttentionBackend(AttentionBackend::kReference);
  MultiheadAttention attn(AttentionOptions(16, 2));
  attn->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 6, 16});
  torch::Tensor full = attn(x, x, torch::Tensor(), true);
  for (int round = 0; round < 2; ++round) {
    AttentionCache cache;
    std::vector<torch::Tensor> parts;
    int64_t at = 0;
    for (int64_t len : {3, 2, 1}) {
      torch::Tensor step = x.narrow(1, at, len);
      parts.push_back(attn(step, step, torch::Tensor(), true, &cache));
      at += len;
    }
    ExpectAttentionClose(torch::cat(parts, 1), full, 1e-5, "round " + std::to_string(round));
  }
}

}  // namespace
}  // namespace deepnet::model
