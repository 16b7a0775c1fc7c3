#include "model/attention.h"

#include <torch/nn/functional/dropout.h>
#include <torch/nn/functional/linear.h>
#include <torch/torch.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

#include "model/kernels/attention_core.h"
#include "model/kernels/fused_kernels.h"
#include "model/precision.h"

namespace deepnet::model {

void AttentionCache::Reorder(const torch::Tensor& index) {
  if (key.defined()) key = key.index_select(0, index);
  if (value.defined()) value = value.index_select(0, index);
}

MultiheadAttentionImpl::MultiheadAttentionImpl(const AttentionOptions& options)
    : options(options) {
  reset();
}

void MultiheadAttentionImpl::reset() {
  const int64_t d = options.d_model();
  TORCH_CHECK(d > 0 && options.heads() > 0 && d % options.heads() == 0,
              "attention: d_model (", d, ") must be a positive multiple of heads (",
              options.heads(), ")");
  q_proj = register_module("q_proj", torch::nn::Linear(d, d));
  k_proj = register_module("k_proj", torch::nn::Linear(d, d));
  v_proj = register_module("v_proj", torch::nn::Linear(d, d));
  out_proj = register_module("out_proj", torch::nn::Linear(d, d));
  if (options.sub_layer_norm()) {
    inner_attn_ln = register_module(
        "inner_attn_ln",
        torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(options.layer_norm_eps())));
  }
}

namespace {
// Applies `projections` (Linear modules with biases, all [D, D]) to x [B, L, D] as one matrix
// product with their concatenated weights: [B, L, n*D], the projections side by side. The
// weights stay separate parameters (their names do not change); concatenating them copies
// n*D*D floats, which is small next to the product, and saves the separate products' per-op
// costs.
torch::Tensor ProjectConcatenated(const torch::Tensor& x,
                                  std::initializer_list<const torch::nn::Linear*> projections) {
  std::vector<torch::Tensor> weights, biases;
  for (const torch::nn::Linear* p : projections) {
    weights.push_back((*p)->weight);
    biases.push_back((*p)->bias);
  }
  return weights.size() == 1 ? kernels::Linear(x, weights[0], biases[0])
                             : kernels::Linear(x, torch::cat(weights), torch::cat(biases));
}

// ProjectConcatenated split into heads as one contiguous tensor [projections, B, H, L, D/H]
// (bmm needs [B*H, L, D/H] operands; torch::matmul on 4-D views copied each one separately).
torch::Tensor ProjectHeads(const torch::Tensor& x,
                           std::initializer_list<const torch::nn::Linear*> projections,
                           int64_t heads) {
  const int64_t n = static_cast<int64_t>(projections.size());
  torch::Tensor y = ProjectConcatenated(x, projections);
  const int64_t b = x.size(0), l = x.size(1), d = y.size(2) / n;
  return y.view({b, l, n, heads, d / heads}).permute({2, 0, 3, 1, 4}).contiguous();
}
}  // namespace

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& memory,
                                              const torch::Tensor& key_padding_mask, bool causal,
                                              AttentionCache* cache, bool static_kv) {
  const int64_t heads = options.heads();
  const int64_t b = query.size(0), t = query.size(1), d = query.size(2);
  const int64_t head_dim = d / heads;
  const double scaling = 1.0 / std::sqrt(static_cast<double>(head_dim));

  if (cache == nullptr && kernels::UseFusedKernels(query)) {
    // Training and full-sequence evaluation on CPU: one fused op from the projections to the
    // concatenated heads (model/kernels/attention_core.h).
    torch::Tensor out;
    if (memory.is_same(query)) {
      torch::Tensor qkv = ProjectConcatenated(query, {&q_proj, &k_proj, &v_proj});
      out = kernels::AttentionCore(qkv, qkv, heads, key_padding_mask, causal, scaling,
                                   options.dropout(), is_training());
    } else {
      out = kernels::AttentionCore(ProjectConcatenated(query, {&q_proj}),
                                   ProjectConcatenated(memory, {&k_proj, &v_proj}),
                                   heads, key_padding_mask, causal, scaling, options.dropout(),
                                   is_training());
    }
    if (inner_attn_ln) out = LayerNormFp32(inner_attn_ln, out);
    return kernels::Linear(out, out_proj->weight, out_proj->bias);
  }

  // q, k, v: [B, H, L, D/H], contiguous.
  torch::Tensor q, k, v;
  int64_t past = 0;
  if (static_kv && cache != nullptr && cache->key.defined()) {
    q = ProjectHeads(query, {&q_proj}, heads)[0];
    k = cache->key;
    v = cache->value;
  } else {
    if (memory.is_same(query)) {  // Self-attention: one product for q, k and v.
      torch::Tensor qkv = ProjectHeads(query, {&q_proj, &k_proj, &v_proj}, heads);
      q = qkv[0];
      k = qkv[1];
      v = qkv[2];
    } else {
      q = ProjectHeads(query, {&q_proj}, heads)[0];
      torch::Tensor kv = ProjectHeads(memory, {&k_proj, &v_proj}, heads);
      k = kv[0];
      v = kv[1];
    }
    if (cache != nullptr) {
      if (!static_kv && cache->key.defined()) {
        past = cache->key.size(2);
        k = torch::cat({cache->key, k}, 2);
        v = torch::cat({cache->value, v}, 2);
      }
      cache->key = k;
      cache->value = v;
    }
  }
  const int64_t s = k.size(2);

  // Scores [B*H, T, S] = (q k^T) / sqrt(D/H), the scaling applied to the scores in place.
  torch::Tensor scores = torch::bmm(q.reshape({b * heads, t, head_dim}),
                                    k.reshape({b * heads, s, head_dim}).transpose(1, 2));
  scores.mul_(scaling);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (key_padding_mask.defined()) {
    scores.masked_fill_(
        key_padding_mask.view({b, 1, 1, s}).expand({b, heads, 1, s}).reshape({b * heads, 1, s}),
        neg_inf);
  }
  if (causal && t > 1) {
    // Query i (absolute position past + i) may see keys j <= past + i.
    auto mask = torch::ones({t, s}, torch::dtype(torch::kBool).device(query.device()))
                    .triu_(past + 1);
    scores.masked_fill_(mask, neg_inf);
  }
  torch::Tensor probs = torch::softmax(scores, -1);
  if (options.dropout() > 0.0 && is_training()) {
    probs = torch::nn::functional::dropout(
        probs, torch::nn::functional::DropoutFuncOptions().p(options.dropout()).training(true));
  }
  torch::Tensor out = torch::bmm(probs, v.reshape({b * heads, s, head_dim}))
                          .view({b, heads, t, head_dim})
                          .transpose(1, 2)
                          .reshape({b, t, d});
  if (inner_attn_ln) out = LayerNormFp32(inner_attn_ln, out);
  return out_proj(out);
}

}  // namespace deepnet::model
