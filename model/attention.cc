#include "model/attention.h"

#include <c10/core/InferenceMode.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/functional/linear.h>
#include <torch/torch.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/ops/scaled_dot_product_attention.h>
#endif

#include <atomic>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

#include "model/kernels/attention_core.h"
#include "model/kernels/fused_kernels.h"
#include "model/precision.h"

namespace deepnet::model {

namespace {

std::atomic<int>& BackendSetting() {
  static std::atomic<int> backend{static_cast<int>(AttentionBackend::kAuto)};
  return backend;
}

// Keys the causal rule hides, [T, S] bool, true where key j > past + i for query i. Every layer
// of a step asks for the same one, so each thread keeps the last one it built.
const torch::Tensor& CausalHidden(int64_t t, int64_t s, int64_t past, const torch::Device& device) {
  struct Cached {
    torch::Tensor hidden;
    int64_t t = -1, s = -1, past = -1;
    bool inference = false;
  };
  thread_local Cached cached;
  const bool inference = c10::InferenceMode::is_enabled();
  if (!cached.hidden.defined() || cached.t != t || cached.s != s || cached.past != past ||
      cached.inference != inference || cached.hidden.device() != device) {
    cached.hidden = torch::ones({t, s}, torch::dtype(torch::kBool).device(device)).triu_(past + 1);
    cached.t = t;
    cached.s = s;
    cached.past = past;
    cached.inference = inference;
  }
  return cached.hidden;
}

// What AttendHeads hides from whom.
struct AttentionMasks {
  // Broadcastable to [B, H, T, S], true where a key is hidden from a query; undefined: none.
  torch::Tensor hidden;
  // [B, 1, T or 1, 1], false for the queries that see no key (their keys are unhidden in
  // `hidden`, so that softmax stays finite, and their outputs zeroed); undefined: every query
  // sees a key (always so without a padding mask: key 0 is never causally hidden).
  torch::Tensor has_key;
  // Plain causal attention without offset or padding (SDPA's is_causal); `hidden` undefined.
  bool is_causal = false;
};

AttentionMasks BuildMasks(const torch::Tensor& key_padding_mask, bool causal, int64_t past,
                          int64_t b, int64_t t, int64_t s, const torch::Device& device,
                          bool allow_is_causal) {
  AttentionMasks m;
  torch::Tensor causal_hidden;
  if (causal && t > 1) {  // A single query at the end sees every key.
    if (allow_is_causal && past == 0 && t == s && !key_padding_mask.defined()) {
      m.is_causal = true;
      return m;
    }
    causal_hidden = CausalHidden(t, s, past, device);
  }
  if (!key_padding_mask.defined()) {
    m.hidden = causal_hidden;
    return m;
  }
  // [B, S]: the same keys hidden from every query; [B, T, S]: a row per query (packing).
  torch::Tensor hidden = key_padding_mask.dim() == 3 ? key_padding_mask.view({b, 1, t, s})
                                                     : key_padding_mask.view({b, 1, 1, s});
  if (causal_hidden.defined()) hidden = hidden.logical_or(causal_hidden);
  m.has_key = hidden.logical_not().any(-1, /*keepdim=*/true);
  m.hidden = hidden.logical_and(m.has_key);
  return m;
}

torch::Tensor ReferenceAttention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const AttentionMasks& m, double dropout) {
  const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), head_dim = q.size(3);
  const int64_t s = k.size(2);
  // Scores [B*H, T, S] = (q k^T) / sqrt(D/H), the scaling applied to the scores in place.
  torch::Tensor scores = torch::bmm(q.reshape({b * heads, t, head_dim}),
                                    k.reshape({b * heads, s, head_dim}).transpose(1, 2));
  scores.mul_(1.0 / std::sqrt(static_cast<double>(head_dim)));
  if (m.hidden.defined()) {
    torch::Tensor hidden = m.hidden;
    if (hidden.dim() == 4) {  // [B, 1, T or 1, S] -> [B*H, T or 1, S]
      const int64_t rows = hidden.size(2);
      hidden = hidden.expand({b, heads, rows, s}).reshape({b * heads, rows, s});
    }
    scores.masked_fill_(hidden, -std::numeric_limits<double>::infinity());
  }
  torch::Tensor probs = torch::softmax(scores, -1);
  if (dropout > 0.0) {
    probs = torch::nn::functional::dropout(
        probs, torch::nn::functional::DropoutFuncOptions().p(dropout).training(true));
  }
  return torch::bmm(probs, v.reshape({b * heads, s, head_dim})).view({b, heads, t, head_dim});
}

torch::Tensor SdpaAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const AttentionMasks& m, double dropout) {
#if TORCH_VERSION_MAJOR >= 2
  // The boolean attn_mask marks the keys that take part. `scale` (2.1+) is left at its
  // default, 1 / sqrt(head_dim), the model's scaling.
  if (m.hidden.defined()) {
    return at::scaled_dot_product_attention(q, k, v, m.hidden.logical_not(), dropout,
                                            /*is_causal=*/false);
  }
  return at::scaled_dot_product_attention(q, k, v, {}, dropout, m.is_causal);
#else
  (void)q, (void)k, (void)v, (void)m, (void)dropout;
  TORCH_CHECK(false, "attention: scaled_dot_product_attention needs LibTorch >= 2.0");
#endif
}

}  // namespace

bool SdpaAvailable() { return TORCH_VERSION_MAJOR >= 2; }

