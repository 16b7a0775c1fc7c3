// The random-token task, learned positions and the scaled_default init through the trainer:
// data loading, checkpoints (the learned tables are saved) and the model-shape check on resume.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "checkpoint/checkpoint.h"
#include "job/job_config.h"
#include "tests/temp_dir.h"
#include "train/trainer.h"
#include "train/training_data.h"

namespace deepnet::train {
namespace {

using testing::TempDir;

job::JobConfig RandomTokensJob(const std::string& checkpoint_dir) {
  job::JobConfig c;
  c.model = model::DeepNetConfig()
                .encoder_layers(1)
                .decoder_layers(1)
                .d_model(16)
                .heads(2)
                .ffn_dim(32)
                .vocab_size(0)
                .dropout(0.0)
                .max_positions(32)
                .init(model::InitScheme::kScaledDefault)
                .positions(model::PositionKind::kLearned);
  c.data.source = job::DataSource::kRandomTokens;
  c.data.random_tokens.vocab_size = 20;
  c.data.random_tokens.pairs = 200;
  c.data.random_tokens.min_len = 2;
  c.data.random_tokens.max_len = 8;
  c.data.random_tokens.target = job::RandomTokensTarget::kReverse;
  c.data.max_tokens = 200;
  c.data.max_len = 16;
  c.optim.warmup_steps = 2;
  c.train.max_steps = 4;
  c.train.log_every = 1;
  c.train.probe_every = 0;
  c.checkpoint.dir = checkpoint_dir;
  c.checkpoint.every_steps = 4;
  return c;
}

TEST(RandomTokensTrainingTest, DataHasTheTaskVocabularyAndTargetRule) {
  TempDir dir;
  const job::JobConfig c = RandomTokensJob(dir.path());
  auto data = LoadTrainingData(c.data);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->tokenizer_kind, "random_tokens");
  EXPECT_EQ(data->languages, (std::vector<std::string>{"reverse"}));
  EXPECT_EQ(data->tokenizer->vocab_size(), 4 + 1 + 20);
  ASSERT_EQ(data->pairs.size(), 1u);
  EXPECT_EQ(data->train_examples() + data->valid_examples(), 200);
  for (const auto& ex : data->pairs[0].train) {
    ASSERT_GE(ex.src.size(), 4u);  // tag, >= 2 symbols, EOS
    EXPECT_EQ(ex.src.front(), *data->tokenizer->LangTagId("reverse"));
    // target = reversed symbols + EOS
    std::vector<int32_t> symbols(ex.src.begin() + 1, ex.src.end() - 1);
    std::reverse(symbols.begin(), symbols.end());
    symbols.push_back(data->tokenizer->eos_id());
    EXPECT_EQ(ex.tgt, symbols);
    for (int32_t id : symbols) EXPECT_LT(id, data->tokenizer->vocab_size());
  }
}

TEST(RandomTokensTrainingTest, TrainsSavesLearnedTablesAndRefusesAnotherPositionKind) {
  TempDir dir;
  job::JobConfig c = RandomTokensJob(dir.path());
  {
    auto trainer = Trainer::Create(c, TrainerIo{});
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    auto summary = (*trainer)->Run();
    ASSERT_TRUE(summary.ok()) << summary.status();
  }
  checkpoint::CheckpointStoreOptions options;
  options.dir = dir.path();
  auto store = checkpoint::CheckpointStore::Open(options);
  ASSERT_TRUE(store.ok());
  auto ckpt = (*store)->LoadLatest();
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_TRUE(ckpt->Find("encoder.embed_positions.weight").defined());
  EXPECT_TRUE(ckpt->Find("decoder.embed_positions.weight").defined());
  EXPECT_EQ(ckpt->metadata["model"]["positions"], "learned");
  EXPECT_EQ(ckpt->metadata["model"]["init"], "scaled_default");

  // Same config resumes; another position kind or init is refused, naming the field.
  c.train.max_steps = 5;
  EXPECT_TRUE(Trainer::Create(c, TrainerIo{}).ok());
  for (bool change_init : {false, true}) {
    job::JobConfig other = c;
    if (change_init) {
      other.model.init(model::InitScheme::kPaper);
    } else {
      other.model.positions(model::PositionKind::kSinusoidal);
    }
    auto refused = Trainer::Create(other, TrainerIo{});
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
    EXPECT_NE(refused.status().message().find(change_init ? "\"init\":\"paper\""
                                                          : "\"positions\":\"sinusoidal\""),
              std::string::npos)
        << refused.status();
  }
}

}  // namespace
}  // namespace deepnet::train
