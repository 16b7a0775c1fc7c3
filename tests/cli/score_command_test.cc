#include "cli/score_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "tests/temp_dir.h"

namespace deepnet::cli {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::string Write(const TempDir& dir, const std::string& name, const std::string& contents) {
  const std::string path = dir / name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(ScoreCommandTest, PrintsSacrebleuStyleTextReport) {
  TempDir dir;
  ScoreCommand cmd;
  cmd.hyp_path = Write(dir, "hyp.txt", "a b c d\n");
  cmd.ref_path = Write(dir, "ref.txt", "a b c d e f g h\n");
  std::ostringstream out, err;
  ASSERT_EQ(RunScore(cmd, out, err), kExitOk) << err.str();
  // Every n-gram matches, so BLEU = BP = exp(1 - 8/4) = 36.79%.
  EXPECT_THAT(out.str(), HasSubstr("BLEU = 36.79 100.0/100.0/100.0/100.0 (BP = 0.368 ratio = "
                                   "0.500 hyp_len = 4 ref_len = 8)\n"));
  EXPECT_THAT(out.str(), HasSubstr("\nchrF2 = "));
  EXPECT_THAT(out.str(), HasSubstr("tok:13a|smooth:exp"));
  EXPECT_EQ(err.str(), "");
}

TEST(ScoreCommandTest, JsonHasFullPrecisionScoresAndStatistics) {
  TempDir dir;
  ScoreCommand cmd;
  cmd.format = "json";
  // CRLF line ends and trailing Unicode spaces are stripped like sacreBLEU does.
  cmd.hyp_path = Write(dir, "hyp.txt", "The cat sat.\r\nHello, world!\u3000\n");
  cmd.ref_path = Write(dir, "ref.txt", "The cat sat.\nHello, world!\n");
  std::ostringstream out, err;
  ASSERT_EQ(RunScore(cmd, out, err), kExitOk) << err.str();
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["lines"].get<int>(), 2);
  EXPECT_DOUBLE_EQ(j["bleu"]["score"].get<double>(), 100.0);
  EXPECT_EQ(j["bleu"]["hyp_len"].get<int>(), 8);
  EXPECT_EQ(j["bleu"]["counts"][0].get<int>(), 8);
  EXPECT_THAT(j["bleu"]["verbose_score"].get<std::string>(), HasSubstr("100.0/100.0/100.0/"));
  EXPECT_THAT(j["bleu"]["signature"].get<std::string>(), HasSubstr("nrefs:1|case:mixed"));
  EXPECT_DOUBLE_EQ(j["chrf2"]["score"].get<double>(), 100.0);
  EXPECT_THAT(j["chrf2"]["signature"].get<std::string>(), HasSubstr("nc:6|nw:0|space:no"));
}

TEST(ScoreCommandTest, DifferentLineCountsNameBothFiles) {
  TempDir dir;
  ScoreCommand cmd;
  cmd.hyp_path = Write(dir, "hyp.txt", "a\nb\n");
  cmd.ref_path = Write(dir, "ref.txt", "a\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunScore(cmd, out, err), kExitBadInput);
  EXPECT_THAT(err.str(), HasSubstr(cmd.hyp_path + " has 2 lines but " + cmd.ref_path + " has 1"));
  EXPECT_EQ(out.str(), "");
}

TEST(ScoreCommandTest, UnreadableFileIsBadInputNamingThePath) {
  TempDir dir;
  ScoreCommand cmd;
  cmd.hyp_path = Write(dir, "hyp.txt", "a\n");
  cmd.ref_path = dir / "missing.txt";
  std::ostringstream out, err;
  EXPECT_EQ(RunScore(cmd, out, err), kExitBadInput);
  EXPECT_THAT(err.str(), HasSubstr(cmd.ref_path));

  cmd.ref_path = dir.path();  // A folder, not a file.
  std::ostringstream err2;
  EXPECT_EQ(RunScore(cmd, out, err2), kExitBadInput);
  EXPECT_THAT(err2.str(), HasSubstr(dir.path()));
}

TEST(ScoreCommandTest, InvalidUtf8IsBadInputNamingPathAndLine) {
  TempDir dir;
  ScoreCommand cmd;
  cmd.hyp_path = Write(dir, "hyp.txt", "fine\nbad \xFF byte\n");
  cmd.ref_path = Write(dir, "ref.txt", "fine\nfine\n");
  std::ostringstream out, err;
  EXPECT_EQ(RunScore(cmd, out, err), kExitBadInput);
  EXPECT_THAT(err.str(), HasSubstr(cmd.hyp_path + ":2: not valid UTF-8"));
}

TEST(ScoreCommandTest, RejectsUnknownFormatAndEmptyInput) {
  TempDir dir;
  ScoreCommand cmd;
  cmd.hyp_path = Write(dir, "hyp.txt", "");
  cmd.ref_path = Write(dir, "ref.txt", "");
  std::ostringstream out, err;
  EXPECT_EQ(RunScore(cmd, out, err), kExitBadInput);
  EXPECT_THAT(err.str(), HasSubstr("nothing to score"));

  cmd.format = "xml";
  std::ostringstream err2;
  EXPECT_EQ(RunScore(cmd, out, err2), kExitBadInput);
  EXPECT_THAT(err2.str(), HasSubstr("--format"));
}

}  // namespace
}  // namespace deepnet::cli
