#include "job/layout_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "job/job_config.h"

namespace deepnet::job {
namespace {

// 1+1 layers, d 4, ffn 8, V 10; micro-batches of 2 tokens per side, sequences of 2.
// Forward FLOPs per token (2 per weight, 4 d per attended position):
//   encoder layer 2 (4 d^2 + 2 d f) + 4 d S            = 2 (64 + 64) + 32       = 288
//   decoder layer 2 (8 d^2 + 2 d f) + 4 d ((S+1)/2 + S) = 2 (128 + 64) + 16 x 3.5 = 440
//   output projection 2 d V                                                       =  80
// One micro-batch: encoder 2 x 288 = 576, decoder 2 x (440 + 80) = 1040, model 1616;
// training is 3x forward: 1728 (stage 0 of 2), 3120 (stage 1 of 2), 4848 (model).
model::DeepNetConfig Tiny() {
  return model::DeepNetConfig()
      .encoder_layers(1)
      .decoder_layers(1)
      .d_model(4)
      .heads(1)
      .ffn_dim(8)
      .vocab_size(10)
      .max_positions(8);
}

PlanOptions Options(int64_t stages, int64_t micro_batches, int64_t replicas) {
  PlanOptions o;
  o.layout.pipeline_stages = stages;
  o.layout.micro_batches = micro_batches;
  o.layout.tokens_per_micro_batch = 2;
  o.layout.sequence_length = 2;
  o.replicas = replicas;
  return o;
}

TEST(LayoutPlanTest, ForwardFlopsByHand) {
  EXPECT_DOUBLE_EQ(ForwardFlops(Tiny(), 0, 1, 2, 2), 576.0);
  EXPECT_DOUBLE_EQ(ForwardFlops(Tiny(), 1, 2, 2, 2), 1040.0);
  EXPECT_DOUBLE_EQ(ForwardFlops(Tiny(), 0, 2, 2, 2), 1616.0);
  EXPECT_DOUBLE_EQ(ForwardFlops(Tiny(), 0, 2, 4, 2), 2 * 1616.0);  // Linear in tokens.
  EXPECT_DOUBLE_EQ(ForwardFlops(Tiny(), 1, 1, 2, 2), 0.0);
}

TEST(LayoutPlanTest, PipelineTimeIsSlowestStageTimesMicroBatchesPlusBubble) {
  PlanOptions o = Options(2, 4, 1);
  o.peak_tflops = 3120e-12;  // The slowest stage's 3120 FLOPs take 1 s at efficiency 1.
  o.efficiency = 1.0;
  o.p2p_gbps = 0.0;
  const LayoutPlan p = PlanLayout(Tiny(), o);
  EXPECT_DOUBLE_EQ(p.model_flops_per_micro_batch, 4848.0);
  EXPECT_DOUBLE_EQ(p.stage_flops_per_micro_batch, 3120.0);
  EXPECT_EQ(p.slowest_stage, 1);
  EXPECT_DOUBLE_EQ(p.stage_s_per_micro_batch, 1.0);
  EXPECT_DOUBLE_EQ(p.bubble_fraction, 1.0 / 5.0);  // (P - 1) / (m + P - 1)
  EXPECT_DOUBLE_EQ(p.pipeline_s, 5.0);             // (m + P - 1) x 1 s
  EXPECT_DOUBLE_EQ(p.allreduce_s, 0.0);            // One replica.
  EXPECT_DOUBLE_EQ(p.step_s, 5.0);
  EXPECT_EQ(p.tokens_per_step, 8);  // m x D x 2
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 8.0 / 5.0);
  // 4 micro-batches x 4848 FLOPs over 5 s on 2 GPUs.
  EXPECT_DOUBLE_EQ(p.tflops_per_gpu, 4 * 4848.0 / 5.0 / 2.0 / 1e12);
}

TEST(LayoutPlanTest, StageTransfersCountBothStreamsInTheDecoder) {
  PlanOptions o = Options(2, 4, 1);
  o.peak_tflops = 3120e-12;
  o.efficiency = 1.0;
  // Stage 1 receives the encoder output and the decoder input (2 x 2 tokens x 4 x 4 bytes =
  // 64 bytes) per micro-batch and sends their gradients back: 2 x 4 x 64 = 512 bytes.
  o.p2p_gbps = 512e-9;  // 512 bytes/s
  const LayoutPlan p = PlanLayout(Tiny(), o);
  EXPECT_DOUBLE_EQ(p.p2p_s, 1.0);
  EXPECT_DOUBLE_EQ(p.step_s, 6.0);
}

TEST(LayoutPlanTest, AllReduceIsRingOverTheLargestStagesGradients) {
  PlanOptions o = Options(1, 1, 4);
  o.peak_tflops = 4848e-12;
  o.efficiency = 1.0;
  o.allreduce_gbps = 1e-9;  // 1 byte/s
  const LayoutPlan p = PlanLayout(Tiny(), o);
  const double grad = 4.0 * static_cast<double>(ModelParameterCount(Tiny()));
  EXPECT_EQ(p.memory.largest.gradient_bytes, static_cast<int64_t>(grad));
  EXPECT_DOUBLE_EQ(p.allreduce_s, 2.0 * 3.0 / 4.0 * grad);
  EXPECT_DOUBLE_EQ(p.step_s, 1.0 + 2.0 * 3.0 / 4.0 * grad);
}

TEST(LayoutPlanTest, MemoryIsTheEstimateAndTheVerdictComparesIt) {
  PlanOptions o = Options(2, 4, 1);
  o.layout.precision = Precision::kBf16;
  const LayoutPlan p = PlanLayout(Tiny(), o);
  EXPECT_EQ(p.memory.largest.total_bytes, EstimateMemory(Tiny(), o.layout).largest.total_bytes);
  EXPECT_TRUE(p.fits);              // No GPU size given.
  EXPECT_DOUBLE_EQ(p.step_s, 0.0);  // No rate given.
  o.gpu_memory_bytes = p.memory.largest.total_bytes;
  EXPECT_TRUE(PlanLayout(Tiny(), o).fits);
  o.gpu_memory_bytes = p.memory.largest.total_bytes - 1;
  EXPECT_FALSE(PlanLayout(Tiny(), o).fits);
}

TEST(LayoutPlanTest, FlagshipOnSixteenByEightInBf16) {
  auto config =
      LoadJobConfig(std::string(DEEPNET_SOURCE_DIR) + "/deploy/jobs/flagship-100L-100L.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  model::DeepNetConfig model = config->model;
  model.vocab_size(64000);
  PlanOptions o;
  o.layout = LayoutOf(*config);
  o.layout.precision = Precision::kBf16;
  o.replicas = config->parallel.data_parallel;
  o.gpu_memory_bytes = 80'000'000'000;
  o.peak_tflops = 790.0;
  const LayoutPlan p = PlanLayout(model, o);
  EXPECT_EQ(p.memory.stages, 16);
  EXPECT_EQ(p.tokens_per_step, 64 * 8 * 2048);
  EXPECT_NEAR(p.bubble_fraction, 15.0 / 79.0, 1e-12);
  EXPECT_TRUE(p.fits) << p.memory.Summary();
  // The 16 stages together do the model's work: each stage's share is about 1/16 of it.
  EXPECT_GT(p.stage_flops_per_micro_batch, p.model_flops_per_micro_batch / 16.0);
  EXPECT_LT(p.stage_flops_per_micro_batch, p.model_flops_per_micro_batch / 8.0);
  EXPECT_GT(p.step_s, p.pipeline_s);  // The all-reduce adds time with 8 replicas.
  const std::string tsv = FormatPlan(p, o, "tsv");
  EXPECT_NE(tsv.find("fits\tyes\n"), std::string::npos) << tsv;
  EXPECT_NE(tsv.find("memory_bytes\t" + std::to_string(p.memory.largest.total_bytes) + "\n"),
            std::string::npos);
  EXPECT_NE(FormatPlan(p, o, "text").find("fits 74.51 GiB per GPU: yes"), std::string::npos)
      << FormatPlan(p, o, "text");
}

}  // namespace
}  // namespace deepnet::job
