#include "pipeline/stage_partition.h"

#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include "job/job_config.h"
#include "pipeline/layer_cost_probe.h"

namespace deepnet::pipeline {
namespace {

using ::testing::HasSubstr;

model::DeepNetConfig Shape(int64_t encoder, int64_t decoder) {
  return model::DeepNetConfig().encoder_layers(encoder).decoder_layers(decoder);
}

LayerCostModel UnitCosts() {
  LayerCostModel costs;
  costs.encoder_layer = 1.0;
  costs.decoder_layer = 1.0;
  return costs;
}

// Layer costs in the global order with embeddings and output folded in, as the plan charges.
std::vector<double> GlobalCosts(const model::DeepNetConfig& c, const LayerCostModel& costs) {
  const int64_t n = c.encoder_layers(), m = c.decoder_layers();
  std::vector<double> w;
  for (int64_t k = 0; k < n + m; ++k)
    w.push_back(k < n ? costs.encoder_layer : costs.decoder_layer);
  if (n > 0) w[0] += costs.source_embedding;
  if (m > 0) w[n] += costs.target_embedding;
  w.back() += costs.output_layer;
  return w;
}

// Best bottleneck over every split of w into `parts` non-empty contiguous runs.
double BruteForceOptimum(const std::vector<double>& w, int parts, size_t begin = 0) {
  if (parts == 1) {
    double sum = 0.0;
    for (size_t k = begin; k < w.size(); ++k) sum += w[k];
    return sum;
  }
  double best = std::numeric_limits<double>::infinity(), head = 0.0;
  for (size_t end = begin + 1; end + parts - 1 <= w.size(); ++end) {
    head += w[end - 1];
    best = std::min(best, std::max(head, BruteForceOptimum(w, parts - 1, end)));
  }
  return best;
}

// The plan's slices cover the global order contiguously, each non-empty and valid, and the
// predicted costs are the sums of their layers. Returns the largest stage cost.
double ExpectValidPlan(const StagePlan& plan, const model::DeepNetConfig& c,
                       const LayerCostModel& costs, int stages) {
  const std::vector<double> w = GlobalCosts(c, costs);
  const int64_t n = c.encoder_layers();
  EXPECT_EQ(static_cast<int>(plan.slices.size()), stages);
  EXPECT_EQ(static_cast<int>(plan.predicted_cost.size()), stages);
  int64_t next = 0;
  double largest = 0.0, total = 0.0;
  for (int s = 0; s < stages && s < static_cast<int>(plan.slices.size()); ++s) {
    const model::ModelSlice& slice = plan.slices[s];
    EXPECT_NO_THROW(model::Validate(slice, c)) << "stage " << s;
    const int64_t begin = slice.encoder.empty() ? n + slice.decoder.begin : slice.encoder.begin;
    const int64_t end = slice.decoder.empty() ? slice.encoder.end : n + slice.decoder.end;
    EXPECT_EQ(begin, next) << "stage " << s;
    EXPECT_GT(end, begin) << "stage " << s;
    double sum = 0.0;
    for (int64_t k = begin; k < end; ++k) sum += w[k];
    EXPECT_NEAR(plan.predicted_cost[s], sum, 1e-9 * (1.0 + sum)) << "stage " << s;
    largest = std::max(largest, sum);
    total += sum;
    next = end;
  }
  EXPECT_EQ(next, static_cast<int64_t>(w.size()));
  EXPECT_NEAR(plan.max_over_mean, total > 0.0 ? largest / (total / stages) : 1.0, 1e-9);
  EXPECT_TRUE(plan.slices.front().owns_source_embedding() || c.encoder_layers() == 0);
  EXPECT_TRUE(plan.slices.back().owns_output(c));
  return largest;
}

TEST(StagePartitionTest, EstimatesDecoderLayerAboveEncoderLayer) {
  const model::DeepNetConfig c = Shape(6, 6);
  const LayerCostModel costs = EstimateLayerCosts(c, 32, 32);
  EXPECT_DOUBLE_EQ(costs.encoder_layer, 1.0);
  // Cross-attention adds Q/K/V/O projections and scores: between 1.2x and 1.6x here.
  EXPECT_GT(costs.decoder_layer, 1.2);
  EXPECT_LT(costs.decoder_layer, 1.6);
  EXPECT_LT(costs.source_embedding, 0.01);
  EXPECT_LT(costs.target_embedding, 0.01);
  EXPECT_GT(costs.output_layer, 0.5);

  // A bigger vocabulary makes only the output layer dearer, about proportionally.
  const LayerCostModel big = EstimateLayerCosts(model::DeepNetConfig(c).vocab_size(32000), 32, 32);
  EXPECT_DOUBLE_EQ(big.decoder_layer, costs.decoder_layer);
  EXPECT_NEAR(big.output_layer / costs.output_layer, 4.0, 1e-9);

  // Without an encoder there is no cross-attention; causal attention is cheaper than full.
  const LayerCostModel decoder_only = EstimateLayerCosts(Shape(0, 6), 32, 32);
  EXPECT_LT(decoder_only.decoder_layer, 1.0);
  EXPECT_GT(decoder_only.decoder_layer, 0.9);
  // Longer targets cost the decoder more, relative to the encoder.
  EXPECT_GT(EstimateLayerCosts(c, 32, 64).decoder_layer, costs.decoder_layer);
}

TEST(StagePartitionTest, MatchesBruteForceOptimumOnSmallModels) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> small(1, 9);
  for (int64_t n = 0; n <= 5; ++n) {
    for (int64_t m = 0; m <= 5; ++m) {
      if (n + m == 0) continue;
      const model::DeepNetConfig c = Shape(n, m);
      for (int trial = 0; trial < 3; ++trial) {
        // Integer costs, so every sum is exact and the optimum compares with ==.
        LayerCostModel costs;
        costs.encoder_layer = small(rng);
        costs.decoder_layer = small(rng);
        costs.source_embedding = small(rng) - 1;
        costs.target_embedding = small(rng) - 1;
        costs.output_layer = 2 * small(rng);
        for (int p = 1; p <= n + m; ++p) {
          absl::StatusOr<StagePlan> plan = PartitionStages(c, p, costs);
          ASSERT_TRUE(plan.ok()) << plan.status();
          const double largest = ExpectValidPlan(*plan, c, costs, p);
          EXPECT_EQ(largest, BruteForceOptimum(GlobalCosts(c, costs), p))
              << n << "L-" << m << "L P=" << p << "\n"
              << DescribePlan(*plan);
        }
      }
    }
  }
}

TEST(StagePartitionTest, BalancesTwentyFourLayerStacksOverFourStages) {
  const model::DeepNetConfig c = Shape(24, 24);
  const LayerCostModel costs = EstimateLayerCosts(c, 32, 32);
  absl::StatusOr<StagePlan> plan = PartitionStages(c, 4, costs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double largest = ExpectValidPlan(*plan, c, costs, 4);
  EXPECT_NEAR(largest, BruteForceOptimum(GlobalCosts(c, costs), 4), 1e-9);
  // One decoder layer (~1.33 encoder layers) is the granularity: within 10% of perfect.
  EXPECT_LT(plan->max_over_mean, 1.1);
  EXPECT_GE(plan->max_over_mean, 1.0);
}

TEST(StagePartitionTest, GivesOneLayerPerStageWhenStagesEqualLayers) {
  const model::DeepNetConfig c = Shape(3, 5);
  absl::StatusOr<StagePlan> plan = PartitionStages(c, 8, EstimateLayerCosts(c, 16, 16));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->slices.size(), 8u);
  for (int s = 0; s < 8; ++s) {
    const model::ModelSlice& slice = plan->slices[s];
    EXPECT_EQ(slice.encoder.size() + slice.decoder.size(), 1) << "stage " << s;
    if (s < 3)
      EXPECT_EQ(slice.encoder.begin, s);
    else
      EXPECT_EQ(slice.decoder.begin, s - 3);
  }
}

TEST(StagePartitionTest, RejectsStageCountsOutsideOneToLayers) {
  const model::DeepNetConfig c = Shape(4, 4);
  absl::StatusOr<StagePlan> too_many = PartitionStages(c, 9, UnitCosts());
  ASSERT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(too_many.status().message(),
            "parallel.pipeline_stages: 9 stages but the model has only 8 layers");
  for (int stages : {0, -3}) {
    absl::StatusOr<StagePlan> plan = PartitionStages(c, stages, UnitCosts());
    ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(), HasSubstr("parallel.pipeline_stages"));
  }
  LayerCostModel negative = UnitCosts();
  negative.output_layer = -1.0;
  EXPECT_THAT(PartitionStages(c, 2, negative).status().message(), HasSubstr("output_layer"));
}

