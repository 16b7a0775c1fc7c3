#include "model/deepnet.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/initialization.h"

namespace deepnet::model {
namespace {

class DeepNetTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(0); }

  static DeepNetConfig SmallConfig(NormVariant norm = NormVariant::kDeepNorm) {
    return DeepNetConfig()
        .encoder_layers(3)
        .decoder_layers(2)
        .d_model(16)
        .heads(4)
        .ffn_dim(32)
        .vocab_size(50)
        .dropout(0.0)
        .max_positions(64)
        .norm(norm);
  }

  static DeepNet Build(const DeepNetConfig& c, uint64_t seed = 5) {
    DeepNet model(c);
    InitializeParameters(*model, seed);
    model->eval();
    return model;
  }

  // Random tokens in [4, vocab).
  static torch::Tensor Tokens(int64_t b, int64_t t, int64_t vocab = 50) {
    return torch::randint(4, vocab, {b, t}, torch::kLong);
  }
};

torch::Tensor ManualLayerNorm(const torch::Tensor& x, double eps) {
  auto mean = x.mean(-1, true);
  auto var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / torch::sqrt(var + eps);
}

torch::Tensor Affine(const torch::nn::Linear& l, const torch::Tensor& x) {
  return torch::matmul(x, l->weight.t()) + l->bias;
}

TEST_F(DeepNetTest, DeepNormSublayersMatchHandComputation) {
  const double alpha = 1.7;
  EncoderLayer layer(TransformerLayerOptions(4, 1, 8).dropout(0.0).residual_alpha(alpha));
  {
    torch::NoGradGuard g;
    for (auto& p : layer->parameters()) p.uniform_(-0.5, 0.5);
  }
  layer->eval();
  auto x = torch::randn({1, 3, 4});
  auto out = layer(x, torch::Tensor());

  torch::NoGradGuard g;
  auto& a = layer->self_attn;
  auto q = Affine(a->q_proj, x), k = Affine(a->k_proj, x), v = Affine(a->v_proj, x);
  auto probs = torch::softmax(torch::matmul(q, k.transpose(1, 2)) / 2.0, -1);  // sqrt(d_k)=2
  auto attn = Affine(a->out_proj, torch::matmul(probs, v));
  auto ln1 = layer->self_attn_layer_norm;
  auto h = ManualLayerNorm(alpha * x + attn, 1e-5) * ln1->weight + ln1->bias;
  auto ffn = Affine(layer->fc2, torch::relu(Affine(layer->fc1, h)));
  auto ln2 = layer->final_layer_norm;
  auto expected = ManualLayerNorm(alpha * h + ffn, 1e-5) * ln2->weight + ln2->bias;
  EXPECT_TRUE(torch::allclose(out, expected, 1e-5, 1e-6)) << (out - expected).abs().max();
}

TEST_F(DeepNetTest, ResidualAlphaComesFromScaling) {
  auto model = Build(SmallConfig());
  const auto s = ComputeScaling(NormVariant::kDeepNorm, 3, 2);
  auto layer = model->named_children()["encoder"]->named_children()["layers"]->named_children()["1"];
  EXPECT_DOUBLE_EQ(std::dynamic_pointer_cast<EncoderLayerImpl>(layer)->options.residual_alpha(),
                   s.encoder->alpha);
}

TEST_F(DeepNetTest, FutureTokensNeverChangeEarlierDecoderOutputs) {
  for (NormVariant norm : {NormVariant::kDeepNorm, NormVariant::kPreLn,
                           NormVariant::kDeepNormPreLn}) {
    auto model = Build(SmallConfig(norm));
    auto src = Tokens(2, 7);
    auto tgt = Tokens(2, 6);
    auto logits = model->forward(src, tgt);
    auto changed = tgt.clone();
    changed.narrow(1, 4, 2).fill_(9);  // Positions 4 and 5 change.
    auto logits2 = model->forward(src, changed);
    EXPECT_TRUE(torch::allclose(logits.narrow(1, 0, 4), logits2.narrow(1, 0, 4), 1e-5, 1e-6))
        << ToString(norm);
    EXPECT_FALSE(torch::allclose(logits.narrow(1, 4, 2), logits2.narrow(1, 4, 2)));
  }
}

