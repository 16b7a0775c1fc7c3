// Tests that need a CUDA device (ctest label `gpu`; scripts/gpu_check.sh runs them on the GPU
// machine). Without one each test is skipped with the reason, after checking what it can on the
// CPU (the job files parse). The bf16 and SDPA tests use runtime.precision and runtime.attention.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

#include "checkpoint/checkpoint.h"
#include "comm/staged_communicator.h"
#include "job/job_config.h"
#include "model/precision.h"
#include "tests/comm/cpu_only_communicator.h"
#include "tests/integration/child_process.h"
#include "tests/temp_dir.h"
#include "train/trainer.h"


// Set up before any test touches CUDA: a deterministic cuBLAS workspace for the bit-identical
// resume (ctest's ENVIRONMENT list is flattened by gtest_discover_tests and cannot carry it),
// and a stack trace on a crash (the first GPU run of these tests died with SIGSEGV and nothing
// else to go on).
class GpuTestEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    absl::InitializeSymbolizer("deepnet_gpu_test");
    // scripts/gpu_segv_probe.sh preloads its own handler (library + offset per frame) and sets
    // DEEPNET_SEGV_REPORT: absl's would replace it.
    if (std::getenv("DEEPNET_SEGV_REPORT") == nullptr) {
      absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
    }
  }
};
const auto* const kGpuTestEnvironment =
    ::testing::AddGlobalTestEnvironment(new GpuTestEnvironment);

namespace deepnet {
namespace {

using testing::Child;
using testing::Slurp;
using testing::TempDir;

#define SKIP_WITHOUT_CUDA()                                                              \
  do {                                                                                   \
    if (!torch::cuda::is_available()) {                                                  \
      GTEST_SKIP() << "no CUDA device here: this test needs a GPU (ctest -L gpu on the " \
                      "GPU machine, scripts/gpu_check.sh)";                              \
    }                                                                                    \
  } while (0)

// A small DeepNet on the synthetic task, on `cuda`; checkpoints every 6 steps.
std::string JobYaml(const std::string& ckpt_dir, int64_t max_steps, double dropout) {
  std::ostringstream y;
  y << "model: {encoder_layers: 2, decoder_layers: 2, d_model: 32, heads: 4, ffn_dim: 64, "
       "max_positions: 64, dropout: "
    << dropout << ", attention_dropout: " << dropout
    << "}\n"
       "data: {synthetic: {languages: [rev, cap], pairs_per_language: 150, max_words: 5}, "
       "max_tokens: 300, max_len: 60, valid_fraction: 0.05}\n"
       "optim: {lr: 2.0e-3, warmup_steps: 5, clip_norm: 1.0, weight_decay: 0.01}\n"
    << "train: {max_steps: " << max_steps << ", log_every: 1, probe_every: 3, seed: 3}\n"
    << "checkpoint: {dir: " << ckpt_dir << ", every_steps: 6, keep_last: 0}\n"
    << "runtime: {device: cuda}\n";
  return y.str();
}

job::JobConfig Config(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  auto config = job::ParseJobConfig(yaml, overrides, "gpu test job");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : job::JobConfig{};
}

struct TrainRun {
  train::TrainSummary summary;
  std::vector<nlohmann::json> steps;  // The JSON step lines.
};

TrainRun Train(const job::JobConfig& config) {
  std::ostringstream out;
  train::TrainerIo io;
  io.out = &out;
  io.format = train::LogFormat::kJson;
  TrainRun run;
  auto trainer = train::Trainer::Create(config, io);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return run;
  auto summary = (*trainer)->Run();
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (summary.ok()) run.summary = *summary;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("event", "") == "step") run.steps.push_back(j);
  }
  return run;
}

std::map<std::string, torch::Tensor> LatestTensors(const std::string& dir) {
  checkpoint::CheckpointStoreOptions options;
  options.dir = dir;
  auto store = checkpoint::CheckpointStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  std::map<std::string, torch::Tensor> out;
  if (!store.ok()) return out;
  auto ckpt = (*store)->LoadLatest();
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return out;
  for (const auto& [file, tensors] : ckpt->files) {
    for (const auto& [name, t] : tensors) out[name] = t;
  }
  return out;
}

