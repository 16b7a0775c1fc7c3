// The fused CPU kernels (model/kernels/) against the ATen ops they replace: values and
// gradients, masks, dropout, and whole models with the kernels on and off.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/deepnet.h"
#include "model/initialization.h"
#include "model/kernels/attention_core.h"
#include "model/kernels/dropout_mask.h"
#include "model/kernels/fused_kernels.h"
#include "model/kernels/gemm.h"
#include "model/kernels/residual_layer_norm.h"
#include "model/kernels/sublayer_blocks.h"

namespace deepnet::model::kernels {
namespace {

// Restores the process-wide switch whatever a test does with it.
class FusedKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = FusedKernelsEnabled();
    torch::manual_seed(0);
  }
  void TearDown() override { SetFusedKernelsEnabled(saved_); }

 private:
  bool saved_ = true;
};

void ExpectFusedClose(const torch::Tensor& actual, const torch::Tensor& expected, double tol,
                      const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const double diff = (actual - expected).abs().max().item<double>();
  const double scale = std::max(1.0, expected.abs().max().item<double>());
  EXPECT_LE(diff, tol * scale) << what;
}

TEST_F(FusedKernelsTest, GemmMatchesAtenForEveryTransposeAndStride) {
  const int64_t m = 7, n = 5, k = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 0.5f}) {
        // Stored matrices with row strides larger than their widths.
        torch::Tensor a = torch::randn({ta ? k : m, 16});
        torch::Tensor b = torch::randn({tb ? n : k, 12});
        torch::Tensor c0 = torch::randn({m, 11});
        torch::Tensor c = c0.clone();
        Gemm(ta, tb, m, n, k, 1.5f, a.data_ptr<float>(), 16, b.data_ptr<float>(), 12, beta,
             c.data_ptr<float>(), 11);
        torch::Tensor op_a = ta ? a.narrow(1, 0, m).t() : a.narrow(1, 0, k);
        torch::Tensor op_b = tb ? b.narrow(1, 0, k).t() : b.narrow(1, 0, n);
        torch::Tensor expected = 1.5 * torch::mm(op_a, op_b) + beta * c0.narrow(1, 0, n);
        const std::string what = "ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
        ExpectFusedClose(c.narrow(1, 0, n), expected, 1e-5, what);
        // Columns past n are untouched.
        EXPECT_TRUE(torch::equal(c.narrow(1, n, 11 - n), c0.narrow(1, n, 11 - n))) << what;
        torch::Tensor c_aten = c0.clone();
        GemmAten(ta, tb, m, n, k, 1.5f, a.data_ptr<float>(), 16, b.data_ptr<float>(), 12, beta,
                 c_aten.data_ptr<float>(), 11);
        ExpectFusedClose(c_aten.narrow(1, 0, n), expected, 1e-5, what + " (ATen)");
      }
    }
  }
}

TEST_F(FusedKernelsTest, GemmWithBetaZeroIgnoresGarbageInOutput) {
  torch::Tensor a = torch::randn({3, 4}), b = torch::randn({4, 2});
  torch::Tensor c = torch::full({3, 2}, std::numeric_limits<float>::quiet_NaN());
  Gemm(false, false, 3, 2, 4, 1.0f, a.data_ptr<float>(), 4, b.data_ptr<float>(), 2, 0.0f,
       c.data_ptr<float>(), 2);
  ExpectFusedClose(c, torch::mm(a, b), 1e-6, "beta 0");
}

