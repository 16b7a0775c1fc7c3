#include "train/engine_options.h"

#include "absl/strings/str_cat.h"
#include "model/precision.h"

namespace deepnet::train {

absl::StatusOr<pipeline::EngineOptions> EngineOptionsFor(const job::JobConfig& config,
                                                         const model::DeepNetConfig& model,
                                                         const torch::Device& device) {
  const auto& par = config.parallel;
  pipeline::EngineOptions engine;
  engine.model = model;
  engine.seed = config.train.seed;
  engine.stages = par.pipeline_stages;
  engine.replicas = par.data_parallel;
  auto schedule = pipeline::ParseSchedule(par.schedule);
  if (!schedule.ok()) return schedule.status();
  engine.schedule = *schedule;
  engine.bucket_bytes = static_cast<int64_t>(par.bucket_mb * 1024 * 1024);
  engine.label_smoothing = config.optim.label_smoothing;
  engine.adam.beta1 = config.optim.beta1;
  engine.adam.beta2 = config.optim.beta2;
  engine.adam.eps = config.optim.eps;
  engine.adam.weight_decay = config.optim.weight_decay;
  engine.clip_norm = config.optim.clip_norm;
  engine.device = device;
  engine.measure_layer_costs = par.partition == "measured";
  engine.recompute_layers = config.runtime.recompute == "layer";
  auto precision = model::ParseComputePrecision(job::EffectivePrecision(config.runtime));
  if (!precision) {
    return absl::InvalidArgumentError(absl::StrCat("runtime.precision: unknown value '",
                                                   config.runtime.precision, "'"));
  }
  engine.precision = *precision;
  if (engine.precision == model::ComputePrecision::kBf16) engine.boundary_dtype = torch::kBFloat16;
  if (config.runtime.grad_reduce == "bf16") engine.grad_reduce_dtype = torch::kBFloat16;
  return engine;
}

}  // namespace deepnet::train