TEST(GpuTest, CheckpointRoundTripsCudaTensors) {
  SKIP_WITHOUT_CUDA();
  TempDir dir;
  checkpoint::CheckpointStoreOptions options;
  options.dir = dir.path();
  auto store = checkpoint::CheckpointStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status();
  const torch::Device cuda(torch::kCUDA, 0);
  checkpoint::Checkpoint saved;
  saved.step = 7;
  saved.files["model.bin"] = {
      {"w", torch::randn({5, 3}, torch::TensorOptions().device(cuda))},
      {"w_bf16", torch::randn({4}, torch::TensorOptions().device(cuda).dtype(torch::kBFloat16))},
      {"t_slice", torch::arange(12, torch::TensorOptions().device(cuda)).view({3, 4}).t()},
      {"ids", torch::arange(6, torch::TensorOptions().device(cuda).dtype(torch::kLong))}};
  auto path = (*store)->Save(saved);
  ASSERT_TRUE(path.ok()) << path.status();
  auto loaded = checkpoint::CheckpointStore::Load(*path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 7);
  for (const auto& [name, t] : saved.files["model.bin"]) {
    const torch::Tensor got = loaded->Find(name);
    ASSERT_TRUE(got.defined()) << name;
    EXPECT_TRUE(got.device().is_cpu()) << name;
    EXPECT_EQ(got.scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(got, t.cpu())) << name;  // Bit-exact.
    EXPECT_TRUE(torch::equal(got.to(cuda), t)) << name;
  }
}

TEST(GpuTest, StagedCommunicatorMovesCudaTensorsThroughHost) {
  SKIP_WITHOUT_CUDA();
  comm::StagedCommunicator comm(std::make_unique<testing::CpuOnlyCommunicator>(),
                                torch::Device(torch::kCUDA, 0));
  const auto on_gpu = torch::TensorOptions().device(torch::kCUDA, 0);
  torch::Tensor t = torch::full({4}, 1.5, on_gpu);
  ASSERT_TRUE(comm.AllReduceSum(t).ok());
  EXPECT_TRUE(t.is_cuda());
  EXPECT_TRUE(torch::equal(t.cpu(), torch::full({4}, 3.0)));
  // A reduction of a view writes through to its base (how gradient buckets are reduced).
  torch::Tensor flat = torch::ones({6}, on_gpu);
  auto work = comm.AllReduceSumAsync(flat.narrow(0, 2, 3));
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_TRUE((*work)->Wait().ok());
  EXPECT_TRUE(torch::equal(flat.cpu(), torch::tensor({1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 1.0f})));
  ASSERT_TRUE(comm.Send(torch::full({2, 2}, 7.0, on_gpu), 0, 3).ok());
  torch::Tensor got = torch::zeros({2, 2}, on_gpu);
  ASSERT_TRUE(comm.Recv(got, 0, 3).ok());
  EXPECT_TRUE(got.is_cuda());
  EXPECT_TRUE(torch::equal(got.cpu(), torch::full({2, 2}, 7.0)));
  ASSERT_TRUE(comm.Broadcast(got, 0).ok());
  EXPECT_TRUE(got.is_cuda());
}

// A transport of device tensors only (NCCL) staged for the trainer: host tensors travel through
// the device and come back in place, device tensors pass straight through.
TEST(GpuTest, StagedCommunicatorMovesHostTensorsThroughTheDevice) {
  SKIP_WITHOUT_CUDA();
  auto inner = std::make_unique<testing::CudaOnlyCommunicator>();
  testing::CudaOnlyCommunicator* raw = inner.get();
  std::unique_ptr<comm::Communicator> comm = comm::StageWhereNeeded(std::move(inner), 0);
  torch::Tensor stats = torch::full({4}, 1.5, torch::kDouble);
  auto read = stats.accessor<double, 1>();  // Taken before the sum: the sum is in place.
  ASSERT_TRUE(comm->AllReduceSum(stats).ok());
  EXPECT_TRUE(stats.device().is_cpu());
  EXPECT_EQ(read[3], 3.0);
  torch::Tensor counts = torch::ones({3}, torch::kDouble);
  auto work = comm->AllReduceSumAsync(counts);
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_TRUE((*work)->Wait().ok());
  EXPECT_TRUE(torch::equal(counts, torch::full({3}, 2.0, torch::kDouble)));
  ASSERT_TRUE(comm->Send(torch::full({2, 2}, 7.0), 0, 3).ok());
  torch::Tensor got = torch::zeros({2, 2});
  ASSERT_TRUE(comm->Recv(got, 0, 3).ok());
  EXPECT_TRUE(got.device().is_cpu());
  EXPECT_TRUE(torch::equal(got, torch::full({2, 2}, 7.0)));
  ASSERT_TRUE(comm->Broadcast(got, 0).ok());
  EXPECT_TRUE(torch::equal(got, torch::full({2, 2}, 7.0)));
  torch::Tensor on_gpu = torch::ones({2}, torch::TensorOptions().device(torch::kCUDA, 0));
  ASSERT_TRUE(comm->AllReduceSum(on_gpu).ok());
  EXPECT_TRUE(torch::equal(on_gpu.cpu(), torch::full({2}, 2.0)));
  EXPECT_EQ(raw->calls, 6);
}

