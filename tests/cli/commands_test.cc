#include "cli/commands.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/temp_dir.h"

namespace deepnet::cli {
namespace {

using testing::TempDir;

TEST(CommandsTest, InspectJsonHasScalingKeysAndNullForAbsentStacks) {
  InspectCommand cmd;
  cmd.format = "json";
  cmd.model = model::DeepNetConfig().encoder_layers(100).decoder_layers(100).d_model(1024)
                  .heads(16).ffn_dim(4096).vocab_size(64000);
  std::ostringstream out, err;
  ASSERT_EQ(RunInspect(cmd, out, err), kExitOk) << err.str();
  auto j = nlohmann::json::parse(out.str());
  EXPECT_NEAR(j["encoder.alpha"].get<double>(), 0.81 * std::pow(1e10, 1.0 / 16), 1e-9);
  EXPECT_NEAR(j["decoder.beta"].get<double>(), std::pow(1200.0, -0.25), 1e-12);
  EXPECT_GT(j["parameters"].get<int64_t>(), 2'900'000'000LL);

  cmd.model.encoder_layers(0).decoder_layers(24);
  std::ostringstream dec_only;
  ASSERT_EQ(RunInspect(cmd, dec_only, err), kExitOk);
  auto d = nlohmann::json::parse(dec_only.str());
  EXPECT_TRUE(d["encoder.alpha"].is_null());
  EXPECT_TRUE(d["encoder.beta"].is_null());
  EXPECT_NEAR(d["decoder.alpha"].get<double>(), std::pow(48.0, 0.25), 1e-12);
}

TEST(CommandsTest, InspectShowsMemoryPerRankForTheJobsLayout) {
  TempDir dir;
  std::ofstream(dir / "job.yaml")
      << "model: {encoder_layers: 4, decoder_layers: 4, d_model: 64, heads: 4, ffn_dim: 128, "
         "vocab_size: 1000}\n"
         "data: {max_tokens: 512, max_len: 64}\n"
         "parallel: {pipeline_stages: 2, micro_batches: 4, schedule: gpipe}\n";
  InspectCommand cmd;
  cmd.config_path = dir / "job.yaml";
  cmd.format = "json";
  std::ostringstream out, err;
  ASSERT_EQ(RunInspect(cmd, out, err), kExitOk) << err.str();
  const auto m = nlohmann::json::parse(out.str())["memory_per_rank"];
  EXPECT_EQ(m["pipeline_stages"].get<int64_t>(), 2);
  EXPECT_EQ(m["schedule"].get<std::string>(), "gpipe");
  EXPECT_EQ(m["live_micro_batches"].get<int64_t>(), 4);
  EXPECT_EQ(m["tokens_per_micro_batch"].get<int64_t>(), 512);
  EXPECT_EQ(m["total_bytes"].get<int64_t>(),
            m["parameter_bytes"].get<int64_t>() + m["gradient_bytes"].get<int64_t>() +
                m["optimizer_bytes"].get<int64_t>() + m["activation_bytes"].get<int64_t>() +
                m["position_table_bytes"].get<int64_t>());
  EXPECT_EQ(m["optimizer_bytes"].get<int64_t>(), 2 * m["parameter_bytes"].get<int64_t>());

  cmd.format = "text";
  std::ostringstream text;
  ASSERT_EQ(RunInspect(cmd, text, err), kExitOk) << err.str();
  EXPECT_NE(text.str().find("memory per rank (fp32, 2 pipeline stage(s), 4 micro-batch(es), gpipe"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("    activations:         "), std::string::npos);
}

TEST(CommandsTest, InspectRejectsImpossibleShapes) {
  InspectCommand cmd;
  cmd.model = model::DeepNetConfig().d_model(100).heads(3);
  std::ostringstream out, err;
  EXPECT_EQ(RunInspect(cmd, out, err), kExitBadInput);
  EXPECT_NE(err.str().find("heads"), std::string::npos) << err.str();
}

TEST(CommandsTest, TrainRejectsBadConfigNamingTheKey) {
  TempDir dir;
  std::ofstream(dir / "job.yaml") << "optim:\n  lr: -1\nmodel:\n  nrom: deepnorm\n";
  TrainCommand cmd;
  cmd.config_path = dir / "job.yaml";
  std::ostringstream out, err;
  EXPECT_EQ(RunTrain(cmd, nullptr, out, err), kExitBadInput);
  EXPECT_NE(err.str().find("optim.lr"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("model.nrom"), std::string::npos) << err.str();
}

// A model far larger than its slot: `deepnet train` exits 2 with the estimate before it builds
// anything (the slot's memory comes from the worker's variable, set here).
TEST(CommandsTest, TrainRefusesAModelLargerThanItsMemory) {
  TempDir dir;
  std::ofstream(dir / "job.yaml")
      << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16384, "
         "heads: 16, ffn_dim: 65536, max_positions: 64}\n"
         "data: {synthetic: {languages: [cp], pairs_per_language: 20}, "
         "max_len: 60}\n"
         "train: {max_steps: 1}\n";
  TrainCommand cmd;
  cmd.config_path = dir / "job.yaml";
  ASSERT_EQ(setenv("DEEPNET_SLOT_MEMORY_BYTES", "1073741824", 1), 0);
  std::ostringstream out, err;
  const int code = RunTrain(cmd, nullptr, out, err);
  unsetenv("DEEPNET_SLOT_MEMORY_BYTES");
  EXPECT_EQ(code, kExitBadInput);
  EXPECT_NE(err.str().find("not enough memory: this model needs an estimated"), std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("but 1.00 GiB is available (the worker's slot memory"),
            std::string::npos)
      << err.str();
}

TEST(CommandsTest, TrainThenTranslate) {
  TempDir dir;
  std::ofstream(dir / "job.yaml") << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, "
                                     "heads: 2, ffn_dim: 32, dropout: 0.0, max_positions: 256}\n"
                                     "data: {synthetic: {languages: [cp, rev], pairs_per_language: 50}}\n"
                                     "train: {max_steps: 3, log_every: 1}\n"
                                  << "checkpoint: {dir: " << (dir / "ckpt") << "}\n";
  TrainCommand train;
  train.config_path = dir / "job.yaml";
  std::ostringstream out, err;
  ASSERT_EQ(RunTrain(train, nullptr, out, err), kExitOk) << err.str();
  EXPECT_NE(out.str().find("[checkpoint] saved"), std::string::npos) << out.str();

  TranslateCommand translate;
  translate.checkpoint = dir / "ckpt";
  translate.to_lang = "rev";
  translate.beam_size = 2;
  std::istringstream in("the cat sat\nhello world\n");
  std::ostringstream translations, terr;
  ASSERT_EQ(RunTranslate(translate, in, translations, terr), kExitOk) << terr.str();
  std::istringstream lines(translations.str());
  int count = 0;
  for (std::string line; std::getline(lines, line);) ++count;
  EXPECT_EQ(count, 2);

  translate.to_lang = "xx";
  std::istringstream in2("hello\n");
  std::ostringstream out2, err2;
  EXPECT_EQ(RunTranslate(translate, in2, out2, err2), kExitBadInput);
  EXPECT_NE(err2.str().find("cp, rev"), std::string::npos) << err2.str();
}

// What deepnet-worker relies on: JSON progress whose checkpoint events carry step and path, a
// fresh checkpoint.dir starting from step 0, and the same job file resuming from the latest
// checkpoint when started again (a restarted attempt).
TEST(CommandsTest, JsonTrainStartsFreshThenResumesFromTheLatestCheckpoint) {
  TempDir dir;
  std::ofstream(dir / "job.yaml") << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, "
                                     "heads: 2, ffn_dim: 32, dropout: 0.0, max_positions: 256}\n"
                                     "data: {synthetic: {languages: [cp], pairs_per_language: 40}}\n"
                                     "train: {max_steps: 4, log_every: 1}\n"
                                  << "checkpoint: {dir: " << (dir / "ckpt") << ", every_steps: 1}\n";
  auto events = [](const std::string& text, const std::string& kind) {
    std::vector<nlohmann::json> found;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.value("event", "") == kind) found.push_back(j);
    }
    return found;
  };
  TrainCommand first;
  first.config_path = dir / "job.yaml";
  first.log_format = "json";
  first.overrides = {"train.max_steps=2"};  // Stands in for a run killed after step 2.
  std::ostringstream out1, err1;
  ASSERT_EQ(RunTrain(first, nullptr, out1, err1), kExitOk) << err1.str();
  EXPECT_TRUE(events(out1.str(), "resume").empty());
  const auto steps1 = events(out1.str(), "step");
  ASSERT_FALSE(steps1.empty());
  EXPECT_EQ(steps1.front()["step"], 1);
  const auto saved = events(out1.str(), "checkpoint");
  ASSERT_FALSE(saved.empty());
  EXPECT_EQ(saved.back()["step"], 2);
  const std::string path = saved.back()["path"].get<std::string>();
  EXPECT_EQ(saved.back()["message"], "saved " + path);
  EXPECT_NE(path.find("step_"), std::string::npos) << path;

  TrainCommand again;  // The same job file, as a restarted attempt gets it.
  again.config_path = dir / "job.yaml";
  again.log_format = "json";
  std::ostringstream out2, err2;
  ASSERT_EQ(RunTrain(again, nullptr, out2, err2), kExitOk) << err2.str();
  const auto resumed = events(out2.str(), "resume");
  ASSERT_EQ(resumed.size(), 1u) << out2.str();
  EXPECT_NE(resumed[0]["message"].get<std::string>().find("resumed from step 2"),
            std::string::npos);
  const auto steps2 = events(out2.str(), "step");
  ASSERT_FALSE(steps2.empty());
  EXPECT_EQ(steps2.front()["step"], 3);
}

TEST(CommandsTest, TranslateNamesAMissingCheckpoint) {
  TranslateCommand cmd;
  cmd.checkpoint = "/nonexistent/ckpt";
  cmd.to_lang = "de";
  std::istringstream in("x\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunTranslate(cmd, in, out, err), kExitBadInput);
  EXPECT_NE(err.str().find("/nonexistent/ckpt"), std::string::npos);
}

}  // namespace
}  // namespace deepnet::cli
