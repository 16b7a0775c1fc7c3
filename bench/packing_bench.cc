// deepnet_bench_packing: what sequence packing (data.pack_tokens) saves on a job's own data.
// For every training batch of the job (data.max_tokens, length-sorted batches as the trainer
// forms them) it counts the positions computed one pair per row and packed, and the attention
// score elements (S² + T² + T·S per row: packing trades padding for wider rows); then it times
// forward and backward of the same batches both ways (alternating, median of --runs) and reports
// real tokens per second. "no mask" is the share of batches whose sources have no padding
// (unpacked, their encoder attention runs unmasked: flash kernels on CUDA). Results are recorded in docs/PERFORMANCE.md; nothing is asserted.
//
// Example: deepnet_bench_packing --config examples/synthetic_small.yaml --pack 64,128 --runs 5

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "data/token_batcher.h"
#include "job/job_config.h"
#include "model/deepnet.h"
#include "model/initialization.h"
#include "pipeline/stage_compute.h"
#include "train/batch_tensors.h"
#include "train/training_data.h"

namespace deepnet::bench {
namespace {

struct Layout {
  int64_t tokens = 0;     // Real source + target tokens.
  int64_t positions = 0;  // Source + target positions computed (padding included).
  int64_t rows = 0;
  double scores = 0.0;    // Attention score elements per head: S² + T² + T·S per row.
  int64_t batches = 0;
  int64_t unmasked = 0;   // Batches whose sources have no padding (unpacked: no encoder mask).
};

void Count(const train::BatchTensors& b, Layout* out) {
  const double s = static_cast<double>(b.src.size(1)), t = static_cast<double>(b.tgt_in.size(1));
  const int64_t rows = b.src.size(0);
  out->tokens += b.src_tokens + b.tgt_tokens;
  out->positions += rows * (b.src.size(1) + b.tgt_in.size(1));
  out->rows += rows;
  out->scores += static_cast<double>(rows) * (s * s + t * t + t * s);
  ++out->batches;
  if (!b.src_segments.defined() && b.src_tokens == b.src.numel()) ++out->unmasked;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Run(int argc, char** argv) {
  CLI::App app{"Padding and throughput with and without sequence packing"};
  std::string config_path = "examples/synthetic_small.yaml";
  std::vector<int64_t> packs = {64, 128};
  int64_t timed_batches = 20, runs = 5, threads = 1;
  app.add_option("--config", config_path, "job YAML whose data and model are used");
  app.add_option("--pack", packs, "data.pack_tokens values to compare with no packing")
      ->delimiter(',');
  app.add_option("--batches", timed_batches, "batches per timed pass");
  app.add_option("--runs", runs, "timed passes per layout (median reported)");
  app.add_option("--threads", threads, "LibTorch intra-op threads");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(static_cast<int>(threads));

  auto config = job::LoadJobConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  auto data = train::LoadTrainingData(config->data);
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", std::string(data.status().message()).c_str());
    return 2;
  }
  const train::SpecialIds ids{data->tokenizer->pad_id(), data->tokenizer->bos_id()};
  data::TokenBatcherOptions batching;
  batching.max_tokens = config->data.max_tokens;
  batching.max_sentences = config->data.max_sentences;
  batching.seed = config->train.seed;

  std::vector<int64_t> layouts = {0};
  layouts.insert(layouts.end(), packs.begin(), packs.end());
  // Every batch of every pair, and the first `timed_batches` of the shuffled order for timing.
  std::vector<Layout> counts(layouts.size());
  std::vector<std::vector<train::BatchTensors>> timed(layouts.size());
  for (const train::LanguagePair& pair : data->pairs) {
    data::TokenBatcher batcher(&pair.train, batching);
    for (int64_t i = 0; i < batcher.batches_per_epoch(); ++i) {
      const std::vector<int64_t> indices = batcher.Next();
      const bool keep = static_cast<int64_t>(timed[0].size()) < timed_batches;
      for (size_t l = 0; l < layouts.size(); ++l) {
        train::BatchTensors b = train::MakeBatch(pair.train, indices, ids, torch::kCPU, layouts[l]);
        Count(b, &counts[l]);
        if (keep) timed[l].push_back(std::move(b));
      }
    }
  }

  model::DeepNetConfig mc = config->model;
  if (mc.vocab_size() == 0) mc.vocab_size(data->tokenizer->vocab_size());
  mc.pad_id(data->tokenizer->pad_id());
  model::DeepNet net(mc);
  model::InitializeParameters(*net, 1);
  pipeline::StageCompute compute(net.get(), 1, config->optim.label_smoothing);
  std::vector<std::vector<double>> seconds(layouts.size());
  for (int64_t r = 0; r < runs + 1; ++r) {  // The first pass warms up and is not counted.
    for (size_t l = 0; l < layouts.size(); ++l) {
      const auto start = std::chrono::steady_clock::now();
      for (const train::BatchTensors& b : timed[l]) {
        pipeline::LossSums sums;
        compute.Forward(0, train::ToMicroBatch(b, torch::kCPU), {}, 1.0, &sums);
        compute.Backward(0, {});
      }
      if (r > 0) seconds[l].push_back(Seconds(start));
    }
  }
  int64_t timed_tokens = 0;
  for (const auto& b : timed[0]) timed_tokens += b.src_tokens + b.tgt_tokens;
  std::printf("%s: %lld pairs in %lld language pairs, data.max_tokens %lld; %lld timed batches,"
              " %lld threads\n",
              config_path.c_str(), static_cast<long long>(data->train_examples()),
              static_cast<long long>(data->pairs.size()),
              static_cast<long long>(config->data.max_tokens),
              static_cast<long long>(timed_batches), static_cast<long long>(threads));
  std::printf("%-12s %10s %12s %9s %14s %10s %14s %8s\n", "pack_tokens", "rows", "positions",
              "padding", "attn scores", "no mask", "tokens/s", "ratio");
  double base_rate = 0.0;
  for (size_t l = 0; l < layouts.size(); ++l) {
    std::vector<double> s = seconds[l];
    std::sort(s.begin(), s.end());
    const double rate = static_cast<double>(timed_tokens) / s[s.size() / 2];
    if (l == 0) base_rate = rate;
    const Layout& c = counts[l];
    std::printf("%-12lld %10lld %12lld %8.1f%% %14.4g %9.1f%% %14.0f %8.3f\n",
                static_cast<long long>(layouts[l]), static_cast<long long>(c.rows),
                static_cast<long long>(c.positions),
                100.0 * (1.0 - static_cast<double>(c.tokens) / static_cast<double>(c.positions)),
                c.scores, 100.0 * static_cast<double>(c.unmasked) / static_cast<double>(c.batches),
                rate, rate / base_rate);
  }
  return 0;
}

}  // namespace
}  // namespace deepnet::bench

int main(int argc, char** argv) { return deepnet::bench::Run(argc, argv); }