TEST_F(FusedKernelsTest, DropoutMaskKeepsOneMinusPAndFollowsTheGenerator) {
  const int64_t n = 1 << 20;
  std::vector<uint8_t> first(n), second(n), third(n);
  torch::manual_seed(11);
  FillDropoutKeepMask(first.data(), n, 0.1);
  FillDropoutKeepMask(third.data(), n, 0.1);
  torch::manual_seed(11);
  FillDropoutKeepMask(second.data(), n, 0.1);
  EXPECT_EQ(first, second) << "same generator state, same mask";
  EXPECT_NE(first, third) << "each call advances the generator";
  int64_t kept = 0;
  for (uint8_t v : first) kept += v;
  // Binomial(n, 0.9): standard deviation 307; allow 6 of them.
  EXPECT_NEAR(static_cast<double>(kept), 0.9 * n, 6 * std::sqrt(n * 0.9 * 0.1));
  std::vector<uint8_t> all(1001);
  FillDropoutKeepMask(all.data(), 1001, 0.0);
  for (uint8_t v : all) ASSERT_EQ(v, 1);
}

// Reference: LayerNorm(alpha * x + branch) with ATen ops.
torch::Tensor ReferenceResidualLayerNorm(const torch::Tensor& x, const torch::Tensor& branch,
                                         const torch::Tensor& w, const torch::Tensor& b,
                                         double alpha, double eps) {
  return torch::layer_norm(alpha * x + branch, {x.size(-1)}, w, b, eps);
}

// Leaf tensors of the given shapes that require gradients, and detached copies of them.
std::vector<torch::Tensor> Leaves(std::initializer_list<std::vector<int64_t>> shapes) {
  std::vector<torch::Tensor> out;
  for (const auto& shape : shapes) out.push_back((0.5 * torch::randn(shape)).requires_grad_());
  return out;
}

std::vector<torch::Tensor> CloneLeaves(const std::vector<torch::Tensor>& leaves) {
  std::vector<torch::Tensor> out;
  for (const auto& t : leaves) out.push_back(t.detach().clone().requires_grad_());
  return out;
}

TEST_F(FusedKernelsTest, ResidualLayerNormMatchesAtenValuesAndGradients) {
  for (double alpha : {1.0, 2.7}) {
    // x, branch, weight, bias.
    std::vector<torch::Tensor> fused = Leaves({{3, 5, 24}, {3, 5, 24}, {24}, {24}});
    std::vector<torch::Tensor> ref = CloneLeaves(fused);
    torch::Tensor up = torch::randn({3, 5, 24});
    torch::Tensor y = ResidualLayerNorm(fused[0], fused[1], fused[2], fused[3], alpha, 0.1, 1e-5,
                                        /*training=*/false);  // Dropout off outside training.
    torch::Tensor y_ref = ReferenceResidualLayerNorm(ref[0], ref[1], ref[2], ref[3], alpha, 1e-5);
    ExpectFusedClose(y, y_ref, 1e-5, "forward");
    (y * up).sum().backward();
    (y_ref * up).sum().backward();
    const char* names[] = {"x", "branch", "weight", "bias"};
    for (size_t i = 0; i < 4; ++i) {
      ExpectFusedClose(fused[i].grad(), ref[i].grad(), 1e-4, names[i]);
    }
  }
}

TEST_F(FusedKernelsTest, ResidualLayerNormDropoutIsInvertedAndGradientsFollowTheMask) {
  const double p = 0.25;
  std::vector<torch::Tensor> leaves = Leaves({{4, 8, 32}, {4, 8, 32}, {32}, {32}});
  const torch::Tensor &x = leaves[0], &branch = leaves[1], &w = leaves[2], &b = leaves[3];
  torch::Tensor y = ResidualLayerNorm(x, branch, w, b, 1.5, p, 1e-5, /*training=*/true);
  y.sum().backward();
  // The branch gradient is exactly zero where the branch was dropped; elsewhere it is the
  // layer norm's input gradient times 1 / (1 - p). Rebuild the mask from it and check the
  // forward against ATen with that mask.
  torch::Tensor kept = branch.grad().ne(0);
  const double fraction = kept.to(torch::kFloat).mean().item<double>();
  EXPECT_NEAR(fraction, 1 - p, 0.05);
  torch::Tensor masked = branch.detach() * kept.to(torch::kFloat) / (1 - p);
  torch::Tensor expected =
      ReferenceResidualLayerNorm(x.detach(), masked, w.detach(), b.detach(), 1.5, 1e-5);
  ExpectFusedClose(y.detach(), expected, 1e-5, "forward with dropout");
  // x's gradient is alpha times the layer-norm input gradient; the kept branch entries carry
  // the same gradient scaled by 1 / (1 - p) / alpha.
  torch::Tensor ratio = (branch.grad() / x.grad()).masked_select(kept);
  ExpectFusedClose(ratio, torch::full_like(ratio, 1.0 / (1 - p) / 1.5), 1e-3, "gradient ratio");
}

