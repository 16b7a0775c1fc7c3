#include "cli/data_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "tests/data/mo_test_writer.h"
#include "tests/temp_dir.h"

namespace deepnet::cli {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

TEST(DataCommandTest, BuildCorpusWritesFilesAndPrintsTheTable) {
  TempDir dir;
  std::filesystem::create_directories(dir / "root/de/LC_MESSAGES");
  data::mo_test::WriteBytes(dir / "root/de/LC_MESSAGES/app.mo",
                            data::mo_test::WriteMo({{"Open", "Öffnen"}, {"Close", "Schließen"}}));
  BuildCorpusCommand command;
  command.roots = {dir / "root", dir / "missing"};
  command.out_dir = dir / "out";
  command.valid_fraction = 0;
  command.test_fraction = 0;
  std::ostringstream out, err;
  ASSERT_EQ(RunBuildCorpus(command, out, err), kExitOk) << err.str();
  EXPECT_TRUE(std::filesystem::exists(dir / "out/train.de.tsv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "out/summary.json"));
  EXPECT_THAT(out.str(), HasSubstr("de                    1         2       0       0         2"));
  EXPECT_THAT(out.str(), HasSubstr("1 locales (0 with >=1k pairs, 0 with >=10k), 2 pairs, "
                                   "2 unique English sentences"));
  EXPECT_THAT(out.str(), HasSubstr("root " + (dir / "missing") + " does not exist"));
  EXPECT_THAT(out.str(), HasSubstr("pairs/s"));
}

TEST(DataCommandTest, BuildCorpusRejectsBadOptions) {
  TempDir dir;
  BuildCorpusCommand command;
  command.out_dir = dir / "out";
  command.locales = {"en"};
  std::ostringstream out, err;
  EXPECT_EQ(RunBuildCorpus(command, out, err), kExitBadInput);
  EXPECT_THAT(err.str(), HasSubstr("locale \"en\""));
}

TEST(DataCommandTest, FetchRunsTheScriptAndForwardsBothStreams) {
  TempDir dir;
  const std::string script = dir / "fetch.sh";
  std::ofstream(script) << "echo \"to stdout: $1\"\necho to stderr >&2\nexit 0\n";
  FetchL10nCommand command;
  command.script = script;
  command.l10n_dir = dir / "l10n";
  std::ostringstream out, err;
  EXPECT_EQ(RunFetchL10n(command, out, err), kExitOk) << err.str();
  EXPECT_EQ(out.str(), "to stdout: " + (dir / "l10n") + "\n");
  EXPECT_EQ(err.str(), "to stderr\n");
}

TEST(DataCommandTest, FetchReportsScriptFailureAndMissingScript) {
  TempDir dir;
  const std::string script = dir / "fail.sh";
  std::ofstream(script) << "echo partial\nexit 3\n";
  FetchL10nCommand command;
  command.script = script;
  std::ostringstream out, err;
  EXPECT_EQ(RunFetchL10n(command, out, err), kExitFailure);
  EXPECT_EQ(out.str(), "partial\n");
  EXPECT_THAT(err.str(), HasSubstr("exited with status 3"));

  command.script = dir / "absent.sh";
  std::ostringstream out2, err2;
  EXPECT_EQ(RunFetchL10n(command, out2, err2), kExitBadInput);
  EXPECT_THAT(err2.str(), HasSubstr("absent.sh: no such script"));
}

}  // namespace
}  // namespace deepnet::cli
