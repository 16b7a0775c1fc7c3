#include "model/deepnet.h"

#include <torch/nn/functional/dropout.h>

#include <cmath>

#include "model/precision.h"

namespace deepnet::model {

void DecoderState::Reorder(const torch::Tensor& index) {
  for (auto& layer : layers) {
    layer.self_attn.Reorder(index);
    layer.encoder_attn.Reorder(index);
  }
}

torch::Tensor SinusoidalPositions(int64_t positions, int64_t dim) {
  const int64_t half = dim / 2;
  auto table = torch::zeros({positions, dim});
  if (half == 0) return table;
  const double step = std::log(10000.0) / static_cast<double>(std::max<int64_t>(half - 1, 1));
  auto freq = torch::exp(torch::arange(half, torch::kDouble) * -step);
  auto angles = torch::arange(positions, torch::kDouble).unsqueeze(1) * freq.unsqueeze(0);
  table.narrow(1, 0, half).copy_(torch::sin(angles));
  table.narrow(1, half, half).copy_(torch::cos(angles));
  return table;
}

void StackImpl::reset() { layers = register_module("layers", torch::nn::ModuleDict()); }

DeepNetImpl::DeepNetImpl(const DeepNetConfig& config)
    : DeepNetImpl(config, ModelSlice::Full(config)) {}

DeepNetImpl::DeepNetImpl(const DeepNetConfig& config, const ModelSlice& slice)
    : config_(config), slice_(slice) {
  reset();
}

void DeepNetImpl::reset() {
  const auto& c = config_;
  Validate(c);
  Validate(slice_, c);
  scaling_ = ComputeScaling(c.norm(), c.encoder_layers(), c.decoder_layers());
  pre_norm_ = c.norm() == NormVariant::kPreLn || c.norm() == NormVariant::kDeepNormPreLn;
  const int64_t d = c.d_model(), v = c.vocab_size();
  auto make_table = [&] {
    return torch::nn::Embedding(torch::nn::EmbeddingOptions(v, d).padding_idx(c.pad_id()));
  };
  auto make_norm = [&] {
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(c.layer_norm_eps()));
  };
  const bool decoder_model = c.decoder_layers() > 0;
  const bool needs_src = slice_.owns_source_embedding();
  const bool needs_tgt = slice_.owns_target_embedding();
  const bool needs_out = slice_.owns_output(c);
  // Without shared vocabularies, the output projection is tied to the last stack's input
  // embedding (share_decoder_input_output) or has weights of its own.
  const bool untied_output = !c.share_all_embeddings() && !c.share_decoder_input_output();

  encoder_layers_.clear();
  decoder_layers_.clear();
  if (c.share_all_embeddings() && (needs_src || needs_tgt || needs_out)) {
    embed_tokens_ = register_module("embed_tokens", make_table());
  }
  auto build_stack = [&](const char* name, bool owns_input, bool owns_end, bool owns_out) {
    Stack stack;
    if (!c.share_all_embeddings() && (owns_input || (owns_out && !untied_output))) {
      stack->embed_tokens = stack->register_module("embed_tokens", make_table());
    }
    if (owns_input && c.positions() == PositionKind::kLearned) {
      stack->embed_positions =
          stack->register_module("embed_positions", torch::nn::Embedding(c.max_positions(), d));
    }
    if (pre_norm_ && owns_end) stack->layer_norm = stack->register_module("layer_norm", make_norm());
    if (owns_out && untied_output) {
      stack->output_projection = stack->register_module(
          "output_projection", torch::nn::Linear(torch::nn::LinearOptions(d, v).bias(false)));
    }
    return register_module(name, stack);
  };
  if (!slice_.encoder.empty()) {
    encoder_ = build_stack("encoder", needs_src, slice_.owns_encoder_end(c),
                           needs_out && !decoder_model);
    const auto opts = LayerOptionsFor(c, scaling_.encoder->alpha, false);
    for (int64_t i = slice_.encoder.begin; i < slice_.encoder.end; ++i) {
      encoder_layers_.emplace_back(opts);
      encoder_->layers->update({{std::to_string(i), encoder_layers_.back().ptr()}});
    }
  }
  if (!slice_.decoder.empty()) {
    decoder_ = build_stack("decoder", needs_tgt, slice_.owns_decoder_end(c), needs_out);
    const auto opts = LayerOptionsFor(c, scaling_.decoder->alpha, c.encoder_layers() > 0);
    for (int64_t i = slice_.decoder.begin; i < slice_.decoder.end; ++i) {
      decoder_layers_.emplace_back(opts);
      decoder_->layers->update({{std::to_string(i), decoder_layers_.back().ptr()}});
    }
  }
  if (c.positions() == PositionKind::kSinusoidal) {
    positions_ = register_buffer("positions", SinusoidalPositions(c.max_positions(), d));
  }
}

