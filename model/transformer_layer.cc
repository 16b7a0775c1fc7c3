#include "model/transformer_layer.h"

#include <ATen/ops/native_dropout.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/dropout.h>

#include "model/kernels/fused_kernels.h"
#include "model/kernels/residual_layer_norm.h"
#include "model/precision.h"

namespace deepnet::model {
namespace {

// Inverted dropout: keeps each element with probability 1 - p and scales it by 1 / (1 - p), as
// torch::nn::functional::dropout does. The keep mask comes from uniform_() (one 32-bit draw per
// element) rather than bernoulli_(1 - p), which on CPU builds without MKL draws a 64-bit double
// per element and took twice as long: 14 % of a training step at d=64 (docs/PERFORMANCE.md).
// Off the CPU, ATen's native_dropout: one kernel forward and one backward, with a bool mask.
torch::Tensor Dropout(const torch::Tensor& x, double p, bool training) {
  if (p <= 0.0 || !training) return x;
  if (p >= 1.0) return x * 0.0;
  if (!x.device().is_cpu()) return std::get<0>(at::native_dropout(x, p, /*train=*/true));
  torch::Tensor mask = torch::empty_like(x, torch::MemoryFormat::Contiguous);
  {
    torch::NoGradGuard no_grad;
    mask.uniform_().ge_(p).mul_(1.0 / (1.0 - p));  // 1 / (1 - p) where u >= p, else 0.
  }
  return x * mask;
}

torch::nn::LayerNorm MakeLayerNorm(int64_t dim, double eps) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(eps));
}

AttentionOptions AttentionFor(const TransformerLayerOptions& o) {
  return AttentionOptions(o.d_model(), o.heads())
      .dropout(o.attention_dropout())
      .sub_layer_norm(o.sub_layer_norm())
      .layer_norm_eps(o.layer_norm_eps());
}

// Registers fc1, fc2 and (with sub-LNs) ffn_layernorm on `m`.
template <typename M>
void RegisterFeedForward(M& m, const TransformerLayerOptions& o) {
  m.fc1 = m.register_module("fc1", torch::nn::Linear(o.d_model(), o.ffn_dim()));
  m.fc2 = m.register_module("fc2", torch::nn::Linear(o.ffn_dim(), o.d_model()));
  if (o.sub_layer_norm()) {
    m.ffn_layernorm =
        m.register_module("ffn_layernorm", MakeLayerNorm(o.ffn_dim(), o.layer_norm_eps()));
  }
}

kernels::AttentionBlockWeights BlockWeights(const MultiheadAttention& attn,
                                            const torch::nn::LayerNorm& norm) {
  return {attn->q_proj->weight,   attn->q_proj->bias, attn->k_proj->weight, attn->k_proj->bias,
          attn->v_proj->weight,   attn->v_proj->bias, attn->out_proj->weight,
          attn->out_proj->bias,   norm->weight,       norm->bias};
}

}  // namespace

bool TransformerLayerBase::UseFusedBlocks(const torch::Tensor& x) const {
  return UseFusedAttention(x) && !layer_options_.pre_norm() && !layer_options_.sub_layer_norm() &&
         ln_input_recorder_ == nullptr;
}

kernels::BlockOptions TransformerLayerBase::BlockOptionsFor(double attention_dropout,
                                                            bool training) const {
  const auto& o = layer_options_;
  kernels::BlockOptions b;
  b.alpha = o.residual_alpha();
  b.dropout = o.dropout();
  b.activation_dropout = o.activation_dropout();
  b.attention_dropout = attention_dropout;
  b.eps = o.layer_norm_eps();
  b.gelu = o.activation() == Activation::kGelu;
  b.training = training;
  return b;
}

TransformerLayerOptions LayerOptionsFor(const DeepNetConfig& c, double residual_alpha,
                                        bool cross_attention) {
  const bool pre = c.norm() == NormVariant::kPreLn || c.norm() == NormVariant::kDeepNormPreLn;
  return TransformerLayerOptions(c.d_model(), c.heads(), c.ffn_dim())
      .dropout(c.dropout())
      .attention_dropout(c.attention_dropout())
      .activation_dropout(c.activation_dropout())
      .activation(c.activation())
      .residual_alpha(residual_alpha)
      .pre_norm(pre)
      .sub_layer_norm(c.norm() == NormVariant::kDeepNormPreLn)
      .cross_attention(cross_attention)
      .layer_norm_eps(c.layer_norm_eps());
}

template <typename Sublayer>
torch::Tensor TransformerLayerBase::Residual(const torch::Tensor& x, torch::nn::LayerNorm& norm,
                                             Sublayer&& g, bool training) const {
  const auto& o = layer_options_;
  if (o.pre_norm()) {
    if (ln_input_recorder_ != nullptr) ln_input_recorder_->Add(x);
    return x + Dropout(g(StreamLayerNorm(norm, x)), o.dropout(), training);
  }
  // DeepNorm, arXiv:2203.00555 §III-A: x_{l+1} = LN(alpha * x_l + G_l(x_l)).
  if (kernels::UseFusedKernels(x) && ln_input_recorder_ == nullptr) {
    return kernels::ResidualLayerNorm(x, g(x), norm->weight, norm->bias, o.residual_alpha(),
                                      o.dropout(), o.layer_norm_eps(), training);
  }
  torch::Tensor branch = Dropout(g(x), o.dropout(), training);
  torch::Tensor sum =
      o.residual_alpha() == 1.0 ? x + branch : torch::add(branch, x, o.residual_alpha());
  if (ln_input_recorder_ != nullptr) ln_input_recorder_->Add(sum);
  return StreamLayerNorm(norm, sum);
}

