#include "worker/commands.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/worker/test_util.h"

namespace deepnet::worker {
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
}  // namespace deepnet::worker
