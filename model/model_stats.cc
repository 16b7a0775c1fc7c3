#include "model/model_stats.h"

#include <cstdio>

namespace deepnet::model {
namespace {

bool SubLayerNorm(const DeepNetConfig& c) { return c.norm() == NormVariant::kDeepNormPreLn; }
bool PreNorm(const DeepNetConfig& c) {
  return c.norm() == NormVariant::kPreLn || c.norm() == NormVariant::kDeepNormPreLn;
}

int64_t AttentionParameters(const DeepNetConfig& c) {
  const int64_t d = c.d_model();
  return 4 * (d * d + d) + (SubLayerNorm(c) ? 2 * d : 0);
}

int64_t FeedForwardParameters(const DeepNetConfig& c) {
  const int64_t d = c.d_model(), f = c.ffn_dim();
  return d * f + f + f * d + d + (SubLayerNorm(c) ? 2 * f : 0);
}

int64_t LayerNormParameters(const DeepNetConfig& c) { return 2 * c.d_model(); }

// Forward FLOPs of the layer matmuls per token: 2 per weight, plus attention scores and
// weighted sums: 2 * (QK^T + AV) = 4 * d * context per attention.
double LayerFlops(int64_t matmul_weights, int64_t d, double contexts) {
  return 2.0 * static_cast<double>(matmul_weights) + 4.0 * static_cast<double>(d) * contexts;
}

}  // namespace

int64_t EncoderLayerParameters(const DeepNetConfig& c) {
  return AttentionParameters(c) + FeedForwardParameters(c) + 2 * LayerNormParameters(c);
}

int64_t DecoderLayerParameters(const DeepNetConfig& c) {
  const bool cross = c.encoder_layers() > 0;
  return (cross ? 2 : 1) * AttentionParameters(c) + FeedForwardParameters(c) +
         (cross ? 3 : 2) * LayerNormParameters(c);
}

ModelStats ComputeModelStats(const DeepNetConfig& c, const StatsOptions& o) {
  ModelStats s;
  s.scaling = ComputeScaling(c.norm(), c.encoder_layers(), c.decoder_layers());
  const int64_t n = c.encoder_layers(), m = c.decoder_layers();
  const int64_t d = c.d_model(), f = c.ffn_dim(), v = c.vocab_size();
  s.encoder_layer_parameters = n > 0 ? EncoderLayerParameters(c) : 0;
  s.decoder_layer_parameters = m > 0 ? DecoderLayerParameters(c) : 0;

  // Embedding tables: one when shared; otherwise one per stack, plus an untied output matrix.
  int64_t tables = 1;
  if (!c.share_all_embeddings()) {
    tables = (n > 0 ? 1 : 0) + (m > 0 ? 1 : 0);
    if (!c.share_decoder_input_output()) tables += 1;
  }
  s.embedding_parameters = tables * v * d;
  if (c.positions() == PositionKind::kLearned) {  // One learned table per stack.
    s.embedding_parameters += ((n > 0 ? 1 : 0) + (m > 0 ? 1 : 0)) * c.max_positions() * d;
  }
  const int64_t final_norms = PreNorm(c) ? ((n > 0 ? 1 : 0) + (m > 0 ? 1 : 0)) : 0;
  s.parameters = s.embedding_parameters + n * s.encoder_layer_parameters +
                 m * s.decoder_layer_parameters + final_norms * LayerNormParameters(c);

  const int64_t attn_weights = 4 * d * d, ffn_weights = 2 * d * f;
  const double src = static_cast<double>(o.source_length);
  const double tgt = static_cast<double>(o.target_length);
  // Causal self-attention sees (T + 1) / 2 positions on average.
  const double enc_layer = LayerFlops(attn_weights + ffn_weights, d, src);
  const double dec_layer =
      n > 0 ? LayerFlops(2 * attn_weights + ffn_weights, d, (tgt + 1.0) / 2.0 + src)
            : LayerFlops(attn_weights + ffn_weights, d, (tgt + 1.0) / 2.0);
  const double output = 2.0 * static_cast<double>(d) * static_cast<double>(v);
  s.forward_flops_per_source_token = static_cast<double>(n) * enc_layer + (m == 0 ? output : 0.0);
  s.forward_flops_per_target_token = m > 0 ? static_cast<double>(m) * dec_layer + output : 0.0;
  const double src_tokens = n > 0 ? src : 0.0, tgt_tokens = m > 0 ? tgt : 0.0;
  s.train_flops_per_token = 3.0 *
                            (src_tokens * s.forward_flops_per_source_token +
                             tgt_tokens * s.forward_flops_per_target_token) /
                            (src_tokens + tgt_tokens);
  s.parameter_bytes = s.parameters * o.bytes_per_element;
  s.gradient_bytes = s.parameter_bytes;
  s.optimizer_bytes = 2 * s.parameter_bytes;
  return s;
}

}  // namespace deepnet::model

namespace deepnet::model {
std::string DescribeShape(const DeepNetConfig& c) {
  const double params = static_cast<double>(ComputeModelStats(c).parameters);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%lldL-%lldL d=%lld h=%lld ffn=%lld V=%lld %s (%.1fM parameters)",
                static_cast<long long>(c.encoder_layers()), static_cast<long long>(c.decoder_layers()),
                static_cast<long long>(c.d_model()), static_cast<long long>(c.heads()),
                static_cast<long long>(c.ffn_dim()), static_cast<long long>(c.vocab_size()),
                std::string(ToString(c.norm())).c_str(), params / 1e6);
  return buf;
}
}  // namespace deepnet::model
