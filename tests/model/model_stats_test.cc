#include "model/model_stats.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/deepnet.h"

namespace deepnet::model {
namespace {

int64_t CountParameters(DeepNetImpl& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

TEST(ModelStatsTest, ParameterCountMatchesBuiltModelForEveryVariant) {
  for (NormVariant norm : {NormVariant::kDeepNorm, NormVariant::kPostLn, NormVariant::kPreLn,
                           NormVariant::kPostLnInit, NormVariant::kDeepNormPreLn}) {
    for (auto [n, m] : {std::pair{3, 2}, {0, 3}, {2, 0}}) {
      for (bool share : {true, false}) {
        auto c = DeepNetConfig()
                     .encoder_layers(n)
                     .decoder_layers(m)
                     .d_model(12)
                     .heads(3)
                     .ffn_dim(20)
                     .vocab_size(37)
                     .norm(norm)
                     .share_all_embeddings(share)
                     .share_decoder_input_output(share);
        DeepNet model(c);
        EXPECT_EQ(ComputeModelStats(c).parameters, CountParameters(*model))
            << ToString(norm) << " N=" << n << " M=" << m << " share=" << share;
      }
    }
  }
}

TEST(ModelStatsTest, HundredLayerModelAtWidth1024) {
  auto c = DeepNetConfig()
               .encoder_layers(100)
               .decoder_layers(100)
               .d_model(1024)
               .heads(16)
               .ffn_dim(4096)
               .vocab_size(64000);
  const ModelStats s = ComputeModelStats(c);
  // Encoder layer: 4*(d^2+d) + 2*d*f + f + d + 4d; decoder adds a cross-attention and one LN.
  const int64_t enc = 4 * (1024 * 1024 + 1024) + 2 * 1024 * 4096 + 4096 + 1024 + 4 * 1024;
  const int64_t dec = enc + 4 * (1024 * 1024 + 1024) + 2 * 1024;
  EXPECT_EQ(s.encoder_layer_parameters, enc);
  EXPECT_EQ(s.decoder_layer_parameters, dec);
  EXPECT_EQ(s.parameters, 64000LL * 1024 + 100 * enc + 100 * dec);
  EXPECT_EQ(s.optimizer_bytes, 8 * s.parameters);
  EXPECT_GT(s.train_flops_per_token, 6.0 * (100.0 * enc + 100.0 * dec) / 2.0);
}

TEST(ModelStatsTest, ThousandLayerModelIsInstantAndHasScaling) {
  auto c = DeepNetConfig().encoder_layers(500).decoder_layers(500).d_model(512).heads(8);
  const ModelStats s = ComputeModelStats(c);
  ASSERT_TRUE(s.scaling.encoder && s.scaling.decoder);
  EXPECT_NEAR(s.scaling.decoder->alpha, std::pow(1500.0, 0.25), 1e-12);
  EXPECT_GT(s.parameters, 1000LL * 3 * 512 * 512);
}

}  // namespace
}  // namespace deepnet::model
