#pragma once

#include <string>

#include "job/job_config.h"
#include "job/memory_estimate.h"
#include "model/deepnet_config.h"
#include "model/model_stats.h"

namespace deepnet::cli {

/// `deepnet inspect` output for a shape: alpha/beta per stack, parameter counts, training
/// FLOPs per token, memory for parameters, gradients and Adam state, and the per-rank memory
/// estimate of the job's parallel layout (job/memory_estimate.h). Nothing is allocated.
/// JSON keys include encoder.alpha, encoder.beta, decoder.alpha, decoder.beta (null where a
/// stack is absent) and parameters.
/// `layout` sets the per-rank memory estimate: parallel layout, schedule, tokens per
/// micro-batch; the default is a default job's.
std::string InspectJson(const model::DeepNetConfig& config, const model::StatsOptions& options,
                        const job::MemoryLayout& layout = job::LayoutOf(job::JobConfig{}));
std::string InspectText(const model::DeepNetConfig& config, const model::StatsOptions& options,
                        const job::MemoryLayout& layout = job::LayoutOf(job::JobConfig{}));

}  // namespace deepnet::cli
