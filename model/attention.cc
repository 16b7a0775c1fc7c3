#include "model/attention.h"

#include <torch/nn/functional/dropout.h>

#include <cmath>
#include <limits>

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
// [B, L, D] -> [B, H, L, D/H]
torch::Tensor SplitHeads(const torch::Tensor& x, int64_t heads) {
  const auto b = x.size(0), l = x.size(1);
  return x.view({b, l, heads, x.size(2) / heads}).transpose(1, 2);
}
}  // namespace

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& memory,
                                              const torch::Tensor& key_padding_mask, bool causal,
                                              AttentionCache* cache, bool static_kv) {
  const int64_t heads = options.heads();
  const int64_t b = query.size(0), t = query.size(1), d = query.size(2);
  const double scaling = 1.0 / std::sqrt(static_cast<double>(d / heads));

  torch::Tensor q = SplitHeads(q_proj(query).mul_(scaling), heads);
  torch::Tensor k, v;
  int64_t past = 0;
  if (static_kv && cache != nullptr && cache->key.defined()) {
    k = cache->key;
    v = cache->value;
  } else {
    k = SplitHeads(k_proj(memory), heads);
    v = SplitHeads(v_proj(memory), heads);
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

  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1));  // [B, H, T, S]
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (key_padding_mask.defined()) {
    scores.masked_fill_(key_padding_mask.view({b, 1, 1, s}), neg_inf);
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
  torch::Tensor out = torch::matmul(probs, v).transpose(1, 2).reshape({b, t, d});
  if (inner_attn_ln) out = inner_attn_ln(out);
  return out_proj(out);
}

}  // namespace deepnet::model
