#include "model/kernels/attention_core.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model/kernels/dropout_mask.h"
#include "model/kernels/gemm.h"
#include "model/kernels/row_math.h"

namespace deepnet::model::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Where the (batch, head) matrices live: row r of head h in batch b of q starts at
// QOffset(b, h) + r * q_row in q; those of k and v at KOffset / VOffset + r * kv_row in kv.
struct Geometry {
  int64_t batch, heads, head_dim, t, s, d;
  int64_t q_row, kv_row;
  int64_t k_col, v_col;  // first column of k and of v in kv (q starts at column 0 of q)

  int64_t QOffset(int64_t b, int64_t h) const { return b * t * q_row + h * head_dim; }
  int64_t KOffset(int64_t b, int64_t h) const { return b * s * kv_row + k_col + h * head_dim; }
  int64_t VOffset(int64_t b, int64_t h) const { return b * s * kv_row + v_col + h * head_dim; }
};

// Self-attention (`shared`): q is [B, L, 3D] = q | k | v. Else q [B, T, D], kv [B, S, 2D] = k | v.
Geometry GeometryOf(const torch::Tensor& q, const torch::Tensor& kv, int64_t heads, bool shared) {
  const int64_t d = shared ? q.size(2) / 3 : q.size(2);
  Geometry g;
  g.batch = q.size(0);
  g.heads = heads;
  g.head_dim = d / heads;
  g.t = q.size(1);
  g.s = kv.size(1);
  g.d = d;
  g.q_row = q.size(2);
  g.kv_row = kv.size(2);
  g.k_col = shared ? d : 0;
  g.v_col = shared ? 2 * d : d;
  return g;
}

// Sets the scores of keys that query row i may not see to -inf: padded keys, and with `causal`
// keys j > i. Returns whether the row sees no key at all.
bool MaskScoresRow(float* row, int64_t i, int64_t s, const bool* pad, bool causal) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t visible_end = causal ? std::min(s, i + 1) : s;
  std::fill(row + visible_end, row + s, neg_inf);
  bool any = false;
  for (int64_t j = 0; j < visible_end; ++j) {
    if (pad != nullptr && pad[j]) {
      row[j] = neg_inf;
    } else {
      any = true;
    }
  }
  return !any;
}

// out [cols, rows] = a [rows, cols]^T. The products with a transposed left operand below run
// about twice as slow as plain ones in OpenBLAS's small-matrix kernels (T, S of 32 at d=64);
// an explicit transpose of the T x S matrix costs less than the difference.
void Transpose(const float* a, int64_t rows, int64_t cols, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = a[i * cols + j];
  }
}

}  // namespace

void CheckKeyMask(const torch::Tensor& mask, int64_t batch, int64_t queries, int64_t keys,
                  const char* who) {
  if (!mask.defined()) return;
  const bool per_key = mask.dim() == 2 && mask.size(0) == batch && mask.size(1) == keys;
  const bool per_query = mask.dim() == 3 && mask.size(0) == batch && mask.size(1) == queries &&
                         mask.size(2) == keys;
  TORCH_CHECK(per_key || per_query, who, ": key_padding_mask must be [B, S] = [", batch, ", ",
              keys, "] or [B, T, S] = [", batch, ", ", queries, ", ", keys, "], got ",
              mask.sizes());
}

