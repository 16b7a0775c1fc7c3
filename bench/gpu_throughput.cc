// deepnet_bench_gpu: training throughput of the trainer's own step (PipelineEngine::TrainStep,
// one stage, one replica) on a GPU: tokens/s, achieved TFLOP/s and MFU against the device's bf16
// matrix-product rate measured in the same run (a large bf16 matmul), and peak memory, for
// 6L-6L and 18L-18L at d_model 1024 (FFN 4096, 16 heads) and the flagship's per-stage slice,
// micro-batches of 4k-16k tokens per side, bf16 (fp32 and tf32 for reference). Run by
// scripts/gpu_check.sh; the method and results are in docs/GPU.md and docs/PERFORMANCE.md.
//
// Each configuration is a job file's text parsed by the job schema with `--set` overrides
// (runtime.precision, runtime.attention, runtime.recompute, ...), and the engine is built from it
// by train::EngineOptionsFor, exactly as `deepnet train` does: a field this build's schema does
// not know is reported and its configuration skipped, never silently ignored.
//
// FLOPs counted (job::ForwardFlops, the formula of `deepnet plan`): forward matmul FLOPs, 2 per
// weight per token plus 4 d per attended position (attention scores and weighted sum; causal
// self-attention sees (T+1)/2 positions), output projection included; training = 3 x forward.
// Recomputation is not counted as useful work. MFU = counted FLOP/s / measured bf16 matmul rate.
//
// Without a GPU (--tiny or no CUDA) it runs a 2L-2L d64 model on the CPU in seconds and prints
// the same table, the rate then being an fp32 CPU matmul's.
//
// Configurations with several micro-batches per step (the flagship trains 2k-token micro-batches,
// 64 per step) run them through the engine's schedule as a real job does.
//
// --profile DIR runs one more step of each configuration under a profiler and writes its Chrome
// trace to DIR/<config>.trace.json: on CUDA LibTorch's Kineto profiler (GPU kernel time per kind
// of work: GEMM, attention, element-wise, norm, optimizer, copies, and the GPU's idle time in the
// step), on the CPU the op census (profiling/op_census.h: host time per kind). Both runs also
// count the ATen ops the step dispatched.
//
// Example: deepnet_bench_gpu --json out.json --jobs-dir jobs/ --set runtime.attention=sdpa

#include <CLI/CLI.hpp>
#include <sys/resource.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#ifdef DEEPNET_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#include <torch/csrc/autograd/profiler_kineto.h>
#define DEEPNET_BENCH_KINETO 1
#endif
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/loopback_communicator.h"
#include "job/job_config.h"
#include "job/layout_plan.h"
#include "pipeline/pipeline_engine.h"
#include "pipeline/step_census.h"
#include "profiling/op_census.h"
#include "train/engine_options.h"

namespace deepnet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;


struct Shape {
  int64_t d_model, heads, ffn, sequence;
};
constexpr Shape kGpuShape{1024, 16, 4096, 256};
constexpr Shape kTinyShape{64, 4, 256, 32};

struct BenchConfig {
  std::string name;
  int64_t encoder_layers, decoder_layers, vocab, tokens;  // tokens per micro-batch and side
  std::string precision;                                  // fp32 | tf32 | bf16
  int64_t micro_batches = 1;                              // per step
};

// bf16 first (the target), fp32/tf32 references last: a run cut short keeps what matters.
std::vector<BenchConfig> GpuConfigs() {
  return {
      {"6L-6L", 6, 6, 32000, 8192, "bf16"},
      {"18L-18L", 18, 18, 32000, 4096, "bf16"},
      {"18L-18L", 18, 18, 32000, 8192, "bf16"},
      {"18L-18L", 18, 18, 32000, 16384, "bf16"},
      // The flagship's per-stage slice: ~12 of its 200 layers with the 64k-vocabulary table and
      // output projection that its first and last stages hold.
      {"flagship-slice", 6, 6, 64000, 8192, "bf16"},
      // As the flagship trains: 2k-token micro-batches, several per step.
      {"flagship-slice", 6, 6, 64000, 2048, "bf16", 8},
      {"18L-18L", 18, 18, 32000, 2048, "bf16", 8},
      {"18L-18L", 18, 18, 32000, 8192, "tf32"},
      {"18L-18L", 18, 18, 32000, 8192, "fp32"},
  };
}

