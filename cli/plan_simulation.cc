#include "cli/plan_simulation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "job/memory_estimate.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/stage_partition.h"
#include "pipeline/step_simulator.h"

namespace deepnet::cli {

absl::StatusOr<std::string> SimulatePlannedStep(const model::DeepNetConfig& c,
                                                const job::PlanOptions& o, job::Schedule schedule,
                                                double latency_s) {
  if (o.peak_tflops <= 0.0 || o.efficiency <= 0.0) {
    return absl::InvalidArgumentError("--simulate needs a rate: --tflops and --efficiency > 0");
  }
  const int64_t n = std::max<int64_t>(c.encoder_layers(), 0);
  const int64_t layers = n + std::max<int64_t>(c.decoder_layers(), 0);
  const int stages = static_cast<int>(
      std::clamp<int64_t>(o.layout.pipeline_stages, 1, std::max<int64_t>(layers, 1)));
  const int micro = static_cast<int>(std::max<int64_t>(o.layout.micro_batches, 1));
  const int64_t replicas = std::max<int64_t>(o.replicas, 1);
  const int64_t tokens = std::max<int64_t>(o.layout.tokens_per_micro_batch, 1);
  const double rate = o.peak_tflops * 1e12 * o.efficiency;
  const double element = static_cast<double>(job::BytesPerElement(o.layout.precision));

  pipeline::StepSimulationInput in;
  auto built = pipeline::BuildSchedule(schedule == job::Schedule::kGPipe
                                           ? pipeline::ScheduleKind::kGPipe
                                           : pipeline::ScheduleKind::k1F1B,
                                       stages, micro);
  if (!built.ok()) return built.status();
  in.schedule = *std::move(built);
  in.link.latency_s = latency_s;
  in.link.bytes_per_s = o.p2p_gbps * 1e9;
  // The split the engine makes (parallel.partition: flops): balanced by the FLOP cost model
  // at the plan's sequence length.
  const int64_t sequence = std::max<int64_t>(o.layout.sequence_length, 1);
  auto split = pipeline::PartitionStages(c, stages,
                                         pipeline::EstimateLayerCosts(c, sequence, sequence));
  if (!split.ok()) return split.status();
  std::vector<job::StageMemory> memory;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int s = 0; s < stages; ++s) {
    const model::ModelSlice& slice = split->slices[s];
    const int64_t begin = slice.encoder.empty() ? n + slice.decoder.begin : slice.encoder.begin;
    const int64_t end = slice.decoder.empty() ? slice.encoder.end : n + slice.decoder.end;
    ranges.emplace_back(begin, end);
    const double forward =
        job::ForwardFlops(c, begin, end, tokens, o.layout.sequence_length) / rate;
    in.costs.push_back(pipeline::StageCost{forward, 2.0 * forward});
    // What crosses the boundary after this stage (pipeline::BoundaryShapes): one hidden state,
    // and the encoder output beside it once the decoder has begun.
    const double streams = (n > 0 && end > n) ? 2.0 : 1.0;
    in.boundary_bytes.push_back(streams * static_cast<double>(tokens) *
                                static_cast<double>(c.d_model()) * element);
    memory.push_back(job::EstimateStageMemoryOfLayers(c, o.layout, s, begin, end));
    const double reduction =
        replicas > 1 && o.allreduce_gbps > 0.0
            ? 2.0 * static_cast<double>(replicas - 1) / static_cast<double>(replicas) *
                  static_cast<double>(memory.back().gradient_bytes) / (o.allreduce_gbps * 1e9)
            : 0.0;
    in.reduction_s.push_back(reduction);
  }
  auto sim = pipeline::SimulateStep(in);
  if (!sim.ok()) return sim.status();
  double busiest = 0.0;
  for (double t : sim->compute_s) busiest = std::max(busiest, t);
  std::string out = absl::StrFormat(
      "simulated step (%s, %d stage(s), %d micro-batch(es); transfers %.1f us + bytes at %.0f "
      "GB/s; reductions at %.0f GB/s): %.3f s; pipeline efficiency %.1f%% (busiest stage's "
      "compute / step)\n",
      schedule == job::Schedule::kGPipe ? "gpipe" : "1f1b", stages, micro, latency_s * 1e6,
      o.p2p_gbps, o.allreduce_gbps, sim->step_s, 100.0 * busiest / sim->step_s);
  absl::StrAppend(&out, absl::StrFormat("%-6s %-10s %10s %10s %8s %5s %12s\n", "stage", "layers",
                                        "compute_s", "finish_s", "bubble", "live", "memory"));
  for (int s = 0; s < stages; ++s) {
    absl::StrAppend(
        &out, absl::StrFormat("%-6d %-10s %10.4f %10.4f %7.1f%% %5d %12s\n", s,
                              absl::StrCat(ranges[s].first, "-", ranges[s].second - 1),
                              sim->compute_s[s], sim->finish_s[s], 100.0 * sim->bubble[s],
                              sim->peak_live_micro_batches[s],
                              job::FormatBytes(memory[s].total_bytes)));
  }
  return out;
}

}  // namespace deepnet::cli
