#include "model/deepnet_config.h"

#include <c10/util/Exception.h>

namespace deepnet::model {

void Validate(const DeepNetConfig& c) {
  TORCH_CHECK(c.encoder_layers() >= 0, "encoder_layers must be >= 0, got ", c.encoder_layers());
  TORCH_CHECK(c.decoder_layers() >= 0, "decoder_layers must be >= 0, got ", c.decoder_layers());
  TORCH_CHECK(c.encoder_layers() + c.decoder_layers() > 0,
              "encoder_layers and decoder_layers cannot both be 0");
  TORCH_CHECK(c.d_model() > 0, "d_model must be > 0, got ", c.d_model());
  TORCH_CHECK(c.heads() > 0, "heads must be > 0, got ", c.heads());
  TORCH_CHECK(c.d_model() % c.heads() == 0, "d_model (", c.d_model(),
              ") must be divisible by heads (", c.heads(), ")");
  TORCH_CHECK(c.ffn_dim() > 0, "ffn_dim must be > 0, got ", c.ffn_dim());
  TORCH_CHECK(c.vocab_size() > 0, "vocab_size must be > 0, got ", c.vocab_size());
  TORCH_CHECK(c.pad_id() >= 0 && c.pad_id() < c.vocab_size(), "pad_id must be in [0, vocab_size), got ",
              c.pad_id());
  TORCH_CHECK(c.max_positions() > 0, "max_positions must be > 0, got ", c.max_positions());
  for (auto [name, p] : {std::pair{"dropout", c.dropout()},
                         std::pair{"attention_dropout", c.attention_dropout()},
                         std::pair{"activation_dropout", c.activation_dropout()}}) {
    TORCH_CHECK(p >= 0.0 && p < 1.0, name, " must be in [0, 1), got ", p);
  }
  TORCH_CHECK(c.layer_norm_eps() > 0.0, "layer_norm_eps must be > 0, got ", c.layer_norm_eps());
}

}  // namespace deepnet::model
