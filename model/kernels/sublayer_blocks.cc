#include "model/kernels/sublayer_blocks.h"

#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/kernels/attention_core.h"
#include "model/kernels/dropout_mask.h"
#include "model/kernels/gemm.h"
#include "model/kernels/residual_layer_norm.h"
#include "model/kernels/row_math.h"

namespace deepnet::model::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t RowsOf(const torch::Tensor& x) { return x.numel() / x.size(-1); }

// y [rows, out] = x [rows, in] W^T + b with W [out, in]: one product, then the bias added to
// every row.
torch::Tensor LinearRows(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  const int64_t rows = RowsOf(x), in = w.size(1), out = w.size(0);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = out;
  torch::Tensor y = torch::empty(sizes, x.options());
  float* yp = y.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  Gemm(false, true, rows, out, in, 1.0f, x.data_ptr<float>(), in, w.data_ptr<float>(), in, 0.0f,
       yp, out);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = yp + r * out;
    for (int64_t j = 0; j < out; ++j) row[j] += bp[j];
  }
  return y;
}

// Gradients of LinearRows from dy [rows, out]: dW [out, in] = dy^T x, db = column sums of dy,
// and dx [rows, in] = dy W, written (or, with accumulate, added) into *dx.
void LinearRowsBackward(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& dy,
                        torch::Tensor* dw, torch::Tensor* db, torch::Tensor* dx, bool accumulate) {
  const int64_t rows = RowsOf(x), in = w.size(1), out = w.size(0);
  const float* dyp = dy.data_ptr<float>();
  *dw = torch::empty_like(w);
  Gemm(true, false, out, in, rows, 1.0f, dyp, out, x.data_ptr<float>(), in, 0.0f,
       dw->data_ptr<float>(), in);
  *db = torch::zeros({out}, w.options());
  float* dbp = db->data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < out; ++j) dbp[j] += dyp[r * out + j];
  }
  if (dx == nullptr) return;
  if (!accumulate) *dx = torch::empty_like(x);
  Gemm(false, false, rows, in, out, 1.0f, dyp, out, w.data_ptr<float>(), in,
       accumulate ? 1.0f : 0.0f, dx->data_ptr<float>(), in);
}

constexpr float kSqrtHalf = 0.70710678118654752f;
constexpr float kInvSqrtTwoPi = 0.39894228040143268f;