torch::nn::Embedding& DeepNetImpl::SourceTable() {
  if (embed_tokens_) return embed_tokens_;
  TORCH_CHECK(encoder_ && encoder_->embed_tokens, "slice ", slice_.ToString(),
              " does not own the source embedding");
  return encoder_->embed_tokens;
}

torch::nn::Embedding& DeepNetImpl::TargetTable() {
  if (embed_tokens_) return embed_tokens_;
  TORCH_CHECK(decoder_ && decoder_->embed_tokens, "slice ", slice_.ToString(),
              " does not own the target embedding");
  return decoder_->embed_tokens;
}

const torch::Tensor& DeepNetImpl::OutputWeight() {
  TORCH_CHECK(slice_.owns_output(config_), "slice ", slice_.ToString(),
              " does not own the output projection");
  if (embed_tokens_) return embed_tokens_->weight;
  Stack& last = config_.decoder_layers() > 0 ? decoder_ : encoder_;
  if (last->output_projection) return last->output_projection->weight;
  return last->embed_tokens->weight;
}

torch::Tensor DeepNetImpl::padding_mask(const torch::Tensor& tokens) const {
  return tokens.eq(config_.pad_id());
}

torch::Tensor DeepNetImpl::Embed(torch::nn::Embedding& table, const torch::Tensor& tokens,
                                 int64_t start_position, const torch::Tensor& positions,
                                 Stack& stack) {
  const int64_t len = tokens.size(1);
  // Positions along a row never exceed the row's length, packed or not.
  TORCH_CHECK(start_position + len <= config_.max_positions(), "sequence of ",
              start_position + len, " positions exceeds max_positions ",
              config_.max_positions());
  TORCH_CHECK(!positions.defined() || positions.sizes() == tokens.sizes(), "positions ",
              positions.sizes(), " do not match tokens ", tokens.sizes());
  // Scaled embedding plus sinusoidal (Vaswani et al. 2017 §3.4, 3.5) or learned positions.
  torch::Tensor x = table(tokens).mul_(std::sqrt(static_cast<double>(config_.d_model())));
  const bool learned = config_.positions() == PositionKind::kLearned;
  TORCH_CHECK(!learned || (stack && stack->embed_positions), "slice ", slice_.ToString(),
              " does not own the learned position table");
  const torch::Tensor& table_of_positions = learned ? stack->embed_positions->weight : positions_;
  if (positions.defined()) {
    x = x + torch::embedding(table_of_positions, positions);
  } else {
    x = x + table_of_positions.narrow(0, start_position, len).unsqueeze(0);
  }
  x = ToStreamDtype(x);  // bf16 from here on under autocast (model/precision.h).
  if (config_.dropout() > 0.0 && is_training()) {
    x = torch::nn::functional::dropout(
        x, torch::nn::functional::DropoutFuncOptions().p(config_.dropout()).training(true));
  }
  return x;
}

torch::Tensor DeepNetImpl::embed_source(const torch::Tensor& src_tokens,
                                        const torch::Tensor& positions) {
  return Embed(SourceTable(), src_tokens, 0, positions, encoder_);
}

torch::Tensor DeepNetImpl::embed_target(const torch::Tensor& tgt_tokens, int64_t start_position,
                                        const torch::Tensor& positions) {
  return Embed(TargetTable(), tgt_tokens, start_position, positions, decoder_);
}

torch::Tensor DeepNetImpl::run_encoder_layers(torch::Tensor x, const torch::Tensor& padding_mask) {
  for (auto& layer : encoder_layers_) x = layer(x, padding_mask);
  return x;
}

