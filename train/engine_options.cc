#include "train/engine_options.h"

namespace deepnet::train {

pipeline::ScheduleKind ScheduleKindOf(job::Schedule schedule) {
  switch (schedule) {
    case job::Schedule::k1F1B:
      return pipeline::ScheduleKind::k1F1B;
    case job::Schedule::kGPipe:
      return pipeline::ScheduleKind::kGPipe;
  }
  return pipeline::ScheduleKind::k1F1B;
}

model::ComputePrecision ComputePrecisionOf(job::PrecisionChoice precision) {
  switch (precision) {
    case job::PrecisionChoice::kBf16:
      return model::ComputePrecision::kBf16;
    case job::PrecisionChoice::kTf32:
      return model::ComputePrecision::kTf32;
    case job::PrecisionChoice::kAuto:
    case job::PrecisionChoice::kFp32:
      return model::ComputePrecision::kFp32;
  }
  return model::ComputePrecision::kFp32;
}

model::AttentionBackend AttentionBackendOf(job::AttentionChoice attention) {
  switch (attention) {
    case job::AttentionChoice::kAuto:
      return model::AttentionBackend::kAuto;
    case job::AttentionChoice::kSdpa:
      return model::AttentionBackend::kSdpa;
    case job::AttentionChoice::kReference:
      return model::AttentionBackend::kReference;
  }
  return model::AttentionBackend::kAuto;
}

comm::CommBackendKind CommBackendOf(job::Backend backend) {
  switch (backend) {
    case job::Backend::kGloo:
      return comm::CommBackendKind::kGloo;
    case job::Backend::kMpi:
      return comm::CommBackendKind::kMpi;
    case job::Backend::kNccl:
      return comm::CommBackendKind::kNccl;
  }
  return comm::CommBackendKind::kGloo;
}

pipeline::EngineOptions EngineOptionsFor(const job::JobConfig& config,
                                         const model::DeepNetConfig& model,
                                         const torch::Device& device) {
  const auto& par = config.parallel;
  pipeline::EngineOptions engine;
  engine.model = model;
  engine.seed = config.train.seed;
  engine.stages = par.pipeline_stages;
  engine.replicas = par.data_parallel;
  engine.schedule = ScheduleKindOf(par.schedule);
  engine.bucket_bytes = static_cast<int64_t>(par.bucket_mb * 1024 * 1024);
  engine.label_smoothing = config.optim.label_smoothing;
  engine.adam.beta1 = config.optim.beta1;
  engine.adam.beta2 = config.optim.beta2;
  engine.adam.eps = config.optim.eps;
  engine.adam.weight_decay = config.optim.weight_decay;
  engine.clip_norm = config.optim.clip_norm;
  engine.device = device;
  engine.measure_layer_costs = par.partition == job::Partition::kMeasured;
  engine.recompute_layers = config.runtime.recompute == job::Recompute::kLayer;
  engine.precision = ComputePrecisionOf(job::EffectivePrecision(config.runtime));
  if (engine.precision == model::ComputePrecision::kBf16) engine.boundary_dtype = torch::kBFloat16;
  if (config.runtime.grad_reduce == job::GradReduce::kBf16) {
    engine.grad_reduce_dtype = torch::kBFloat16;
  }
  return engine;
}

}  // namespace deepnet::train
