// deepnet_bench_train: training throughput of DeepNet on this machine, next to the GFLOP/s of a
// plain LibTorch matrix product of the model's size measured in the same process (the
// machine's practical limit). Results and the method are recorded in docs/PERFORMANCE.md;
// nothing here is asserted by tests.
//
// One step is what train/trainer.cc does for one batch: forward, label-smoothed
// cross-entropy (epsilon 0.1), backward into the FlatParameters gradient buffer, gradient norm,
// and an AdamW update over the flat buffer. Dropout 0.1 is on, as in real training.
// The batch is 16 sentences of exactly 32 source and 32 target tokens (random ids, fixed seed,
// no padding), so a step processes 1,024 tokens.
//
// Every rate is reported per wall-clock second and per second of process CPU time; with one
// thread the latter is robust to other jobs on a shared machine. --breakdown adds the self time
// per LibTorch op of one profiled step.
//
// Example: deepnet_bench_train --shape 6x6-d512 --blas-threads 1 --intra-threads 1 --runs 5

#include <ATen/Version.h>
#include <CLI/CLI.hpp>
#include <dlfcn.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/deepnet.h"
#include "model/initialization.h"
#include "model/kernels/fused_kernels.h"
#include "model/kernels/gemm.h"
#include "model/loss.h"
#include "model/model_stats.h"
#include "pipeline/adamw.h"
#include "pipeline/flat_parameters.h"
#include "train/runtime_threads.h"

namespace deepnet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr int64_t kBatch = 16;
constexpr int64_t kSourceLength = 32;
constexpr int64_t kTargetLength = 32;
constexpr int64_t kTokensPerStep = kBatch * (kSourceLength + kTargetLength);
constexpr int64_t kTargetTokensPerStep = kBatch * kTargetLength;
constexpr int64_t kPad = 0;
constexpr int64_t kBos = 1;
constexpr int64_t kFirstWordId = 4;  // Ids below are pad/bos/eos/unk in the real tokenizers.
constexpr double kLabelSmoothing = 0.1;
constexpr size_t kProfileRows = 40;  // Ops listed by --breakdown.

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU time of the whole process (all threads). With one thread it is the time the work would
// take on an otherwise idle core: descheduling by other jobs on a shared machine does not count.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Shape {
  std::string name;
  model::DeepNetConfig config;
};

bool ShapeByName(const std::string& name, Shape* shape) {
  model::DeepNetConfig c;
  c.vocab_size(8000).dropout(0.1).norm(model::NormVariant::kDeepNorm);
  if (name == "6x6-d512") {
    c.encoder_layers(6).decoder_layers(6).d_model(512).heads(8).ffn_dim(2048);
  } else if (name == "100x100-d64") {
    c.encoder_layers(100).decoder_layers(100).d_model(64).heads(2).ffn_dim(128);
  } else {
    return false;
  }
  *shape = {name, c};
  return true;
}

// The matrix product each run is compared with: [M x K] x [K x N] with torch::mm.
struct MatmulShape {
  int64_t m, k, n;
  std::string ToString() const {
    return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
  }
};

struct Rate {
  double wall = 0.0;  // Per wall-clock second.
  double cpu = 0.0;   // Per second of process CPU time.
};

// GFLOP/s of torch::mm on fresh random operands, timed over about `seconds` of wall time.
Rate MatmulGflops(const MatmulShape& s, double seconds) {
  torch::NoGradGuard no_grad;
  auto a = torch::randn({s.m, s.k});
  auto b = torch::randn({s.k, s.n});
  auto c = torch::empty({s.m, s.n});
  for (int i = 0; i < 3; ++i) torch::mm_out(c, a, b);  // Warm-up: pack buffers, pool threads.
  const double flops = 2.0 * static_cast<double>(s.m * s.k * s.n);
  int64_t iterations = 0;
  const double cpu_start = ProcessCpuSeconds();
  const auto start = Clock::now();
  auto now = start;
  do {
    for (int i = 0; i < 4; ++i) torch::mm_out(c, a, b);
    iterations += 4;
    now = Clock::now();
  } while (Seconds(start, now) < seconds);
  const double total = flops * static_cast<double>(iterations) / 1e9;
  return {total / Seconds(start, now), total / (ProcessCpuSeconds() - cpu_start)};
}

struct Batch {
  torch::Tensor src, tgt_in, tgt_out;
};