torch::Tensor DeepNetImpl::run_encoder_layers(torch::Tensor x, const torch::Tensor& padding_mask,
                                              int64_t begin, int64_t end) {
  TORCH_CHECK(slice_.encoder.begin <= begin && begin <= end && end <= slice_.encoder.end,
              "encoder layers [", begin, ",", end, ") are not in slice ", slice_.ToString());
  for (int64_t i = begin; i < end; ++i) {
    x = encoder_layers_[i - slice_.encoder.begin](x, padding_mask);
  }
  return x;
}

torch::Tensor DeepNetImpl::run_decoder_layers(torch::Tensor x, const EncoderOutput& encoder,
                                              int64_t begin, int64_t end) {
  TORCH_CHECK(slice_.decoder.begin <= begin && begin <= end && end <= slice_.decoder.end,
              "decoder layers [", begin, ",", end, ") are not in slice ", slice_.ToString());
  for (int64_t i = begin; i < end; ++i) {
    x = decoder_layers_[i - slice_.decoder.begin](x, encoder.out, encoder.padding_mask, nullptr,
                                                  encoder.target_mask);
  }
  return x;
}

torch::Tensor DeepNetImpl::finish_encoder(const torch::Tensor& x) {
  return encoder_ && encoder_->layer_norm ? StreamLayerNorm(encoder_->layer_norm, x) : x;
}

torch::Tensor DeepNetImpl::run_decoder_layers(torch::Tensor x, const EncoderOutput& encoder,
                                              DecoderState* state) {
  if (state != nullptr) {
    TORCH_CHECK(state->layers.size() == decoder_layers_.size(),
                "decoder state has ", state->layers.size(), " layers, slice has ",
                decoder_layers_.size());
  }
  for (size_t i = 0; i < decoder_layers_.size(); ++i) {
    x = decoder_layers_[i](x, encoder.out, encoder.padding_mask,
                           state ? &state->layers[i] : nullptr, encoder.target_mask);
  }
  return x;
}

torch::Tensor DeepNetImpl::finish_decoder(const torch::Tensor& x) {
  return decoder_ && decoder_->layer_norm ? StreamLayerNorm(decoder_->layer_norm, x) : x;
}

EncoderOutput DeepNetImpl::encode(const torch::Tensor& src_tokens) {
  TORCH_CHECK(slice_.owns_source_embedding() && slice_.owns_encoder_end(config_),
              "encode() needs the whole encoder; slice is ", slice_.ToString());
  EncoderOutput enc;
  enc.padding_mask = padding_mask(src_tokens);
  enc.out = finish_encoder(run_encoder_layers(embed_source(src_tokens), enc.padding_mask));
  return enc;
}

torch::Tensor DeepNetImpl::decode(const torch::Tensor& tgt_input, const EncoderOutput& encoder,
                                  DecoderState* state) {
  TORCH_CHECK(slice_.owns_target_embedding() && slice_.owns_decoder_end(config_),
              "decode() needs the whole decoder; slice is ", slice_.ToString());
  const int64_t start = state ? state->length : 0;
  torch::Tensor x = run_decoder_layers(embed_target(tgt_input, start), encoder, state);
  if (state != nullptr) state->length += tgt_input.size(1);
  return finish_decoder(x);
}

torch::Tensor DeepNetImpl::output_logits(const torch::Tensor& hidden) {
  return torch::matmul(hidden, OutputWeight().t());
}

DecoderState DeepNetImpl::initial_state() const {
  DecoderState state;
  state.layers.resize(decoder_layers_.size());
  return state;
}

torch::Tensor DeepNetImpl::forward(const torch::Tensor& src_tokens, const torch::Tensor& tgt_input) {
  TORCH_CHECK(slice_.is_full(config_), "forward() needs the whole model; slice is ",
              slice_.ToString());
  EncoderOutput enc;
  if (config_.encoder_layers() > 0) enc = encode(src_tokens);
  if (config_.decoder_layers() == 0) return output_logits(enc.out);
  return output_logits(decode(tgt_input, enc));
}

}  // namespace deepnet::model
