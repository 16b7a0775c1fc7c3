// runtime.precision bf16 and runtime.grad_reduce bf16 against fp32, trained end to end on CPU:
// one process, and two ranks (data-parallel, and two pipeline stages whose boundary tensors
// travel in bf16) over Gloo inside this process. Tolerances and measured gaps:
// docs/ARCHITECTURE.md "Mixed precision".
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include "job/job_config.h"
#include "tests/temp_dir.h"
#include "train/trainer.h"

#ifdef DEEPNET_HAVE_GLOO
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "comm/gloo_communicator.h"
#endif

namespace deepnet::train {
namespace {

job::JobConfig TinyJob(const std::string& precision, int64_t steps) {
  job::JobConfig c;
  c.model = model::DeepNetConfig()
                .encoder_layers(2)
                .decoder_layers(2)
                .d_model(32)
                .heads(4)
                .ffn_dim(64)
                .vocab_size(0)
                .dropout(0.0)  // the same computation in both precisions, nothing random
                .attention_dropout(0.0)
                .max_positions(64);
  c.data.synthetic.languages = {"rev", "cap"};
  c.data.synthetic.pairs_per_language = 200;
  c.data.synthetic.max_words = 5;
  c.data.max_tokens = 300;
  c.data.max_len = 60;
  c.data.valid_fraction = 0.05;
  c.optim.lr = 2e-3;
  c.optim.warmup_steps = 20;
  c.optim.clip_norm = 1.0;
  c.train.max_steps = steps;
  c.train.log_every = 1000;
  c.train.probe_every = 0;
  c.train.seed = 5;
  c.runtime.precision = *job::ParseChoice<job::PrecisionChoice>(precision);
  return c;
}

std::vector<double> Losses(const job::JobConfig& config, comm::Communicator* world = nullptr,
                           std::string* log = nullptr) {
  std::ostringstream out;
  TrainerIo io;
  io.out = &out;
  auto trainer = Trainer::Create(config, io, world);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  auto summary = (*trainer)->Run();
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (log != nullptr) *log = out.str();
  return summary.ok() ? summary->losses : std::vector<double>{};
}

// Largest relative gap between two losses of the same step.
double WorstStepGap(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / b[i]);
  }
  return worst;
}

// Largest relative gap between the two curves' means over consecutive windows of `window`
// steps (single steps are noisy; a drifting curve shows in every window after the drift).
double WorstWindowGap(const std::vector<double>& a, const std::vector<double>& b, size_t window) {
  double worst = 0.0;
  for (size_t start = 0; start + window <= std::min(a.size(), b.size()); start += window) {
    double sa = 0.0, sb = 0.0;
    for (size_t i = start; i < start + window; ++i) sa += a[i], sb += b[i];
    worst = std::max(worst, std::abs(sa - sb) / sb);
  }
  return worst;
}

TEST(MixedPrecisionTrainingTest, Bf16TracksTheFp32LossCurveOver200Steps) {
  torch::set_num_threads(1);
  std::string log;
  const std::vector<double> fp32 = Losses(TinyJob("fp32", 200));
  const std::vector<double> bf16 = Losses(TinyJob("bf16", 200), nullptr, &log);
  ASSERT_EQ(fp32.size(), 200u);
  ASSERT_EQ(bf16.size(), 200u);
  EXPECT_NE(log.find(", bf16 on cpu"), std::string::npos) << log;  // the start line says so
  const double gap = WorstWindowGap(bf16, fp32, 20);
  const double step_gap = WorstStepGap(bf16, fp32);
  RecordProperty("worst_window_gap", std::to_string(gap));
  std::printf(
      "bf16 vs fp32: first %.5f / %.5f, last %.5f / %.5f, worst 20-step window gap "
      "%.2e, worst single step %.2e\n",
      bf16.front(), fp32.front(), bf16.back(), fp32.back(), gap, step_gap);
  EXPECT_LT(gap, 0.02);
  EXPECT_LT(step_gap, 0.05);
  EXPECT_NE(bf16, fp32);                       // bf16 did run
  EXPECT_LT(bf16.back(), 0.8 * bf16.front());  // and it learns
}