class FeedForwardBlockFunction : public torch::autograd::Function<FeedForwardBlockFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w1_in, const torch::Tensor& b1,
                               const torch::Tensor& w2_in, const torch::Tensor& b2,
                               const torch::Tensor& ln_weight, const torch::Tensor& ln_bias,
                               double alpha, double dropout, double activation_dropout,
                               double eps, bool gelu, bool training) {
    const torch::Tensor x = x_in.contiguous();
    const torch::Tensor w1 = w1_in.contiguous(), w2 = w2_in.contiguous();
    torch::Tensor pre = LinearRows(x, w1, b1.contiguous());  // [.., F] before the activation
    torch::Tensor act = torch::empty_like(pre);
    const float* pp = pre.data_ptr<float>();
    float* ap = act.data_ptr<float>();
    const int64_t n = pre.numel();
    if (gelu) {
      for (int64_t i = 0; i < n; ++i) ap[i] = 0.5f * pp[i] * (1.0f + std::erf(pp[i] * kSqrtHalf));
    } else {
      for (int64_t i = 0; i < n; ++i) ap[i] = std::max(pp[i], 0.0f);
    }
    const bool drop = training && activation_dropout > 0.0;
    torch::Tensor keep = torch::empty({0}, x.options().dtype(torch::kUInt8));
    const float keep_scale = drop ? static_cast<float>(1.0 / (1.0 - activation_dropout)) : 1.0f;
    if (drop) {
      keep = torch::empty(pre.sizes(), keep.options());
      FillDropoutKeepMask(keep.data_ptr<uint8_t>(), n, activation_dropout);
      ApplyKeepMask(ap, ap, keep.data_ptr<uint8_t>(), keep_scale, n);
    }
    torch::Tensor branch = LinearRows(act, w2, b2.contiguous());
    ResidualLayerNormState norm =
        ResidualLayerNormForward(x, branch, ln_weight, ln_bias, alpha, dropout, eps, training);
    std::vector<torch::Tensor> saved = {x, w1, w2, pre, act, keep, ln_weight};
    for (const torch::Tensor& t : norm.ToSave()) saved.push_back(t);  // From index 7.
    ctx->save_for_backward(saved);
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["gelu"] = gelu;
    ctx->saved_data["keep_scale"] = static_cast<double>(keep_scale);
    ctx->saved_data["norm_keep_scale"] = static_cast<double>(norm.keep_scale);
    return norm.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list s = ctx->get_saved_variables();
    const torch::Tensor &x = s[0], &w1 = s[1], &w2 = s[2], &pre = s[3], &act = s[4],
                        &keep = s[5], &ln_weight = s[6];
    const ResidualLayerNormState norm =
        ResidualLayerNormState::FromSaved(s, 7, ctx->saved_data["norm_keep_scale"].toDouble());
    torch::Tensor dx, dbranch, dln_weight, dln_bias;
    ResidualLayerNormBackward(norm, ln_weight, ctx->saved_data["alpha"].toDouble(),
                              grad_outputs[0], /*accumulate_dx=*/false, dx, dbranch, dln_weight,
                              dln_bias);
    torch::Tensor dw2, db2, dact;
    LinearRowsBackward(act, w2, dbranch, &dw2, &db2, &dact, /*accumulate=*/false);
    // Through the activation dropout and the activation, in place: dact becomes d(pre).
    float* dp = dact.data_ptr<float>();
    const float* pp = pre.data_ptr<float>();
    const int64_t n = dact.numel();
    if (keep.numel() > 0) {
      const float keep_scale = static_cast<float>(ctx->saved_data["keep_scale"].toDouble());
      ApplyKeepMask(dp, dp, keep.data_ptr<uint8_t>(), keep_scale, n);
    }
    if (ctx->saved_data["gelu"].toBool()) {
      for (int64_t i = 0; i < n; ++i) {
        const float h = pp[i];
        const float cdf = 0.5f * (1.0f + std::erf(h * kSqrtHalf));
        dp[i] *= cdf + h * kInvSqrtTwoPi * std::exp(-0.5f * h * h);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) dp[i] = pp[i] > 0.0f ? dp[i] : 0.0f;
    }
    torch::Tensor dw1, db1;
    LinearRowsBackward(x, w1, dact, &dw1, &db1, &dx, /*accumulate=*/true);
    variable_list grads(13);  // One per forward argument.
    grads[0] = dx;
    grads[1] = dw1;
    grads[2] = db1;
    grads[3] = dw2;
    grads[4] = db2;
    grads[5] = dln_weight;
    grads[6] = dln_bias;
    return grads;
  }
};

