#include "train/trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/synthetic_task.h"
#include "job/job_config.h"
#include "tests/temp_dir.h"

namespace deepnet::train {
namespace {

using testing::TempDir;

job::JobConfig SmallJob(const std::string& checkpoint_dir) {
  job::JobConfig c;
  c.model = model::DeepNetConfig()
                .encoder_layers(2)
                .decoder_layers(2)
                .d_model(32)
                .heads(4)
                .ffn_dim(64)
                .vocab_size(0)
                .dropout(0.1)
                .attention_dropout(0.1)
                .max_positions(64);
  c.data.synthetic.languages = {"rev", "cap"};
  c.data.synthetic.pairs_per_language = 150;
  c.data.synthetic.max_words = 5;
  c.data.max_tokens = 300;
  c.data.max_len = 60;
  c.data.valid_fraction = 0.05;
  c.optim.lr = 2e-3;
  c.optim.warmup_steps = 5;
  c.optim.clip_norm = 1.0;
  c.optim.weight_decay = 0.01;
  c.train.max_steps = 12;
  c.train.log_every = 1;
  c.train.probe_every = 3;
  c.train.seed = 3;
  c.checkpoint.dir = checkpoint_dir;
  c.checkpoint.every_steps = 6;
  c.checkpoint.keep_last = 0;
  return c;
}

TrainSummary Train(const job::JobConfig& config, std::ostream* out = nullptr) {
  TrainerIo io;
  io.out = out;
  auto trainer = Trainer::Create(config, io);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return {};
  auto summary = (*trainer)->Run();
  EXPECT_TRUE(summary.ok()) << summary.status();
  return summary.ok() ? *summary : TrainSummary{};
}

std::map<std::string, torch::Tensor> FinalParameters(const std::string& dir) {
  checkpoint::CheckpointStoreOptions options;
  options.dir = dir;
  auto store = checkpoint::CheckpointStore::Open(options);
  EXPECT_TRUE(store.ok());
  auto ckpt = (*store)->LoadLatest();
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  std::map<std::string, torch::Tensor> out;
  for (const auto& [file, tensors] : ckpt->files) {
    for (const auto& [name, t] : tensors) out[name] = t;
  }
  return out;
}

TEST(TrainerTest, ResumeReproducesTheUninterruptedRunBitForBit) {
  torch::set_num_threads(1);
  TempDir a, b;
  // Uninterrupted: 12 steps (checkpoints at 6 and 12).
  const TrainSummary full = Train(SmallJob(a.path()));
  ASSERT_EQ(full.losses.size(), 12u);
  // Interrupted after 6 steps, then resumed to 12 by a fresh trainer (fresh RNG state).
  job::JobConfig first = SmallJob(b.path());
  first.train.max_steps = 6;
  Train(first);
  torch::manual_seed(12345);  // Disturb the global generator: the checkpoint must restore it.
  const TrainSummary resumed = Train(SmallJob(b.path()));
  ASSERT_EQ(resumed.start_step, 6);
  ASSERT_EQ(resumed.losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(resumed.losses[i], full.losses[6 + i]) << "step " << 7 + i;  // Exact equality.
  }
  auto pa = FinalParameters(a.path()), pb = FinalParameters(b.path());
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& [name, t] : pa) EXPECT_TRUE(torch::equal(t, pb.at(name))) << name;
}

TEST(TrainerTest, CorruptLatestCheckpointFallsBackToThePreviousOne) {
  TempDir dir;
  Train(SmallJob(dir.path()));  // Checkpoints at steps 6 and 12.
  const std::string victim = dir / "step_000000012/model-s000.bin";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    char c = 0;
    f.read(&c, 1);
    f.seekp(100);
    c ^= 0x5a;
    f.write(&c, 1);
  }
  TrainerIo io;
  auto trainer = Trainer::Create(SmallJob(dir.path()), io);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->step(), 6);
  auto summary = (*trainer)->Run();
  ASSERT_TRUE(summary.ok());
  ASSERT_EQ(summary->rejected_checkpoints.size(), 1u);
  EXPECT_NE(summary->rejected_checkpoints[0].find("model-s000.bin"), std::string::npos)
      << summary->rejected_checkpoints[0];
  EXPECT_EQ(summary->final_step, 12);
}

TEST(TrainerTest, TruncatedCheckpointIsRejected) {
  TempDir dir;
  job::JobConfig c = SmallJob(dir.path());
  Train(c);
  std::filesystem::resize_file(dir / "step_000000012/optimizer-s000.bin", 64);
  auto trainer = Trainer::Create(c, TrainerIo{});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->step(), 6);
}

TEST(TrainerTest, RefusesToResumeACheckpointOfAnotherShape) {
  TempDir dir;
  job::JobConfig c = SmallJob(dir.path());
  c.train.max_steps = 6;
  Train(c);
  c.model.d_model(64);
  auto trainer = Trainer::Create(c, TrainerIo{});
  ASSERT_FALSE(trainer.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(trainer.status()));
  EXPECT_NE(trainer.status().message().find("d_model"), std::string::npos);
}