Batch RandomBatch(int64_t vocab, uint64_t seed) {
  torch::Generator gen = at::detail::createCPUGenerator(seed);
  Batch b;
  b.src = torch::randint(kFirstWordId, vocab, {kBatch, kSourceLength}, gen, torch::kLong);
  b.tgt_out = torch::randint(kFirstWordId, vocab, {kBatch, kTargetLength}, gen, torch::kLong);
  b.tgt_in = torch::cat({torch::full({kBatch, 1}, kBos, torch::kLong),
                         b.tgt_out.narrow(1, 0, kTargetLength - 1)},
                        1);
  return b;
}

// Seconds spent in each phase of one step.
struct StepTimes {
  double forward = 0.0;   // Forward pass and loss.
  double backward = 0.0;  // Backward pass (gradients into the flat buffer).
  double optimizer = 0.0; // Zeroing gradients, gradient norm, AdamW update.
  StepTimes& operator+=(const StepTimes& o) {
    forward += o.forward;
    backward += o.backward;
    optimizer += o.optimizer;
    return *this;
  }
};

// The training state of one benchmark process: model, batch, flat parameters, optimiser.
class StepRunner {
 public:
  explicit StepRunner(const model::DeepNetConfig& config)
      : model_(config), batch_(RandomBatch(config.vocab_size(), 1234)) {
    model::InitializeParameters(*model_, 42);
    flat_ = std::make_unique<pipeline::FlatParameters>(*model_);
    pipeline::AdamWOptions adam;  // The trainer's defaults: betas (0.9, 0.98), eps 1e-8, no decay.
    optimizer_ = std::make_unique<pipeline::AdamW>(flat_.get(), adam);
    model_->train();
  }

  StepTimes Step() {
    StepTimes t;
    const auto t0 = Clock::now();
    flat_->ZeroGrad();
    const auto t1 = Clock::now();
    auto logits = model_->forward(batch_.src, batch_.tgt_in);
    auto out = model::LabelSmoothedCrossEntropy(logits, batch_.tgt_out, kLabelSmoothing, kPad);
    const auto t2 = Clock::now();
    (out.loss / static_cast<double>(out.tokens)).backward();
    last_loss_ = out.loss.item<double>() / static_cast<double>(out.tokens);
    const auto t3 = Clock::now();
    {
      torch::NoGradGuard no_grad;
      // As the trainer: the norm is always computed (logged and used for clipping).
      last_grad_norm_ = flat_->grads().norm().item<double>();
      ++step_;
      optimizer_->Step(pipeline::InverseSqrtLearningRate(step_, 5e-4, 4000, 1e-7));
    }
    const auto t4 = Clock::now();
    t.forward = Seconds(t1, t2);
    t.backward = Seconds(t2, t3);
    t.optimizer = Seconds(t0, t1) + Seconds(t3, t4);
    return t;
  }

  double last_loss() const { return last_loss_; }
  int64_t parameters() const { return flat_->numel(); }

 private:
  model::DeepNet model_;
  Batch batch_;
  std::unique_ptr<pipeline::FlatParameters> flat_;
  std::unique_ptr<pipeline::AdamW> optimizer_;
  int64_t step_ = 0;
  double last_loss_ = 0.0;
  double last_grad_norm_ = 0.0;
};

struct OpProfile {
  std::string name;
  double self_ms = 0.0;
  int64_t calls = 0;
};

// Profiles one step with the legacy autograd profiler and returns self time per op name,
// largest first. The profiler adds a few microseconds per op, so small ops look costlier.
std::vector<OpProfile> ProfileStep(StepRunner& trainer) {
  namespace prof = torch::autograd::profiler;
  prof::enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  trainer.Step();
  auto lists = prof::disableProfilerLegacy();
  std::map<std::string, OpProfile> by_name;
  for (const auto& list : lists) {
    struct Open {
      const prof::LegacyEvent* event;
      double child_us;
    };
    std::vector<Open> stack;
    for (const auto& e : list) {
      if (e.kind() == prof::EventKind::PushRange) {
        stack.push_back({&e, 0.0});
      } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
        Open top = stack.back();
        stack.pop_back();
        const double inclusive = top.event->cpuElapsedUs(e);
        OpProfile& op = by_name[top.event->name()];
        op.self_ms += (inclusive - top.child_us) / 1000.0;
        ++op.calls;
        if (!stack.empty()) stack.back().child_us += inclusive;
      }
    }
  }
  std::vector<OpProfile> out;
  for (auto& [name, op] : by_name) {
    op.name = name;
    out.push_back(op);
  }
  std::sort(out.begin(), out.end(),
            [](const OpProfile& a, const OpProfile& b) { return a.self_ms > b.self_ms; });
  return out;
}

