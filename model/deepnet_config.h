#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

std::string_view ToString(NormVariant norm);
std::string_view ToString(Activation activation);
std::optional<NormVariant> ParseNormVariant(std::string_view name);
std::optional<Activation> ParseActivation(std::string_view name);

/// Shape and regularisation of a DeepNet encoder-decoder. Either stack may have 0 layers
/// (decoder-only or encoder-only models).
/// Example: DeepNetConfig().encoder_layers(100).decoder_layers(100).d_model(64)
struct DeepNetConfig {
  TORCH_ARG(int64_t, encoder_layers) = 6;
  TORCH_ARG(int64_t, decoder_layers) = 6;
  TORCH_ARG(int64_t, d_model) = 512;
  TORCH_ARG(int64_t, heads) = 8;
  TORCH_ARG(int64_t, ffn_dim) = 2048;
  // Size of the shared (or each) vocabulary, special tokens included.
  TORCH_ARG(int64_t, vocab_size) = 8000;
  // Id of the padding token: its embedding row is zero and it is ignored by the loss.
  TORCH_ARG(int64_t, pad_id) = 0;
  TORCH_ARG(double, dropout) = 0.1;
  TORCH_ARG(double, attention_dropout) = 0.0;
  TORCH_ARG(double, activation_dropout) = 0.0;
  TORCH_ARG(Activation, activation) = Activation::kRelu;
  // Longest sequence (in tokens) the sinusoidal position table covers.
  TORCH_ARG(int64_t, max_positions) = 1024;
  // Source embedding, target embedding and output projection are one tensor.
  TORCH_ARG(bool, share_all_embeddings) = true;
  // Without shared vocabularies: tie the decoder's input embedding and output projection.
  TORCH_ARG(bool, share_decoder_input_output) = true;
  TORCH_ARG(NormVariant, norm) = NormVariant::kDeepNorm;
  TORCH_ARG(double, layer_norm_eps) = 1e-5;
};

/// Throws c10::Error (TORCH_CHECK) naming the first field that is out of range.
void Validate(const DeepNetConfig& config);

}  // namespace deepnet::model