std::vector<BenchConfig> TinyConfigs() {
  return {{"tiny-2L-2L", 2, 2, 1000, 512, "fp32"},
          {"tiny-2L-2L", 2, 2, 1000, 512, "bf16"},
          {"tiny-2L-2L", 2, 2, 1000, 128, "bf16", 4}};
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// The device's matrix-product rate, TFLOP/s: a bf16 n x n x n product on a GPU, fp32 on the CPU;
// random operands, 3 warm-ups, median of 5 timings of `reps` products each.
double MatmulTflops(const torch::Device& device, int64_t n, int reps) {
  torch::NoGradGuard no_grad;
  const auto dtype = device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  auto opts = torch::TensorOptions().dtype(dtype).device(device);
  auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
  auto c = torch::empty({n, n}, opts);
  for (int i = 0; i < 3; ++i) torch::mm_out(c, a, b);
  Synchronize(device);
  std::vector<double> rates;
  for (int t = 0; t < 5; ++t) {
    const auto start = Clock::now();
    for (int i = 0; i < reps; ++i) torch::mm_out(c, a, b);
    Synchronize(device);
    rates.push_back(2.0 * n * n * n * reps / Seconds(start, Clock::now()) / 1e12);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

void ResetPeakMemory(const torch::Device& device) {
#ifdef DEEPNET_HAVE_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::emptyCache();
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
  }
#endif
}

// Peak bytes allocated on the device since ResetPeakMemory (the caching allocator's statistic
// 0, all pools); on the CPU the process's peak resident set.
int64_t PeakMemory(const torch::Device& device, int64_t* reserved) {
  *reserved = 0;
#ifdef DEEPNET_HAVE_CUDA
  if (device.is_cuda()) {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    *reserved = stats.reserved_bytes[0].peak;
    return stats.allocated_bytes[0].peak;
  }
#endif
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

std::string JobYaml(const BenchConfig& b, const Shape& s, const torch::Device& device) {
  const int64_t sentences = std::max<int64_t>(1, b.tokens / s.sequence);
  return "name: bench-" + b.name + "\n" +
         "model:\n  encoder_layers: " + std::to_string(b.encoder_layers) +
         "\n  decoder_layers: " + std::to_string(b.decoder_layers) +
         "\n  d_model: " + std::to_string(s.d_model) + "\n  heads: " + std::to_string(s.heads) +
         "\n  ffn_dim: " + std::to_string(s.ffn) + "\n  vocab_size: " + std::to_string(b.vocab) +
         "\n  max_positions: " + std::to_string(2 * s.sequence) +
         "\n  dropout: 0.1\n  share_all_embeddings: true\n" +
         "data:\n  source: synthetic\n  max_tokens: " + std::to_string(sentences * s.sequence) +
         "\n  max_len: " + std::to_string(s.sequence) + "\n" +
         "runtime:\n  device: " + (device.is_cuda() ? "cuda" : "cpu") + "\n" +
         "parallel:\n  pipeline_stages: 1\n  data_parallel: 1\n  micro_batches: " +
         std::to_string(b.micro_batches) + "\n";
}

struct Options {
  std::string json_path, jobs_dir;
  std::string profile_dir;  // --profile: one profiled step per configuration, traces here.
  std::vector<std::string> overrides;
  std::vector<std::string> only;  // Config names to run; empty: all.
  bool tiny = false;
  int64_t steps = 8, warmup = 3;
  double budget_s = 170.0;  // Configurations not started by then are skipped.
};

std::string ConfigLabel(const BenchConfig& b, int64_t tokens) {
  return b.name + "-" + b.precision + "-" + std::to_string(tokens) +
         (b.micro_batches > 1 ? "x" + std::to_string(b.micro_batches) : "");
}

json KindTable(const profiling::PerKind<double>& seconds) {
  json t = json::object();
  for (int k = 0; k < profiling::kOpKinds; ++k) {
    if (seconds[k] > 0) t[std::string(profiling::ToString(static_cast<profiling::OpKind>(k)))] = 1e3 * seconds[k];
  }
  return t;
}

void PrintKinds(const char* what, const json& by_kind_ms, double wall_ms, double idle_ms) {
  std::printf("  %s: step %.2f ms", what, wall_ms);
  for (const auto& [kind, ms] : by_kind_ms.items()) {
    std::printf(", %s %.2f (%.1f%%)", kind.c_str(), ms.get<double>(),
                100.0 * ms.get<double>() / std::max(1e-9, wall_ms));
  }
  std::printf(", idle %.2f (%.1f%%)\n", idle_ms, 100.0 * idle_ms / std::max(1e-9, wall_ms));
}

#ifdef DEEPNET_BENCH_KINETO
// GPU kernel time per kind and the step's idle GPU time, from Kineto's events of one step.
json KinetoSummary(const torch::autograd::profiler::ProfilerResult& result, double wall_s) {
  profiling::PerKind<double> by_kind{};
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [start, end) ns of every GPU kernel
  int64_t kernels = 0;
  for (const auto& e : result.events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    ++kernels;
    by_kind[static_cast<int>(profiling::KindOfKernel(e.name()))] += e.durationNs() * 1e-9;
    busy.emplace_back(e.startNs(), e.startNs() + e.durationNs());
  }
  std::sort(busy.begin(), busy.end());
  double busy_s = 0.0;
  uint64_t begin = 0, end = 0;
  for (const auto& [a, z] : busy) {
    if (a > end) {
      busy_s += (end - begin) * 1e-9;
      begin = a;
      end = z;
    } else {
      end = std::max(end, z);
    }
  }
  busy_s += (end - begin) * 1e-9;
  return {{"gpu_kernels", kernels},
          {"by_kind_ms", KindTable(by_kind)},
          {"gpu_busy_ms", 1e3 * busy_s},
          {"idle_ms", 1e3 * std::max(0.0, wall_s - busy_s)}};
}
#endif

// One more step under the profiler (on CUDA, Kineto; on the CPU, the op census), and one under
// the op census for the op counts. The traces go to dir/<label>.trace.json.
json ProfileStep(const std::function<absl::Status(int64_t)>& train_step, int64_t* step,
                 const torch::Device& device, const std::string& dir, const std::string& label) {
  std::filesystem::create_directories(dir);
  const std::string trace = dir + "/" + label + ".trace.json";
  json p = {{"trace", trace}};
#ifdef DEEPNET_BENCH_KINETO
  if (device.is_cuda()) {
    namespace prof = torch::profiler::impl;
    const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
    const std::set<prof::ActivityType> activities{prof::ActivityType::CPU,
                                                  prof::ActivityType::CUDA};
    torch::autograd::profiler::prepareProfiler(config, activities);
    Synchronize(device);
    torch::autograd::profiler::enableProfiler(config, activities);
    const auto start = Clock::now();
    const absl::Status s = train_step(++*step);
    Synchronize(device);
    const double wall = Seconds(start, Clock::now());
    auto result = torch::autograd::profiler::disableProfiler();
    if (!s.ok()) return {{"status", "failed: " + std::string(s.message())}};
    result->save(trace);
    p.update(KinetoSummary(*result, wall));
    p["wall_ms"] = 1e3 * wall;
    PrintKinds("GPU time", p["by_kind_ms"], p["wall_ms"].get<double>(), p["idle_ms"].get<double>());
  }
#endif
  // The op census: on the CPU also the host-time profile and its trace.
  const bool cpu = !device.is_cuda();
  profiling::OpCensus census(profiling::OpCensus::Options{/*trace=*/cpu, /*memory=*/cpu});
  const absl::Status s = train_step(++*step);
  Synchronize(device);
  const profiling::CensusResult r = census.Stop();
  if (!s.ok()) return {{"status", "failed: " + std::string(s.message())}};
  p["ops"] = r.ops;
  p["top_level_ops"] = r.top_level_ops;
  p["autograd_nodes"] = r.autograd_nodes;
  if (cpu) {
    double host = 0.0;
    for (double x : r.host_s_by_kind) host += x;
    p["wall_ms"] = 1e3 * r.wall_s;
    p["by_kind_ms"] = KindTable(r.host_s_by_kind);
    p["idle_ms"] = 1e3 * std::max(0.0, r.wall_s - host);  // Host time outside ATen ops.
    p["allocated_bytes"] = r.allocated_bytes;
    std::ofstream(trace) << profiling::ChromeTrace(r.events);
    PrintKinds("host time", p["by_kind_ms"], p["wall_ms"].get<double>(), p["idle_ms"].get<double>());
  }
  std::printf("  %s", profiling::FormatCensus(r, 10).c_str());
  p["status"] = "ok";
  return p;
}

json RunConfig(const BenchConfig& b, const Shape& shape, const torch::Device& device,
               const Options& o, double peak_tflops) {
  json r = {{"name", b.name},
            {"precision", b.precision},
            {"tokens", b.tokens},
            {"encoder_layers", b.encoder_layers},
            {"decoder_layers", b.decoder_layers},
            {"d_model", shape.d_model},
            {"vocab", b.vocab}};
  std::vector<std::string> overrides;
  // Always explicit: runtime.precision auto means bf16 on cuda.
  overrides.push_back("runtime.precision=" + b.precision);
  overrides.insert(overrides.end(), o.overrides.begin(), o.overrides.end());
  const std::string yaml = JobYaml(b, shape, device);
  auto config = job::ParseJobConfig(yaml, overrides, "bench " + b.name);
  if (!config.ok()) {
    r["status"] = "skipped: " + std::string(config.status().message());
    return r;
  }
  model::DeepNetConfig mc = config->model;
  pipeline::EngineOptions options = train::EngineOptionsFor(*config, mc, device);
  const int64_t sentences = std::max<int64_t>(1, b.tokens / shape.sequence);
  options.source_length = shape.sequence;
  options.target_length = shape.sequence;
  options.batch_sentences = sentences;
  const int64_t tokens = sentences * shape.sequence * b.micro_batches;  // per step and side
  r["tokens"] = tokens;
  r["micro_batches"] = b.micro_batches;
  r["tokens_per_micro_batch"] = sentences * shape.sequence;
  r["job_yaml"] = yaml;
  r["overrides"] = overrides;
  try {
    ResetPeakMemory(device);
    comm::LoopbackCommunicator world;
    auto engine = pipeline::PipelineEngine::Create(options, &world);
    if (!engine.ok()) {
      r["status"] = "failed: " + std::string(engine.status().message());
      return r;
    }
    pipeline::CensusBatches shape_of;
    shape_of.sentences = sentences;
    shape_of.source_length = shape.sequence;
    shape_of.target_length = shape.sequence;
    shape_of.micro_batches = static_cast<int>(b.micro_batches);
    const std::vector<pipeline::MicroBatch> batches =
        pipeline::RandomMicroBatches(b.vocab, shape_of, device, 1234);
    int64_t step = 0;
    double loss = 0.0;
    for (int64_t i = 0; i < o.warmup + o.steps; ++i) {
      if (i == o.warmup) Synchronize(device);
      const auto start = Clock::now();
      auto totals = (*engine)->TrainStep(batches, ++step, 1e-4);
      if (!totals.ok()) {
        r["status"] = "failed: " + std::string(totals.status().message());
        return r;
      }
      Synchronize(device);
      if (i >= o.warmup) {
        r["step_s"].push_back(Seconds(start, Clock::now()));
        loss = totals->loss_sum / std::max<int64_t>(1, totals->tgt_tokens);
      }
    }
    std::vector<double> times = r["step_s"].get<std::vector<double>>();
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    const int64_t layers = b.encoder_layers + b.decoder_layers;
    const double flops = 3.0 * job::ForwardFlops(mc, 0, layers, tokens, shape.sequence);
    int64_t reserved = 0;
    const int64_t peak = PeakMemory(device, &reserved);
    r["status"] = "ok";
    r["median_step_s"] = median;
    r["tokens_per_s"] = 2.0 * tokens / median;  // Source and target tokens.
    r["target_tokens_per_s"] = tokens / median;
    r["train_flops_per_step"] = flops;
    r["tflops"] = flops / median / 1e12;
    r["mfu"] = flops / median / 1e12 / peak_tflops;
    r["peak_allocated_bytes"] = peak;
    r["peak_reserved_bytes"] = reserved;
    r["loss"] = loss;
    if (!o.profile_dir.empty()) {
      r["profile"] = ProfileStep(
          [&](int64_t s) { return (*engine)->TrainStep(batches, s, 1e-4).status(); }, &step,
          device, o.profile_dir, ConfigLabel(b, r["tokens"].get<int64_t>()));
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    r["status"] = "failed: " + what.substr(0, std::min<size_t>(what.size(), what.find('\n')));
  }
  ResetPeakMemory(device);
  return r;
}

// The job file `deepnet plan` reads for this configuration, with what was measured in comments
// (scripts/gpu_check.sh puts the plan's prediction beside it).
void WriteJobFile(const std::string& dir, int index, const json& r) {
  if (dir.empty() || !r.contains("job_yaml")) return;
  std::filesystem::create_directories(dir);
  char name[256];
  std::snprintf(name, sizeof(name), "%s/%02d-%s-%s-%lld.yaml", dir.c_str(), index,
                r["name"].get<std::string>().c_str(), r["precision"].get<std::string>().c_str(),
                static_cast<long long>(r["tokens"].get<int64_t>()));
  std::ofstream out(name);
  out << "# precision: " << r["precision"].get<std::string>() << "\n";
  if (r.value("status", "") == "ok") {
    out << "# measured_peak_bytes: " << r["peak_allocated_bytes"].get<int64_t>() << "\n";
  }
  out << r["job_yaml"].get<std::string>();
}

int Run(const Options& o) {
  const bool gpu = !o.tiny && torch::cuda::is_available();
  const torch::Device device = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const Shape shape = gpu ? kGpuShape : kTinyShape;
  torch::manual_seed(7);
  const auto t0 = Clock::now();
  const double peak = gpu ? MatmulTflops(device, 8192, 10) : MatmulTflops(device, 512, 4);
  std::printf("peak matmul: %.4g TFLOP/s (%s, %s) on %s, torch %s\n", peak,
              gpu ? "bf16 8192^3" : "fp32 512^3", "median of 5", gpu ? "cuda:0" : "cpu",
              TORCH_VERSION);
  std::fflush(stdout);
  json out = {{"device", gpu ? "cuda:0" : "cpu"},
              {"torch", TORCH_VERSION},
              {"peak_matmul_tflops", peak},
              {"peak_matmul", gpu ? "bf16 8192x8192x8192" : "fp32 512x512x512"},
              {"sequence", shape.sequence},
              {"steps", o.steps},
              {"warmup", o.warmup},
              {"overrides", o.overrides},
              {"results", json::array()}};
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1) << "\n";
  const auto configs = gpu ? GpuConfigs() : TinyConfigs();
  int index = 0;
  for (const auto& b : configs) {
    ++index;
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), b.name) == o.only.end()) {
      continue;
    }
    json r;
    if (Seconds(t0, Clock::now()) > o.budget_s) {
      r = {{"name", b.name},
           {"precision", b.precision},
           {"tokens", b.tokens},
           {"status", "skipped: time budget"}};
    } else {
      r = RunConfig(b, shape, device, o, peak);
    }
    WriteJobFile(o.jobs_dir, index, r);
    r.erase("job_yaml");
    out["results"].push_back(r);
    // After every configuration, so that a run stopped from outside still leaves its results.
    if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1) << "\n";
    if (r["status"] == "ok") {
      std::printf(
          "%-15s %-5s %6lld tok x%-2lld  %8.1f ms  %10.0f tok/s  %8.3g TFLOP/s  MFU %5.1f%%  "
          "peak %7.2f GiB\n",
          b.name.c_str(), b.precision.c_str(),
          static_cast<long long>(r["tokens_per_micro_batch"].get<int64_t>()),
          static_cast<long long>(b.micro_batches),
          1e3 * r["median_step_s"].get<double>(), r["tokens_per_s"].get<double>(),
          r["tflops"].get<double>(), 100.0 * r["mfu"].get<double>(),
          r["peak_allocated_bytes"].get<int64_t>() / 1073741824.0);
    } else {
      std::printf("%-15s %-5s %6lld tok  %s\n", b.name.c_str(), b.precision.c_str(),
                  static_cast<long long>(b.tokens), r["status"].get<std::string>().c_str());
    }
    std::fflush(stdout);
  }
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace deepnet::bench

int main(int argc, char** argv) {
  deepnet::bench::Options o;
  CLI::App app{"DeepNet training throughput and MFU on a GPU (docs/GPU.md)"};
  app.add_option("--json", o.json_path, "Write the results as JSON here");
  app.add_option("--jobs-dir", o.jobs_dir, "Write each configuration's job file here");
  app.add_option("--set", o.overrides, "Job field for every configuration: key.path=value");
  app.add_option("--only", o.only, "Run only these configuration names")->delimiter(',');
  app.add_flag("--tiny", o.tiny, "A 2L-2L d64 model on the CPU (the kit's dry run)");
  app.add_option("--steps", o.steps, "Timed steps per configuration")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "Untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--budget-s", o.budget_s, "Start no configuration after this many seconds");
  app.add_option("--profile", o.profile_dir,
                 "Profile one more step per configuration; Chrome traces into this folder");
  CLI11_PARSE(app, argc, argv);
  return deepnet::bench::Run(o);
}
