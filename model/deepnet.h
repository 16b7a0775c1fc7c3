#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "model/deepnet_config.h"
#include "model/deepnorm.h"
#include "model/model_slice.h"
#include "model/transformer_layer.h"

namespace deepnet::model {

/// Encoder output with the masks the decoder's attention needs.
struct EncoderOutput {
  torch::Tensor out;  // [B, S, D]
  // Keys hidden from cross-attention, bool: [B, S] true at padding, or [B, T, S] for packed
  // batches (model/packing.h); undefined: none.
  torch::Tensor padding_mask;
  // Packed batches: [B, T, T] bool, keys hidden from decoder self-attention besides causal
  // order; undefined otherwise.
  torch::Tensor target_mask;
};

/// Caches of every decoder layer this model owns, for incremental decoding.
struct DecoderState {
  std::vector<DecoderLayerCache> layers;  // [local decoder layer]
  int64_t length = 0;                     // Target positions consumed so far.
  void Reorder(const torch::Tensor& index);
};

/// One stack's own modules: `embed_tokens` (without shared vocabularies), `embed_positions`
/// (learned positions, on the slice that starts the stack), `layers.<global index>`, `layer_norm`
/// (Pre-LN variants, on the slice that ends the stack) and `output_projection` (untied output
/// weights). Each is null when this slice does not own it.
class StackImpl : public torch::nn::Cloneable<StackImpl> {
 public:
  StackImpl() { reset(); }
  void reset() override;
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::Embedding embed_positions{nullptr};
  torch::nn::ModuleDict layers{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};
  torch::nn::Linear output_projection{nullptr};
};
TORCH_MODULE(Stack);

/// A DeepNet encoder-decoder (Post-LN with DeepNorm residuals, or one of the baselines chosen
/// by DeepNetConfig::norm), built for the whole model or for a contiguous slice of its layers.
/// Parameters carry global names (`encoder.layers.37.self_attn.v_proj.weight`); with
/// share_all_embeddings the single embedding is `embed_tokens.weight` on every slice that
/// needs it. Call InitializeParameters() (model/initialization.h) after construction.
/// Tensors are batch-first. Not thread-safe (a torch::nn::Module).
/// Example: DeepNet model(DeepNetConfig().encoder_layers(12).decoder_layers(12));
class DeepNetImpl : public torch::nn::Cloneable<DeepNetImpl> {
 public:
  explicit DeepNetImpl(const DeepNetConfig& config);
  DeepNetImpl(const DeepNetConfig& config, const ModelSlice& slice);
  void reset() override;

  /// Whole model: src_tokens [B, S], tgt_input [B, T] (BOS + target) -> logits [B, T, V].
  /// Encoder-only models take src_tokens only; decoder-only models tgt_input only.
  torch::Tensor forward(const torch::Tensor& src_tokens, const torch::Tensor& tgt_input);

  /// Whole encoder (needs a slice that owns it).
  EncoderOutput encode(const torch::Tensor& src_tokens);
  /// Whole decoder up to its final hidden states [B, T, D] (before the output projection).
  /// With `state`, tgt_input holds only the positions after state->length.
  torch::Tensor decode(const torch::Tensor& tgt_input, const EncoderOutput& encoder,
                       DecoderState* state = nullptr);
  /// Logits [.., V] from final hidden states.
  torch::Tensor output_logits(const torch::Tensor& hidden);
  /// A fresh state for incremental decoding.
  DecoderState initial_state() const;

  // Building blocks of one pipeline stage; each runs only what this slice owns.
  // `positions` [B, L] int64: each token's position (packed batches: SegmentPositions in
  // model/packing.h); undefined: 0, 1, ... along every row (from start_position).
  torch::Tensor embed_source(const torch::Tensor& src_tokens,
                             const torch::Tensor& positions = torch::Tensor());
  torch::Tensor run_encoder_layers(torch::Tensor x, const torch::Tensor& padding_mask);
  // The layers with global indices [begin, end) of the stack; the slice must own them.
  torch::Tensor run_encoder_layers(torch::Tensor x, const torch::Tensor& padding_mask,
                                   int64_t begin, int64_t end);
  torch::Tensor run_decoder_layers(torch::Tensor x, const EncoderOutput& encoder, int64_t begin,
                                   int64_t end);
  torch::Tensor finish_encoder(const torch::Tensor& x);  // Final LN of Pre-LN variants.
  torch::Tensor embed_target(const torch::Tensor& tgt_tokens, int64_t start_position,
                             const torch::Tensor& positions = torch::Tensor());
  torch::Tensor run_decoder_layers(torch::Tensor x, const EncoderOutput& encoder,
                                   DecoderState* state);
  torch::Tensor finish_decoder(const torch::Tensor& x);
  torch::Tensor padding_mask(const torch::Tensor& tokens) const;

  const DeepNetConfig& config() const { return config_; }
  const ModelSlice& slice() const { return slice_; }
  const ModelScaling& scaling() const { return scaling_; }

 private:
  torch::Tensor Embed(torch::nn::Embedding& table, const torch::Tensor& tokens,
                      int64_t start_position, const torch::Tensor& positions, Stack& stack);
  torch::nn::Embedding& SourceTable();
  torch::nn::Embedding& TargetTable();
  const torch::Tensor& OutputWeight();

  DeepNetConfig config_;
  ModelSlice slice_;
  ModelScaling scaling_;
  bool pre_norm_ = false;

  torch::nn::Embedding embed_tokens_{nullptr};  // Only with share_all_embeddings.
  Stack encoder_{nullptr};
  Stack decoder_{nullptr};
  std::vector<EncoderLayer> encoder_layers_;  // [local encoder layer]
  std::vector<DecoderLayer> decoder_layers_;  // [local decoder layer]
  torch::Tensor positions_;  // [max_positions, D] sinusoidal table (buffer; sinusoidal only)
};
TORCH_MODULE(DeepNet);

/// Sinusoidal position table [positions, dim] (Vaswani et al.; sin half then cos half).
torch::Tensor SinusoidalPositions(int64_t positions, int64_t dim);

}  // namespace deepnet::model