std::string OpenBlasString(const char* symbol) {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, symbol));
  if (fn == nullptr) return "unknown";
  const char* s = fn();
  return s != nullptr ? s : "unknown";
}

std::string AtenCpuCapability() {
  const std::string config = at::show_config();
  const std::string key = "CPU capability usage: ";
  const auto pos = config.find(key);
  if (pos == std::string::npos) return "unknown";
  const auto end = config.find('\n', pos);
  return config.substr(pos + key.size(), end - pos - key.size());
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

struct Options {
  std::string shape = "6x6-d512";
  int64_t blas_threads = 0;
  int64_t intra_threads = 1;
  int64_t steps = 5;
  int64_t warmup_steps = 2;
  int64_t runs = 3;
  double matmul_seconds = 0.5;
  bool json = false;
  bool breakdown = false;
};

int Run(const Options& o) {
  Shape shape;
  if (!ShapeByName(o.shape, &shape)) {
    std::cerr << "unknown --shape " << o.shape << " (6x6-d512 or 100x100-d64)\n";
    return 2;
  }
  const train::ThreadSettings threads = train::ConfigureThreads(o.blas_threads, o.intra_threads);
  const bool malloc_tuned = train::KeepFreedMemoryForReuse();
  torch::manual_seed(7);  // Dropout masks.

  model::StatsOptions stats_options;
  stats_options.source_length = kSourceLength;
  stats_options.target_length = kTargetLength;
  const model::ModelStats stats = model::ComputeModelStats(shape.config, stats_options);
  const double step_flops = static_cast<double>(kTokensPerStep) * stats.train_flops_per_token;

  // The machine's limit: one layer's first feed-forward product over the batch's 512 tokens of
  // one stack at d=512, [512 x 512] x [512 x 2048]; and the same product at this shape's size.
  const int64_t rows = kBatch * kSourceLength;
  const MatmulShape reference{rows, 512, 2048};
  const MatmulShape typical{rows, shape.config.d_model(), shape.config.ffn_dim()};

  StepRunner trainer(shape.config);
  for (int64_t i = 0; i < o.warmup_steps; ++i) trainer.Step();

  std::vector<double> step_s, tokens_s, tgt_tokens_s, gflops, mm_ref, mm_typical, ratio;
  std::vector<double> cpu_share, cpu_tokens_s, cpu_gflops, cpu_mm_ref, cpu_ratio;
  StepTimes phases;
  json runs = json::array();
  for (int64_t r = 0; r < o.runs; ++r) {
    StepTimes run_phases;
    const double cpu_start = ProcessCpuSeconds();
    const auto start = Clock::now();
    for (int64_t i = 0; i < o.steps; ++i) run_phases += trainer.Step();
    const double elapsed = Seconds(start, Clock::now());
    const double cpu = ProcessCpuSeconds() - cpu_start;
    phases += run_phases;
    const Rate ref = MatmulGflops(reference, o.matmul_seconds);
    const Rate typ = typical.k == reference.k && typical.n == reference.n
                         ? ref
                         : MatmulGflops(typical, o.matmul_seconds);
    const double steps = static_cast<double>(o.steps);
    step_s.push_back(elapsed / steps);
    tokens_s.push_back(steps * kTokensPerStep / elapsed);
    tgt_tokens_s.push_back(steps * kTargetTokensPerStep / elapsed);
    gflops.push_back(steps * step_flops / elapsed / 1e9);
    mm_ref.push_back(ref.wall);
    mm_typical.push_back(typ.wall);
    ratio.push_back(gflops.back() / ref.wall);
    cpu_share.push_back(cpu / elapsed);
    cpu_tokens_s.push_back(steps * kTokensPerStep / cpu);
    cpu_gflops.push_back(steps * step_flops / cpu / 1e9);
    cpu_mm_ref.push_back(ref.cpu);
    cpu_ratio.push_back(cpu_gflops.back() / ref.cpu);
    runs.push_back({{"step_s", step_s.back()},
                    {"tokens_per_s", tokens_s.back()},
                    {"target_tokens_per_s", tgt_tokens_s.back()},
                    {"gflops", gflops.back()},
                    {"matmul_gflops", ref.wall},
                    {"matmul_typical_gflops", typ.wall},
                    {"ratio_to_matmul", ratio.back()},
                    {"cpu_s_per_wall_s", cpu_share.back()},
                    {"tokens_per_cpu_s", cpu_tokens_s.back()},
                    {"gflops_per_cpu_s", cpu_gflops.back()},
                    {"matmul_gflops_per_cpu_s", ref.cpu},
                    {"ratio_to_matmul_cpu", cpu_ratio.back()},
                    {"forward_s", run_phases.forward / steps},
                    {"backward_s", run_phases.backward / steps},
                    {"optimizer_s", run_phases.optimizer / steps},
                    {"loss", trainer.last_loss()}});
    if (!o.json) {
      std::printf("run %lld: %.3f s/step  %.0f tok/s  %.0f tgt tok/s  %.1f GFLOP/s  "
                  "matmul %.1f GFLOP/s (%s %.1f)  ratio %.2f  [fwd %.3f bwd %.3f opt %.3f s]  "
                  "cpu/wall %.2f, per CPU second: %.0f tok/s, ratio %.2f\n",
                  static_cast<long long>(r), step_s.back(), tokens_s.back(), tgt_tokens_s.back(),
                  gflops.back(), ref.wall, typical.ToString().c_str(), typ.wall, ratio.back(),
                  run_phases.forward / steps, run_phases.backward / steps,
                  run_phases.optimizer / steps, cpu_share.back(), cpu_tokens_s.back(),
                  cpu_ratio.back());
      std::fflush(stdout);
    }
  }
  const double total_steps = static_cast<double>(o.steps * o.runs);

  json result = {
      {"shape", shape.name},
      {"description", model::DescribeShape(shape.config)},
      {"parameters", trainer.parameters()},
      {"batch", {{"sentences", kBatch}, {"source_tokens", kSourceLength},
                 {"target_tokens", kTargetLength}, {"tokens_per_step", kTokensPerStep}}},
      {"dropout", shape.config.dropout()},
      {"train_flops_per_token", stats.train_flops_per_token},
      {"threads", {{"blas_library", threads.blas_library}, {"blas_threads", threads.blas_threads},
                   {"intra_op_threads", threads.intra_op_threads}}},
      {"openblas_corename", OpenBlasString("openblas_get_corename")},
      {"openblas_config", OpenBlasString("openblas_get_config")},
      {"openblas_coretype_env", EnvOr("OPENBLAS_CORETYPE", "")},
      {"aten_cpu_capability", AtenCpuCapability()},
      {"fused_kernels", model::kernels::FusedKernelsEnabled()},
      {"malloc_tuned", malloc_tuned},
      {"fused_gemm", model::kernels::GemmUsesCblas() ? "cblas" : "aten"},
      {"steps", o.steps},
      {"warmup_steps", o.warmup_steps},
      {"runs", o.runs},
      {"matmul_shape", reference.ToString()},
      {"matmul_typical_shape", typical.ToString()},
      {"median", {{"step_s", Median(step_s)},
                  {"tokens_per_s", Median(tokens_s)},
                  {"target_tokens_per_s", Median(tgt_tokens_s)},
                  {"gflops", Median(gflops)},
                  {"matmul_gflops", Median(mm_ref)},
                  {"matmul_typical_gflops", Median(mm_typical)},
                  {"ratio_to_matmul", Median(ratio)},
                  {"ratio_to_matmul_typical", Median(gflops) / Median(mm_typical)},
                  {"cpu_s_per_wall_s", Median(cpu_share)},
                  {"tokens_per_cpu_s", Median(cpu_tokens_s)},
                  {"gflops_per_cpu_s", Median(cpu_gflops)},
                  {"matmul_gflops_per_cpu_s", Median(cpu_mm_ref)},
                  {"ratio_to_matmul_cpu", Median(cpu_ratio)}}},
      {"phases_s", {{"forward", phases.forward / total_steps},
                    {"backward", phases.backward / total_steps},
                    {"optimizer", phases.optimizer / total_steps}}},
      {"per_run", runs},
  };

  std::vector<OpProfile> profile;
  double profile_total_ms = 0.0;
  if (o.breakdown) {
    profile = ProfileStep(trainer);
    json top = json::array();
    int64_t calls = 0;
    for (const auto& op : profile) {
      profile_total_ms += op.self_ms;
      calls += op.calls;
    }
    for (size_t i = 0; i < profile.size() && i < kProfileRows; ++i) {
      top.push_back({{"op", profile[i].name}, {"self_ms", profile[i].self_ms},
                     {"calls", profile[i].calls}});
    }
    result["profile_calls"] = calls;
    result["profile_self_ms"] = top;
    result["profile_total_self_ms"] = profile_total_ms;
  }

  if (o.json) {
    std::cout << result.dump() << "\n";
    return 0;
  }
  const json& m = result["median"];
  std::printf("%s | %s | BLAS %s core %s, %lld BLAS threads, %lld intra-op threads, ATen %s, "
              "fused kernels %s\n",
              shape.name.c_str(), result["description"].get<std::string>().c_str(),
              threads.blas_library.c_str(), result["openblas_corename"].get<std::string>().c_str(),
              static_cast<long long>(threads.blas_threads),
              static_cast<long long>(threads.intra_op_threads),
              result["aten_cpu_capability"].get<std::string>().c_str(),
              model::kernels::FusedKernelsEnabled()
                  ? (model::kernels::GemmUsesCblas() ? "on (CBLAS)" : "on (ATen products)")
                  : "off");
  std::printf("median of %lld runs x %lld steps: %.3f s/step, %.0f tokens/s "
              "(%.0f target tokens/s), %.1f GFLOP/s; matmul %s %.1f GFLOP/s -> ratio %.2f; "
              "matmul %s %.1f GFLOP/s\n",
              static_cast<long long>(o.runs), static_cast<long long>(o.steps),
              m["step_s"].get<double>(), m["tokens_per_s"].get<double>(),
              m["target_tokens_per_s"].get<double>(), m["gflops"].get<double>(),
              reference.ToString().c_str(), m["matmul_gflops"].get<double>(),
              m["ratio_to_matmul"].get<double>(), typical.ToString().c_str(),
              m["matmul_typical_gflops"].get<double>());
  std::printf("per second of process CPU time (cpu/wall %.2f): %.0f tokens/s, %.1f GFLOP/s; "
              "matmul %.1f GFLOP/s -> ratio %.2f\n",
              m["cpu_s_per_wall_s"].get<double>(), m["tokens_per_cpu_s"].get<double>(),
              m["gflops_per_cpu_s"].get<double>(), m["matmul_gflops_per_cpu_s"].get<double>(),
              m["ratio_to_matmul_cpu"].get<double>());
  std::printf("phases per step: forward+loss %.3f s, backward %.3f s, optimizer %.3f s\n",
              phases.forward / total_steps, phases.backward / total_steps,
              phases.optimizer / total_steps);
  if (o.breakdown) {
    std::printf("profile of one step (self time, %.1f ms in %lld op calls):\n",
                profile_total_ms, static_cast<long long>(result["profile_calls"].get<int64_t>()));
    for (size_t i = 0; i < profile.size() && i < kProfileRows; ++i) {
      std::printf("  %8.1f ms %5.1f%% %7lld calls  %s\n", profile[i].self_ms,
                  100.0 * profile[i].self_ms / profile_total_ms,
                  static_cast<long long>(profile[i].calls), profile[i].name.c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace deepnet::bench

int main(int argc, char** argv) {
  deepnet::bench::Options o;
  CLI::App app{"DeepNet training throughput and matmul GFLOP/s (docs/PERFORMANCE.md)"};
  app.add_option("--shape", o.shape, "6x6-d512 or 100x100-d64")
      ->check(CLI::IsMember({"6x6-d512", "100x100-d64"}));
  app.add_option("--blas-threads", o.blas_threads, "OpenBLAS threads, 0 = one per core")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--intra-threads", o.intra_threads, "LibTorch intra-op threads")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "timed steps per run")->check(CLI::PositiveNumber);
  app.add_option("--warmup-steps", o.warmup_steps, "untimed steps before the first run")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--runs", o.runs, "timed runs (the median is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--matmul-seconds", o.matmul_seconds, "time spent on each matmul measurement")
      ->check(CLI::PositiveNumber);
  app.add_flag("--json", o.json, "print one JSON object");
  app.add_flag("--breakdown", o.breakdown, "profile one extra step: self time per LibTorch op");
  CLI11_PARSE(app, argc, argv);
  return deepnet::bench::Run(o);
}
