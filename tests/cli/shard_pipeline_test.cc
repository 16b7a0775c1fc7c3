// corpus TSVs -> `data prepare` (SentencePiece + shards) -> train from shards -> eval/translate
// from the checkpoint alone (the SentencePiece model travels inside it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/eval_command.h"
#include "cli/prepare_command.h"
#include "data/synthetic_task.h"
#include "tests/temp_dir.h"
#include "train/training_data.h"

namespace deepnet::cli {
namespace {

using testing::TempDir;

// Writes <split>.<locale>.tsv files in the corpus layout, from the synthetic task.
void WriteCorpus(const std::string& dir) {
  std::filesystem::create_directories(dir);
  data::SyntheticTaskOptions o;
  o.languages = {"rev", "cap"};
  o.pairs_per_language = 300;
  o.max_words = 4;
  std::map<std::string, int> seen;  // per language
  std::map<std::string, std::ofstream> files;
  for (const auto& ex : data::GenerateSyntheticCorpus(o)) {
    const int i = seen[ex.tgt_lang]++;
    const std::string split = i % 10 == 0 ? "test" : (i % 10 == 1 ? "valid" : "train");
    auto& f = files[split + "." + ex.tgt_lang];
    if (!f.is_open()) f.open(dir + "/" + split + "." + ex.tgt_lang + ".tsv");
    f << "en\t" << ex.tgt_lang << "\t" << ex.src << "\t" << ex.tgt << "\n";
  }
}

// `deepnet data prepare` of DIR/corpus into DIR/shards (a 120-piece vocabulary).
void PrepareShards(const TempDir& dir) {
  data::ShardBuildOptions prepare;
  prepare.input_dir = dir / "corpus";
  prepare.output_dir = dir / "shards";
  prepare.vocab_size = 120;
  prepare.training_sentences = 2000;
  prepare.max_len = 48;
  prepare.num_threads = 1;
  std::ostringstream out, err;
  ASSERT_EQ(RunPrepare(prepare, out, err), kExitOk) << err.str();
}

TEST(ShardPipelineTest, PrepareTrainEvaluateTranslate) {
  TempDir dir;
  WriteCorpus(dir / "corpus");
  ASSERT_NO_FATAL_FAILURE(PrepareShards(dir));
  auto index = nlohmann::json::parse(std::ifstream(dir / "shards/shards.json"));
  EXPECT_EQ(index["vocab_size"], 120);

  std::ofstream(dir / "job.yaml")
      << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 32, heads: 2, ffn_dim: 64, "
         "dropout: 0.0, max_positions: 64}\n"
      << "data: {source: shards, shard_dir: " << (dir / "shards") << ", max_len: 48, max_tokens: 400}\n"
      << "train: {max_steps: 20, log_every: 10, valid_every: 10, valid_max_pairs: 5}\n"
      << "checkpoint: {dir: " << (dir / "ckpt") << "}\n";
  TrainCommand train;
  train.config_path = dir / "job.yaml";
  std::ostringstream train_out, train_err;
  ASSERT_EQ(RunTrain(train, nullptr, train_out, train_err), kExitOk) << train_err.str();
  EXPECT_NE(train_out.str().find("in 4 directions"), std::string::npos) << train_out.str();
  EXPECT_NE(train_out.str().find("[valid] step 20"), std::string::npos) << train_out.str();

  // The shards can go away: the checkpoint holds the tokenizer.
  std::filesystem::remove_all(dir / "shards");
  EvalCommand eval;
  eval.checkpoint = dir / "ckpt";
  eval.test_dir = dir / "corpus";
  eval.max_sentences = 5;
  eval.beam_size = 2;
  eval.format = "json";
  std::ostringstream eval_out, eval_err;
  ASSERT_EQ(RunEval(eval, eval_out, eval_err), kExitOk) << eval_err.str();
  auto report = nlohmann::json::parse(eval_out.str());
  EXPECT_EQ(report["directions"].size(), 4u);  // en->rev, rev->en, en->cap, cap->en
  EXPECT_EQ(report["x2en"]["directions"], 2);
  EXPECT_EQ(report["en2x"]["directions"], 2);
  for (const auto& d : report["directions"]) {
    EXPECT_EQ(d["sentences"], 5);
    EXPECT_GE(d["chrf2"].get<double>(), 0.0);
  }

  TranslateCommand translate;
  translate.checkpoint = dir / "ckpt";
  translate.to_lang = "cap";
  std::istringstream in("the cat\n");
  std::ostringstream tr_out, tr_err;
  EXPECT_EQ(RunTranslate(translate, in, tr_out, tr_err), kExitOk) << tr_err.str();
}

TEST(ShardPipelineTest, EvalNeedsExactlyOneSource) {
  EvalCommand eval;
  eval.checkpoint = "/nonexistent";
  std::ostringstream out, err;
  EXPECT_EQ(RunEval(eval, out, err), kExitBadInput);
  EXPECT_NE(err.str().find("--test-dir"), std::string::npos);
}

// shards.json is the user's file: every file it names must be in the shard folder, so that an
// entry "/etc/shadow", "../x" or a link in the folder to elsewhere is refused before any open.
TEST(ShardPipelineTest, ShardIndexEntriesResolveOnlyInsideTheFolder) {
  TempDir dir;
  WriteCorpus(dir / "corpus");
  ASSERT_NO_FATAL_FAILURE(PrepareShards(dir));
  const std::string index_path = dir / "shards/shards.json";
  const nlohmann::json original = nlohmann::json::parse(std::ifstream(index_path));
  job::DataConfig config;
  config.source = job::DataSource::kShards;
  config.shard_dir = dir / "shards";
  config.max_len = 48;
  ASSERT_TRUE(train::LoadTrainingData(config).ok());

  std::filesystem::copy_file(dir / "shards/spm.model", dir / "elsewhere.model");
  std::filesystem::create_symlink(dir / "elsewhere.model", dir / "shards/link.model");
  const std::string first_file = original["shards"][0]["file"];
  const std::vector<std::pair<std::string, std::string>> escapes = {
      {"file", "../corpus/" + first_file}, {"file", "/etc/shadow"}, {"file", "sub/x.bin"},
      {"tokenizer", "../elsewhere.model"}, {"tokenizer", "link.model"}};
  for (const auto& [key, value] : escapes) {
    nlohmann::json index = original;
    if (key == "tokenizer") {
      index["tokenizer"] = value;
    } else {
      index["shards"][0]["file"] = value;
    }
    std::ofstream(index_path, std::ios::trunc) << index.dump();
    const absl::Status status = train::LoadTrainingData(config).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << value << ": " << status;
    EXPECT_NE(std::string(status.message()).find(value), std::string::npos) << status;
    EXPECT_NE(std::string(status.message()).find("data.shard_dir"), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace deepnet::cli
