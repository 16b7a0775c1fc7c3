// deepnet_bench_diagnostics: what per-layer diagnostics (train.diagnostics_every) and the
// model-update probe cost per step on this machine. One engine (one process, the 1 x 1 layout)
// trains the same batches four ways, interleaved step by step: plain steps, steps that also
// record per-layer gradient norms, steps that also run the diagnostic forward
// (PipelineEngine::Diagnose, a train.diagnostics_every step) on an 8-sentence probe batch, and
// steps followed by the probe (PipelineEngine::Probe) on the same batch. Reports medians over
// --runs of the mean step time of each kind (wall and process CPU seconds; CPU time is robust
// to other load on a shared machine) and each kind's ratio to plain steps. Results:
// docs/PERFORMANCE.md.
//
// Example: deepnet_bench_diagnostics --layers 6 --d-model 256 --steps 6 --runs 5

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <vector>

#include "comm/loopback_communicator.h"
#include "pipeline/pipeline_engine.h"

namespace {

using deepnet::pipeline::MicroBatch;

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

MicroBatch RandomBatch(int64_t sentences, int64_t length, int64_t vocab) {
  MicroBatch b;
  b.src = torch::randint(4, vocab, {sentences, length}, torch::kLong);
  b.tgt_in = torch::randint(4, vocab, {sentences, length}, torch::kLong);
  b.tgt_out = torch::randint(4, vocab, {sentences, length}, torch::kLong);
  b.src_tokens = b.src.numel();
  b.tgt_tokens = b.tgt_out.numel();
  return b;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cost of per-layer diagnostics and the update-norm probe per training step"};
  int64_t layers = 6, d_model = 256, sentences = 16, length = 32, vocab = 8000, steps = 6, runs = 5,
          threads = 1;
  app.add_option("--layers", layers, "encoder and decoder layers (N-N)");
  app.add_option("--d-model", d_model, "model width (ffn 4x, heads d/64)");
  app.add_option("--sentences", sentences, "training batch sentences");
  app.add_option("--length", length, "tokens per sentence (source and target)");
  app.add_option("--vocab", vocab, "vocabulary");
  app.add_option("--steps", steps, "steps of each kind per run");
  app.add_option("--runs", runs, "runs (the median is reported)");
  app.add_option("--threads", threads, "LibTorch intra-op threads");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(static_cast<int>(threads));
  torch::manual_seed(1);

  deepnet::pipeline::EngineOptions o;
  o.model = deepnet::model::DeepNetConfig()
                .encoder_layers(layers)
                .decoder_layers(layers)
                .d_model(d_model)
                .heads(std::max<int64_t>(1, d_model / 64))
                .ffn_dim(4 * d_model)
                .vocab_size(vocab)
                .dropout(0.1)
                .max_positions(std::max<int64_t>(64, length));
  o.clip_norm = 1.0;
  deepnet::comm::LoopbackCommunicator world;
  auto engine = deepnet::pipeline::PipelineEngine::Create(o, &world);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  deepnet::pipeline::PipelineEngine& e = **engine;
  const MicroBatch probe = RandomBatch(8, length, vocab);
  if (!e.Probe(probe).ok()) return 1;  // The reference F(x, theta_0).
  // Kinds, interleaved step by step on the same batches: 0 plain, 1 + per-layer gradient
  // norms only, 2 + gradient norms and the diagnostic forward (a diagnostics step), 3 + the
  // probe (a probe step).
  constexpr int kKinds = 4;
  const char* names[kKinds] = {"plain", "grad_norms", "diagnostics", "probe"};
  std::vector<std::vector<double>> wall(kKinds), cpu(kKinds);
  int64_t step = 0;
  for (int64_t run = 0; run < runs + 1; ++run) {  // Run 0 warms up.
    std::vector<double> w(kKinds, 0.0), c(kKinds, 0.0);
    for (int64_t i = 0; i < steps; ++i) {
      const MicroBatch batch = RandomBatch(sentences, length, vocab);
      for (int kind = 0; kind < kKinds; ++kind) {
        const double w0 = WallSeconds(), c0 = CpuSeconds();
        if (kind == 1 || kind == 2) e.MeasureLayerGradients();
        if (!e.TrainStep({batch}, ++step, 1e-4).ok()) return 1;
        if (kind == 2 && !e.Diagnose(probe).ok()) return 1;  // Also clears kind 1's flag.
        if (kind == 3 && !e.Probe(probe).ok()) return 1;
        w[kind] += WallSeconds() - w0;
        c[kind] += CpuSeconds() - c0;
      }
    }
    if (run == 0) continue;
    for (int kind = 0; kind < kKinds; ++kind) {
      wall[kind].push_back(w[kind] / steps);
      cpu[kind].push_back(c[kind] / steps);
    }
  }
  std::printf(
      "{\"shape\":\"%lldL-%lldL d%lld\",\"tokens_per_step\":%lld,\"probe_tokens\":%lld,"
      "\"threads\":%lld,\"runs\":%lld,\"steps\":%lld",
      static_cast<long long>(layers), static_cast<long long>(layers),
      static_cast<long long>(d_model), static_cast<long long>(2 * sentences * length),
      static_cast<long long>(2 * 8 * length), static_cast<long long>(threads),
      static_cast<long long>(runs), static_cast<long long>(steps));
  const double base = Median(cpu[0]);
  for (int kind = 0; kind < kKinds; ++kind) {
    std::printf(",\"%s_cpu_s\":%.4f,\"%s_wall_s\":%.4f,\"%s_ratio_cpu\":%.3f", names[kind],
                Median(cpu[kind]), names[kind], Median(wall[kind]), names[kind],
                Median(cpu[kind]) / base);
  }
  std::printf("}\n");
  return 0;
}
