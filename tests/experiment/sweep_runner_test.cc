// RunSweep with a scripted executor: rows, resume and the run budget, without any trainer.
#include "experiment/sweep_runner.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "experiment/results.h"
#include "tests/temp_dir.h"

namespace deepnet::experiment {
namespace {

using ::testing::HasSubstr;

// Answers each run with the lines scripted for its id (default: a run that trained).
class ScriptedExecutor : public RunExecutor {
 public:
  std::string mode() const override { return "scripted"; }
  absl::StatusOr<RunExecution> Execute(const RunRequest& request) override {
    ran.push_back(request.run->id);
    overrides[request.run->id] = request.overrides;
    RunExecution exec;
    exec.wall_s = 1.0;
    if (request.run->id == interrupt_id) {
      exec.interrupted = true;
      return exec;
    }
    auto it = lines.find(request.run->id);
    const std::vector<std::string> script =
        it != lines.end() ? it->second
                          : std::vector<std::string>{
                                R"({"event":"valid","step":0,"loss":5.5})",
                                R"({"event":"step","step":4,"loss":1.0,"update_norm":0.3})",
                                R"({"event":"valid","step":4,"loss":1.0})",
                                R"({"event":"stop","message":"step 4 (max_steps) after 00:01"})"};
    for (const auto& line : script) exec.log.AddLine(line);
    exec.end.exit_code = exit_code;
    return exec;
  }
  std::vector<std::string> ran;
  std::map<std::string, std::vector<std::string>> overrides;
  std::map<std::string, std::vector<std::string>> lines;
  std::string interrupt_id;
  int exit_code = 0;
};

SweepSpec Spec(const std::string& out) {
  SweepSpec spec;
  spec.name = "scripted";
  spec.job_yaml = "model: {d_model: 16, heads: 2, ffn_dim: 32}\ntrain: {max_steps: 4}\n";
  spec.job_source = "job.yaml";
  spec.axes = {{"model.norm", {"post_ln", "deepnorm"}}, {"depth", {"1", "2"}}};
  spec.out = out;
  return spec;
}

absl::StatusOr<SweepSummary> Sweep(const SweepSpec& spec, ScriptedExecutor* executor) {
  auto plan = ExpandPlan(spec);
  if (!plan.ok()) return plan.status();
  RunnerOptions options;
  options.out_dir = spec.out;
  options.commit = "abc123";
  return RunSweep(spec, *plan, executor, options);
}

TEST(SweepRunnerTest, WritesOneRowPerRunWithTheRunnersOverrides) {
  testing::TempDir dir;
  ScriptedExecutor executor;
  executor.lines["norm-post_ln_depth-2"] = {R"({"event":"valid","step":0,"loss":5.5})",
                                            R"({"event":"valid","step":4,"loss":4.5})",
                                            R"j({"event":"stop","message":"step 4 (max_steps)"})j"};
  executor.lines["norm-deepnorm_depth-1"] = {R"({"event":"step","step":2,"loss":null})"};
  SweepSpec spec = Spec(dir / "out");
  spec.budget.minutes = 10;
  auto summary = Sweep(spec, &executor);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->ran, 4);
  auto rows = ReadResults(dir / "out/results.jsonl");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows.size(), 4u);
  auto latest = LatestRows(rows->rows);
  EXPECT_EQ(latest["norm-post_ln_depth-1"]["status"], "ok");
  EXPECT_EQ(latest["norm-post_ln_depth-2"]["status"], "plateau");
  EXPECT_EQ(latest["norm-deepnorm_depth-1"]["status"], "diverged");
  const auto& row = latest["norm-post_ln_depth-1"];
  EXPECT_EQ(row["commit"], "abc123");
  EXPECT_EQ(row["mode"], "scripted");
  EXPECT_EQ(row["axes"]["depth"], 1);
  EXPECT_EQ(row["config"]["model"]["decoder_layers"], 1);
  EXPECT_EQ(row["probe"][0]["update_norm"], 0.3);
  EXPECT_EQ(row["final_valid_loss"], 1.0);
  // Checkpoints off, and the budget's minutes passed on.
  const auto& o = executor.overrides["norm-post_ln_depth-1"];
  EXPECT_THAT(o, ::testing::Contains("checkpoint.dir="));
  EXPECT_THAT(o, ::testing::Contains(::testing::StartsWith("train.max_minutes=")));
}

