// The torch-free memory estimate (job/memory_estimate.h) against real modules: its parameter
// counts must be exactly what DeepNet registers, for the whole model and for pipeline slices.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "job/memory_estimate.h"
#include "model/deepnet.h"
#include "model/model_slice.h"
#include "model/model_stats.h"

namespace deepnet::model {
namespace {

int64_t CountModelParameters(DeepNetImpl& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

ModelSlice SliceOf(const DeepNetConfig& c, int64_t begin, int64_t end) {
  const int64_t n = c.encoder_layers();
  ModelSlice s;
  s.encoder = {std::min(begin, n), std::min(end, n)};
  s.decoder = {std::max(begin, n) - n, std::max(end, n) - n};
  return s;
}

TEST(MemoryEstimateModelTest, ParameterCountsMatchBuiltModelsAndSlices) {
  for (NormVariant norm :
       {NormVariant::kDeepNorm, NormVariant::kPreLn, NormVariant::kDeepNormPreLn}) {
    for (auto [n, m] : {std::pair{3, 2}, {0, 3}, {2, 0}}) {
      for (int untie = 0; untie < 4; ++untie) {
        // untie 3: shared tables with learned positions.
        auto c = DeepNetConfig()
                     .encoder_layers(n)
                     .decoder_layers(m)
                     .d_model(12)
                     .heads(3)
                     .ffn_dim(20)
                     .vocab_size(37)
                     .norm(norm)
                     .max_positions(9)
                     .positions(untie == 3 ? PositionKind::kLearned : PositionKind::kSinusoidal)
                     .share_all_embeddings(untie == 0 || untie == 3)
                     .share_decoder_input_output(untie < 2 || untie == 3);
        const std::string what = std::string(ToString(norm)) + " N=" + std::to_string(n) +
                                 " M=" + std::to_string(m) + " untie=" + std::to_string(untie);
        DeepNet whole(c);
        EXPECT_EQ(job::ModelParameterCount(c), CountModelParameters(*whole)) << what;
        EXPECT_EQ(job::ModelParameterCount(c), ComputeModelStats(c).parameters) << what;
        job::MemoryLayout layout;
        layout.pipeline_stages = 2;
        const int64_t layers = n + m;
        for (int64_t stage = 0; stage < 2; ++stage) {
          DeepNet part(c, SliceOf(c, stage * layers / 2, (stage + 1) * layers / 2));
          EXPECT_EQ(job::EstimateStageMemory(c, layout, stage).parameters, CountModelParameters(*part))
              << what << " stage " << stage;
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepnet::model
