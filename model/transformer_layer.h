#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/attention.h"
#include "model/deepnet_config.h"
#include "model/kernels/sublayer_blocks.h"
#include "model/ln_input_recorder.h"

namespace deepnet::model {

/// Options shared by encoder and decoder layers.
struct TransformerLayerOptions {
  TransformerLayerOptions(int64_t d_model, int64_t heads, int64_t ffn_dim)
      : d_model_(d_model), heads_(heads), ffn_dim_(ffn_dim) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, heads);
  TORCH_ARG(int64_t, ffn_dim);
  TORCH_ARG(double, dropout) = 0.1;
  TORCH_ARG(double, attention_dropout) = 0.0;
  TORCH_ARG(double, activation_dropout) = 0.0;
  TORCH_ARG(Activation, activation) = Activation::kRelu;
  // Weight of the residual branch x in LN(alpha * x + G(x)); from ComputeScaling(); 1 is Post-LN.
  TORCH_ARG(double, residual_alpha) = 1.0;
  // Pre-LN arrangement x + G(LN(x)) instead of Post-LN.
  TORCH_ARG(bool, pre_norm) = false;
  // Pre-LN DeepNet sub-LNs before the attention output and the FFN output projections.
  TORCH_ARG(bool, sub_layer_norm) = false;
  // Decoder layers only: attend to the encoder output.
  TORCH_ARG(bool, cross_attention) = true;
  TORCH_ARG(double, layer_norm_eps) = 1e-5;
};

TransformerLayerOptions LayerOptionsFor(const DeepNetConfig& config, double residual_alpha,
                                        bool cross_attention);

/// Self-attention and FFN sub-layers with a residual arrangement chosen by the options.
/// Owns fc1/fc2 directly so that parameter names match the usual `layers.N.fc1.weight`.
class TransformerLayerBase {
 protected:
  // DeepNorm / Post-LN: LN(alpha * x + Dropout(G(x))); Pre-LN: x + Dropout(G(LN(x))).
  template <typename Sublayer>
  torch::Tensor Residual(const torch::Tensor& x, torch::nn::LayerNorm& norm, Sublayer&& g,
                         bool training) const;
  torch::Tensor FeedForward(const torch::Tensor& x, torch::nn::Linear& fc1, torch::nn::Linear& fc2,
                            torch::nn::LayerNorm& ffn_layernorm, bool training) const;
  // Post-LN / DeepNorm sub-layers on float32 CPU tensors run as fused blocks
  // (model/kernels/sublayer_blocks.h), one autograd op each.
  bool UseFusedBlocks(const torch::Tensor& x) const;
  kernels::BlockOptions BlockOptionsFor(double attention_dropout, bool training) const;
  explicit TransformerLayerBase(const TransformerLayerOptions& o) : layer_options_(o) {}
  // Diagnostic steps only (model/ln_input_recorder.h): not owned; null on every other step.
  void set_ln_input_recorder(LnInputRecorder* recorder) { ln_input_recorder_ = recorder; }
  TransformerLayerOptions layer_options_;
  LnInputRecorder* ln_input_recorder_ = nullptr;
};

/// Example: EncoderLayer layer(TransformerLayerOptions(512, 8, 2048).residual_alpha(2.3));
class EncoderLayerImpl : public torch::nn::Cloneable<EncoderLayerImpl>, TransformerLayerBase {
 public:
  explicit EncoderLayerImpl(const TransformerLayerOptions& options);
  void reset() override;
  using TransformerLayerBase::set_ln_input_recorder;
  /// x [B, S, D]; padding_mask bool, true where a key is hidden: [B, S] (padding), [B, S, S]
  /// (packed batches, model/packing.h) or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& padding_mask);

  TransformerLayerOptions options;
  MultiheadAttention self_attn{nullptr};
  torch::nn::LayerNorm self_attn_layer_norm{nullptr};
  torch::nn::Linear fc1{nullptr};
  torch::nn::Linear fc2{nullptr};
  torch::nn::LayerNorm ffn_layernorm{nullptr};  // Only with sub_layer_norm.
  torch::nn::LayerNorm final_layer_norm{nullptr};
};
TORCH_MODULE(EncoderLayer);

/// Per-layer key/value caches of a decoder layer for incremental decoding.
struct DecoderLayerCache {
  AttentionCache self_attn;
  AttentionCache encoder_attn;
};

/// Example: DecoderLayer layer(TransformerLayerOptions(512, 8, 2048).residual_alpha(2.3));
class DecoderLayerImpl : public torch::nn::Cloneable<DecoderLayerImpl>, TransformerLayerBase {
 public:
  explicit DecoderLayerImpl(const TransformerLayerOptions& options);
  void reset() override;
  using TransformerLayerBase::set_ln_input_recorder;
  /// x [B, T, D]; encoder_out [B, S, D] and encoder_padding_mask [B, S] or [B, T, S] (both
  /// undefined for decoder-only models). With `cache`, x holds only the new positions.
  /// `self_mask` [B, T, T] bool hides keys from self-attention besides causal order (packed
  /// batches, model/packing.h); undefined: causal order alone.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& encoder_out,
                        const torch::Tensor& encoder_padding_mask,
                        DecoderLayerCache* cache = nullptr,
                        const torch::Tensor& self_mask = torch::Tensor());

  TransformerLayerOptions options;
  MultiheadAttention self_attn{nullptr};
  torch::nn::LayerNorm self_attn_layer_norm{nullptr};
  MultiheadAttention encoder_attn{nullptr};  // Only with cross_attention.
  torch::nn::LayerNorm encoder_attn_layer_norm{nullptr};
  torch::nn::Linear fc1{nullptr};
  torch::nn::Linear fc2{nullptr};
  torch::nn::LayerNorm ffn_layernorm{nullptr};
  torch::nn::LayerNorm final_layer_norm{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace deepnet::model