// Reference attention with ATen ops: q [B, T, D], k and v [B, S, D].
torch::Tensor ReferenceAttention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, int64_t heads,
                                 const torch::Tensor& padding, bool causal, double scaling) {
  const int64_t b = q.size(0), t = q.size(1), s = k.size(1), d = q.size(2), hd = d / heads;
  auto split = [&](const torch::Tensor& x, int64_t len) {
    return x.reshape({b, len, heads, hd}).transpose(1, 2);
  };
  torch::Tensor scores = torch::matmul(split(q, t), split(k, s).transpose(-1, -2)) * scaling;
  torch::Tensor hidden = torch::zeros({b, 1, t, s}, torch::kBool);
  if (padding.defined()) hidden = hidden | padding.view({b, 1, 1, s});
  if (causal) hidden = hidden | torch::ones({t, s}, torch::kBool).triu(1).view({1, 1, t, s});
  scores = scores.masked_fill(hidden, -std::numeric_limits<double>::infinity());
  torch::Tensor probs = torch::softmax(scores, -1);
  return torch::matmul(probs, split(v, s)).transpose(1, 2).reshape({b, t, d});
}

TEST_F(FusedKernelsTest, SelfAttentionMatchesAtenWithPaddingAndCausalMasks) {
  const int64_t b = 3, l = 6, d = 12, heads = 3;
  torch::Tensor padding = torch::zeros({b, l}, torch::kBool);
  padding[1][5] = true;
  padding[2][4] = true;
  padding[2][5] = true;
  for (bool causal : {false, true}) {
    for (bool with_padding : {false, true}) {
      torch::Tensor qkv = torch::randn({b, l, 3 * d}).requires_grad_();
      torch::Tensor qkv_ref = qkv.detach().clone().requires_grad_();
      const torch::Tensor mask = with_padding ? padding : torch::Tensor();
      torch::Tensor out = AttentionCore(qkv, qkv, heads, mask, causal, 0.4, 0.0, true);
      auto parts = qkv_ref.split(d, 2);
      torch::Tensor ref = ReferenceAttention(parts[0], parts[1], parts[2], heads, mask, causal, 0.4);
      const std::string what =
          std::string(causal ? "causal" : "full") + (with_padding ? " padded" : "");
      ExpectFusedClose(out, ref, 1e-5, what);
      torch::Tensor up = torch::randn({b, l, d});
      (out * up).sum().backward();
      (ref * up).sum().backward();
      ExpectFusedClose(qkv.grad(), qkv_ref.grad(), 1e-4, what + " gradient");
    }
  }
}

TEST_F(FusedKernelsTest, CrossAttentionMatchesAten) {
  const int64_t b = 2, t = 4, s = 7, d = 8, heads = 2;
  torch::Tensor padding = torch::zeros({b, s}, torch::kBool);
  padding[0][6] = true;
  torch::Tensor q = torch::randn({b, t, d}).requires_grad_();
  torch::Tensor kv = torch::randn({b, s, 2 * d}).requires_grad_();
  torch::Tensor q_ref = q.detach().clone().requires_grad_();
  torch::Tensor kv_ref = kv.detach().clone().requires_grad_();
  torch::Tensor out = AttentionCore(q, kv, heads, padding, false, 0.5, 0.0, true);
  auto parts = kv_ref.split(d, 2);
  torch::Tensor ref = ReferenceAttention(q_ref, parts[0], parts[1], heads, padding, false, 0.5);
  ExpectFusedClose(out, ref, 1e-5, "forward");
  torch::Tensor up = torch::randn({b, t, d});
  (out * up).sum().backward();
  (ref * up).sum().backward();
  ExpectFusedClose(q.grad(), q_ref.grad(), 1e-4, "q gradient");
  ExpectFusedClose(kv.grad(), kv_ref.grad(), 1e-4, "kv gradient");
}