TEST(StagePartitionTest, SplitsEncoderOnlyAndDecoderOnlyModels) {
  for (const auto& [n, m] : {std::pair<int64_t, int64_t>{12, 0}, {0, 12}}) {
    const model::DeepNetConfig c = Shape(n, m);
    const LayerCostModel costs = EstimateLayerCosts(c, 32, 32);
    absl::StatusOr<StagePlan> plan = PartitionStages(c, 3, costs);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectValidPlan(*plan, c, costs, 3);
    for (const model::ModelSlice& slice : plan->slices) {
      EXPECT_EQ(slice.encoder.empty(), n == 0);
      EXPECT_EQ(slice.decoder.empty(), m == 0);
    }
    EXPECT_EQ(plan->slices.front().owns_target_embedding(), n == 0);
  }
}

TEST(StagePartitionTest, PutsEncoderTailAndDecoderHeadOnOneStage) {
  const model::DeepNetConfig c = Shape(3, 1);
  absl::StatusOr<StagePlan> plan = PartitionStages(c, 2, UnitCosts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->slices[1].encoder.begin, 2);
  EXPECT_EQ(plan->slices[1].encoder.end, 3);
  EXPECT_EQ(plan->slices[1].decoder.end, 1);
  EXPECT_EQ(DescribePlan(*plan),
            "stage 0: encoder 0-1, predicted cost 2.0 (1.00 of mean)\n"
            "stage 1: encoder 2-2, decoder 0-0, predicted cost 2.0 (1.00 of mean)\n");
}