// Train 6 steps, checkpoint, resume in a fresh trainer to 12: the same losses and parameters,
// bit for bit, as 12 uninterrupted steps. Dropout on, so the CUDA generators' states (saved in
// the checkpoint) matter.
TEST(GpuTest, ResumeOnGpuIsBitIdentical) {
  TempDir a, b;
  const job::JobConfig full_job = Config(JobYaml(a.path(), 12, 0.1));
  job::JobConfig first_job = Config(JobYaml(b.path(), 6, 0.1));
  const job::JobConfig resume_job = Config(JobYaml(b.path(), 12, 0.1));
  SKIP_WITHOUT_CUDA();
  // Deterministic kernels where CUDA has them (cuBLAS needs the workspace setting, which ctest
  // passes; warn-only for the rest).
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  const TrainRun full = Train(full_job);
  ASSERT_EQ(full.summary.losses.size(), 12u);
  Train(first_job);
  torch::manual_seed(12345);  // Disturb CPU and CUDA generators: the checkpoint restores them.
  const TrainRun resumed = Train(resume_job);
  ASSERT_EQ(resumed.summary.start_step, 6);
  ASSERT_EQ(resumed.summary.losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(resumed.summary.losses[i], full.summary.losses[6 + i]) << "step " << 7 + i;
  }
  auto pa = LatestTensors(a.path()), pb = LatestTensors(b.path());
  ASSERT_EQ(pa.size(), pb.size());
  int cuda_rng = 0;
  for (const auto& [name, t] : pa) {
    if (name.rfind("rng.cuda", 0) == 0) ++cuda_rng;
    EXPECT_TRUE(torch::equal(t, pb.at(name))) << name;
  }
  EXPECT_GE(cuda_rng, 1) << "no rng.cuda<N>.rank<R> tensor in the checkpoint";
}

// A bf16 run learns, reports its GPU memory, and stays near the fp32 loss curve.
// The residual stream's LayerNorm on CUDA runs the native kernel on bf16 input: its statistics
// must accumulate in fp32. Rows 256, 258, ... (exact in bf16, mean 257, variance 1) normalise
// to -1, +1; statistics held in bf16 would put every element 1 off.
TEST(GpuTest, StreamLayerNormKeepsFp32StatisticsOnCuda) {
  SKIP_WITHOUT_CUDA();
  const torch::Device cuda(torch::kCUDA, 0);
  const int64_t d = 512;
  torch::Tensor row = 256 + 2 * (torch::arange(d) % 2).to(torch::kFloat);
  torch::Tensor x = row.repeat({3, 1}).to(torch::kBFloat16).to(cuda);
  torch::Tensor expected = (2 * (torch::arange(d) % 2) - 1).to(torch::kFloat).repeat({3, 1});
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({d}));
  norm->to(cuda);
  for (bool autocast : {false, true}) {
    model::Bf16AutocastScope scope(c10::DeviceType::CUDA, autocast);
    torch::Tensor y = model::StreamLayerNorm(norm, x);
    EXPECT_EQ(y.scalar_type(), torch::kBFloat16) << "autocast " << autocast;
    EXPECT_LE((y.to(torch::kFloat).cpu() - expected).abs().max().item<double>(), 1e-2)
        << "autocast " << autocast;
    model::ClearAutocastCache();
  }
}

TEST(GpuTest, Bf16TrainingStepsTrackFp32) {
  SKIP_WITHOUT_CUDA();
  TempDir a, b;
  const TrainRun fp32 = Train(Config(JobYaml(a.path(), 20, 0.0), {"runtime.precision=fp32"}));
  const TrainRun bf16 = Train(Config(JobYaml(b.path(), 20, 0.0), {"runtime.precision=bf16"}));
  ASSERT_EQ(fp32.summary.losses.size(), 20u);
  ASSERT_EQ(bf16.summary.losses.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(std::isfinite(bf16.summary.losses[i])) << "step " << i + 1;
    EXPECT_NEAR(bf16.summary.losses[i], fp32.summary.losses[i],
                0.05 * std::abs(fp32.summary.losses[i]))
        << "step " << i + 1;
  }
  EXPECT_LT(bf16.summary.losses.back(), bf16.summary.losses.front());
  ASSERT_FALSE(bf16.steps.empty());
  const nlohmann::json& last = bf16.steps.back();
  ASSERT_TRUE(last.contains("gpu_reserved_bytes")) << last.dump();
  EXPECT_GT(last.at("gpu_reserved_bytes").get<int64_t>(), 0);
  EXPECT_GT(last.at("gpu_peak_allocated_bytes").get<int64_t>(), 0);
  EXPECT_GE(last.at("gpu_peak_allocated_bytes").get<int64_t>(),
            last.at("gpu_allocated_bytes").get<int64_t>());
}