torch::Tensor TransformerLayerBase::FeedForward(const torch::Tensor& x, torch::nn::Linear& fc1,
                                                torch::nn::Linear& fc2,
                                                torch::nn::LayerNorm& ffn_layernorm,
                                                bool training) const {
  const auto& o = layer_options_;
  torch::Tensor h = kernels::Linear(x, fc1->weight, fc1->bias);
  h = o.activation() == Activation::kRelu ? torch::relu(h) : torch::gelu(h);
  h = Dropout(h, o.activation_dropout(), training);
  if (ffn_layernorm) h = LayerNormFp32(ffn_layernorm, h);
  return kernels::Linear(h, fc2->weight, fc2->bias);
}

EncoderLayerImpl::EncoderLayerImpl(const TransformerLayerOptions& options)
    : TransformerLayerBase(options), options(options) {
  reset();
}

void EncoderLayerImpl::reset() {
  layer_options_ = options;
  const auto& o = options;
  self_attn = register_module("self_attn", MultiheadAttention(AttentionFor(o)));
  self_attn_layer_norm =
      register_module("self_attn_layer_norm", MakeLayerNorm(o.d_model(), o.layer_norm_eps()));
  RegisterFeedForward(*this, o);
  final_layer_norm =
      register_module("final_layer_norm", MakeLayerNorm(o.d_model(), o.layer_norm_eps()));
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& padding_mask) {
  const bool train = is_training();
  if (UseFusedBlocks(x)) {
    const kernels::BlockOptions b = BlockOptionsFor(options.attention_dropout(), train);
    torch::Tensor h =
        kernels::AttentionBlock(x, x, BlockWeights(self_attn, self_attn_layer_norm),
                                options.heads(), padding_mask, /*causal=*/false, b);
    return kernels::FeedForwardBlock(h, fc1->weight, fc1->bias, fc2->weight, fc2->bias,
                                     final_layer_norm->weight, final_layer_norm->bias, b);
  }
  torch::Tensor h = Residual(
      x, self_attn_layer_norm,
      [&](const torch::Tensor& in) { return self_attn(in, in, padding_mask, false); }, train);
  return Residual(
      h, final_layer_norm,
      [&](const torch::Tensor& in) { return FeedForward(in, fc1, fc2, ffn_layernorm, train); },
      train);
}

DecoderLayerImpl::DecoderLayerImpl(const TransformerLayerOptions& options)
    : TransformerLayerBase(options), options(options) {
  reset();
}

void DecoderLayerImpl::reset() {
  layer_options_ = options;
  const auto& o = options;
  self_attn = register_module("self_attn", MultiheadAttention(AttentionFor(o)));
  self_attn_layer_norm =
      register_module("self_attn_layer_norm", MakeLayerNorm(o.d_model(), o.layer_norm_eps()));
  if (o.cross_attention()) {
    encoder_attn = register_module("encoder_attn", MultiheadAttention(AttentionFor(o)));
    encoder_attn_layer_norm =
        register_module("encoder_attn_layer_norm", MakeLayerNorm(o.d_model(), o.layer_norm_eps()));
  }
  RegisterFeedForward(*this, o);
  final_layer_norm =
      register_module("final_layer_norm", MakeLayerNorm(o.d_model(), o.layer_norm_eps()));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& encoder_out,
                                        const torch::Tensor& encoder_padding_mask,
                                        DecoderLayerCache* cache, const torch::Tensor& self_mask) {
  const bool train = is_training();
  if (cache == nullptr && UseFusedBlocks(x)) {
    const kernels::BlockOptions b = BlockOptionsFor(options.attention_dropout(), train);
    torch::Tensor h =
        kernels::AttentionBlock(x, x, BlockWeights(self_attn, self_attn_layer_norm),
                                options.heads(), self_mask, /*causal=*/true, b);
    if (encoder_attn) {
      TORCH_CHECK(encoder_out.defined(), "decoder layer with cross-attention needs encoder_out");
      h = kernels::AttentionBlock(h, encoder_out,
                                  BlockWeights(encoder_attn, encoder_attn_layer_norm),
                                  options.heads(), encoder_padding_mask, /*causal=*/false, b);
    }
    return kernels::FeedForwardBlock(h, fc1->weight, fc1->bias, fc2->weight, fc2->bias,
                                     final_layer_norm->weight, final_layer_norm->bias, b);
  }
  torch::Tensor h = Residual(
      x, self_attn_layer_norm,
      [&](const torch::Tensor& in) {
        return self_attn(in, in, self_mask, /*causal=*/true,
                         cache ? &cache->self_attn : nullptr);
      },
      train);
  if (encoder_attn) {
    TORCH_CHECK(encoder_out.defined(), "decoder layer with cross-attention needs encoder_out");
    h = Residual(
        h, encoder_attn_layer_norm,
        [&](const torch::Tensor& in) {
          return encoder_attn(in, encoder_out, encoder_padding_mask, false,
                              cache ? &cache->encoder_attn : nullptr, /*static_kv=*/true);
        },
        train);
  }
  return Residual(
      h, final_layer_norm,
      [&](const torch::Tensor& in) { return FeedForward(in, fc1, fc2, ffn_layernorm, train); },
      train);
}

}  // namespace deepnet::model
