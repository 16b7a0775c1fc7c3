#pragma once

#include <torch/types.h>

#include "absl/status/statusor.h"
#include "job/job_config.h"
#include "model/deepnet_config.h"
#include "pipeline/pipeline_engine.h"

namespace deepnet::train {

/// The PipelineEngine options a job runs with: the model `model` (the job's, with the
/// tokenizer's vocabulary and pad id), the seed, the P x D layout, schedule, bucket size, loss
/// and optimiser settings, the runtime settings that change how a stage computes, and `device`.
/// The stage cost model's typical lengths and sentences are the caller's (they come from the
/// data). The trainer and deepnet_bench_gpu both build their engine from it, so the benchmark
/// runs what a job runs. Errors name the field (parallel.schedule).
absl::StatusOr<pipeline::EngineOptions> EngineOptionsFor(const job::JobConfig& config,
                                                         const model::DeepNetConfig& model,
                                                         const torch::Device& device);

}  // namespace deepnet::train
