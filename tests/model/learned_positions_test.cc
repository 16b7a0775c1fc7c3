// model.positions: learned: one trainable table per stack, on the slice that embeds its input.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/initialization.h"

namespace deepnet::model {
namespace {

DeepNetConfig Learned() {
  return DeepNetConfig()
      .encoder_layers(2)
      .decoder_layers(2)
      .d_model(16)
      .heads(2)
      .ffn_dim(32)
      .vocab_size(30)
      .dropout(0.0)
      .max_positions(24)
      .positions(PositionKind::kLearned);
}

torch::Tensor Tokens(int64_t b, int64_t t) { return torch::randint(4, 30, {b, t}, torch::kLong); }

TEST(LearnedPositionsTest, AreParametersOfEachStackNotABuffer) {
  DeepNet model(Learned());
  InitializeParameters(*model, 3);
  auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("encoder.embed_positions.weight"));
  ASSERT_TRUE(params.contains("decoder.embed_positions.weight"));
  EXPECT_EQ(params["encoder.embed_positions.weight"].sizes(), (std::vector<int64_t>{24, 16}));
  EXPECT_TRUE(params["decoder.embed_positions.weight"].requires_grad());
  EXPECT_EQ(model->named_buffers().size(), 0u);
  // N(0, d^-1/2), no padding row (the table is indexed by position).
  auto table = params["encoder.embed_positions.weight"];
  EXPECT_NEAR(table.std().item<double>(), 0.25, 0.05);
  EXPECT_GT(table[0].abs().sum().item<double>(), 0.0);

  DeepNet sinusoidal(Learned().positions(PositionKind::kSinusoidal));
  EXPECT_FALSE(sinusoidal->named_parameters().contains("encoder.embed_positions.weight"));
  EXPECT_EQ(sinusoidal->named_buffers().size(), 1u);
}

TEST(LearnedPositionsTest, GetGradientsOnTheRowsUsed) {
  torch::manual_seed(1);
  DeepNet model(Learned());
  InitializeParameters(*model, 3);
  auto logits = model->forward(Tokens(2, 7), Tokens(2, 5));
  logits.pow(2).sum().backward();
  auto params = model->named_parameters();
  auto enc = params["encoder.embed_positions.weight"].grad();
  auto dec = params["decoder.embed_positions.weight"].grad();
  ASSERT_TRUE(enc.defined() && dec.defined());
  EXPECT_GT(enc.narrow(0, 0, 7).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(enc.narrow(0, 7, 17).abs().sum().item<double>(), 0.0);
  EXPECT_GT(dec.narrow(0, 0, 5).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(dec.narrow(0, 5, 19).abs().sum().item<double>(), 0.0);
}

TEST(LearnedPositionsTest, TheTableChangesTheOutputAndLoadsByName) {
  torch::manual_seed(2);
  DeepNet a(Learned()), b(Learned());
  InitializeParameters(*a, 3);
  InitializeParameters(*b, 4);
  a->eval();
  b->eval();
  auto src = Tokens(2, 6), tgt = Tokens(2, 4);
  auto before = a->forward(src, tgt);
  // A save/load by global name (what checkpoints do) restores the tables exactly.
  {
    torch::NoGradGuard no_grad;
    auto pb = b->named_parameters();
    for (const auto& p : a->named_parameters()) pb[p.key()].copy_(p.value());
  }
  EXPECT_TRUE(torch::allclose(b->forward(src, tgt), before));
  {
    torch::NoGradGuard no_grad;
    a->named_parameters()["decoder.embed_positions.weight"][1].add_(1.0);
  }
  EXPECT_FALSE(torch::allclose(a->forward(src, tgt), before));
}

TEST(LearnedPositionsTest, SlicesComposeToTheWholeModel) {
  torch::manual_seed(3);
  const DeepNetConfig c = Learned();
  DeepNet whole(c);
  InitializeParameters(*whole, 9);
  whole->eval();
  ModelSlice first, second;
  first.encoder = {0, 2};
  first.decoder = {0, 0};
  second.encoder = {2, 2};
  second.decoder = {0, 2};
  DeepNet a(c, first), b(c, second);
  InitializeParameters(*a, 9);
  InitializeParameters(*b, 9);
  a->eval();
  b->eval();
  EXPECT_TRUE(a->named_parameters().contains("encoder.embed_positions.weight"));
  EXPECT_FALSE(a->named_parameters().contains("decoder.embed_positions.weight"));
  EXPECT_TRUE(b->named_parameters().contains("decoder.embed_positions.weight"));
  EXPECT_FALSE(b->named_parameters().contains("encoder.embed_positions.weight"));
  auto src = Tokens(2, 6), tgt = Tokens(2, 5);
  EncoderOutput enc = a->encode(src);
  auto logits = b->output_logits(b->decode(tgt, enc));
  EXPECT_TRUE(torch::allclose(logits, whole->forward(src, tgt), 1e-5, 1e-6));

  // A slice without the table says so instead of crashing.
  ModelSlice middle;
  middle.encoder = {1, 2};
  middle.decoder = {0, 0};
  DeepNet m(c, middle);
  EXPECT_THROW(m->embed_source(src), c10::Error);
}

TEST(LearnedPositionsTest, IncrementalDecodingMatchesTheFullPass) {
  torch::manual_seed(4);
  DeepNet model(Learned());
  InitializeParameters(*model, 5);
  model->eval();
  torch::NoGradGuard no_grad;
  auto src = Tokens(1, 6), tgt = Tokens(1, 5);
  EncoderOutput enc = model->encode(src);
  auto full = model->decode(tgt, enc);
  DecoderState state = model->initial_state();
  for (int64_t t = 0; t < 5; ++t) {
    auto step = model->decode(tgt.narrow(1, t, 1), enc, &state);
    EXPECT_TRUE(torch::allclose(step.squeeze(1), full.select(1, t), 1e-4, 1e-5)) << t;
  }
}

}  // namespace
}  // namespace deepnet::model
