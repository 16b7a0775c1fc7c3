#include "model/model_slice.h"

#include <c10/util/Exception.h>

namespace deepnet::model {

ModelSlice ModelSlice::Full(const DeepNetConfig& c) {
  ModelSlice s;
  s.encoder = {0, c.encoder_layers()};
  s.decoder = {0, c.decoder_layers()};
  return s;
}

bool ModelSlice::is_full(const DeepNetConfig& c) const {
  return encoder.begin == 0 && encoder.end == c.encoder_layers() && decoder.begin == 0 &&
         decoder.end == c.decoder_layers();
}

std::string ModelSlice::ToString() const {
  return "encoder[" + std::to_string(encoder.begin) + "," + std::to_string(encoder.end) +
         ") decoder[" + std::to_string(decoder.begin) + "," + std::to_string(decoder.end) + ")";
}

std::vector<std::string> TableParameterNames(const DeepNetConfig& c, const ModelSlice& s) {
  // Mirrors DeepNetImpl::reset(); tests compare the two for many configurations and slices.
  std::vector<std::string> names;
  const bool needs_src = s.owns_source_embedding();
  const bool needs_tgt = s.owns_target_embedding();
  const bool needs_out = s.owns_output(c);
  const bool untied_output = !c.share_all_embeddings() && !c.share_decoder_input_output();
  if (c.share_all_embeddings()) {
    if (needs_src || needs_tgt || needs_out) names.push_back("embed_tokens.weight");
    return names;
  }
  const bool decoder_model = c.decoder_layers() > 0;
  auto stack = [&](const std::string& name, bool owns_input, bool owns_out) {
    if (owns_input || (owns_out && !untied_output)) names.push_back(name + ".embed_tokens.weight");
    if (owns_out && untied_output) names.push_back(name + ".output_projection.weight");
  };
  if (!s.encoder.empty()) stack("encoder", needs_src, needs_out && !decoder_model);
  if (!s.decoder.empty()) stack("decoder", needs_tgt, needs_out);
  return names;
}

void Validate(const ModelSlice& s, const DeepNetConfig& c) {
  TORCH_CHECK(s.encoder.begin >= 0 && s.encoder.end <= c.encoder_layers() &&
                  s.encoder.begin <= s.encoder.end,
              "slice ", s.ToString(), ": encoder range outside [0, ", c.encoder_layers(), ")");
  TORCH_CHECK(s.decoder.begin >= 0 && s.decoder.end <= c.decoder_layers() &&
                  s.decoder.begin <= s.decoder.end,
              "slice ", s.ToString(), ": decoder range outside [0, ", c.decoder_layers(), ")");
  TORCH_CHECK(!s.encoder.empty() || !s.decoder.empty(), "slice ", s.ToString(), " is empty");
  if (!s.encoder.empty() && !s.decoder.empty()) {
    TORCH_CHECK(s.encoder.end == c.encoder_layers() && s.decoder.begin == 0, "slice ",
                s.ToString(), " is not contiguous: a slice holding encoder and decoder layers ",
                "must hold the encoder's tail and the decoder's head");
  }
}

}  // namespace deepnet::model