TEST(SweepRunnerTest, ResumeSkipsFinishedRunsAndRedoesTheInterruptedOne) {
  testing::TempDir dir;
  const SweepSpec spec = Spec(dir / "out");
  ScriptedExecutor first;
  first.interrupt_id = "norm-deepnorm_depth-1";
  auto summary = Sweep(spec, &first);
  ASSERT_TRUE(summary.ok());
  EXPECT_TRUE(summary->interrupted);
  EXPECT_EQ(summary->ran, 2);
  ScriptedExecutor second;
  summary = Sweep(spec, &second);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->skipped, 2);
  EXPECT_EQ(second.ran,
            (std::vector<std::string>{"norm-deepnorm_depth-1", "norm-deepnorm_depth-2"}));
  // A changed config is a new run, whatever its id.
  SweepSpec changed = spec;
  changed.set = {"train.max_steps=5"};
  ScriptedExecutor third;
  ASSERT_TRUE(Sweep(changed, &third).ok());
  EXPECT_EQ(third.ran.size(), 4u);
}

TEST(SweepRunnerTest, RunBudgetWritesBudgetRowsThatALaterSweepRuns) {
  testing::TempDir dir;
  SweepSpec spec = Spec(dir / "out");
  spec.budget.max_runs = 3;
  ScriptedExecutor first;
  auto summary = Sweep(spec, &first);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(first.ran.size(), 3u);
  EXPECT_EQ(summary->not_started, 1);
  auto rows = ReadResults(dir / "out/results.jsonl");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->rows.size(), 4u);
  EXPECT_EQ(rows->rows[3]["status"], "budget");
  EXPECT_THAT(rows->rows[3]["reason"].get<std::string>(), HasSubstr("budget.max_runs (3)"));
  // Time budget spent (the rows' wall time counts): nothing starts.
  spec.budget.max_runs = 0;
  spec.budget.minutes = 3.0 / 60;  // 3 s, and the rows already hold 3 s.
  ScriptedExecutor second;
  summary = Sweep(spec, &second);
  ASSERT_TRUE(summary.ok());
  EXPECT_TRUE(second.ran.empty());
  rows = ReadResults(dir / "out/results.jsonl");
  EXPECT_THAT(rows->rows.back()["reason"].get<std::string>(), HasSubstr("budget.minutes"));
  spec.budget.minutes = 0;
  ScriptedExecutor third;
  ASSERT_TRUE(Sweep(spec, &third).ok());
  EXPECT_EQ(third.ran, std::vector<std::string>{"norm-deepnorm_depth-2"});
}

TEST(SweepRunnerTest, SecondSweepInTheSameFolderIsRefused) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "out");
  const int fd = ::open((dir / "out/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  ScriptedExecutor executor;
  auto summary = Sweep(Spec(dir / "out"), &executor);
  ::close(fd);
  ASSERT_FALSE(summary.ok());
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("another deepnet experiment"));
  EXPECT_TRUE(executor.ran.empty());
}

TEST(SweepRunnerTest, FailedRunIsFinalAndNamesTheExitCode) {
  testing::TempDir dir;
  ScriptedExecutor executor;
  executor.exit_code = 2;
  executor.lines["norm-post_ln_depth-1"] = {};
  SweepSpec spec = Spec(dir / "out");
  spec.axes = {{"model.norm", {"post_ln"}}, {"depth", {"1"}}};
  ASSERT_TRUE(Sweep(spec, &executor).ok());
  auto rows = ReadResults(dir / "out/results.jsonl");
  ASSERT_EQ(rows->rows.size(), 1u);
  EXPECT_EQ(rows->rows[0]["status"], "failed");
  EXPECT_THAT(rows->rows[0]["reason"].get<std::string>(), HasSubstr("exit code 2"));
  ScriptedExecutor again;
  ASSERT_TRUE(Sweep(spec, &again).ok());
  EXPECT_TRUE(again.ran.empty());
}

}  // namespace
}  // namespace deepnet::experiment
