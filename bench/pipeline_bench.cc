// Pipeline- and data-parallel engine benchmark (docs/PERFORMANCE.md): run under a launcher,
//   mpirun -np P*D deepnet_bench_pipeline --stages P --replicas D --micro-batches m ...
// Rank 0 prints one JSON object: per-stage measured compute time and idle fraction next to the
// schedule's prediction (bubble), the predicted cost share of each stage against its measured
// compute (balance), peak live micro-batches against the schedule's bound (memory), and the
// data-parallel reduction time left exposed with and without overlapping it with backward.
#include <CLI/CLI.hpp>
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator_factory.h"
#include "comm/launch_env.h"
#include "pipeline/pipeline_engine.h"
#include "pipeline/step_simulator.h"
#include "train/runtime_threads.h"

namespace {

using deepnet::pipeline::MicroBatch;

struct Options {
  int64_t encoder_layers = 8, decoder_layers = 8, d_model = 256, heads = 4, ffn = 1024;
  int64_t vocab = 8000, batch = 16, source = 32, target = 32;
  int stages = 2, replicas = 1, micro = 8, steps = 4, warmup = 1;
  std::string schedule = "1f1b", backend = "gloo", rendezvous;
  double bucket_mb = 4.0;
  bool compare_overlap = false;
  bool measured = false;
  bool recompute = false;  // runtime.recompute: layer
  double dropout = 0.0;
};

std::vector<MicroBatch> RandomMicroBatches(const Options& o, int replica, int step) {
  std::vector<MicroBatch> out;
  torch::manual_seed(1000 * step + replica);
  for (int i = 0; i < o.micro; ++i) {
    MicroBatch b;
    b.src = torch::randint(4, o.vocab, {o.batch, o.source}, torch::kLong);
    b.tgt_in = torch::randint(4, o.vocab, {o.batch, o.target}, torch::kLong);
    b.tgt_out = torch::randint(4, o.vocab, {o.batch, o.target}, torch::kLong);
    b.src_tokens = o.batch * o.source;
    b.tgt_tokens = o.batch * o.target;
    out.push_back(std::move(b));
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Runs warm-up + timed steps; returns, per rank, the median over timed steps of each field.
absl::StatusOr<std::vector<deepnet::pipeline::RankTiming>> Measure(
    deepnet::pipeline::PipelineEngine& engine, const Options& o, int world) {
  std::vector<std::vector<deepnet::pipeline::RankTiming>> per_step;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    auto totals = engine.TrainStep(RandomMicroBatches(o, engine.replica(), s), s + 1, 1e-4);
    if (!totals.ok()) return totals.status();
    if (s >= o.warmup) per_step.push_back(totals->ranks);
  }
  std::vector<deepnet::pipeline::RankTiming> med(world);
  for (int r = 0; r < world; ++r) {
    std::vector<double> f[7];
    for (const auto& step : per_step) {
      const auto& t = step[r];
      f[0].push_back(t.step_s), f[1].push_back(t.compute_s), f[2].push_back(t.compute_cpu_s);
      f[3].push_back(t.wait_s), f[4].push_back(t.reduce_wait_s), f[5].push_back(t.peak_live);
      f[6].push_back(t.schedule_s);
    }
    auto& m = med[r];
    m.step_s = Median(f[0]), m.compute_s = Median(f[1]), m.compute_cpu_s = Median(f[2]);
    m.wait_s = Median(f[3]), m.reduce_wait_s = Median(f[4]), m.peak_live = Median(f[5]);
    m.schedule_s = Median(f[6]);
  }
  return med;
}

int Run(const Options& o) {
  auto env = deepnet::comm::DetectLaunchEnv();
  if (!env.ok()) {
    std::cerr << env.status().message() << "\n";
    return 2;
  }
  deepnet::train::ConfigureThreads(1, 1);  // One core per rank: the compute is the stage's.
  deepnet::train::KeepFreedMemoryForReuse();
  auto backend = deepnet::comm::ParseCommBackend(o.backend);
  if (!backend.ok()) {
    std::cerr << backend.status().message() << "\n";
    return 2;
  }
  deepnet::comm::CommOptions comm;
  comm.backend = *backend;
  comm.rendezvous = o.rendezvous;
  auto world = deepnet::comm::OpenWorld(comm, *env);
  if (!world.ok()) {
    std::cerr << world.status().message() << "\n";
    return 1;
  }
  deepnet::pipeline::EngineOptions e;
  e.model = deepnet::model::DeepNetConfig()
                .encoder_layers(o.encoder_layers)
                .decoder_layers(o.decoder_layers)
                .d_model(o.d_model)
                .heads(o.heads)
                .ffn_dim(o.ffn)
                .vocab_size(o.vocab)
                .dropout(o.dropout)
                .max_positions(std::max(o.source, o.target) + 1);
  e.stages = o.stages;
  e.replicas = o.replicas;
  e.schedule = *deepnet::pipeline::ParseSchedule(o.schedule);
  e.bucket_bytes = static_cast<int64_t>(o.bucket_mb * 1024 * 1024);
  e.source_length = o.source;
  e.target_length = o.target;
  e.batch_sentences = o.batch;
  e.measure_layer_costs = o.measured;
  e.recompute_layers = o.recompute;
  nlohmann::json out;
  for (bool overlap : o.compare_overlap ? std::vector<bool>{false, true} : std::vector<bool>{true}) {
    e.overlap_reduction = overlap;
    auto engine = deepnet::pipeline::PipelineEngine::Create(e, world->comm.get());
    if (!engine.ok()) {
      std::cerr << engine.status().message() << "\n";
      return 1;
    }
    auto timing = Measure(**engine, o, world->comm->size());
    if (!timing.ok()) {
      std::cerr << timing.status().message() << "\n";
      return 1;
    }
    nlohmann::json stages = nlohmann::json::array();
    const auto& plan = (*engine)->plan();
    // The simulator's step from this run's own per-stage compute (replica 0; backward taken
    // as 2 x forward, transfers as free: one host, loopback), beside the measured schedule.
    deepnet::pipeline::StepSimulationInput sim_in;
    sim_in.schedule = *deepnet::pipeline::BuildSchedule(e.schedule, o.stages, o.micro);
    sim_in.boundary_bytes.assign(o.stages, 0.0);
    for (int s = 0; s < o.stages; ++s) {
      const double per_micro = (*timing)[s * o.replicas].compute_s / o.micro;
      sim_in.costs.push_back({per_micro / 3.0, 2.0 * per_micro / 3.0});
    }
    const auto simulated = deepnet::pipeline::SimulateStep(sim_in);
    double cost_sum = 0.0;
    for (double c : plan.predicted_cost) cost_sum += c;
    for (int s = 0; s < o.stages; ++s) {
      nlohmann::json replicas = nlohmann::json::array();
      for (int r = 0; r < o.replicas; ++r) {
        const auto& t = (*timing)[s * o.replicas + r];
        replicas.push_back({{"step_s", t.step_s}, {"compute_s", t.compute_s},
                            {"compute_cpu_s", t.compute_cpu_s}, {"wait_s", t.wait_s},
                            {"reduce_wait_s", t.reduce_wait_s},
                            {"schedule_s", t.schedule_s},
                            // Idle within the schedule: what the bubble formula predicts.
                            {"idle_fraction", 1.0 - t.compute_s / t.schedule_s},
                            {"cpu_per_wall", t.compute_cpu_s / t.compute_s},
                            {"peak_live_micro_batches", t.peak_live}});
      }
      stages.push_back({{"slice", plan.slices[s].ToString()},
                        {"predicted_cost_share", plan.predicted_cost[s] / cost_sum},
                        {"replicas", replicas}});
    }
    double measured_schedule_s = 0.0;
    for (int s = 0; s < o.stages; ++s) {
      measured_schedule_s = std::max(measured_schedule_s, (*timing)[s * o.replicas].schedule_s);
    }
    out[overlap ? "overlap" : "no_overlap"] = {
        {"stages", stages},
        {"predicted_max_over_mean", plan.max_over_mean},
        {"measured_schedule_s", measured_schedule_s},
        {"simulated_schedule_s", simulated.ok() ? simulated->step_s : -1.0}};
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  if (world->comm->rank() == 0) {
    out["config"] = {{"encoder_layers", o.encoder_layers}, {"decoder_layers", o.decoder_layers},
                     {"d_model", o.d_model}, {"stages", o.stages}, {"replicas", o.replicas},
                     {"micro_batches", o.micro}, {"schedule", o.schedule},
                     {"backend", o.backend}, {"bucket_mb", o.bucket_mb},
                     {"partition", o.measured ? "measured" : "flops"},
                     {"recompute", o.recompute ? "layer" : "none"}, {"dropout", o.dropout},
                     {"batch", o.batch}, {"source", o.source}, {"target", o.target}};
    out["predicted_bubble"] = deepnet::pipeline::PredictedBubbleFraction(o.stages, o.micro);
    out["rank0_max_rss_mb"] = usage.ru_maxrss / 1024.0;
    std::cout << out.dump() << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  deepnet::train::ReexecWithFasterOpenBlasKernels(argv);
  Options o;
  CLI::App app{"DeepNet pipeline/data-parallel engine benchmark (docs/PERFORMANCE.md)"};
  app.add_option("--encoder-layers", o.encoder_layers);
  app.add_option("--decoder-layers", o.decoder_layers);
  app.add_option("--d-model", o.d_model);
  app.add_option("--heads", o.heads);
  app.add_option("--ffn-dim", o.ffn);
  app.add_option("--vocab", o.vocab);
  app.add_option("--batch", o.batch, "sentences per micro-batch");
  app.add_option("--source", o.source);
  app.add_option("--target", o.target);
  app.add_option("--stages", o.stages);
  app.add_option("--replicas", o.replicas);
  app.add_option("--micro-batches", o.micro);
  app.add_option("--steps", o.steps, "timed steps (median reported)");
  app.add_option("--warmup", o.warmup);
  app.add_option("--schedule", o.schedule)->check(CLI::IsMember({"1f1b", "gpipe"}));
  app.add_option("--backend", o.backend)->check(CLI::IsMember({"gloo", "mpi"}));
  app.add_option("--rendezvous", o.rendezvous);
  app.add_option("--bucket-mb", o.bucket_mb);
  app.add_flag("--compare-overlap", o.compare_overlap,
               "also run with reductions started after the schedule");
  app.add_flag("--measured-costs", o.measured, "balance stages by timed layer costs");
  app.add_flag("--recompute", o.recompute, "recompute each layer in backward (runtime.recompute)");
  app.add_option("--dropout", o.dropout, "model dropout (0 by default)");
  CLI11_PARSE(app, argc, argv);
  return Run(o);
}