void SetAttentionBackend(AttentionBackend backend) {
  TORCH_CHECK(backend != AttentionBackend::kSdpa || SdpaAvailable(),
              "runtime.attention: sdpa needs LibTorch >= 2.0 (at::scaled_dot_product_attention);"
              " this build has LibTorch ",
              TORCH_VERSION, "; use auto or reference");
  BackendSetting().store(static_cast<int>(backend), std::memory_order_relaxed);
}

AttentionBackend GetAttentionBackend() {
  return static_cast<AttentionBackend>(BackendSetting().load(std::memory_order_relaxed));
}

bool ParseAttentionBackend(const std::string& name, AttentionBackend* backend) {
  if (name == "auto") {
    *backend = AttentionBackend::kAuto;
  } else if (name == "sdpa") {
    *backend = AttentionBackend::kSdpa;
  } else if (name == "reference") {
    *backend = AttentionBackend::kReference;
  } else {
    return false;
  }
  return true;
}

bool UseFusedAttention(const torch::Tensor& t) {
  return GetAttentionBackend() == AttentionBackend::kAuto && kernels::UseFusedKernels(t);
}

torch::Tensor AttendHeads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& key_padding_mask, bool causal, int64_t past,
                          double dropout, AttentionBackend backend) {
  if (backend == AttentionBackend::kAuto) {
    backend = SdpaAvailable() ? AttentionBackend::kSdpa : AttentionBackend::kReference;
  }
  kernels::CheckKeyMask(key_padding_mask, q.size(0), q.size(2), k.size(2), "attention");
  const bool sdpa = backend == AttentionBackend::kSdpa;
  const AttentionMasks m = BuildMasks(key_padding_mask, causal, past, q.size(0), q.size(2),
                                      k.size(2), q.device(), /*allow_is_causal=*/sdpa);
  torch::Tensor out =
      sdpa ? SdpaAttention(q, k, v, m, dropout) : ReferenceAttention(q, k, v, m, dropout);
  if (m.has_key.defined()) out = out.masked_fill(m.has_key.logical_not(), 0.0);
  return out;
}

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
  const bool several = projections.size() > 1;
  for (const torch::nn::Linear* p : projections) {
    // Under autocast, the cached bf16 casts are concatenated (half the bytes, no cast of the
    // concatenation on every forward).
    weights.push_back(several ? AutocastWeight((*p)->weight) : (*p)->weight);
    biases.push_back(several ? AutocastWeight((*p)->bias) : (*p)->bias);
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

// ProjectHeads without the copy: a [projections, B, H, L, D/H] view of the product, rows of
// each head D/H apart (SDPA's kernels take such strides; the reference's bmm does not).
torch::Tensor ProjectHeadsView(const torch::Tensor& x,
                               std::initializer_list<const torch::nn::Linear*> projections,
                               int64_t heads) {
  const int64_t n = static_cast<int64_t>(projections.size());
  torch::Tensor y = ProjectConcatenated(x, projections);
  const int64_t b = x.size(0), l = x.size(1), d = y.size(2) / n;
  return y.view({b, l, n, heads, d / heads}).permute({2, 0, 3, 1, 4});
}
}  // namespace

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& memory,
                                              const torch::Tensor& key_padding_mask, bool causal,
                                              AttentionCache* cache, bool static_kv) {
  const int64_t heads = options.heads();
  const int64_t b = query.size(0), t = query.size(1), d = query.size(2);
  const int64_t head_dim = d / heads;
  const double dropout = is_training() ? options.dropout() : 0.0;

  if (cache == nullptr && UseFusedAttention(query)) {
    // Training and full-sequence evaluation on CPU: one fused op from the projections to the
    // concatenated heads (model/kernels/attention_core.h).
    const double scaling = 1.0 / std::sqrt(static_cast<double>(head_dim));
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

  AttentionBackend backend = GetAttentionBackend();
  if (backend == AttentionBackend::kAuto) {
    backend = SdpaAvailable() ? AttentionBackend::kSdpa : AttentionBackend::kReference;
  }
  // q, k, v: [B, H, L, D/H]; contiguous for the reference's bmm and the cache, views into the
  // projection for SDPA.
  const auto project = [&](const torch::Tensor& x,
                           std::initializer_list<const torch::nn::Linear*> projections) {
    return backend == AttentionBackend::kSdpa && cache == nullptr
               ? ProjectHeadsView(x, projections, heads)
               : ProjectHeads(x, projections, heads);
  };
  torch::Tensor q, k, v;
  int64_t past = 0;
  if (static_kv && cache != nullptr && cache->key.defined()) {
    q = project(query, {&q_proj}).squeeze(0);
    k = cache->key;
    v = cache->value;
  } else {
    // unbind, not qkv[i]: its backward stacks the three gradients into one buffer, where
    // three selects would each zero-fill a full-size buffer and add them up.
    if (memory.is_same(query)) {  // Self-attention: one product for q, k and v.
      std::vector<torch::Tensor> qkv = project(query, {&q_proj, &k_proj, &v_proj}).unbind(0);
      q = qkv[0];
      k = qkv[1];
      v = qkv[2];
    } else {
      q = project(query, {&q_proj}).squeeze(0);
      std::vector<torch::Tensor> kv = project(memory, {&k_proj, &v_proj}).unbind(0);
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
  torch::Tensor out = AttendHeads(q, k, v, key_padding_mask, causal, past, dropout, backend)
                          .transpose(1, 2)
                          .reshape({b, t, d});
  if (inner_attn_ln) out = LayerNormFp32(inner_attn_ln, out);
  return out_proj(out);
}

}  // namespace deepnet::model
