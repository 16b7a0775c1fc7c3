// The divergence and plateau guard in the training loop (train/trainer_guard.cc): forced NaN and
// spike roll back to the right checkpoint and training continues; retries run out; plateaus.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "tests/json_log_events.h"
#include "tests/temp_dir.h"
#include "train/trainer.h"

namespace deepnet::train {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

job::JobConfig GuardedJob(const std::string& checkpoint_dir) {
  job::JobConfig c;
  c.model = model::DeepNetConfig()
                .encoder_layers(1)
                .decoder_layers(1)
                .d_model(16)
                .heads(2)
                .ffn_dim(32)
                .vocab_size(0)
                .max_positions(64);
  c.data.synthetic.languages = {"rev"};
  c.data.synthetic.pairs_per_language = 120;
  c.data.synthetic.max_words = 4;
  c.data.max_tokens = 200;
  c.data.max_len = 50;
  c.data.valid_fraction = 0.05;
  c.optim.lr = 1e-3;
  c.optim.warmup_steps = 4;
  c.train.max_steps = 12;
  c.train.log_every = 1;
  c.train.probe_every = 0;
  c.checkpoint.dir = checkpoint_dir;
  c.checkpoint.every_steps = 3;
  c.checkpoint.keep_last = 2;
  c.guard.loss_window = 3;
  c.guard.max_retries = 2;
  c.guard.plateau_window = 0;
  return c;
}

std::set<int64_t> Steps(const std::string& dir) {
  checkpoint::CheckpointStoreOptions options;
  options.dir = dir;
  options.keep_last = 0;
  auto store = checkpoint::CheckpointStore::Open(options);
  std::set<int64_t> steps;
  if (store.ok()) {
    for (const auto& info : (*store)->List()) steps.insert(info.step);
  }
  return steps;
}

std::string Latest(const std::string& dir) {
  std::ifstream in(dir + "/latest");
  std::string name;
  in >> name;
  return name;
}

using deepnet::testing::JsonLogEvents;

nlohmann::json Metadata(const std::string& folder) {
  std::ifstream in(folder + "/metadata.json");
  return nlohmann::json::parse(in);
}

TEST(TrainerGuardTest, ForcedNanAndSpikeRollBackToTheRightCheckpointAndTrainOn) {
  torch::set_num_threads(1);
  TempDir clean_dir, dir;
  // The same job without faults, for the data position.
  Trainer::Create(GuardedJob(clean_dir.path()), TrainerIo{}).value()->Run().value();
  const int64_t clean_position =
      Metadata(clean_dir / "step_000000012")["data_stream"]["position"].get<int64_t>();

  std::ostringstream out;
  TrainerIo io;
  io.out = &out;
  io.format = LogFormat::kJson;
  // NaN at step 8: checkpoints 3 and 6 exist, back to 6. Then a spike at 7 before a new
  // checkpoint: step 6 is suspect, back to 3, and step 6 leaves `latest` and the folder.
  auto fault = ParseGuardFault("nan@8,spike@7");
  ASSERT_TRUE(fault.ok());
  std::vector<std::pair<int64_t, std::set<int64_t>>> seen;  // (step, checkpoints) per call.
  int calls = 0;
  io.step_fault = [&](StepMetrics* m) {
    seen.emplace_back(m->step, Steps(dir.path()));
    // The first visit of step 7 must pass: the spike is for the second one.
    if (m->step == 7 && calls++ == 0) return;
    (*fault)(m);
  };
  auto trainer = Trainer::Create(GuardedJob(dir.path()), io);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto summary = (*trainer)->Run();
  ASSERT_TRUE(summary.ok()) << summary.status() << "\n" << out.str();
  EXPECT_EQ(summary->final_step, 12);
  EXPECT_EQ(summary->stop_reason, "max_steps");
  EXPECT_EQ(summary->guard_rollbacks, 2);
  EXPECT_EQ(summary->losses.size(), 12u);

  const auto guard = JsonLogEvents(out.str(), "guard");
  ASSERT_EQ(guard.size(), 2u) << out.str();
  EXPECT_EQ(guard[0]["action"], "rollback");
  EXPECT_EQ(guard[0]["step"], 8);
  EXPECT_EQ(guard[0]["trigger"], "nonfinite_loss");
  EXPECT_EQ(guard[0]["to_step"], 6);
  EXPECT_EQ(guard[0]["skipped_steps"], 2);
  EXPECT_EQ(guard[0]["retries"], 1);
  EXPECT_EQ(guard[1]["step"], 7);
  EXPECT_EQ(guard[1]["trigger"], "loss_spike");
  EXPECT_EQ(guard[1]["to_step"], 3);
  EXPECT_DOUBLE_EQ(guard[1]["lr_scale"].get<double>(), 0.25);
  EXPECT_THAT(guard[1]["message"].get<std::string>(), HasSubstr("rolled back to step 3"));

  // Right after the second rollback (the next visit of step 4) only step 3 is left.
  bool checked = false;
  for (size_t i = 1; i < seen.size(); ++i) {
    if (seen[i].first == 4 && seen[i - 1].first == 7) {
      EXPECT_EQ(seen[i].second, (std::set<int64_t>{3}));
      checked = true;
    }
  }
  EXPECT_TRUE(checked);
  // Then saves at 6, 9, 12 with keep_last 2 counting only those.
  EXPECT_EQ(Steps(dir.path()), (std::set<int64_t>{9, 12}));
  EXPECT_EQ(Latest(dir.path()), "step_000000012");
  const nlohmann::json meta = Metadata(dir / "step_000000012");
  EXPECT_EQ(meta["guard"]["retries"], 2);
  EXPECT_DOUBLE_EQ(meta["guard"]["lr_scale"].get<double>(), 0.25);
  // Batches skipped: steps 7-8 of the first try and 4-7 of the second were not trained again.
  EXPECT_EQ(meta["data_stream"]["position"].get<int64_t>(), clean_position + 2 + 4);
  // The learning rate of the steps after the rollbacks is scaled.
  const auto steps = JsonLogEvents(out.str(), "step");
  ASSERT_FALSE(steps.empty());
  const double last_lr = steps.back()["lr"].get<double>();
  const double expected = 1e-3 * std::sqrt(4.0 / 12.0) * 0.25;
  EXPECT_NEAR(last_lr, expected, 1e-12);
}

TEST(TrainerGuardTest, RetriesRunOutAndTheRunFailsWithTheReason) {
  TempDir dir;
  job::JobConfig job = GuardedJob(dir.path());
  job.guard.max_retries = 1;
  std::ostringstream out;
  TrainerIo io;
  io.out = &out;
  io.format = LogFormat::kJson;
  io.step_fault = ParseGuardFault("nan@8..").value();
  auto trainer = Trainer::Create(job, io);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto summary = (*trainer)->Run();
  ASSERT_FALSE(summary.ok());
  EXPECT_TRUE(IsGuardFailure(summary.status()));
  EXPECT_THAT(std::string(summary.status().message()),
              HasSubstr("guard: step 8: loss is nan; retries exhausted (1 of 1 rollbacks used)"));
  const auto guard = JsonLogEvents(out.str(), "guard");
  ASSERT_EQ(guard.size(), 2u) << out.str();
  EXPECT_EQ(guard[0]["action"], "rollback");
  EXPECT_EQ(guard[1]["action"], "fail");
  EXPECT_EQ(guard[1]["step"], 8);
}

TEST(TrainerGuardTest, WithoutACheckpointTheGuardFailsAndOffMeansTheOldError) {
  TempDir dir;
  job::JobConfig job = GuardedJob(dir.path());
  job.checkpoint.every_steps = 0;
  TrainerIo io;
  io.step_fault = ParseGuardFault("nan@2").value();
  auto summary = Trainer::Create(job, io).value()->Run();
  ASSERT_FALSE(summary.ok());
  EXPECT_TRUE(IsGuardFailure(summary.status()));
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("no checkpoint before step 2"));
  // Post-LN runs have no guard by default: a NaN fails at once as before.
  job.model.norm(model::NormVariant::kPostLn);
  io.step_fault = ParseGuardFault("nan@2").value();
  summary = Trainer::Create(job, io).value()->Run();
  ASSERT_FALSE(summary.ok());
  EXPECT_FALSE(IsGuardFailure(summary.status()));
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("(diverged)"));
}