TEST(StagePartitionTest, LeavesSlackOnEarlierStagesDeterministically) {
  // 5 equal layers over 2 stages: the optimum 3 fits either way; the later stage takes 3.
  const model::DeepNetConfig c = Shape(5, 0);
  absl::StatusOr<StagePlan> plan = PartitionStages(c, 2, UnitCosts());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->predicted_cost, (std::vector<double>{2.0, 3.0}));
  absl::StatusOr<StagePlan> again = PartitionStages(c, 2, UnitCosts());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(DescribePlan(*again), DescribePlan(*plan));
  // All-zero costs still give every stage a layer.
  LayerCostModel zero;
  zero.encoder_layer = 0.0;
  zero.decoder_layer = 0.0;
  absl::StatusOr<StagePlan> free = PartitionStages(Shape(2, 2), 4, zero);
  ASSERT_TRUE(free.ok()) << free.status();
  ExpectValidPlan(*free, Shape(2, 2), zero, 4);
  EXPECT_DOUBLE_EQ(free->max_over_mean, 1.0);
}

TEST(StagePartitionTest, PartitionsThousandLayerModelOverManyStages) {
  const model::DeepNetConfig c = Shape(500, 500);
  const LayerCostModel costs = EstimateLayerCosts(c, 64, 64);
  absl::StatusOr<StagePlan> plan = PartitionStages(c, 128, costs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectValidPlan(*plan, c, costs, 128);
  EXPECT_GE(plan->max_over_mean, 1.0);
  absl::StatusOr<StagePlan> wide = PartitionStages(Shape(1000, 1000), 128, costs);
  ASSERT_TRUE(wide.ok()) << wide.status();
  ExpectValidPlan(*wide, Shape(1000, 1000), costs, 128);
}

// The config accepts exactly the stage counts PartitionStages can split the model into, for
// the cost model the trainer uses and for lopsided measured costs.
TEST(StagePartitionTest, JobConfigAcceptsExactlyThePartitionableStageCounts) {
  LayerCostModel lopsided;
  lopsided.encoder_layer = 0.0;
  lopsided.decoder_layer = 5.0;
  lopsided.source_embedding = 100.0;
  lopsided.output_layer = 1e6;
  for (const auto& [encoder, decoder] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 0}, {0, 1}, {1, 1}, {3, 0}, {0, 4}, {2, 3}, {6, 6}, {12, 1}}) {
    for (int64_t stages = -1; stages <= encoder + decoder + 2; ++stages) {
      SCOPED_TRACE(::testing::Message()
                   << encoder << "+" << decoder << " layers, " << stages << " stages");
      absl::StatusOr<job::JobConfig> config =
          job::ParseJobConfig("model: {encoder_layers: " + std::to_string(encoder) +
                              ", decoder_layers: " + std::to_string(decoder) +
                              ", d_model: 64, heads: 4, ffn_dim: 128, vocab_size: 300}\n" +
                              "parallel: {pipeline_stages: " + std::to_string(stages) + "}\n");
      for (const LayerCostModel& costs :
           {EstimateLayerCosts(config.ok() ? config->model : model::DeepNetConfig(), 32, 32),
            lopsided}) {
        model::DeepNetConfig shape =
            model::DeepNetConfig().encoder_layers(encoder).decoder_layers(decoder);
        absl::StatusOr<StagePlan> plan = PartitionStages(shape, static_cast<int>(stages), costs);
        EXPECT_EQ(config.ok(), plan.ok())
            << "config: " << config.status() << "\npartition: " << plan.status();
        if (plan.ok()) {
          EXPECT_EQ(plan->slices.size(), static_cast<size_t>(stages));
        }
        if (!config.ok()) {
          EXPECT_THAT(std::string(config.status().message()),
                      HasSubstr("parallel.pipeline_stages: must be"));
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepnet::pipeline
