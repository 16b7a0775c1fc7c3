// `deepnet translate` and `deepnet eval` on a checkpoint of the random-token task with learned
// positions: they load its own symbol tokenizer and run, or fail with a clear message.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/eval_command.h"
#include "tests/temp_dir.h"

namespace deepnet::cli {
namespace {

using testing::TempDir;

TEST(RandomTokensCommandsTest, TrainThenTranslateAndEval) {
  TempDir dir;
  std::ofstream(dir / "job.yaml")
      << "model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32, "
         "dropout: 0.0, max_positions: 32, init: scaled_default, positions: learned}\n"
         "data: {source: random_tokens, max_len: 16, random_tokens: {vocab_size: 10, pairs: 60, "
         "min_len: 2, max_len: 6, target: copy}}\n"
         "train: {max_steps: 2, log_every: 1}\n"
      << "checkpoint: {dir: " << (dir / "ckpt") << "}\n";
  TrainCommand train;
  train.config_path = dir / "job.yaml";
  std::ostringstream out, err;
  ASSERT_EQ(RunTrain(train, nullptr, out, err), kExitOk) << err.str();

  TranslateCommand translate;
  translate.checkpoint = dir / "ckpt";
  translate.to_lang = "copy";
  translate.beam_size = 2;
  // Symbols, an unknown word (unk) and an empty line: output per line, no crash.
  std::istringstream in("s1 s2 s3\nhello s9\n\n");
  std::ostringstream translations, terr;
  ASSERT_EQ(RunTranslate(translate, in, translations, terr), kExitOk) << terr.str();
  std::istringstream lines(translations.str());
  int count = 0;
  for (std::string line; std::getline(lines, line);) {
    ++count;
    std::istringstream words(line);
    for (std::string w; words >> w;) EXPECT_EQ(w[0], 's') << line;  // only symbols come out
  }
  EXPECT_EQ(count, 3);

  translate.to_lang = "reverse";
  std::istringstream in2("s1\n");
  std::ostringstream out2, err2;
  EXPECT_EQ(RunTranslate(translate, in2, out2, err2), kExitBadInput);
  EXPECT_NE(err2.str().find("copy"), std::string::npos) << err2.str();

  std::ofstream(dir / "test.tsv") << "rnd\tcopy\ts1 s2 s3\ts1 s2 s3\nrnd\tcopy\ts4 s5\ts4 s5\n";
  EvalCommand eval;
  eval.checkpoint = dir / "ckpt";
  eval.tsv = dir / "test.tsv";
  eval.beam_size = 2;
  std::ostringstream eout, eerr;
  EXPECT_EQ(RunEval(eval, eout, eerr), kExitOk) << eerr.str();
}

}  // namespace
}  // namespace deepnet::cli
