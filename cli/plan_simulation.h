#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "job/job_choices.h"
#include "job/layout_plan.h"
#include "model/deepnet_config.h"

namespace deepnet::cli {

/// `deepnet plan --simulate`: the step replayed stage by stage under the job's schedule
/// (pipeline::SimulateStep) instead of the closed-form bubble, on the stages the engine would
/// cut (pipeline::PartitionStages, FLOP cost model): each stage's forward and
/// backward from its FLOPs at the plan's rate (backward = 2 x forward), each boundary transfer
/// `latency_s` + its bytes at --p2p-gbps, each stage's data-parallel reduction of its own
/// gradients at --allreduce-gbps after its last backward. Returns the report (text); needs a
/// rate (options.peak_tflops > 0).
absl::StatusOr<std::string> SimulatePlannedStep(const model::DeepNetConfig& model,
                                                const job::PlanOptions& options,
                                                job::Schedule schedule, double latency_s);

}  // namespace deepnet::cli
