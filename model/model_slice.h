#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/deepnet_config.h"

namespace deepnet::model {

/// Half-open range [begin, end) of layer indices within one stack.
struct LayerRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool contains(int64_t i) const { return i >= begin && i < end; }
};

/// The part of a DeepNet one process builds: a contiguous run of layers in the global order
/// [encoder 0..N-1, decoder 0..M-1]. A slice that holds encoder layer 0 also holds the source
/// embedding; one that holds decoder layer 0 holds the target embedding; one that holds the
/// last layer of the last stack holds that stack's final LN (Pre-LN variants) and the output
/// projection. Parameter names are global, so a checkpoint does not depend on the split.
struct ModelSlice {
  LayerRange encoder;
  LayerRange decoder;

  static ModelSlice Full(const DeepNetConfig& config);

  bool owns_source_embedding() const { return !encoder.empty() && encoder.begin == 0; }
  bool owns_target_embedding() const { return !decoder.empty() && decoder.begin == 0; }
  bool owns_encoder_end(const DeepNetConfig& c) const {
    return !encoder.empty() && encoder.end == c.encoder_layers();
  }
  bool owns_decoder_end(const DeepNetConfig& c) const {
    return !decoder.empty() && decoder.end == c.decoder_layers();
  }
  // The slice that produces the model's logits (decoder end, or encoder end when M = 0).
  bool owns_output(const DeepNetConfig& c) const {
    return c.decoder_layers() > 0 ? owns_decoder_end(c) : owns_encoder_end(c);
  }
  bool is_full(const DeepNetConfig& c) const;

  std::string ToString() const;
};

/// Names of the embedding and output tables this slice holds (`embed_tokens.weight`,
/// `decoder.embed_tokens.weight`, `decoder.output_projection.weight`, ...), exactly as
/// DeepNetImpl registers them. A tied table is held by every slice that needs it (the source
/// embedding, the target embedding and the output projection may be one tensor), so a pipeline
/// must sum its gradient over those slices.
std::vector<std::string> TableParameterNames(const DeepNetConfig& config, const ModelSlice& slice);

/// TORCH_CHECKs that the slice is non-empty, within the config's stacks and contiguous.
void Validate(const ModelSlice& slice, const DeepNetConfig& config);

}  // namespace deepnet::model
