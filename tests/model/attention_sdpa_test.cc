// runtime.attention: sdpa against the reference attention (model/attention.h), values and
// gradients for every mask, cached decoding, dropout; float32 and bfloat16. Needs LibTorch >= 2.0
// (ctest label `torch2`); skipped on 1.13. The device comes from DEEPNET_TEST_DEVICE (`cpu` by
// default; the `gpu;torch2` variant sets `cuda` and skips without a CUDA device).
//
// Tolerances (max |a - b| over max |b|, per tensor): float32 1e-4 (both compute in float32; the
// kernels sum in different orders); bfloat16 3e-2 (8 mantissa bits, ~4e-3 per rounding, over the
// projections, softmax and both products, each path rounding at different points).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "model/attention.h"
#include "model/packing.h"

namespace deepnet::model {
namespace {

torch::Device TestDevice() {
  const char* name = std::getenv("DEEPNET_TEST_DEVICE");
  return torch::Device(name != nullptr && *name != '\0' ? name : "cpu");
}

class AttentionSdpaTest : public ::testing::TestWithParam<torch::ScalarType> {
 protected:
  void SetUp() override {
    if (!SdpaAvailable()) {
      GTEST_SKIP() << "needs LibTorch >= 2.0 (at::scaled_dot_product_attention); this build has "
                   << TORCH_VERSION;
    }
    device_ = TestDevice();
    if (device_.is_cuda() && !torch::cuda::is_available()) {
      GTEST_SKIP() << "DEEPNET_TEST_DEVICE=" << device_ << " but no CUDA device is available";
    }
    saved_ = GetAttentionBackend();
    torch::manual_seed(0);
  }
  void TearDown() override {
    if (SdpaAvailable()) SetAttentionBackend(saved_);
  }
  torch::TensorOptions Options() const { return torch::dtype(GetParam()).device(device_); }
  double Tolerance() const { return GetParam() == torch::kBFloat16 ? 3e-2 : 1e-4; }
  void ExpectClose(const torch::Tensor& actual, const torch::Tensor& expected,
                   const std::string& what) const {
    ASSERT_TRUE(actual.defined()) << what;
    ASSERT_TRUE(expected.defined()) << what;
    ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
    const torch::Tensor a = actual.to(torch::kCPU, torch::kDouble);
    const torch::Tensor e = expected.to(torch::kCPU, torch::kDouble);
    ASSERT_TRUE(torch::isfinite(a).all().item<bool>()) << what << ": not finite";
    const double diff = (a - e).abs().max().item<double>();
    const double scale = std::max(1e-6, e.abs().max().item<double>());
    EXPECT_LE(diff / scale, Tolerance())
        << what << ": max difference " << diff << " at scale " << scale;
  }