TEST_F(DeepNetTest, PaddingDoesNotChangeResults) {
  auto model = Build(SmallConfig());
  auto src = Tokens(1, 5);
  auto tgt = Tokens(1, 4);
  auto logits = model->forward(src, tgt);
  const int64_t pad = model->config().pad_id();
  auto src_padded = torch::cat({src, torch::full({1, 3}, pad, torch::kLong)}, 1);
  auto tgt_padded = torch::cat({tgt, torch::full({1, 2}, pad, torch::kLong)}, 1);
  auto logits_padded = model->forward(src_padded, tgt_padded);
  EXPECT_TRUE(torch::allclose(logits, logits_padded.narrow(1, 0, 4), 1e-5, 1e-5))
      << (logits - logits_padded.narrow(1, 0, 4)).abs().max();
  // In a batch with a longer sentence, the short one's results are unchanged too.
  auto other = Tokens(1, 8);
  auto batch_src = torch::cat({src_padded, other}, 0);
  auto batch_tgt = torch::cat({tgt_padded, Tokens(1, 6)}, 0);
  auto batch_logits = model->forward(batch_src, batch_tgt);
  EXPECT_TRUE(torch::allclose(logits, batch_logits.narrow(0, 0, 1).narrow(1, 0, 4), 1e-5, 1e-5));
}

TEST_F(DeepNetTest, IncrementalDecodingEqualsFullDecoding) {
  for (NormVariant norm : {NormVariant::kDeepNorm, NormVariant::kDeepNormPreLn}) {
    auto model = Build(SmallConfig(norm));
    auto src = Tokens(3, 6);
    auto tgt = Tokens(3, 5);
    torch::NoGradGuard g;
    auto enc = model->encode(src);
    auto full = model->decode(tgt, enc);
    DecoderState state = model->initial_state();
    std::vector<torch::Tensor> steps;
    for (int64_t t = 0; t < 5; ++t) steps.push_back(model->decode(tgt.narrow(1, t, 1), enc, &state));
    auto incremental = torch::cat(steps, 1);
    EXPECT_TRUE(torch::allclose(full, incremental, 1e-5, 1e-5)) << ToString(norm);
    EXPECT_EQ(state.length, 5);
  }
}

TEST_F(DeepNetTest, SliceHoldsGlobalNamesAndSameInitialValues) {
  const DeepNetConfig c = SmallConfig();
  auto full = Build(c, 21);
  ModelSlice tail;
  tail.encoder = {2, 3};
  tail.decoder = {0, 1};
  DeepNet part(c, tail);
  InitializeParameters(*part, 21);
  auto full_params = full->named_parameters();
  int64_t count = 0;
  for (const auto& p : part->named_parameters()) {
    ASSERT_TRUE(full_params.contains(p.key())) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), full_params[p.key()])) << p.key();
    ++count;
  }
  auto names = part->named_parameters().keys();
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("encoder.layers.2.self_attn.v_proj.weight"));
  EXPECT_TRUE(has("decoder.layers.0.encoder_attn.k_proj.weight"));
  EXPECT_TRUE(has("embed_tokens.weight"));  // Holds decoder layer 0: target embedding.
  EXPECT_FALSE(has("encoder.layers.1.fc1.weight"));
  EXPECT_LT(count, static_cast<int64_t>(full_params.size()));
}

TEST_F(DeepNetTest, SlicesComposeToTheWholeModel) {
  const DeepNetConfig c = SmallConfig(NormVariant::kPreLn);
  auto full = Build(c, 4);
  ModelSlice first, second;
  first.encoder = {0, 2};
  second.encoder = {2, 3};
  second.decoder = {0, 2};
  DeepNet a(c, first), b(c, second);
  InitializeParameters(*a, 4);
  InitializeParameters(*b, 4);
  a->eval();
  b->eval();
  auto src = Tokens(2, 5), tgt = Tokens(2, 4);
  torch::NoGradGuard g;
  EncoderOutput enc;
  enc.padding_mask = a->padding_mask(src);
  auto h = a->run_encoder_layers(a->embed_source(src), enc.padding_mask);
  enc.out = b->finish_encoder(b->run_encoder_layers(h, enc.padding_mask));
  auto dec = b->finish_decoder(b->run_decoder_layers(b->embed_target(tgt, 0), enc, nullptr));
  EXPECT_TRUE(torch::allclose(b->output_logits(dec), full->forward(src, tgt), 1e-5, 1e-6));
}