AttentionCoreState AttentionCoreForward(const torch::Tensor& q, const torch::Tensor& kv,
                                        int64_t heads, const torch::Tensor& padding_in,
                                        bool causal, double scaling, double dropout,
                                        bool training) {
  const bool shared = q.is_same(kv);
  const Geometry g = GeometryOf(q, kv, heads, shared);
  const bool drop = training && dropout > 0.0;
  const float keep_scale = drop ? static_cast<float>(1.0 / (1.0 - dropout)) : 1.0f;

  torch::Tensor scores = torch::empty({g.batch, g.heads, g.t, g.s}, q.options());
  // Autograd saves no undefined tensors: "no dropout" is an empty mask.
  torch::Tensor keep = torch::empty({0}, q.options().dtype(torch::kUInt8));
  if (drop) {
    keep = torch::empty(scores.sizes(), q.options().dtype(torch::kUInt8));
    FillDropoutKeepMask(keep.data_ptr<uint8_t>(), keep.numel(), dropout);
  }
  torch::Tensor padding;  // padding_in has no elements when there is no mask.
  if (padding_in.numel() > 0) padding = padding_in.to(torch::kBool).contiguous();
  torch::Tensor out = torch::empty({g.batch, g.t, g.d}, q.options());

  const float* qp = q.data_ptr<float>();
  const float* kvp = kv.data_ptr<float>();
  const bool* padp = padding.defined() ? padding.data_ptr<bool>() : nullptr;
  const bool per_query_mask = padding.defined() && padding.dim() == 3;
  const uint8_t* kp = drop ? keep.data_ptr<uint8_t>() : nullptr;
  float* sp = scores.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float scale = static_cast<float>(scaling);
  // Scores and masks per (batch, head); then one softmax over all rows, ATen's vectorised
  // kernel (exp per element in a scalar loop was 3 % of a d=64 step); then the products with v.
  std::vector<uint8_t> blind(g.batch * g.heads * g.t, 0);  // Rows that see no key.
  at::parallel_for(0, g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / g.heads, h = bh % g.heads;
      const float* qm = qp + g.QOffset(b, h);
      const float* km = kvp + g.KOffset(b, h);
      float* pm = sp + bh * g.t * g.s;
      Gemm(false, true, g.t, g.s, g.head_dim, scale, qm, g.q_row, km, g.kv_row, 0.0f, pm, g.s);
      if (padp == nullptr && !causal) continue;
      for (int64_t i = 0; i < g.t; ++i) {
        // [B, S]: one row of hidden keys for every query; [B, T, S]: a row per query.
        const bool* pad = padp == nullptr  ? nullptr
                          : per_query_mask ? padp + (b * g.t + i) * g.s
                                           : padp + b * g.s;
        blind[bh * g.t + i] = MaskScoresRow(pm + i * g.s, i, g.s, pad, causal);
      }
    }
  });
  torch::Tensor probs = torch::softmax(scores, -1);
  float* pp = probs.data_ptr<float>();
  for (size_t row = 0; row < blind.size(); ++row) {  // softmax gave NaN there.
    if (blind[row]) std::fill(pp + row * g.s, pp + (row + 1) * g.s, 0.0f);
  }
  at::parallel_for(0, g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> dropped(drop ? g.t * g.s : 0);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / g.heads, h = bh % g.heads;
      const float* vm = kvp + g.VOffset(b, h);
      const float* weights = pp + bh * g.t * g.s;
      if (drop) {
        ApplyKeepMask(dropped.data(), weights, kp + bh * g.t * g.s, keep_scale, g.t * g.s);
        weights = dropped.data();
      }
      Gemm(false, false, g.t, g.head_dim, g.s, 1.0f, weights, g.s, vm, g.kv_row, 0.0f,
           op + b * g.t * g.d + h * g.head_dim, g.d);
    }
  });
  AttentionCoreState state;
  state.out = out;
  state.probs = probs;
  state.keep = keep;
  state.keep_scale = keep_scale;
  return state;
}

std::pair<torch::Tensor, torch::Tensor> AttentionCoreBackward(
    const torch::Tensor& q, const torch::Tensor& kv, int64_t heads, double scaling,
    const AttentionCoreState& state, const torch::Tensor& dout_in) {
  const bool shared = q.is_same(kv);
  const torch::Tensor& probs = state.probs;
  const torch::Tensor& keep = state.keep;
  const float keep_scale = state.keep_scale;
  const torch::Tensor dout = dout_in.contiguous();
  const Geometry g = GeometryOf(q, kv, heads, shared);
  const float scale = static_cast<float>(scaling);

  // Every column of q and kv is some head's q, k or v column, so the products below write
  // all of both gradients.
  torch::Tensor dq = torch::empty_like(q);
  torch::Tensor dkv = shared ? dq : torch::empty_like(kv);

  const float* qp = q.data_ptr<float>();
  const float* kvp = kv.data_ptr<float>();
  const float* pp = probs.data_ptr<float>();
  const uint8_t* kp = keep.numel() > 0 ? keep.data_ptr<uint8_t>() : nullptr;
  const float* gop = dout.data_ptr<float>();
  float* dqp = dq.data_ptr<float>();
  float* dkvp = dkv.data_ptr<float>();
  at::parallel_for(0, g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> dscores(g.t * g.s);
    std::vector<float> transposed(g.t * g.s);
    std::vector<float> dropped(kp != nullptr ? g.t * g.s : 0);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / g.heads, h = bh % g.heads;
      const int64_t q_off = g.QOffset(b, h), k_off = g.KOffset(b, h), v_off = g.VOffset(b, h);
      const float* pm = pp + bh * g.t * g.s;
      const float* gom = gop + b * g.t * g.d + h * g.head_dim;
      const float* weights = pm;
      if (kp != nullptr) {
        ApplyKeepMask(dropped.data(), pm, kp + bh * g.t * g.s, keep_scale, g.t * g.s);
        weights = dropped.data();
      }
      float* ds = dscores.data();
      // d(weights) = dO v^T; dv = weights^T dO.
      Gemm(false, true, g.t, g.s, g.head_dim, 1.0f, gom, g.d, kvp + v_off, g.kv_row, 0.0f, ds,
           g.s);
      Transpose(weights, g.t, g.s, transposed.data());
      Gemm(false, false, g.s, g.head_dim, g.t, 1.0f, transposed.data(), g.t, gom, g.d, 0.0f,
           dkvp + v_off, g.kv_row);
      if (kp != nullptr) {
        ApplyKeepMask(ds, ds, kp + bh * g.t * g.s, keep_scale, g.t * g.s);
      }
      // Softmax backward: dS = P * (dP - rowsum(P * dP)).
      for (int64_t i = 0; i < g.t; ++i) {
        const float* p_row = pm + i * g.s;
        float* d_row = ds + i * g.s;
        const float dot = RowDot(p_row, d_row, g.s);
        for (int64_t j = 0; j < g.s; ++j) d_row[j] = p_row[j] * (d_row[j] - dot);
      }
      // dq = scale * dS k; dk = scale * dS^T q.
      Gemm(false, false, g.t, g.head_dim, g.s, scale, ds, g.s, kvp + k_off, g.kv_row, 0.0f,
           dqp + q_off, g.q_row);
      Transpose(ds, g.t, g.s, transposed.data());
      Gemm(false, false, g.s, g.head_dim, g.t, scale, transposed.data(), g.t, qp + q_off, g.q_row,
           0.0f, dkvp + k_off, g.kv_row);
    }
  });
  return {dq, dkv};
}