class AttentionBlockFunction : public torch::autograd::Function<AttentionBlockFunction> {
 public:
  // Tensor arguments: x, memory, q/k/v/out weight and bias, ln weight and bias, padding.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& memory_in, const torch::Tensor& q_weight,
                               const torch::Tensor& q_bias, const torch::Tensor& k_weight,
                               const torch::Tensor& k_bias, const torch::Tensor& v_weight,
                               const torch::Tensor& v_bias, const torch::Tensor& out_weight_in,
                               const torch::Tensor& out_bias, const torch::Tensor& ln_weight,
                               const torch::Tensor& ln_bias, const torch::Tensor& padding,
                               bool shared, int64_t heads, bool causal, double scaling,
                               double attention_dropout, double alpha, double dropout,
                               double eps, bool training) {
    const torch::Tensor x = x_in.contiguous();
    const torch::Tensor out_weight = out_weight_in.contiguous();
    torch::Tensor memory, q, kv, q_w, kv_w;  // q_w: [3D, D] for self-attention, else [D, D].
    if (shared) {
      q_w = torch::cat({q_weight, k_weight, v_weight});
      q = LinearRows(x, q_w, torch::cat({q_bias, k_bias, v_bias}));
      memory = x;
      kv = q;
    } else {
      memory = memory_in.contiguous();
      q_w = q_weight.contiguous();
      q = LinearRows(x, q_w, q_bias.contiguous());
      kv_w = torch::cat({k_weight, v_weight});
      kv = LinearRows(memory, kv_w, torch::cat({k_bias, v_bias}));
    }
    AttentionCoreState core = AttentionCoreForward(q, kv, heads, padding, causal, scaling,
                                                   attention_dropout, training);
    torch::Tensor branch = LinearRows(core.out, out_weight, out_bias.contiguous());
    ResidualLayerNormState norm =
        ResidualLayerNormForward(x, branch, ln_weight, ln_bias, alpha, dropout, eps, training);
    const torch::Tensor none = torch::empty({0}, x.options());
    std::vector<torch::Tensor> saved = {x,      shared ? none : memory, q, shared ? none : kv,
                                        q_w,    shared ? none : kv_w,   core.out, out_weight,
                                        ln_weight};
    for (const torch::Tensor& t : core.ToSave()) saved.push_back(t);  // From index 9.
    for (const torch::Tensor& t : norm.ToSave()) saved.push_back(t);  // From index 11.
    ctx->save_for_backward(saved);
    ctx->saved_data["shared"] = shared;
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["scaling"] = scaling;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["core_keep_scale"] = static_cast<double>(core.keep_scale);
    ctx->saved_data["norm_keep_scale"] = static_cast<double>(norm.keep_scale);
    return norm.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list s = ctx->get_saved_variables();
    const bool shared = ctx->saved_data["shared"].toBool();
    const torch::Tensor &x = s[0], &q = s[2], &q_w = s[4], &out_weight = s[7],
                        &ln_weight = s[8];
    const torch::Tensor& memory = shared ? x : s[1];
    const torch::Tensor& kv = shared ? q : s[3];
    const ResidualLayerNormState norm =
        ResidualLayerNormState::FromSaved(s, 11, ctx->saved_data["norm_keep_scale"].toDouble());
    torch::Tensor dx, dbranch, dln_weight, dln_bias;
    ResidualLayerNormBackward(norm, ln_weight, ctx->saved_data["alpha"].toDouble(),
                              grad_outputs[0], /*accumulate_dx=*/false, dx, dbranch, dln_weight,
                              dln_bias);
    torch::Tensor dout_w, dout_b, dcore;
    LinearRowsBackward(s[6], out_weight, dbranch, &dout_w, &dout_b, &dcore, false);
    const AttentionCoreState core =
        AttentionCoreState::FromSaved(s, 9, ctx->saved_data["core_keep_scale"].toDouble());
    auto [dq, dkv] = AttentionCoreBackward(q, kv, ctx->saved_data["heads"].toInt(),
                                           ctx->saved_data["scaling"].toDouble(), core, dcore);
    variable_list grads(22);  // One per forward argument.
    torch::Tensor dq_w, dq_b;
    LinearRowsBackward(x, q_w, dq, &dq_w, &dq_b, &dx, /*accumulate=*/true);
    const int64_t d = x.size(-1);
    if (shared) {
      for (int i = 0; i < 3; ++i) {  // q, k, v rows of the fused weight and bias.
        grads[2 + 2 * i] = dq_w.narrow(0, i * d, d);
        grads[3 + 2 * i] = dq_b.narrow(0, i * d, d);
      }
    } else {
      torch::Tensor dkv_w, dkv_b, dmemory;
      LinearRowsBackward(memory, s[5], dkv, &dkv_w, &dkv_b, &dmemory, false);
      grads[1] = dmemory;
      grads[2] = dq_w;
      grads[3] = dq_b;
      for (int i = 0; i < 2; ++i) {  // k, v rows.
        grads[4 + 2 * i] = dkv_w.narrow(0, i * d, d);
        grads[5 + 2 * i] = dkv_b.narrow(0, i * d, d);
      }
    }
    grads[0] = dx;
    grads[8] = dout_w;
    grads[9] = dout_b;
    grads[10] = dln_weight;
    grads[11] = dln_bias;
    return grads;
  }
};

