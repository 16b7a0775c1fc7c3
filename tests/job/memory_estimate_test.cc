#include "job/memory_estimate.h"

#include <gtest/gtest.h>

#include "job/job_config.h"

namespace deepnet::job {
namespace {

// 2+2 layers, d 8, h 2, ffn 16, V 10: small enough to count by hand.
//   attention 4 (d^2 + d) = 288, FFN 2 d f + f + d = 280, LN 2d = 16
//   encoder layer 288 + 280 + 2*16 = 600, decoder layer 2*288 + 280 + 3*16 = 904
//   model: one shared table 80 + 2*600 + 2*904 = 3088
model::DeepNetConfig Small() {
  return model::DeepNetConfig()
      .encoder_layers(2)
      .decoder_layers(2)
      .d_model(8)
      .heads(2)
      .ffn_dim(16)
      .vocab_size(10)
      .max_positions(32);
}

MemoryLayout Layout(int64_t stages, int64_t micro_batches, bool gpipe) {
  MemoryLayout layout;
  layout.pipeline_stages = stages;
  layout.micro_batches = micro_batches;
  layout.gpipe = gpipe;
  layout.tokens_per_micro_batch = 4;
  layout.sequence_length = 4;
  return layout;
}

TEST(MemoryEstimateTest, ParameterCountsByHand) {
  EXPECT_EQ(EncoderLayerParameterCount(Small()), 600);
  EXPECT_EQ(DecoderLayerParameterCount(Small()), 904);
  EXPECT_EQ(ModelParameterCount(Small()), 3088);
}

TEST(MemoryEstimateTest, OneStageFp32ByHand) {
  const MemoryEstimate e = EstimateMemory(Small(), Layout(1, 1, false));
  const StageMemory& s = e.largest;
  EXPECT_EQ(s.parameters, 3088);
  EXPECT_EQ(s.parameter_bytes, 3088 * 4);
  EXPECT_EQ(s.gradient_bytes, 3088 * 4);
  EXPECT_EQ(s.optimizer_bytes, 3088 * 8);
  EXPECT_EQ(s.buffer_bytes, 32 * 8 * 4);
  // Per token: encoder layer 12d + 2f + 2hS = 144, decoder 20d + 2f + 4hS = 224, two
  // embeddings 2d each: 2*144 + 2*224 + 32 = 768 elements; x 4 tokens x 4 bytes = 12288;
  // logits and their gradient 2 x 4 tokens x V 10 x 4 bytes, + the loss's fp32 rows 40 x 4
  // = 480.
  EXPECT_EQ(s.activation_bytes_per_micro_batch, 12288 + 480);
  EXPECT_EQ(s.live_micro_batches, 1);
  EXPECT_EQ(s.total_bytes, 12352 + 12352 + 24704 + 1024 + 12768);
  EXPECT_FALSE(e.saturated);
}

TEST(MemoryEstimateTest, OneF1BKeepsFewerMicroBatchesThanGPipe) {
  // Stage 0: encoder layers + the shared table (1280 parameters), activations (2*144 + 16) x 4
  // tokens x 4 bytes = 4864 per micro-batch. Stage 1: decoder layers + the table (1888),
  // (2*224 + 16) x 16 + 480 logits = 7904 per micro-batch.
  const MemoryLayout one_f_one_b = Layout(2, 4, false);
  const StageMemory s0 = EstimateStageMemory(Small(), one_f_one_b, 0);
  const StageMemory s1 = EstimateStageMemory(Small(), one_f_one_b, 1);
  EXPECT_EQ(s0.parameters, 1280);
  EXPECT_EQ(s1.parameters, 1888);
  EXPECT_EQ(s0.activation_bytes_per_micro_batch, 4864);
  EXPECT_EQ(s1.activation_bytes_per_micro_batch, 7904);
  EXPECT_EQ(s0.live_micro_batches, 2);  // min(P - s, m)
  EXPECT_EQ(s1.live_micro_batches, 1);
  EXPECT_EQ(s0.total_bytes, 1280 * 16 + 1024 + 2 * 4864);
  EXPECT_EQ(s1.total_bytes, 1888 * 16 + 1024 + 7904);
  const MemoryEstimate e = EstimateMemory(Small(), one_f_one_b);
  EXPECT_EQ(e.largest.stage, 1);
  EXPECT_EQ(e.largest.total_bytes, 39136);

  const MemoryEstimate gpipe = EstimateMemory(Small(), Layout(2, 4, true));
  EXPECT_EQ(gpipe.largest.stage, 1);
  EXPECT_EQ(gpipe.largest.live_micro_batches, 4);
  EXPECT_EQ(gpipe.largest.total_bytes, 1888 * 16 + 1024 + 4 * 7904);
}

TEST(MemoryEstimateTest, StageOfLayersMatchesTheCountSplitAndFollowsOtherSplits) {
  const model::DeepNetConfig c = Small();
  MemoryLayout layout;
  layout.pipeline_stages = 3;
  layout.micro_batches = 4;
  const int64_t layers = c.encoder_layers() + c.decoder_layers();
  for (int64_t s = 0; s < 3; ++s) {
    const StageMemory counted = EstimateStageMemory(c, layout, s);
    const StageMemory ranged =
        EstimateStageMemoryOfLayers(c, layout, s, layers * s / 3, layers * (s + 1) / 3);
    EXPECT_EQ(ranged.total_bytes, counted.total_bytes) << s;
    EXPECT_EQ(ranged.parameters, counted.parameters) << s;
  }
  // One more layer on a stage costs one more layer's parameters and activations.
  const StageMemory wide = EstimateStageMemoryOfLayers(c, layout, 1, 0, layers - 1);
  const StageMemory narrow = EstimateStageMemoryOfLayers(c, layout, 1, 1, layers - 1);
  EXPECT_GT(wide.parameters, narrow.parameters);
  EXPECT_EQ(wide.layers, narrow.layers + 1);
}

TEST(MemoryEstimateTest, LowerPrecisionKeepsAnFp32MasterCopy) {
  MemoryLayout layout = Layout(1, 1, false);
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    layout.precision = p;
    const StageMemory s = EstimateMemory(Small(), layout).largest;
    EXPECT_EQ(s.parameter_bytes, 3088 * (4 + 2)) << ToString(p);  // fp32 master + 2-byte cast
    EXPECT_EQ(s.gradient_bytes, 3088 * 4);                        // fp32
    EXPECT_EQ(s.optimizer_bytes, 3088 * 8);                       // two fp32 moments
    // 768 elements per token at 2 bytes (the residual stream too), plus the logits and their
    // gradient at 2 bytes (2 x 40 x 2) and the loss's fp32 rows (40 x 4).
    EXPECT_EQ(s.activation_bytes_per_micro_batch, 768 * 4 * 2 + 160 + 160);
    EXPECT_EQ(s.total_bytes, 18528 + 12352 + 24704 + 1024 + 6464);
  }
}

TEST(MemoryEstimateTest, JobPrecisionFollowsRuntimePrecision) {
  JobConfig job;
  job.model = Small();
  EXPECT_EQ(PrecisionOf(job), Precision::kFp32);  // auto on cpu
  job.runtime.precision = PrecisionChoice::kBf16;
  EXPECT_EQ(PrecisionOf(job), Precision::kBf16);
  EXPECT_EQ(LayoutOf(job).precision, Precision::kBf16);
  job.runtime.precision = PrecisionChoice::kTf32;  // fp32 storage
  EXPECT_EQ(PrecisionOf(job), Precision::kFp32);
  job.runtime.precision = PrecisionChoice::kAuto;
  job.runtime.device = *ParseDevice("cuda:1");
  EXPECT_EQ(PrecisionOf(job), Precision::kBf16);
  job.runtime.precision = PrecisionChoice::kFp32;
  EXPECT_EQ(PrecisionOf(job), Precision::kFp32);
}

TEST(MemoryEstimateTest, UntiedTablesAreCountedPerStage) {
  auto c = Small().share_all_embeddings(false).share_decoder_input_output(false);
  // Source, target and output tables: 3 x 80.
  EXPECT_EQ(ModelParameterCount(c), 2 * 600 + 2 * 904 + 240);
  const MemoryLayout two = Layout(2, 1, false);
  EXPECT_EQ(EstimateStageMemory(c, two, 0).parameters, 1200 + 80);
  EXPECT_EQ(EstimateStageMemory(c, two, 1).parameters, 1808 + 160);
}

TEST(MemoryEstimateTest, AbsurdModelsSaturateInsteadOfOverflowing) {
  for (auto c : {Small().d_model(1000000000).heads(1), Small().ffn_dim(1000000000000),
                 Small().vocab_size(1000000000000), Small().encoder_layers(100000)}) {
    MemoryLayout layout = Layout(1, 1, false);
    layout.tokens_per_micro_batch = 1000000000000000;
    const MemoryEstimate e = EstimateMemory(c, layout);
    EXPECT_GT(e.largest.total_bytes, int64_t{1} << 40);
    EXPECT_GE(e.largest.total_bytes, e.largest.parameter_bytes);
  }
  const MemoryEstimate huge = EstimateMemory(
      Small().d_model(1000000000).heads(1).vocab_size(1000000000000), Layout(1, 1, false));
  EXPECT_TRUE(huge.saturated);
  EXPECT_EQ(huge.largest.total_bytes, kMemoryUnbounded);
  EXPECT_NE(huge.Summary().find("more than 8 EiB"), std::string::npos) << huge.Summary();
  EXPECT_EQ(huge.biggest_part(), "optimizer state");
}

TEST(MemoryEstimateTest, InvalidShapesGiveZero) {
  EXPECT_EQ(EstimateMemory(Small().encoder_layers(0).decoder_layers(0), Layout(1, 1, false))
                .largest.total_bytes,
            0);
  EXPECT_EQ(EstimateMemory(Small(), Layout(5, 1, false)).largest.total_bytes, 0);  // P > layers
}

TEST(MemoryEstimateTest, ManyStagesEvaluateOnlyCandidates) {
  // 200,000 encoder layers over 100,000 stages: stage 0 (table, most live micro-batches) is the
  // largest, as an exact pass would find.
  auto c = Small().encoder_layers(200000).decoder_layers(0);
  MemoryLayout layout = Layout(100000, 8, false);
  const MemoryEstimate e = EstimateMemory(c, layout);
  EXPECT_EQ(e.stages, 100000);
  EXPECT_EQ(e.largest.stage, 0);
  EXPECT_EQ(e.largest.total_bytes, EstimateStageMemory(c, layout, 0).total_bytes);
}

TEST(MemoryEstimateTest, JobLayoutFollowsTheSpec) {
  JobConfig job;
  job.model = Small().vocab_size(0);
  job.data.max_tokens = 100;
  job.data.max_len = 20;
  job.parallel.pipeline_stages = 2;
  job.parallel.micro_batches = 3;
  job.parallel.schedule = Schedule::kGPipe;
  const MemoryLayout layout = LayoutOf(job);
  EXPECT_EQ(layout.pipeline_stages, 2);
  EXPECT_EQ(layout.micro_batches, 3);
  EXPECT_TRUE(layout.gpipe);
  EXPECT_EQ(layout.sequence_length, 20);
  EXPECT_EQ(layout.tokens_per_micro_batch, 100);
  EXPECT_EQ(layout.precision, Precision::kFp32);
  // vocab_size 0: the given vocabulary is assumed.
  EXPECT_EQ(EstimateJobMemory(job, 10).largest.total_bytes,
            EstimateMemory(Small(), layout).largest.total_bytes);
  job.data.max_len = 0;  // sequences bounded by max_positions; a longer one is a batch alone
  job.data.max_tokens = 8;
  EXPECT_EQ(LayoutOf(job).sequence_length, 32);
  EXPECT_EQ(LayoutOf(job).tokens_per_micro_batch, 32);
}

TEST(MemoryEstimateTest, LayerRecomputationKeepsLayerInputsAndOneLayer) {
  MemoryLayout layout = Layout(1, 2, true);
  layout.recompute_layers = true;
  const StageMemory s = EstimateMemory(Small(), layout).largest;
  // Per token: 4 layer inputs + the encoder output (d each) + two embeddings (2d each)
  // = 9d = 72 elements; x 4 tokens x 4 bytes = 1152, + logits 480 = 1632 per micro-batch.
  EXPECT_EQ(s.activation_bytes_per_micro_batch, 1152 + 480);
  // Two live micro-batches, plus one decoder layer's 224 elements per token rebuilt in
  // backward: 224 x 4 tokens x 4 bytes = 3584.
  EXPECT_EQ(s.activation_bytes, 2 * 1632 + 3584);
  EXPECT_LT(s.activation_bytes,
            EstimateMemory(Small(), Layout(1, 2, true)).largest.activation_bytes);
  // bf16: the kept inputs, the bf16 residual stream (40 x 4 tokens x 2 bytes), the embeddings
  // (32 x 4 x 2), logits 320 (as above); the rebuilt decoder layer 224 x 4 x 2.
  layout.precision = Precision::kBf16;
  const StageMemory low = EstimateMemory(Small(), layout).largest;
  EXPECT_EQ(low.activation_bytes_per_micro_batch, 320 + 256 + 320);
  EXPECT_EQ(low.activation_bytes, 2 * 896 + 1792);
  JobConfig job;
  EXPECT_FALSE(LayoutOf(job).recompute_layers);
  job.runtime.recompute = Recompute::kLayer;
  EXPECT_TRUE(LayoutOf(job).recompute_layers);
}

TEST(MemoryEstimateTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(int64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(FormatBytes(kMemoryUnbounded), "more than 8 EiB");
}

}  // namespace
}  // namespace deepnet::job