// Fused attention (at::scaled_dot_product_attention) trains like the reference attention.
TEST(GpuTest, SdpaTrainingStepsMatchTheReferenceAttention) {
  SKIP_WITHOUT_CUDA();
  TempDir a, b;
  const TrainRun reference = Train(Config(JobYaml(a.path(), 10, 0.0), {"runtime.precision=fp32"}));
  const TrainRun sdpa = Train(
      Config(JobYaml(b.path(), 10, 0.0), {"runtime.precision=fp32", "runtime.attention=sdpa"}));
  ASSERT_EQ(reference.summary.losses.size(), 10u);
  ASSERT_EQ(sdpa.summary.losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(sdpa.summary.losses[i], reference.summary.losses[i],
                1e-3 * std::abs(reference.summary.losses[i]))
        << "step " << i + 1;
  }
}

// 2 stages x 2 replicas, four ranks started on their own (as deepnet-worker does), all on the
// one GPU (local rank mod 1 visible device = cuda:0) over Gloo, their tensors staged through
// host memory; the losses match the single-process run that accumulates the same global batch.
TEST(GpuTest, TwoStagesTimesTwoReplicasShareOneGpuOverGloo) {
  TempDir dir;
  const std::string yaml = JobYaml(dir / "ckpt", 10, 0.0);
  Config(yaml);  // Parses on the CPU too.
  SKIP_WITHOUT_CUDA();
#ifndef DEEPNET_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo (the LibTorch found ships no gloo headers, as PyTorch's "
                  "pip package does not): the four ranks need the gloo backend";
#endif
  std::ofstream(dir / "job.yaml") << yaml;
  const std::vector<std::string> common = {
      DEEPNET_BINARY, "train", "--config", dir / "job.yaml",
      "--log-format", "json",  "--set",    "runtime.precision=fp32"};
  auto losses = [](const std::string& log) {
    std::map<int64_t, double> out;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.is_object() && j.value("event", "") == "step") {
        out[j.at("step").get<int64_t>()] = j.at("loss").get<double>();
      }
    }
    return out;
  };
  std::vector<std::string> single = common;
  single.insert(single.end(),
                {"--set", "optim.accum_steps=4", "--set", "checkpoint.dir=" + dir / "ckpt-single"});
  Child reference(single, dir / "single.log");
  ASSERT_EQ(reference.Wait(std::chrono::seconds(240)), 0) << Slurp(dir / "single.log");
  const std::map<int64_t, double> want = losses(Slurp(dir / "single.log"));
  ASSERT_EQ(want.size(), 10u) << Slurp(dir / "single.log");

  std::vector<std::unique_ptr<Child>> ranks;
  for (int r = 0; r < 4; ++r) {
    std::vector<std::string> args = common;
    args.insert(args.end(),
                {"--set", "parallel.pipeline_stages=2", "--set", "parallel.data_parallel=2",
                 "--set", "parallel.micro_batches=2", "--set", "parallel.backend=gloo", "--set",
                 "parallel.rendezvous=file://" + dir / "rdv"});
    ranks.push_back(std::make_unique<Child>(
        args, dir / ("rank" + std::to_string(r) + ".log"),
        std::vector<std::string>{"DEEPNET_RANK=" + std::to_string(r), "DEEPNET_WORLD_SIZE=4",
                                 "DEEPNET_LOCAL_RANK=" + std::to_string(r),
                                 "DEEPNET_LOCAL_SIZE=4"}));
  }
  for (int r = 0; r < 4; ++r) {
    const std::string log = dir / ("rank" + std::to_string(r) + ".log");
    EXPECT_EQ(ranks[r]->Wait(std::chrono::seconds(300)), 0) << "rank " << r << "\n" << Slurp(log);
  }
  const std::map<int64_t, double> got = losses(Slurp(dir / "rank0.log"));
  ASSERT_EQ(got.size(), want.size()) << Slurp(dir / "rank0.log");
  for (const auto& [step, loss] : want) {
    ASSERT_TRUE(got.count(step)) << "step " << step;
    EXPECT_NEAR(got.at(step), loss, 1e-4 * std::abs(loss)) << "step " << step;
  }
}

}  // namespace
}  // namespace deepnet
