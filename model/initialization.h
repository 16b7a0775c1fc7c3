#pragma once

#include <cstdint>
#include <string>

#include "model/deepnet.h"

namespace deepnet::model {

/// What the initialiser does to one parameter, decided from its global name.
struct ParameterInit {
  enum class Kind { kXavierNormal, kEmbedding, kZeros, kOnes };
  Kind kind = Kind::kZeros;
  double gain = 1.0;     // Xavier: multiplies sqrt(2 / (fan_in + fan_out)).
  double divisor = 1.0;  // post_ln_init: k_l = L - l + 1 for the parameter's layer.
};

/// The rule for `name` (a global parameter name such as
/// `decoder.layers.3.encoder_attn.v_proj.weight`) under `config`:
///  - v_proj, out_proj, fc1 and fc2 weights: Xavier-normal with gain beta of their stack;
///    q_proj and k_proj weights: gain 1 (arXiv:2203.00555 §III-C, "Encoder-decoder
///    architecture" steps 1-3; this follows the paper, not TorchScale; see docs/MODEL.md);
///  - post_ln_init additionally divides every weight matrix of layer l by k_l (§II);
///  - embeddings and untied output projections: N(0, d^-1/2), padding row zero;
///  - biases 0; layer-norm weights 1, biases 0.
ParameterInit InitRuleFor(const std::string& name, const DeepNetConfig& config);

/// Initialises every parameter of `model` in place. Each parameter draws from its own
/// generator seeded by (seed, name), so a slice gets exactly the values the same parameters
/// have in the whole model, whatever the split.
void InitializeParameters(DeepNetImpl& model, uint64_t seed);

}  // namespace deepnet::model