  torch::Device device_ = torch::kCPU;
  AttentionBackend saved_ = AttentionBackend::kAuto;
};

// Output and gradients (inputs, projection weights and biases) of one attention call.
struct Result {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};

Result RunAttention(MultiheadAttention& attn, AttentionBackend backend, const torch::Tensor& x,
                    const torch::Tensor& memory, const torch::Tensor& padding, bool causal,
                    const torch::Tensor& upstream) {
  SetAttentionBackend(backend);
  attn->zero_grad();
  torch::Tensor xq = x.detach().clone().requires_grad_();
  const bool self = !memory.defined();
  torch::Tensor mem = self ? xq : memory.detach().clone().requires_grad_();
  torch::Tensor out = attn(xq, mem, padding, causal);
  (out.to(torch::kFloat) * upstream).sum().backward();
  Result r;
  r.tensors.push_back({"output", out.detach()});
  r.tensors.push_back({"grad query", xq.grad()});
  if (!self) r.tensors.push_back({"grad memory", mem.grad()});
  for (const auto& p : attn->named_parameters()) {
    r.tensors.push_back({"grad " + p.key(), p.value().grad()});
  }
  return r;
}

TEST_P(AttentionSdpaTest, ValuesAndGradientsMatchTheReferenceForEveryMask) {
  const int64_t b = 3, t = 7, s = 5, d = 32, heads = 4;
  MultiheadAttention attn(AttentionOptions(d, heads));
  attn->to(device_, GetParam());
  torch::Tensor x = torch::randn({b, t, d}, Options());
  torch::Tensor memory = torch::randn({b, s, d}, Options());
  // Row 1 loses its last two positions; row 2 is all padding for the self-attention cases
  // below that use `self_all` (every query of it sees no key).
  torch::Tensor self_pad = torch::zeros({b, t}, torch::kBool);
  self_pad[1].narrow(0, t - 2, 2).fill_(true);
  torch::Tensor self_all = self_pad.clone();
  self_all[2].fill_(true);
  torch::Tensor cross_pad = torch::zeros({b, s}, torch::kBool);
  cross_pad[0][s - 1] = true;
  cross_pad[2].narrow(0, 2, 3).fill_(true);
  // Causal with left padding: query 0 of row 0 sees no key.
  torch::Tensor left_pad = torch::zeros({b, t}, torch::kBool);
  left_pad[0][0] = true;
  // Packed rows (model/packing.h): per-query masks [B, T, S], two or three pairs per row,
  // row 2 ending in padding.
  const torch::Tensor target_ids =
      torch::tensor({1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 2, 3, 3, 1, 1, 1, 2, 0, 0, 0}, torch::kLong)
          .view({b, t});
  const torch::Tensor source_ids =
      torch::tensor({1, 1, 2, 2, 2, 1, 2, 2, 3, 3, 1, 1, 2, 0, 0}, torch::kLong).view({b, s});
  const torch::Tensor packed_self = SegmentHidden(target_ids, target_ids);
  const torch::Tensor packed_cross = SegmentHidden(target_ids, source_ids);
  struct Case {
    std::string name;
    bool cross;
    torch::Tensor padding;
    bool causal;
  };
  const std::vector<Case> cases = {
      {"self, no mask", false, torch::Tensor(), false},
      {"self, padding", false, self_pad, false},
      {"self, causal", false, torch::Tensor(), true},
      {"self, padding and causal", false, self_pad, true},
      {"self, a fully padded row", false, self_all, false},
      {"self, causal with a query that sees no key", false, left_pad, true},
      {"cross, no mask", true, torch::Tensor(), false},
      {"cross, padding", true, cross_pad, false},
      {"self, packed pairs", false, packed_self, false},
      {"self, packed pairs and causal", false, packed_self, true},
      {"cross, packed pairs", true, packed_cross, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const torch::Tensor padding = c.padding.defined() ? c.padding.to(device_) : c.padding;
    const torch::Tensor mem = c.cross ? memory : torch::Tensor();
    torch::Tensor upstream = torch::randn({b, t, d}, torch::dtype(torch::kFloat).device(device_));
    Result ref =
        RunAttention(attn, AttentionBackend::kReference, x, mem, padding, c.causal, upstream);
    Result sdpa = RunAttention(attn, AttentionBackend::kSdpa, x, mem, padding, c.causal, upstream);
    ASSERT_EQ(ref.tensors.size(), sdpa.tensors.size());
    for (size_t i = 0; i < ref.tensors.size(); ++i) {
      // The key bias adds q.b_k to every score of a query, which softmax ignores: its exact
      // gradient is zero, so both backends return rounding noise (1e-7 in fp32, 4e-3 in bf16
      // on an H200) that no relative tolerance can compare. Compared with the other gradients'
      // scale instead.
      if (ref.tensors[i].first == "grad k_proj.bias") {
        const double noise = sdpa.tensors[i].second.abs().max().item<double>();
        const double scale = ref.tensors[1].second.abs().max().item<double>();  // grad query
        EXPECT_LE(noise, Tolerance() * scale) << "grad k_proj.bias should vanish";
        continue;
      }
      ExpectClose(sdpa.tensors[i].second, ref.tensors[i].second, sdpa.tensors[i].first);
    }
  }
}

TEST_P(AttentionSdpaTest, QueriesThatSeeNoKeyGetTheOutputProjectionsBias) {
  // Attention gives them zeros (the fused kernels' rule), so the layer's output is out_proj's
  // bias, in both implementations.
  const int64_t d = 16;
  MultiheadAttention attn(AttentionOptions(d, 2));
  attn->to(device_, GetParam());
  torch::Tensor x = torch::randn({2, 4, d}, Options());
  torch::Tensor padding = torch::zeros({2, 4}, torch::kBool);
  padding[1].fill_(true);
  for (AttentionBackend backend : {AttentionBackend::kReference, AttentionBackend::kSdpa}) {
    SetAttentionBackend(backend);
    torch::Tensor out = attn(x, x, padding.to(device_), false);
    ExpectClose(out[1], attn->out_proj->bias.detach().expand({4, d}), "padded row");
  }
}

TEST_P(AttentionSdpaTest, CachedDecodingMatchesTheFullCausalPass) {
  // Self-attention with a cache: 3 positions, then 2 (past 3: an explicit offset mask), then 1.
  const int64_t b = 2, d = 16;
  MultiheadAttention attn(AttentionOptions(d, 2));
  attn->to(device_, GetParam());
  attn->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({b, 6, d}, Options());
  for (AttentionBackend backend : {AttentionBackend::kReference, AttentionBackend::kSdpa}) {
    SetAttentionBackend(backend);
    torch::Tensor full = attn(x, x, torch::Tensor(), true);
    AttentionCache cache;
    std::vector<torch::Tensor> parts;
    int64_t at = 0;
    for (int64_t len : {3, 2, 1}) {
      torch::Tensor step = x.narrow(1, at, len);
      parts.push_back(attn(step, step, torch::Tensor(), true, &cache));
      at += len;
    }
    ExpectClose(torch::cat(parts, 1), full,
                backend == AttentionBackend::kSdpa ? "sdpa cached" : "reference cached");
  }
}

// Attention with v = identity returns the dropped-out probabilities themselves:
// out[i][j] = keep_ij * p_ij / (1 - p).
TEST_P(AttentionSdpaTest, DropoutKeepsOneMinusPOfTheWeightsScaledByItsInverse) {
  const int64_t b = 4, heads = 4, t = 32, s = 32;
  const double p = 0.3;
  // Small scores: probabilities near 1/s, none too small to tell from a dropped one.
  torch::Tensor q = 0.1 * torch::randn({b, heads, t, s}, Options());
  torch::Tensor k = 0.1 * torch::randn({b, heads, s, s}, Options());
  torch::Tensor v = torch::eye(s, Options()).expand({b, heads, s, s}).contiguous();
  torch::Tensor probs =
      AttendHeads(q, k, v, torch::Tensor(), false, 0, 0.0, AttentionBackend::kReference)
          .to(torch::kCPU, torch::kDouble);
  torch::manual_seed(7);
  torch::Tensor out = AttendHeads(q, k, v, torch::Tensor(), false, 0, p, AttentionBackend::kSdpa)
                          .to(torch::kCPU, torch::kDouble);
  torch::manual_seed(7);
  torch::Tensor again = AttendHeads(q, k, v, torch::Tensor(), false, 0, p, AttentionBackend::kSdpa)
                            .to(torch::kCPU, torch::kDouble);
  EXPECT_TRUE(torch::equal(out, again)) << "the same seed gives the same masks";
  torch::Tensor kept_value = probs / (1.0 - p);
  torch::Tensor dropped = out.abs() <= 1e-3 * kept_value;
  torch::Tensor kept = (out - kept_value).abs() <= Tolerance() * kept_value + 1e-6;
  EXPECT_TRUE((dropped | kept).all().item<bool>())
      << "every weight is either dropped or scaled by 1 / (1 - p)";
  // 16384 weights: the dropped fraction's standard deviation is 0.0036; allow 8 of them.
  const double fraction = dropped.to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(fraction, p, 0.03);
}

TEST_P(AttentionSdpaTest, DropoutGradientsAreReproducibleAndVanishForDroppedWeights) {
  const int64_t b = 2, heads = 2, t = 8, s = 8;
  const double p = 0.5;
  torch::Tensor q = 0.1 * torch::randn({b, heads, t, s}, Options());
  torch::Tensor k = 0.1 * torch::randn({b, heads, s, s}, Options());
  torch::Tensor v0 = torch::eye(s, Options()).expand({b, heads, s, s}).contiguous();
  auto run = [&](torch::Tensor* grad_v) {
    torch::Tensor v = v0.clone().requires_grad_();
    torch::manual_seed(11);
    torch::Tensor out = AttendHeads(q, k, v, torch::Tensor(), false, 0, p, AttentionBackend::kSdpa);
    out.to(torch::kFloat).sum().backward();
    *grad_v = v.grad().to(torch::kCPU, torch::kDouble);
    return out.detach().to(torch::kCPU, torch::kDouble);
  };
  torch::Tensor g1, g2;
  torch::Tensor out1 = run(&g1);
  torch::Tensor out2 = run(&g2);
  EXPECT_TRUE(torch::equal(out1, out2));
  EXPECT_TRUE(torch::equal(g1, g2));
  // d(sum out)/d v[j][:] = sum_i keep_ij p_ij / (1 - p) = the column sums of `out` (v = I).
  torch::Tensor expected = out1.sum(2).unsqueeze(-1).expand({b, heads, s, s});
  ExpectClose(g1, expected, "gradient of v");
}

TEST_P(AttentionSdpaTest, AutoPicksSdpaOutsideTheFusedKernels) {
  // kAuto on this device and dtype is SDPA unless the fused CPU kernels take it.
  const int64_t d = 16;
  MultiheadAttention attn(AttentionOptions(d, 2));
  attn->to(device_, GetParam());
  torch::Tensor x = torch::randn({2, 5, d}, Options());
  SetAttentionBackend(AttentionBackend::kSdpa);
  torch::Tensor sdpa = attn(x, x, torch::Tensor(), true).detach();
  SetAttentionBackend(AttentionBackend::kAuto);
  torch::Tensor autod = attn(x, x, torch::Tensor(), true).detach();
  if (UseFusedAttention(x)) {
    ExpectClose(autod, sdpa, "auto (fused kernels)");
  } else {
    EXPECT_TRUE(torch::equal(autod, sdpa)) << "auto runs SDPA";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AttentionSdpaTest,
                         ::testing::Values(torch::kFloat, torch::kBFloat16),
                         [](const ::testing::TestParamInfo<torch::ScalarType>& info) {
                           return std::string(info.param == torch::kFloat ? "Float32" : "BFloat16");
                         });

}  // namespace
}  // namespace deepnet::model
