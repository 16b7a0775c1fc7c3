#pragma once

// `deepnet plan`: per-rank memory and step time of a job on a P x D layout at a precision,
// predicted from the config alone, so that a user knows before submitting whether a layout fits
// the GPUs and about how fast it will run. No LibTorch. The formulas are in docs/GPU.md
// ("deepnet plan"); memory is EstimateMemory's (job/memory_estimate.h).

#include <cstdint>
#include <string>

#include "job/memory_estimate.h"
#include "model/deepnet_config.h"

namespace deepnet::job {

struct PlanOptions {
  // Precision, P, micro-batches m, tokens per micro-batch (each side) and sequence length.
  MemoryLayout layout;
  // D: data-parallel replicas of every stage.
  int64_t replicas = 1;
  // Memory of one GPU; 0: no verdict on whether the layout fits.
  int64_t gpu_memory_bytes = 0;
  // Matrix-product rate of one GPU at the precision, TFLOP/s (a large matmul's, as
  // deepnet_bench_gpu measures it); 0: no time prediction.
  double peak_tflops = 0.0;
  // Fraction of peak_tflops that a stage's forward and backward achieve (its MFU).
  double efficiency = 0.4;
  // Bus bandwidth of the data-parallel gradient all-reduce (ring), GB/s per GPU.
  double allreduce_gbps = 100.0;
  // Bandwidth of one stage-to-stage transfer (activations forward, gradients back), GB/s.
  double p2p_gbps = 25.0;
};

struct LayoutPlan {
  MemoryEstimate memory;
  bool fits = true;  // Largest rank's estimate <= gpu_memory_bytes (true when that is 0).
  // Training FLOPs (forward + backward = 3 x forward matmul FLOPs, attention included) of one
  // micro-batch: the whole model, and the stage with the most.
  double model_flops_per_micro_batch = 0.0;
  double stage_flops_per_micro_batch = 0.0;
  int64_t slowest_stage = 0;
  // Seconds (all 0 without peak_tflops).
  double stage_s_per_micro_batch = 0.0;  // The slowest stage's forward + backward.
  double pipeline_s = 0.0;               // (m + P - 1) x stage_s_per_micro_batch.
  double bubble_fraction = 0.0;          // (P - 1) / (m + P - 1).
  double p2p_s = 0.0;                    // 2 m boundary transfers of the slowest stage.
  double allreduce_s = 0.0;              // 2 (D - 1) / D x its gradient bytes / bandwidth.
  double step_s = 0.0;                   // pipeline_s + p2p_s + allreduce_s (no overlap).
  // Target tokens of one step (m x D x tokens per micro-batch) and their rate.
  int64_t tokens_per_step = 0;
  double tokens_per_s = 0.0;
  // Useful FLOP/s per GPU over the step: model FLOPs x m x D / step_s / (P x D).
  double tflops_per_gpu = 0.0;
};

/// Forward matmul FLOPs of one micro-batch of `tokens` source and `tokens` target tokens with
/// sequences of `sequence` positions on global layers [begin, end) of the order [encoder 0..N-1,
/// decoder 0..M-1], the output projection included when `end` is the last layer. Mirrors
/// model/model_stats.cc (2 per weight per token; 4 d per attended position; causal
/// self-attention sees (T + 1) / 2 positions on average).
double ForwardFlops(const model::DeepNetConfig& model, int64_t begin, int64_t end, int64_t tokens,
                    int64_t sequence);

LayoutPlan PlanLayout(const model::DeepNetConfig& model, const PlanOptions& options);

/// The plan as text for people, or as `key<TAB>value` lines (format "tsv").
std::string FormatPlan(const LayoutPlan& plan, const PlanOptions& options,
                       const std::string& format);

}  // namespace deepnet::job