namespace {

class AttentionCoreFunction : public torch::autograd::Function<AttentionCoreFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& kv_in, bool shared, int64_t heads,
                               const torch::Tensor& padding, bool causal, double scaling,
                               double dropout, bool training) {
    const torch::Tensor q = q_in.contiguous();
    const torch::Tensor kv = shared ? q : kv_in.contiguous();
    AttentionCoreState state =
        AttentionCoreForward(q, kv, heads, padding, causal, scaling, dropout, training);
    ctx->save_for_backward({q, kv, state.probs, state.keep});  // ToSave() from index 2.
    ctx->saved_data["shared"] = shared;
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["scaling"] = scaling;
    ctx->saved_data["keep_scale"] = static_cast<double>(state.keep_scale);
    return state.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const AttentionCoreState state =
        AttentionCoreState::FromSaved(saved, 2, ctx->saved_data["keep_scale"].toDouble());
    // Unpacked saved tensors need not be the same objects: pass q twice for self-attention.
    const bool shared = ctx->saved_data["shared"].toBool();
    auto [dq, dkv] = AttentionCoreBackward(saved[0], shared ? saved[0] : saved[1],
                                           ctx->saved_data["heads"].toInt(),
                                           ctx->saved_data["scaling"].toDouble(), state,
                                           grad_outputs[0]);
    variable_list grads(9);  // One per forward argument.
    grads[0] = dq;
    if (!shared) grads[1] = dkv;
    return grads;
  }
};

}  // namespace

torch::Tensor AttentionCore(const torch::Tensor& q, const torch::Tensor& kv, int64_t heads,
                            const torch::Tensor& key_padding_mask, bool causal, double scaling,
                            double dropout, bool training) {
  TORCH_CHECK(q.dim() == 3 && kv.dim() == 3 && q.size(0) == kv.size(0),
              "AttentionCore: q [B, T, *] and kv [B, S, *] expected");
  TORCH_CHECK(q.device().is_cpu() && q.scalar_type() == torch::kFloat &&
                  kv.device().is_cpu() && kv.scalar_type() == torch::kFloat,
              "AttentionCore: float32 CPU tensors expected");
  const bool shared = q.is_same(kv);
  const int64_t d = shared ? q.size(2) / 3 : q.size(2);
  TORCH_CHECK(heads > 0 && d > 0 && d % heads == 0, "AttentionCore: width ", d,
              " is not a positive multiple of ", heads, " heads");
  TORCH_CHECK(shared ? q.size(2) == 3 * d : kv.size(2) == 2 * d,
              shared ? "AttentionCore: self-attention input must be [B, L, 3D]"
                     : "AttentionCore: cross-attention kv must be [B, S, 2D] for q [B, T, D]");
  CheckKeyMask(key_padding_mask, q.size(0), q.size(1), kv.size(1), "AttentionCore");
  TORCH_CHECK(dropout >= 0.0 && dropout < 1.0, "AttentionCore: dropout must be in [0, 1)");
  // Autograd takes no undefined tensors as inputs: "no mask" is an empty one.
  const torch::Tensor mask = key_padding_mask.defined()
                                 ? key_padding_mask
                                 : torch::empty({0}, q.options().dtype(torch::kBool));
  return AttentionCoreFunction::apply(q, kv, shared, heads, mask, causal, scaling, dropout,
                                      training);
}

}  // namespace deepnet::model::kernels