TEST_F(FusedKernelsTest, QueryThatSeesNoKeyGetsZerosNotNaN) {
  torch::Tensor q = torch::randn({1, 2, 4}), kv = torch::randn({1, 3, 8});
  torch::Tensor padding = torch::ones({1, 3}, torch::kBool);
  torch::Tensor out = AttentionCore(q, kv, 2, padding, false, 1.0, 0.0, false);
  EXPECT_TRUE(torch::equal(out, torch::zeros_like(out)));
}

TEST_F(FusedKernelsTest, AttentionDropoutGradientMatchesFiniteDifferences) {
  // With the generator reset before each call the dropout mask is the same, so the op is a
  // fixed differentiable function whose directional derivative can be checked numerically.
  const int64_t b = 2, l = 5, d = 8, heads = 2;
  torch::Tensor qkv = torch::randn({b, l, 3 * d}).requires_grad_();
  torch::Tensor up = torch::randn({b, l, d});
  auto f = [&](const torch::Tensor& input) {
    torch::manual_seed(99);
    return (AttentionCore(input, input, heads, torch::Tensor(), true, 0.35, 0.3, true) * up).sum();
  };
  f(qkv).backward();
  torch::Tensor direction = torch::randn_like(qkv);
  const double eps = 1e-2;
  torch::NoGradGuard no_grad;
  const double numeric =
      (f(qkv + eps * direction).item<double>() - f(qkv - eps * direction).item<double>()) /
      (2 * eps);
  const double analytic = (qkv.grad() * direction).sum().item<double>();
  EXPECT_NEAR(analytic, numeric, 2e-2 * std::max(1.0, std::abs(numeric)));
  // Dropout changed the result.
  torch::manual_seed(99);
  torch::Tensor dropped = AttentionCore(qkv, qkv, heads, torch::Tensor(), true, 0.35, 0.3, true);
  torch::Tensor plain = AttentionCore(qkv, qkv, heads, torch::Tensor(), true, 0.35, 0.3, false);
  EXPECT_FALSE(torch::allclose(dropped, plain));
}

TEST_F(FusedKernelsTest, KernelsRejectWrongShapesNamingTheInput) {
  torch::Tensor q = torch::randn({2, 3, 8});
  EXPECT_THROW(AttentionCore(q, torch::randn({2, 3, 8}), 2, torch::Tensor(), false, 1, 0, true),
               c10::Error);  // kv must be [B, S, 2D]
  EXPECT_THROW(AttentionCore(q, q, 2, torch::Tensor(), false, 1, 0, true),
               c10::Error);  // 8 is not 3D
  EXPECT_THROW(ResidualLayerNorm(q, torch::randn({2, 3, 7}), torch::ones({8}), torch::zeros({8}),
                                 1, 0, 1e-5, true),
               c10::Error);
}

