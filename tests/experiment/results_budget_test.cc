#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "experiment/budget.h"
#include "experiment/results.h"
#include "tests/temp_dir.h"

namespace deepnet::experiment {
namespace {

TEST(ResultsTest, AppendReadAndLatestRowWins) {
  testing::TempDir dir;
  const std::string path = dir / "results.jsonl";
  auto empty = ReadResults(path);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->rows.empty());
  ASSERT_TRUE(AppendResult(path, {{"run_id", "a"}, {"status", "budget"}}).ok());
  ASSERT_TRUE(AppendResult(path, {{"run_id", "b"}, {"status", "ok"}}).ok());
  ASSERT_TRUE(AppendResult(path, {{"run_id", "a"}, {"status", "plateau"}}).ok());
  auto file = ReadResults(path);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(file->rows.size(), 3u);
  auto latest = LatestRows(file->rows);
  EXPECT_EQ(latest["a"]["status"], "plateau");
  EXPECT_EQ(latest["b"]["status"], "ok");
}

TEST(ResultsTest, TornLastLineIsSkippedAndTheNextRowStartsALine) {
  testing::TempDir dir;
  const std::string path = dir / "results.jsonl";
  ASSERT_TRUE(AppendResult(path, {{"run_id", "a"}, {"status", "ok"}}).ok());
  { std::ofstream(path, std::ios::app) << R"({"run_id": "b", "sta)"; }
  ASSERT_TRUE(AppendResult(path, {{"run_id", "c"}, {"status", "ok"}}).ok());
  auto file = ReadResults(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->bad_lines, 1);
  ASSERT_EQ(file->rows.size(), 2u);
  EXPECT_EQ(file->rows[1]["run_id"], "c");
}

TEST(ResultsTest, FinishedNeedsAFinalStatusAndTheSameConfig) {
  const nlohmann::json config = {{"train", {{"max_steps", 3}}}};
  nlohmann::json row = {{"run_id", "a"}, {"status", "ok"}, {"config", config}};
  EXPECT_TRUE(IsFinished(row, config));
  for (const char* status : {"diverged", "plateau", "failed"}) {
    row["status"] = status;
    EXPECT_TRUE(IsFinished(row, config)) << status;
  }
  row["status"] = "budget";
  EXPECT_FALSE(IsFinished(row, config));
  row["status"] = "ok";
  EXPECT_FALSE(IsFinished(row, {{"train", {{"max_steps", 4}}}}));
}

TEST(ResultsTest, YamlBecomesTypedJson) {
  const nlohmann::json j = YamlToJson("a: 1\nb: 1.5e-3\nc: true\nd: deepnorm\ne: '7'\nf: [1, x]\n");
  EXPECT_EQ(j["a"], 1);
  EXPECT_DOUBLE_EQ(j["b"].get<double>(), 1.5e-3);
  EXPECT_EQ(j["c"], true);
  EXPECT_EQ(j["d"], "deepnorm");
  EXPECT_EQ(j["e"], "7");
  EXPECT_EQ(j["f"], nlohmann::json({1, "x"}));
  EXPECT_EQ(ScalarToJson("5e-4"), 5e-4);
  EXPECT_EQ(ScalarToJson("post_ln"), "post_ln");
}

TEST(BudgetTest, MinutesAndRuns) {
  SweepBudget budget;
  EXPECT_TRUE(std::isinf(RemainingSeconds(budget, 1e9)));
  EXPECT_FALSE(BudgetStop(budget, 1e9, 1000000));
  budget.minutes = 2;
  EXPECT_DOUBLE_EQ(RemainingSeconds(budget, 30), 90);
  EXPECT_DOUBLE_EQ(RemainingSeconds(budget, 500), 0);
  EXPECT_FALSE(BudgetStop(budget, 100, 0));
  auto spent = BudgetStop(budget, 120 - kMinRunSeconds / 2, 0);
  ASSERT_TRUE(spent);
  EXPECT_THAT(*spent, ::testing::HasSubstr("budget.minutes"));
  budget.max_runs = 3;
  EXPECT_FALSE(BudgetStop(budget, 0, 2));
  auto runs = BudgetStop(budget, 0, 3);
  ASSERT_TRUE(runs);
  EXPECT_THAT(*runs, ::testing::HasSubstr("budget.max_runs (3)"));
}

TEST(BudgetTest, RunGetsWhatIsLeftOrItsOwnLimit) {
  EXPECT_DOUBLE_EQ(RunMaxMinutes(90, 0), 1.5);
  EXPECT_DOUBLE_EQ(RunMaxMinutes(90, 1), 1);
  EXPECT_DOUBLE_EQ(RunMaxMinutes(90, 5), 1.5);
  EXPECT_DOUBLE_EQ(RunMaxMinutes(INFINITY, 0), 0);
  EXPECT_DOUBLE_EQ(RunMaxMinutes(INFINITY, 3), 3);
}

}  // namespace
}  // namespace deepnet::experiment
