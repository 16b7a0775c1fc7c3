#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/config_arg.h"

namespace deepnet::model {

/// How residual connections and layer normalisation are arranged, and how weights are
/// initialised. See docs/MODEL.md and arXiv:2203.00555 §II–IV.
enum class NormVariant {
  kDeepNorm,       // x <- LN(alpha*x + G(x)), Post-LN, beta-scaled Xavier init (§III).
  kPostLn,         // x <- LN(x + G(x)), Xavier init (vanilla Post-LN).
  kPreLn,          // x <- x + G(LN(x)), final LN per stack.
  kPostLnInit,     // Post-LN with layer l's weights divided by k_l = N - l + 1 (§II).
  kDeepNormPreLn,  // Pre-LN DeepNet with sub-LNs, gain sqrt(log 2N) (§IV).
};

enum class Activation { kRelu, kGelu };

/// How weight matrices are initialised before DeepNorm's beta applies (docs/MODEL.md).
enum class InitScheme {
  kPaper,          // Xavier-normal with gain beta on v/out/fc1/fc2, gain 1 on q/k; biases 0.
  kScaledDefault,  // PyTorch's nn.Linear default U(+-1/sqrt(fan_in)) (weights and biases),
                   // then v/out/fc1/fc2 weights and biases times beta (TorchScale's way).
};

/// Where position information comes from.
enum class PositionKind {
  kSinusoidal,  // Fixed sinusoidal table (a buffer, not a parameter).
  kLearned,     // A learned [max_positions, d_model] table per stack that embeds tokens.
};

// Names as written in job configs ("deepnorm", "relu"); defined in deepnet_config_names.cc,
// which needs no LibTorch (target deepnet_model_config).
std::string_view ToString(NormVariant norm);
std::string_view ToString(Activation activation);
std::string_view ToString(InitScheme init);
std::string_view ToString(PositionKind positions);
std::optional<NormVariant> ParseNormVariant(std::string_view name);

/// Shape and regularisation of a DeepNet encoder-decoder. Either stack may have 0 layers
/// (decoder-only or encoder-only models).
/// Example: DeepNetConfig().encoder_layers(100).decoder_layers(100).d_model(64)
struct DeepNetConfig {
  DEEPNET_CONFIG_ARG(int64_t, encoder_layers) = 6;
  DEEPNET_CONFIG_ARG(int64_t, decoder_layers) = 6;
  DEEPNET_CONFIG_ARG(int64_t, d_model) = 512;
  DEEPNET_CONFIG_ARG(int64_t, heads) = 8;
  DEEPNET_CONFIG_ARG(int64_t, ffn_dim) = 2048;
  // Size of the shared (or each) vocabulary, special tokens included.
  DEEPNET_CONFIG_ARG(int64_t, vocab_size) = 8000;
  // Id of the padding token: its embedding row is zero and it is ignored by the loss.
  DEEPNET_CONFIG_ARG(int64_t, pad_id) = 0;
  DEEPNET_CONFIG_ARG(double, dropout) = 0.1;
  DEEPNET_CONFIG_ARG(double, attention_dropout) = 0.0;
  DEEPNET_CONFIG_ARG(double, activation_dropout) = 0.0;
  DEEPNET_CONFIG_ARG(Activation, activation) = Activation::kRelu;
  // Longest sequence (in tokens) the position table (sinusoidal or learned) covers.
  DEEPNET_CONFIG_ARG(int64_t, max_positions) = 1024;
  // Source embedding, target embedding and output projection are one tensor.
  DEEPNET_CONFIG_ARG(bool, share_all_embeddings) = true;
  // Without shared vocabularies: tie the decoder's input embedding and output projection.
  DEEPNET_CONFIG_ARG(bool, share_decoder_input_output) = true;
  DEEPNET_CONFIG_ARG(NormVariant, norm) = NormVariant::kDeepNorm;
  DEEPNET_CONFIG_ARG(double, layer_norm_eps) = 1e-5;
  DEEPNET_CONFIG_ARG(InitScheme, init) = InitScheme::kPaper;
  DEEPNET_CONFIG_ARG(PositionKind, positions) = PositionKind::kSinusoidal;
};

/// Throws c10::Error (TORCH_CHECK) naming the first field that is out of range. Needs LibTorch
/// (deepnet_model); code without it validates through worker::ParseJobConfig's rules.
void Validate(const DeepNetConfig& config);

}  // namespace deepnet::model
