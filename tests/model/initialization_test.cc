#include "model/initialization.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

namespace deepnet::model {
namespace {

DeepNetConfig WideConfig(NormVariant norm) {
  // Wide matrices so that the sample standard deviation is within 2 % of the target.
  return DeepNetConfig()
      .encoder_layers(4)
      .decoder_layers(3)
      .d_model(256)
      .heads(4)
      .ffn_dim(512)
      .vocab_size(300)
      .norm(norm);
}

double XavierStd(const torch::Tensor& w) {
  return std::sqrt(2.0 / static_cast<double>(w.size(0) + w.size(1)));
}

TEST(InitializationTest, DeepNormScalesValueOutputAndFfnByBeta) {
  const DeepNetConfig config = WideConfig(NormVariant::kDeepNorm);
  DeepNet model(config);
  InitializeParameters(*model, 7);
  const ModelScaling s = model->scaling();
  int checked = 0;
  for (const auto& p : model->named_parameters()) {
    const std::string& name = p.key();
    if (name.find(".layers.") == std::string::npos || name.find("norm") != std::string::npos ||
        name.find("bias") != std::string::npos) {
      continue;
    }
    const double beta = name.rfind("encoder.", 0) == 0 ? s.encoder->beta : s.decoder->beta;
    const bool unscaled = name.find("q_proj") != std::string::npos ||
                          name.find("k_proj") != std::string::npos;
    const double expected = (unscaled ? 1.0 : beta) * XavierStd(p.value());
    EXPECT_NEAR(p.value().std().item<double>() / expected, 1.0, 0.02) << name;
    EXPECT_NEAR(p.value().mean().item<double>(), 0.0, 0.1 * expected) << name;
    ++checked;
  }
  // 6 matrices per encoder layer, 10 per decoder layer.
  EXPECT_EQ(checked, 4 * 6 + 3 * 10);
}

TEST(InitializationTest, BiasesZeroLayerNormsIdentityPaddingRowZero) {
  const DeepNetConfig config = WideConfig(NormVariant::kDeepNorm);
  DeepNet model(config);
  InitializeParameters(*model, 7);
  for (const auto& p : model->named_parameters()) {
    const std::string& name = p.key();
    if (name.find("layer_norm.weight") != std::string::npos) {
      EXPECT_TRUE(p.value().eq(1).all().item<bool>()) << name;
    } else if (name.find("bias") != std::string::npos) {
      EXPECT_TRUE(p.value().eq(0).all().item<bool>()) << name;
    }
  }
  auto emb = model->named_parameters()["embed_tokens.weight"];
  EXPECT_TRUE(emb[config.pad_id()].eq(0).all().item<bool>());
  EXPECT_NEAR(emb.std().item<double>(), 1.0 / std::sqrt(256.0), 0.002);
}

TEST(InitializationTest, PostLnInitDividesLayerLByNMinusLPlusOne) {
  const DeepNetConfig config = WideConfig(NormVariant::kPostLnInit);
  DeepNet model(config);
  InitializeParameters(*model, 3);
  auto params = model->named_parameters();
  for (int layer = 0; layer < 4; ++layer) {
    auto w = params["encoder.layers." + std::to_string(layer) + ".fc1.weight"];
    auto q = params["encoder.layers." + std::to_string(layer) + ".self_attn.q_proj.weight"];
    const double k = 4 - layer;  // k_l = N - l + 1 with l = layer + 1
    EXPECT_NEAR(w.std().item<double>() * k / XavierStd(w), 1.0, 0.02) << layer;
    EXPECT_NEAR(q.std().item<double>() * k / XavierStd(q), 1.0, 0.03) << layer;
  }
}

TEST(InitializationTest, PreLnDeepNetGainIsSqrtLog2N) {
  const DeepNetConfig config = WideConfig(NormVariant::kDeepNormPreLn);
  DeepNet model(config);
  InitializeParameters(*model, 3);
  auto w = model->named_parameters()["encoder.layers.1.self_attn.v_proj.weight"];
  EXPECT_NEAR(w.std().item<double>() / (std::sqrt(std::log(8.0)) * XavierStd(w)), 1.0, 0.02);
}

TEST(InitializationTest, SameSeedSameValuesDifferentSeedDifferentValues) {
  const DeepNetConfig config = WideConfig(NormVariant::kDeepNorm).d_model(32).ffn_dim(64);
  DeepNet a(config), b(config), c(config);
  InitializeParameters(*a, 11);
  InitializeParameters(*b, 11);
  InitializeParameters(*c, 12);
  auto pb = b->named_parameters(), pc = c->named_parameters();
  for (const auto& p : a->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  }
  EXPECT_FALSE(torch::equal(a->named_parameters()["decoder.layers.0.fc1.weight"],
                            pc["decoder.layers.0.fc1.weight"]));
}

}  // namespace
}  // namespace deepnet::model
