// The engine under runtime.precision bf16: parameters (the master weights), gradients and Adam's
// moments stay fp32, the step leaves no autocast state behind, and steps track fp32.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "comm/loopback_communicator.h"
#include "model/precision.h"
#include "pipeline/pipeline_engine.h"

namespace deepnet::pipeline {
namespace {

EngineOptions Options(model::ComputePrecision precision) {
  EngineOptions o;
  o.model = model::DeepNetConfig()
                .encoder_layers(2)
                .decoder_layers(2)
                .d_model(32)
                .heads(4)
                .ffn_dim(64)
                .vocab_size(40)
                .dropout(0.0)
                .max_positions(32);
  o.seed = 7;
  o.precision = precision;
  if (precision == model::ComputePrecision::kBf16) o.boundary_dtype = torch::kBFloat16;
  return o;
}

MicroBatch Batch(int64_t seed) {
  torch::manual_seed(seed);
  MicroBatch b;
  b.src = torch::randint(4, 40, {4, 7}, torch::kLong);
  b.tgt_in = torch::randint(4, 40, {4, 6}, torch::kLong);
  b.tgt_out = torch::randint(4, 40, {4, 6}, torch::kLong);
  b.src_tokens = b.src.numel();
  b.tgt_tokens = b.tgt_out.numel();
  return b;
}

TEST(MixedPrecisionEngineTest, Bf16KeepsMasterWeightsGradientsAndAdamStateFp32) {
  std::vector<std::vector<double>> losses;
  for (auto precision : {model::ComputePrecision::kFp32, model::ComputePrecision::kBf16}) {
    comm::LoopbackCommunicator world;
    auto engine = PipelineEngine::Create(Options(precision), &world);
    ASSERT_TRUE(engine.ok()) << engine.status();
    PipelineEngine& e = **engine;
    std::vector<double> curve;
    for (int64_t step = 1; step <= 6; ++step) {
      auto totals = e.TrainStep({Batch(step), Batch(100 + step)}, step, 1e-3);
      ASSERT_TRUE(totals.ok()) << totals.status();
      curve.push_back(totals->loss_sum / static_cast<double>(totals->tgt_tokens));
      EXPECT_FALSE(model::AutocastEnabled(c10::DeviceType::CPU));  // the scope ended
    }
    losses.push_back(curve);
    EXPECT_EQ(e.flat().values().scalar_type(), torch::kFloat);
    EXPECT_EQ(e.flat().grads().scalar_type(), torch::kFloat);
    EXPECT_EQ(e.optimizer().exp_avg().scalar_type(), torch::kFloat);
    EXPECT_EQ(e.optimizer().exp_avg_sq().scalar_type(), torch::kFloat);
    for (const auto& p : e.model().parameters()) {
      EXPECT_EQ(p.scalar_type(), torch::kFloat);
      // Still a view of the flat fp32 buffer the optimiser updates.
      EXPECT_EQ(p.storage().data(), e.flat().values().storage().data());
    }
    auto valid = e.Evaluate({Batch(999)});
    ASSERT_TRUE(valid.ok()) << valid.status();
    EXPECT_GT(valid->tokens, 0);
  }
  EXPECT_NE(losses[0], losses[1]);  // bf16 did run
  for (size_t i = 0; i < losses[0].size(); ++i) {
    EXPECT_NEAR(losses[1][i], losses[0][i], 0.02 * losses[0][i]) << "step " << i + 1;
  }
}

}  // namespace
}  // namespace deepnet::pipeline
