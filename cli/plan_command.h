#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace deepnet::cli {

/// `deepnet plan JOB.yaml`: predicted memory per GPU and step time of the job on a P x D layout
/// at a precision (job/layout_plan.h), before anything is submitted. Unset numbers (0, empty)
/// come from the job file.
struct PlanCommand {
  std::string config_path;
  std::vector<std::string> overrides;  // "key.path=value", as `deepnet train --set`
  int64_t stages = 0;                  // P; 0: parallel.pipeline_stages
  int64_t replicas = 0;                // D; 0: parallel.data_parallel
  int64_t micro_batches = 0;           // m; 0: parallel.micro_batches
  int64_t tokens = 0;                  // Tokens per micro-batch and side; 0: data.max_tokens
  // fp32 | tf32 | bf16; empty: the job's runtime.precision as the trainer resolves it
  // (job::EffectivePrecision: auto is bf16 on cuda, fp32 on cpu).
  std::string precision;
  std::string gpu_memory;              // "80GB", "80GiB", "81559MiB"; empty: no verdict
  double tflops = -1.0;                // Peak matmul TFLOP/s per GPU; < 0: by precision
  double efficiency = 0.4;             // MFU of a stage's compute
  double allreduce_gbps = 100.0;
  double p2p_gbps = 25.0;
  int64_t vocab = 32000;        // When model.vocab_size is 0 (the tokenizer's)
  std::string format = "text";  // text | tsv
  // Replay the step under the job's schedule (cli/plan_simulation.h) and print it per stage.
  bool simulate = false;
  double p2p_latency_us = 10.0;  // Latency of one stage-to-stage transfer (--simulate).
};

/// "80GB" -> 80e9, "80GiB" -> 80 x 2^30, "81559MiB", "1.5TB", "4096" (bytes). -1 when invalid.
int64_t ParseByteSize(const std::string& text);

/// Prints the plan to `out`; problems (bad job file, bad option) to `err` with kExitBadInput.
/// Exit code 3 (kExitDoesNotFit) when --gpu-memory is given and the largest rank does not fit.
int RunPlan(const PlanCommand& command, std::ostream& out, std::ostream& err);

inline constexpr int kExitDoesNotFit = 3;

}  // namespace deepnet::cli