TEST_F(DeepNetTest, UntiedEmbeddingsHaveStackNames) {
  auto c = SmallConfig().share_all_embeddings(false).share_decoder_input_output(false);
  DeepNet model(c);
  auto names = model->named_parameters().keys();
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("encoder.embed_tokens.weight"));
  EXPECT_TRUE(has("decoder.embed_tokens.weight"));
  EXPECT_TRUE(has("decoder.output_projection.weight"));
  EXPECT_FALSE(has("embed_tokens.weight"));
}

TEST_F(DeepNetTest, DecoderOnlyAndEncoderOnlyModelsRun) {
  auto dec_only = Build(SmallConfig().encoder_layers(0));
  auto tgt = Tokens(2, 5);
  EXPECT_EQ(dec_only->forward(torch::Tensor(), tgt).sizes(), (std::vector<int64_t>{2, 5, 50}));
  auto enc_only = Build(SmallConfig().decoder_layers(0));
  auto src = Tokens(2, 6);
  EXPECT_EQ(enc_only->forward(src, torch::Tensor()).sizes(), (std::vector<int64_t>{2, 6, 50}));
}

TEST_F(DeepNetTest, RejectsBadShapes) {
  EXPECT_THROW(DeepNet(SmallConfig().heads(3)), c10::Error);
  EXPECT_THROW(DeepNet(SmallConfig().encoder_layers(0).decoder_layers(0)), c10::Error);
  ModelSlice gap;
  gap.encoder = {0, 2};  // Encoder head with decoder layers: not contiguous.
  gap.decoder = {0, 1};
  EXPECT_THROW(DeepNet(SmallConfig(), gap), c10::Error);
  auto model = Build(SmallConfig().max_positions(8));
  EXPECT_THROW(model->forward(Tokens(1, 9), Tokens(1, 3)), c10::Error);
}

TEST_F(DeepNetTest, TableParameterNamesMatchWhatEverySliceRegisters) {
  for (bool share_all : {true, false}) {
    for (bool share_dec : {true, false}) {
      for (auto layers : {std::pair<int64_t, int64_t>{3, 2}, {3, 0}, {0, 3}}) {
        auto c = SmallConfig()
                     .encoder_layers(layers.first)
                     .decoder_layers(layers.second)
                     .share_all_embeddings(share_all)
                     .share_decoder_input_output(share_dec);
        const int64_t total = layers.first + layers.second;
        for (int64_t begin = 0; begin < total; ++begin) {
          for (int64_t end = begin + 1; end <= total; ++end) {
            ModelSlice s;
            s.encoder = {std::min(begin, layers.first), std::min(end, layers.first)};
            s.decoder = {std::max<int64_t>(begin - layers.first, 0),
                         std::max<int64_t>(end - layers.first, 0)};
            DeepNet part(c, s);
            std::vector<std::string> registered;
            for (const auto& p : part->named_parameters()) {
              if (p.key().find("embed_tokens") != std::string::npos ||
                  p.key().find("output_projection") != std::string::npos) {
                registered.push_back(p.key());
              }
            }
            auto predicted = TableParameterNames(c, s);
            std::sort(registered.begin(), registered.end());
            std::sort(predicted.begin(), predicted.end());
            EXPECT_EQ(predicted, registered) << s.ToString() << " share_all=" << share_all
                                             << " share_dec=" << share_dec;
          }
        }
      }
    }
  }
}

TEST_F(DeepNetTest, LayerRangesComposeToTheWholeStack) {
  const DeepNetConfig c = SmallConfig();
  auto full = Build(c, 8);
  auto src = Tokens(2, 5), tgt = Tokens(2, 4);
  torch::NoGradGuard g;
  EncoderOutput enc;
  enc.padding_mask = full->padding_mask(src);
  auto h = full->run_encoder_layers(full->embed_source(src), enc.padding_mask, 0, 1);
  h = full->run_encoder_layers(h, enc.padding_mask, 1, 3);
  enc.out = full->finish_encoder(h);
  auto y = full->run_decoder_layers(full->embed_target(tgt, 0), enc, 0, 1);
  y = full->finish_decoder(full->run_decoder_layers(y, enc, 1, 2));
  EXPECT_TRUE(torch::allclose(full->output_logits(y), full->forward(src, tgt), 1e-5, 1e-6));
  EXPECT_THROW(full->run_encoder_layers(h, enc.padding_mask, 2, 4), c10::Error);
}

}  // namespace
}  // namespace deepnet::model
