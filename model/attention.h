#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <string>

namespace deepnet::model {

/// How attention computes softmax(q k^T / sqrt(D/H)) v (the job's `runtime.attention`).
/// - kAuto: the fused CPU kernels for float32 CPU tensors (model/kernels/, unless
///   DEEPNET_FUSED_KERNELS=0), else at::scaled_dot_product_attention with LibTorch >= 2.0, else
///   the reference ATen ops;
/// - kSdpa: at::scaled_dot_product_attention everywhere (flash / memory-efficient kernels on
///   CUDA); needs LibTorch >= 2.0;
/// - kReference: the reference ATen ops everywhere (scores materialised as [B*H, T, S]).
/// The choice is process-wide, like kernels::SetFusedKernelsEnabled.
enum class AttentionBackend { kAuto, kSdpa, kReference };
/// Whether this build's LibTorch has at::scaled_dot_product_attention (2.0 and later).
bool SdpaAvailable();
/// Throws c10::Error for kSdpa without SdpaAvailable().
void SetAttentionBackend(AttentionBackend backend);
AttentionBackend GetAttentionBackend();
/// "auto", "sdpa" or "reference"; false for anything else.
bool ParseAttentionBackend(const std::string& name, AttentionBackend* backend);
/// Whether attention on `t` takes the fused CPU kernels: kAuto and kernels::UseFusedKernels(t).
bool UseFusedAttention(const torch::Tensor& t);

/// The attention core on split heads: q [B, H, T, Dh], k and v [B, H, S, Dh] -> [B, H, T, Dh]
/// (not necessarily contiguous). key_padding_mask bool, true where a key is hidden: [B, S]
/// (padding), [B, T, S] (a row per query: packed batches, model/packing.h) or undefined;
/// `causal`: query i, at absolute position past + i, sees keys j <= past + i. A query that sees
/// no key gets a zero output and passes no gradient, as in the fused kernels (softmax over no
/// key would be NaN). Inverted dropout with probability `dropout` on the attention weights
/// (0 for none). `backend` is kSdpa or kReference (kAuto: kSdpa when available).
torch::Tensor AttendHeads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          const torch::Tensor& key_padding_mask, bool causal, int64_t past,
                          double dropout, AttentionBackend backend);

struct AttentionOptions {
  AttentionOptions(int64_t d_model, int64_t heads) : d_model_(d_model), heads_(heads) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, heads);
  // Dropout on attention probabilities.
  TORCH_ARG(double, dropout) = 0.0;
  // Pre-LN DeepNet (§IV-A): LN on the attention output before the output projection.
  TORCH_ARG(bool, sub_layer_norm) = false;
  TORCH_ARG(double, layer_norm_eps) = 1e-5;
};

/// Keys and values of earlier steps ([batch, heads, length, head_dim]) for incremental
/// decoding. For cross-attention they are computed once from the encoder output.
struct AttentionCache {
  torch::Tensor key;
  torch::Tensor value;
  // Keeps rows `index` (beam search reordering).
  void Reorder(const torch::Tensor& index);
};

/// Multi-head scaled dot-product attention with separate q/k/v/out projections.
/// Example: MultiheadAttention attn(AttentionOptions(512, 8).dropout(0.1));
class MultiheadAttentionImpl : public torch::nn::Cloneable<MultiheadAttentionImpl> {
 public:
  explicit MultiheadAttentionImpl(const AttentionOptions& options);
  void reset() override;

  /// query [B, T, D]; memory [B, S, D] (pass `query` for self-attention);
  /// key_padding_mask bool, true where a key is hidden: [B, S] (padding), [B, T, S] (per
  /// query: packed batches) or undefined; `causal` masks keys
  /// after each query position (positions count from the cache's length).
  /// With `cache`: self-attention appends this call's keys/values to it; cross-attention
  /// (`static_kv`) computes them from `memory` on the first call and reuses them afterwards.
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& memory,
                        const torch::Tensor& key_padding_mask, bool causal,
                        AttentionCache* cache = nullptr, bool static_kv = false);

  AttentionOptions options;
  torch::nn::Linear q_proj{nullptr};
  torch::nn::Linear k_proj{nullptr};
  torch::nn::Linear v_proj{nullptr};
  torch::nn::Linear out_proj{nullptr};
  torch::nn::LayerNorm inner_attn_ln{nullptr};  // Only with sub_layer_norm.
};
TORCH_MODULE(MultiheadAttention);

}  // namespace deepnet::model