TEST(TrainerTest, LossFallsAndProgressCarriesEveryField) {
  TempDir dir;
  job::JobConfig c = SmallJob("");
  c.train.max_steps = 40;
  c.train.log_every = 5;
  c.train.probe_every = 10;
  c.train.valid_every = 20;
  c.model.dropout(0.0).attention_dropout(0.0);
  std::ostringstream out;
  TrainerIo io;
  io.out = &out;
  io.format = LogFormat::kJson;
  auto trainer = Trainer::Create(c, io);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  auto summary = (*trainer)->Run();
  ASSERT_TRUE(summary.ok()) << summary.status();
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += summary->losses[i] / 5, last += summary->losses[35 + i] / 5;
  EXPECT_LT(last, first - 1.0);
  ASSERT_TRUE(summary->last_valid.has_value());
  EXPECT_GT(summary->last_valid->tokens, 0);

  int steps = 0, valids = 0, probes = 0;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "step") {
      ++steps;
      for (const char* key : {"loss", "nll", "ppl", "lr", "grad_norm", "tokens_per_s", "eta_s"}) {
        EXPECT_TRUE(j.contains(key)) << key;
      }
      if (!j["update_norm"].is_null()) {
        ++probes;
        EXPECT_GT(j["update_norm"].get<double>(), 0.0);
      }
    }
    if (j["event"] == "valid") ++valids;
  }
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(probes, 4);
  EXPECT_EQ(valids, 3);  // Steps 0 (baseline), 20 and 40.
}

TEST(TrainerTest, BadDataPathIsNamed) {
  job::JobConfig c = SmallJob("");
  c.data.source = job::DataSource::kTsv;
  c.data.train_path = "/nonexistent/train.tsv";
  auto trainer = Trainer::Create(c, TrainerIo{});
  ASSERT_FALSE(trainer.ok());
  EXPECT_NE(trainer.status().message().find("/nonexistent/train.tsv"), std::string::npos);
}

TEST(TrainerTest, LayerRecomputationTrainsTheSameBits) {
  // runtime.recompute: layer, end to end: the same losses and final parameters, exactly.
  torch::set_num_threads(1);
  TempDir a, b;
  job::JobConfig plain = SmallJob(a.path());
  plain.train.max_steps = 4;
  plain.checkpoint.every_steps = 4;
  job::JobConfig recompute = SmallJob(b.path());
  recompute.train.max_steps = 4;
  recompute.checkpoint.every_steps = 4;
  recompute.runtime.recompute = job::Recompute::kLayer;
  const TrainSummary x = Train(plain), y = Train(recompute);
  ASSERT_EQ(x.losses.size(), 4u);
  ASSERT_EQ(x.losses, y.losses);
  auto pa = FinalParameters(a.path()), pb = FinalParameters(b.path());
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& [name, t] : pa) EXPECT_TRUE(torch::equal(t, pb.at(name))) << name;
}

TEST(TrainerTest, PackedBatchesTrainLikeOnePairPerRowAndResumeExactly) {
  // data.pack_tokens, end to end. Without dropout a packed run computes the plain run's
  // losses (to rounding: rows of other widths sum in another order).
  torch::set_num_threads(1);
  TempDir a, b, c, d;
  auto without_dropout = [](job::JobConfig j) {
    j.model.dropout(0.0).attention_dropout(0.0);
    j.train.max_steps = 6;
    return j;
  };
  job::JobConfig plain = without_dropout(SmallJob(a.path()));
  job::JobConfig packed = without_dropout(SmallJob(b.path()));
  packed.data.pack_tokens = 48;
  const TrainSummary x = Train(plain), y = Train(packed);
  ASSERT_EQ(x.losses.size(), 6u);
  ASSERT_EQ(y.losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(x.losses[i], y.losses[i], 1e-4 * x.losses[i]) << i;
  // With dropout, a packed run resumed from its checkpoint repeats the uninterrupted one.
  job::JobConfig full = SmallJob(c.path());
  full.data.pack_tokens = 48;
  const TrainSummary uninterrupted = Train(full);
  job::JobConfig first = SmallJob(d.path());
  first.data.pack_tokens = 48;
  first.train.max_steps = 6;
  Train(first);
  job::JobConfig rest = first;
  rest.train.max_steps = 12;
  const TrainSummary resumed = Train(rest);
  ASSERT_EQ(resumed.start_step, 6);
  ASSERT_EQ(resumed.losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(resumed.losses[i], uninterrupted.losses[6 + i]) << i;
}

TEST(TrainerTest, AttentionSdpaNeedsLibTorch2) {
  job::JobConfig c = SmallJob("");
  c.runtime.attention = job::AttentionChoice::kSdpa;
  c.train.max_steps = 1;
  auto trainer = Trainer::Create(c, TrainerIo{});
  if (TORCH_VERSION_MAJOR >= 2) {
    EXPECT_TRUE(trainer.ok()) << trainer.status();
  } else {
    ASSERT_FALSE(trainer.ok());
    EXPECT_NE(trainer.status().message().find("runtime.attention: sdpa needs LibTorch >= 2.0"),
              std::string::npos)
        << trainer.status();
  }
  c.runtime.attention = job::AttentionChoice::kAuto;  // Leave the process-wide switch as the other tests expect.
  ASSERT_TRUE(Trainer::Create(c, TrainerIo{}).ok());
}

TEST(TrainerTest, StopFlagEndsTheRunBeforeTheNextStep) {
  TempDir dir;
  std::atomic<bool> stop{true};
  TrainerIo io;
  io.stop = &stop;
  auto trainer = Trainer::Create(SmallJob(dir.path()), io);
  ASSERT_TRUE(trainer.ok());
  auto summary = (*trainer)->Run();
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->stop_reason, "signal");
  EXPECT_EQ(summary->final_step, 0);
}

// The job schema accepts exactly the pseudo-languages the generator knows: the schema keeps
// its own list so that it (and the coordinator) stays free of data/.
TEST(TrainingDataTest, JobSchemaAndGeneratorKnowTheSameSyntheticLanguages) {
  EXPECT_EQ(job::SyntheticDataLanguages(), data::SyntheticLanguages());
}

}  // namespace
}  // namespace deepnet::train