TEST_F(FusedKernelsTest, FeedForwardBlockMatchesAtenForReluAndGelu) {
  for (bool gelu : {false, true}) {
    // x, w1, b1, w2, b2, ln weight, ln bias.
    std::vector<torch::Tensor> p = Leaves({{2, 5, 8}, {12, 8}, {12}, {8, 12}, {8}, {8}, {8}});
    std::vector<torch::Tensor> r = CloneLeaves(p);
    BlockOptions o;
    o.alpha = 1.3;
    o.gelu = gelu;
    o.dropout = 0.2;  // Not training: off.
    torch::Tensor y = FeedForwardBlock(p[0], p[1], p[2], p[3], p[4], p[5], p[6], o);
    torch::Tensor hidden = torch::nn::functional::linear(r[0], r[1], r[2]);
    hidden = gelu ? torch::gelu(hidden) : torch::relu(hidden);
    torch::Tensor ref = torch::layer_norm(
        1.3 * r[0] + torch::nn::functional::linear(hidden, r[3], r[4]), {8}, r[5], r[6], 1e-5);
    const std::string what = gelu ? "gelu" : "relu";
    ExpectFusedClose(y, ref, 1e-5, what);
    torch::Tensor up = torch::randn_like(ref);
    (y * up).sum().backward();
    (ref * up).sum().backward();
    for (size_t i = 0; i < p.size(); ++i) {
      ExpectFusedClose(p[i].grad(), r[i].grad(), 1e-4, what + " gradient " + std::to_string(i));
    }
  }
}

// The attention block against the same arithmetic in ATen ops (projections, attention,
// output projection, residual LayerNorm), for self- and cross-attention.
TEST_F(FusedKernelsTest, AttentionBlockMatchesAtenForSelfAndCrossAttention) {
  const int64_t b = 2, t = 5, s = 6, d = 8, heads = 2;
  torch::Tensor padding = torch::zeros({b, s}, torch::kBool);
  padding[1][5] = true;
  for (bool cross : {false, true}) {
    // x, memory, q w/b, k w/b, v w/b, out w/b, ln w/b.
    std::vector<torch::Tensor> p = Leaves({{b, t, d}, {b, s, d}, {d, d}, {d}, {d, d}, {d}, {d, d},
                                          {d}, {d, d}, {d}, {d}, {d}});
    std::vector<torch::Tensor> r = CloneLeaves(p);
    auto weights = [](const std::vector<torch::Tensor>& v) {
      return AttentionBlockWeights{v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]};
    };
    BlockOptions o;
    o.alpha = 0.8;
    const torch::Tensor mask = cross ? padding : torch::Tensor();
    const bool causal = !cross;
    torch::Tensor y = AttentionBlock(p[0], cross ? p[1] : p[0], weights(p), heads, mask, causal, o);
    namespace F = torch::nn::functional;
    const torch::Tensor& mem = cross ? r[1] : r[0];
    torch::Tensor attn = ReferenceAttention(F::linear(r[0], r[2], r[3]), F::linear(mem, r[4], r[5]),
                                            F::linear(mem, r[6], r[7]), heads, mask, causal,
                                            1.0 / std::sqrt(d / heads));
    torch::Tensor ref =
        torch::layer_norm(0.8 * r[0] + F::linear(attn, r[8], r[9]), {d}, r[10], r[11], 1e-5);
    const std::string what = cross ? "cross" : "self";
    ExpectFusedClose(y, ref, 1e-5, what);
    torch::Tensor up = torch::randn_like(ref);
    (y * up).sum().backward();
    (ref * up).sum().backward();
    for (size_t i = 0; i < p.size(); ++i) {
      if (!cross && i == 1) continue;  // memory unused for self-attention
      ExpectFusedClose(p[i].grad(), r[i].grad(), 1e-4, what + " gradient " + std::to_string(i));
    }
  }
}