void CheckCpuFloat(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat, what,
              " must be a float32 CPU tensor");
}

}  // namespace

torch::Tensor FeedForwardBlock(const torch::Tensor& x, const torch::Tensor& w1,
                               const torch::Tensor& b1, const torch::Tensor& w2,
                               const torch::Tensor& b2, const torch::Tensor& ln_weight,
                               const torch::Tensor& ln_bias, const BlockOptions& o) {
  CheckCpuFloat(x, "FeedForwardBlock: x");
  const int64_t d = x.size(-1);
  TORCH_CHECK(w1.dim() == 2 && w1.size(1) == d && b1.numel() == w1.size(0) &&
                  w2.dim() == 2 && w2.size(0) == d && w2.size(1) == w1.size(0) &&
                  b2.numel() == d && ln_weight.numel() == d && ln_bias.numel() == d,
              "FeedForwardBlock: weights do not match x's width ", d);
  TORCH_CHECK(o.dropout >= 0 && o.dropout < 1 && o.activation_dropout >= 0 &&
                  o.activation_dropout < 1,
              "FeedForwardBlock: dropout must be in [0, 1)");
  return FeedForwardBlockFunction::apply(x, w1, b1, w2, b2, ln_weight, ln_bias, o.alpha,
                                         o.dropout, o.activation_dropout, o.eps, o.gelu,
                                         o.training);
}

torch::Tensor AttentionBlock(const torch::Tensor& x, const torch::Tensor& memory,
                             const AttentionBlockWeights& w, int64_t heads,
                             const torch::Tensor& key_padding_mask, bool causal,
                             const BlockOptions& o) {
  CheckCpuFloat(x, "AttentionBlock: x");
  CheckCpuFloat(memory, "AttentionBlock: memory");
  const int64_t d = x.size(-1);
  TORCH_CHECK(x.dim() == 3 && memory.dim() == 3 && memory.size(0) == x.size(0) &&
                  memory.size(2) == d,
              "AttentionBlock: x [B, T, D] and memory [B, S, D] expected");
  TORCH_CHECK(heads > 0 && d % heads == 0, "AttentionBlock: ", d,
              " is not a multiple of heads ", heads);
  for (const torch::Tensor* t : {&w.q_weight, &w.k_weight, &w.v_weight, &w.out_weight}) {
    TORCH_CHECK(t->dim() == 2 && t->size(0) == d && t->size(1) == d,
                "AttentionBlock: projection weights must be [", d, ", ", d, "]");
  }
  CheckKeyMask(key_padding_mask, x.size(0), x.size(1), memory.size(1), "AttentionBlock");
  TORCH_CHECK(o.dropout >= 0 && o.dropout < 1 && o.attention_dropout >= 0 &&
                  o.attention_dropout < 1,
              "AttentionBlock: dropout must be in [0, 1)");
  const double scaling = 1.0 / std::sqrt(static_cast<double>(d / heads));
  const torch::Tensor padding = key_padding_mask.defined()
                                    ? key_padding_mask
                                    : torch::empty({0}, x.options().dtype(torch::kBool));
  return AttentionBlockFunction::apply(x, memory, w.q_weight, w.q_bias, w.k_weight, w.k_bias,
                                       w.v_weight, w.v_bias, w.out_weight, w.out_bias,
                                       w.ln_weight, w.ln_bias, padding, memory.is_same(x), heads,
                                       causal, scaling, o.attention_dropout, o.alpha, o.dropout,
                                       o.eps, o.training);
}

}  // namespace deepnet::model::kernels
