#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/pipeline_engine.h"
#include "profiling/op_census.h"

namespace deepnet::pipeline {

/// The op census (profiling/op_census.h) of one training step of the engine, one stage and one
/// replica, after a warm-up step: the whole step, and one encoder layer's and one decoder
/// layer's share of it, found as the difference between the step of the model with one more
/// encoder (decoder) layer and the step of the model as given. Device-independent figures of
/// what a layer costs per micro-batch: ATen ops dispatched and bytes of temporaries (CPU).
struct StepCensus {
  profiling::CensusResult step;           // The model as given.
  profiling::CensusResult encoder_layer;  // One more encoder layer's share (empty without encoder).
  profiling::CensusResult decoder_layer;  // One more decoder layer's share (empty without decoder).
  int micro_batches = 0;                  // Per step; divide the layer shares by it.
};

/// Random token batches without padding: `sentences` rows of `source_length` and
/// `target_length` tokens per micro-batch, `micro_batches` per step.
struct CensusBatches {
  int64_t sentences = 4;
  int64_t source_length = 16;
  int64_t target_length = 16;
  int micro_batches = 2;
};

/// `batches.micro_batches` micro-batches of random word ids (no padding, token counts set) from
/// a generator seeded with `seed`, on `device`: what benchmarks and the census train on.
std::vector<MicroBatch> RandomMicroBatches(int64_t vocab, const CensusBatches& batches,
                                           const torch::Device& device, uint64_t seed);

/// Runs the census on `options.device` (any; ops are counted on the host, bytes for the CPU
/// allocator only). The caller chooses the code path beforehand (fused CPU kernels, attention
/// backend). Errors: the engine's.
absl::StatusOr<StepCensus> MeasureStepCensus(const EngineOptions& options,
                                             const CensusBatches& batches);

}  // namespace deepnet::pipeline