// With every dropout on and the generator reset before each call (so the masks repeat), the
// blocks' gradients match finite differences in a random direction.
TEST_F(FusedKernelsTest, BlockGradientsWithDropoutMatchFiniteDifferences) {
  BlockOptions o;
  o.alpha = 1.2;
  o.dropout = 0.2;
  o.activation_dropout = 0.3;
  o.attention_dropout = 0.25;
  o.training = true;
  const int64_t d = 8;
  std::vector<torch::Tensor> ffn = Leaves({{2, 4, d}, {16, d}, {16}, {d, 16}, {d}, {d}, {d}});
  std::vector<torch::Tensor> att = Leaves({{2, 4, d}, {2, 6, d}, {d, d}, {d}, {d, d}, {d},
                                           {d, d}, {d}, {d, d}, {d}, {d}, {d}});
  torch::Tensor up_ffn = torch::randn({2, 4, d}), up_att = torch::randn({2, 4, d});
  auto ffn_loss = [&](const std::vector<torch::Tensor>& v) {
    torch::manual_seed(7);
    return (FeedForwardBlock(v[0], v[1], v[2], v[3], v[4], v[5], v[6], o) * up_ffn).sum();
  };
  auto att_loss = [&](const std::vector<torch::Tensor>& v) {
    torch::manual_seed(7);
    AttentionBlockWeights w{v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]};
    return (AttentionBlock(v[0], v[1], w, 2, torch::Tensor(), false, o) * up_att).sum();
  };
  auto check = [](const std::vector<torch::Tensor>& leaves, const auto& loss,
                  const std::string& what) {
    loss(leaves).backward();
    std::vector<torch::Tensor> plus, minus, dirs;
    double analytic = 0;
    const double eps = 1e-2;
    for (const auto& t : leaves) {
      torch::Tensor dir = torch::randn_like(t);
      analytic += (t.grad() * dir).sum().item<double>();
      plus.push_back(t.detach() + eps * dir);
      minus.push_back(t.detach() - eps * dir);
    }
    torch::NoGradGuard no_grad;
    const torch::Tensor up_value = loss(plus), down_value = loss(minus);
    const double numeric =
        (up_value.template item<double>() - down_value.template item<double>()) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, 3e-2 * std::max(1.0, std::abs(numeric))) << what;
  };
  check(ffn, ffn_loss, "feed-forward");
  check(att, att_loss, "cross-attention");
}

// Whole models: loss and every parameter gradient with the fused kernels equal the ATen path's
// (dropout 0, so both compute the same function), for every normalisation variant.
TEST_F(FusedKernelsTest, ModelsTrainTheSameWithAndWithoutFusedKernels) {
  for (NormVariant norm : {NormVariant::kDeepNorm, NormVariant::kPostLn, NormVariant::kPreLn,
                           NormVariant::kPostLnInit, NormVariant::kDeepNormPreLn}) {
   for (Activation activation : {Activation::kRelu, Activation::kGelu}) {
    DeepNetConfig config = DeepNetConfig()
                               .encoder_layers(3)
                               .decoder_layers(2)
                               .d_model(16)
                               .heads(4)
                               .ffn_dim(32)
                               .vocab_size(40)
                               .dropout(0.0)
                               .max_positions(32)
                               .activation(activation)
                               .norm(norm);
    DeepNet model(config);
    InitializeParameters(*model, 3);
    model->train();
    torch::Tensor src = torch::randint(4, 40, {3, 9}, torch::kLong);
    torch::Tensor tgt = torch::randint(4, 40, {3, 7}, torch::kLong);
    src[1][8] = config.pad_id();  // Padding in the source.
    src[2][7] = config.pad_id();
    src[2][8] = config.pad_id();
    std::vector<std::vector<torch::Tensor>> grads;
    std::vector<torch::Tensor> logits;
    for (bool fused : {true, false}) {
      SetFusedKernelsEnabled(fused);
      model->zero_grad();
      torch::Tensor out = model->forward(src, tgt);
      (out * out.detach().sin()).sum().backward();
      logits.push_back(out.detach());
      std::vector<torch::Tensor> g;
      for (const auto& p : model->parameters()) g.push_back(p.grad().clone());
      grads.push_back(g);
    }
    const std::string what = "norm " + std::to_string(static_cast<int>(norm)) + " activation " +
                             std::to_string(static_cast<int>(activation));
    ExpectFusedClose(logits[0], logits[1], 1e-4, what + " logits");
    const auto names = model->named_parameters().keys();
    for (size_t i = 0; i < grads[0].size(); ++i) {
      ExpectFusedClose(grads[0][i], grads[1][i], 1e-3, what + " " + names[i]);
    }
   }
  }
}

}  // namespace
}  // namespace deepnet::model::kernels