// Resuming a bf16 run reproduces it bit for bit: the checkpoint holds the fp32 master weights
// (the same files as fp32), and the dropout streams come back.
TEST(MixedPrecisionTrainingTest, Bf16ResumeReproducesTheUninterruptedRunBitForBit) {
  torch::set_num_threads(1);
  testing::TempDir a, b;
  job::JobConfig full = TinyJob("bf16", 12);
  full.model.dropout(0.1);
  full.checkpoint.dir = a.path();
  full.checkpoint.every_steps = 6;
  const std::vector<double> uninterrupted = Losses(full);
  ASSERT_EQ(uninterrupted.size(), 12u);
  job::JobConfig first = full;
  first.checkpoint.dir = b.path();
  first.train.max_steps = 6;
  ASSERT_EQ(Losses(first).size(), 6u);
  job::JobConfig rest = full;
  rest.checkpoint.dir = b.path();
  const std::vector<double> resumed = Losses(rest);
  ASSERT_EQ(resumed.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(resumed[i], uninterrupted[6 + i]) << "step " << 7 + i;  // exact equality
  }
}

TEST(MixedPrecisionTrainingTest, Tf32IsFp32OnCpu) {
  torch::set_num_threads(1);
  EXPECT_EQ(Losses(TinyJob("tf32", 5)), Losses(TinyJob("fp32", 5)));
}

#ifdef DEEPNET_HAVE_GLOO
// Losses of `config` run as two ranks over Gloo (threads of this process).
std::vector<double> TwoRankLosses(const job::JobConfig& config) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::future<std::vector<double>>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(std::async(std::launch::async, [&config, store, rank] {
      auto comm = comm::GlooCommunicator::Create(store, rank, 2, std::chrono::milliseconds(120000),
                                                 "127.0.0.1");
      EXPECT_TRUE(comm.ok()) << comm.status();
      if (!comm.ok()) return std::vector<double>{};
      return Losses(config, comm->get());
    }));
  }
  std::vector<double> rank0 = ranks[0].get();
  EXPECT_EQ(ranks[1].get(), rank0);  // every rank sees the global loss
  return rank0;
}

TEST(MixedPrecisionTrainingTest, Bf16GradientAllReduceTracksFp32OverTwoReplicas) {
  torch::set_num_threads(1);
  job::JobConfig c = TinyJob("fp32", 60);
  c.parallel.data_parallel = 2;
  const std::vector<double> fp32 = TwoRankLosses(c);
  c.runtime.grad_reduce = job::GradReduce::kBf16;
  const std::vector<double> bf16 = TwoRankLosses(c);
  ASSERT_EQ(fp32.size(), 60u);
  ASSERT_EQ(bf16.size(), 60u);
  const double gap = WorstWindowGap(bf16, fp32, 20);
  std::printf("grad_reduce bf16 vs fp32 (D=2): worst 20-step window gap %.2e, step %.2e\n", gap,
              WorstStepGap(bf16, fp32));
  EXPECT_LT(gap, 0.02);
  EXPECT_NE(bf16, fp32);  // the reduction did run in bf16
}

TEST(MixedPrecisionTrainingTest, TwoStagesSendingBf16ActivationsTrackOneStage) {
  torch::set_num_threads(1);
  job::JobConfig c = TinyJob("bf16", 60);
  c.parallel.micro_batches = 2;
  const std::vector<double> one = Losses(c);  // the same batches in one process
  c.parallel.pipeline_stages = 2;
  const std::vector<double> two = TwoRankLosses(c);
  ASSERT_EQ(one.size(), 60u);
  ASSERT_EQ(two.size(), 60u);
  const double gap = WorstWindowGap(two, one, 20);
  std::printf(
      "bf16, 2 stages (bf16 boundary) vs 1 stage: worst 20-step window gap %.2e, "
      "step %.2e\n",
      gap, WorstStepGap(two, one));
  EXPECT_LT(gap, 0.02);
  EXPECT_NE(two, one);  // the boundary did round
}
#endif

}  // namespace
}  // namespace deepnet::train
