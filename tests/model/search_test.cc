#include "model/search.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/initialization.h"

namespace deepnet::model {
namespace {

DeepNet TinyModel(uint64_t seed) {
  auto c = DeepNetConfig()
               .encoder_layers(2)
               .decoder_layers(2)
               .d_model(16)
               .heads(2)
               .ffn_dim(32)
               .vocab_size(30)
               .dropout(0.0)
               .max_positions(64);
  DeepNet model(c);
  InitializeParameters(*model, seed);
  return model;
}

SearchOptions Options(int64_t beam) {
  SearchOptions o;
  o.beam_size = beam;
  o.max_len_a = 1.0;
  o.max_len_b = 5;
  return o;
}

TEST(SearchTest, BeamOfOneEqualsGreedy) {
  for (uint64_t seed : {1, 2, 3}) {
    auto model = TinyModel(seed);
    torch::manual_seed(seed);
    auto src = torch::randint(4, 30, {4, 6}, torch::kLong);
    auto greedy = GreedySearch(*model, src, Options(1));
    auto beam = BeamSearch(*model, src, Options(1));
    ASSERT_EQ(greedy.size(), beam.size());
    for (size_t i = 0; i < greedy.size(); ++i) {
      EXPECT_EQ(greedy[i].tokens, beam[i].tokens) << "seed " << seed << " sentence " << i;
      EXPECT_NEAR(greedy[i].score, beam[i].score, 1e-4);
    }
  }
}

TEST(SearchTest, GreedyScoreIsTheSumOfStepLogProbabilities) {
  auto model = TinyModel(9);
  torch::manual_seed(9);
  auto src = torch::randint(4, 30, {1, 5}, torch::kLong);
  auto hyp = GreedySearch(*model, src, Options(1))[0];
  // Re-score the hypothesis (plus EOS) with one teacher-forced pass.
  std::vector<int64_t> in = {1};
  in.insert(in.end(), hyp.tokens.begin(), hyp.tokens.end());
  std::vector<int64_t> out = hyp.tokens;
  out.push_back(2);
  torch::NoGradGuard g;
  model->eval();
  auto logits = model->forward(src, torch::tensor(in).unsqueeze(0));
  auto lp = torch::log_softmax(logits, -1)[0].gather(1, torch::tensor(out).unsqueeze(1));
  EXPECT_NEAR(lp.sum().item<double>(), hyp.score, 1e-4);
}

TEST(SearchTest, WideBeamFindsTheExhaustiveOptimum) {
  // Vocabulary 8: producible tokens are unk (3), 4..7 and EOS; with at most 3 steps there are
  // 1 + 5 + 25 = 31 hypotheses, so a beam of 32 finishes every one of them.
  auto c = DeepNetConfig().encoder_layers(1).decoder_layers(2).d_model(8).heads(2).ffn_dim(16)
               .vocab_size(8).dropout(0.0).max_positions(16);
  DeepNet model(c);
  InitializeParameters(*model, 13);
  model->eval();
  auto src = torch::tensor({{5, 6, 4, 2}}, torch::kLong);
  SearchOptions o;
  o.beam_size = 32;
  o.length_penalty = 0.0;
  o.max_len_a = 0.0;
  o.max_len_b = 3;
  auto best = BeamSearch(*model, src, o)[0];

  torch::NoGradGuard g;
  auto score = [&](const std::vector<int64_t>& tokens) {
    std::vector<int64_t> in = {1};
    in.insert(in.end(), tokens.begin(), tokens.end());
    std::vector<int64_t> out = tokens;
    out.push_back(2);
    auto lp = torch::log_softmax(model->forward(src, torch::tensor(in).unsqueeze(0)), -1)[0];
    return lp.gather(1, torch::tensor(out).unsqueeze(1)).sum().item<double>();
  };
  const std::vector<int64_t> symbols = {3, 4, 5, 6, 7};
  std::vector<std::vector<int64_t>> all = {{}};
  for (int64_t a : symbols) {
    all.push_back({a});
    for (int64_t b : symbols) all.push_back({a, b});
  }
  double optimum = -1e30;
  std::vector<int64_t> argmax;
  for (const auto& h : all) {
    const double s = score(h);
    if (s > optimum) optimum = s, argmax = h;
  }
  EXPECT_EQ(best.tokens, argmax);
  EXPECT_NEAR(best.score, optimum, 1e-4);
}

TEST(SearchTest, OutputsRespectTheLengthLimitAndSkipSpecialTokens) {
  auto model = TinyModel(5);
  auto src = torch::randint(4, 30, {3, 4}, torch::kLong);
  for (auto& h : BeamSearch(*model, src, Options(3))) {
    EXPECT_LE(h.tokens.size(), 4u + 5u - 1u);  // max steps minus EOS
    for (int64_t t : h.tokens) {
      EXPECT_NE(t, 0);
      EXPECT_NE(t, 1);
      EXPECT_NE(t, 2);
    }
  }
}

TEST(SearchTest, RestoresTrainingMode) {
  auto model = TinyModel(6);
  model->train();
  GreedySearch(*model, torch::randint(4, 30, {1, 3}, torch::kLong), Options(1));
  EXPECT_TRUE(model->is_training());
}

}  // namespace
}  // namespace deepnet::model
