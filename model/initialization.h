#pragma once

#include <cstdint>
#include <string>

#include "model/deepnet.h"

namespace deepnet::model {

/// What the initialiser does to one parameter, decided from its global name.
struct ParameterInit {
  enum class Kind { kXavierNormal, kUniform, kEmbedding, kZeros, kOnes };
  Kind kind = Kind::kZeros;
  double gain = 1.0;     // Xavier: multiplies sqrt(2 / (fan_in + fan_out)); uniform: the bound.
  double divisor = 1.0;  // post_ln_init: k_l = L - l + 1 for the parameter's layer.
  double bound = 0.0;    // kUniform: U(-bound * gain / divisor, +bound * gain / divisor).
};

/// Standard deviation of the values `rule` draws for a tensor of shape [fan_out, fan_in]
/// (matrices) or [fan_out] (biases; fan_in unused). Embedding rules need `d_model`; zeros and
/// ones give 0.
double InitStd(const ParameterInit& rule, int64_t fan_out, int64_t fan_in, int64_t d_model);

/// The rule for `name` (a global parameter name such as
/// `decoder.layers.3.encoder_attn.v_proj.weight`) under `config`:
///  - v_proj, out_proj, fc1 and fc2 weights: Xavier-normal with gain beta of their stack;
///    q_proj and k_proj weights: gain 1 (arXiv:2203.00555 §III-C, "Encoder-decoder
///    architecture" steps 1-3; this follows the paper, not TorchScale; see docs/MODEL.md);
///  - post_ln_init additionally divides every weight matrix of layer l by k_l (§II);
///  - embeddings, learned position tables and untied output projections: N(0, d^-1/2),
///    the padding row of token tables zero;
///  - biases 0; layer-norm weights 1, biases 0.
/// With config.init() == kScaledDefault (TorchScale's way, docs/MODEL.md) every linear weight
/// and bias is instead U(+-1/sqrt(fan_in)) (PyTorch's nn.Linear default), and v_proj,
/// out_proj, fc1 and fc2 weights and biases are multiplied by beta; post_ln_init's k_l still
/// divides the weights.
ParameterInit InitRuleFor(const std::string& name, const DeepNetConfig& config);

/// Initialises every parameter of `model` in place. Each parameter draws from its own
/// generator seeded by (seed, name), so a slice gets exactly the values the same parameters
/// have in the whole model, whatever the split.
void InitializeParameters(DeepNetImpl& model, uint64_t seed);

}  // namespace deepnet::model
