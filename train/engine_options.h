#pragma once

#include <torch/types.h>

#include "comm/communicator.h"
#include "job/job_config.h"
#include "model/attention.h"
#include "model/deepnet_config.h"
#include "model/precision.h"
#include "pipeline/pipeline_engine.h"
#include "pipeline/pipeline_schedule.h"

namespace deepnet::train {

/// The PipelineEngine options a job runs with: the model `model` (the job's, with the
/// tokenizer's vocabulary and pad id), the seed, the P x D layout, schedule, bucket size, loss
/// and optimiser settings, the runtime settings that change how a stage computes, and `device`.
/// The stage cost model's typical lengths and sentences are the caller's (they come from the
/// data). The trainer and deepnet_bench_gpu both build their engine from it, so the benchmark
/// runs what a job runs.
pipeline::EngineOptions EngineOptionsFor(const job::JobConfig& config,
                                         const model::DeepNetConfig& model,
                                         const torch::Device& device);

// The job's choices (parsed once, job/job_choices.h) as the enums of the rooms that run them.
pipeline::ScheduleKind ScheduleKindOf(job::Schedule schedule);
/// `precision` resolved (job::EffectivePrecision); kAuto is taken as fp32.
model::ComputePrecision ComputePrecisionOf(job::PrecisionChoice precision);
model::AttentionBackend AttentionBackendOf(job::AttentionChoice attention);
comm::CommBackendKind CommBackendOf(job::Backend backend);

}  // namespace deepnet::train