TEST(TrainerGuardTest, UpdateNormOverTheBoundRollsBackWithoutSkippingBatches) {
  TempDir dir;
  job::JobConfig job = GuardedJob(dir.path());
  job.guard.update_bound = 100.0;
  job.guard.skip_batches = false;
  job.guard.lr_factor = 1.0;
  std::ostringstream out;
  TrainerIo io;
  io.out = &out;
  io.format = LogFormat::kJson;
  io.step_fault = ParseGuardFault("update@5").value();
  auto summary = Trainer::Create(job, io).value()->Run();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->guard_rollbacks, 1);
  const auto guard = JsonLogEvents(out.str(), "guard");
  ASSERT_EQ(guard.size(), 1u) << out.str();
  EXPECT_EQ(guard[0]["trigger"], "update_norm");
  EXPECT_EQ(guard[0]["to_step"], 3);
  EXPECT_EQ(guard[0]["skipped_steps"], 0);
  EXPECT_DOUBLE_EQ(guard[0]["lr_scale"].get<double>(), 1.0);
  // Batches replayed from the checkpoint's position: the data stream is where a clean run's is.
  TempDir clean;
  Trainer::Create(GuardedJob(clean.path()), TrainerIo{}).value()->Run().value();
  EXPECT_EQ(Metadata(dir / "step_000000012")["data_stream"]["position"],
            Metadata(clean / "step_000000012")["data_stream"]["position"]);
}

TEST(TrainerGuardTest, PlateauIsFlaggedAndRewarmRestartsTheWarmup) {
  TempDir dir;
  job::JobConfig job = GuardedJob(dir.path());
  job.train.max_steps = 6;
  job.train.valid_every = 1;
  job.guard.plateau_window = 2;
  job.guard.plateau_min_delta = 100.0;  // Nothing counts as an improvement.
  job.guard.plateau_action = job::PlateauAction::kRewarm;
  std::ostringstream out;
  TrainerIo io;
  io.out = &out;
  io.format = LogFormat::kJson;
  auto summary = Trainer::Create(job, io).value()->Run();
  ASSERT_TRUE(summary.ok()) << summary.status();
  // Validations at 1..6: the best is set at 1; plateaus at 3 and 5.
  EXPECT_EQ(summary->plateaus, 2);
  const auto plateau = JsonLogEvents(out.str(), "plateau");
  ASSERT_EQ(plateau.size(), 2u) << out.str();
  EXPECT_EQ(plateau[0]["step"], 3);
  EXPECT_EQ(plateau[0]["action"], "rewarm");
  EXPECT_EQ(plateau[1]["step"], 5);
  // Step 4 is the first of the restarted warm-up (4 steps), as step 1 was.
  const auto steps = JsonLogEvents(out.str(), "step");
  ASSERT_GE(steps.size(), 4u);
  EXPECT_DOUBLE_EQ(steps[3]["lr"].get<double>(), steps[0]["lr"].get<double>());
}

}  // namespace
}  // namespace deepnet::train
