// `deepnet experiment` end to end: a 2 depths x 2 variants sweep of a tiny model through real
// `deepnet train` processes, its results file and plots; and a sweep that is stopped (by its
// run budget, then by SIGTERM) and resumed.
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/integration/child_process.h"
#include "tests/temp_dir.h"

namespace deepnet {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSpec = R"(name: tiny-sweep
job:
  model: {d_model: 16, heads: 2, ffn_dim: 32, dropout: 0.0, max_positions: 128}
  data:
    source: synthetic
    synthetic: {languages: [rev], pairs_per_language: 60, min_words: 2, max_words: 4}
    max_tokens: 256
    max_len: 64
  optim: {lr: 5.0e-4, warmup_steps: 0}
  train: {max_steps: STEPS, log_every: 1, probe_every: 1, probe_sentences: 2, valid_every: 2,
          valid_max_pairs: 4}
  runtime: {blas_threads: 1}
axes:
  model.norm: [post_ln, deepnorm]
  depth: [1, 2]
budget: {minutes: 60}
)";

std::string WriteSpec(const testing::TempDir& dir, int steps) {
  std::string text = kSpec;
  text.replace(text.find("STEPS"), 5, std::to_string(steps));
  const std::string path = dir / "spec.yaml";
  std::ofstream(path) << text;
  return path;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<nlohmann::json> Rows(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

int Experiment(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {DEEPNET_BINARY, "experiment"};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::Child child(argv, log, {"OPENBLAS_NUM_THREADS=1"});
  return child.Wait(std::chrono::seconds(600));
}

bool HaveGnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

bool IsPng(const std::string& path) {
  const std::string head = Read(path).substr(0, 8);
  return head == std::string("\x89PNG\r\n\x1a\n", 8);
}

// Four steps train too little to leave the plateau rule's band; either status is a finished run.
bool Trained(const nlohmann::json& status) { return status == "ok" || status == "plateau"; }

const std::vector<std::string> kIds = {"norm-post_ln_depth-1", "norm-post_ln_depth-2",
                                       "norm-deepnorm_depth-1", "norm-deepnorm_depth-2"};

TEST(ExperimentE2eTest, TinySweepWritesAResultRowPerRunAndPlots) {
  testing::TempDir dir;
  const std::string out = dir / "out";
  ASSERT_EQ(Experiment({"run", "--spec", WriteSpec(dir, 4), "--out", out}, dir / "log"), 0)
      << Read(dir / "log");
  const auto rows = Rows(out + "/results.jsonl");
  ASSERT_EQ(rows.size(), 4u) << Read(dir / "log");
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& row : rows) by_id[row["run_id"]] = row;
  for (const std::string& id : kIds) {
    ASSERT_TRUE(by_id.count(id)) << id;
    const nlohmann::json& row = by_id[id];
    EXPECT_TRUE(Trained(row["status"])) << row.dump();
    EXPECT_EQ(row["steps"], 4);
    EXPECT_EQ(row["seed"], 1);
    EXPECT_FALSE(row["commit"].get<std::string>().empty());
    EXPECT_EQ(row["config"]["model"]["encoder_layers"], row["axes"]["depth"]);
    EXPECT_EQ(row["config"]["model"]["norm"], row["axes"]["model.norm"]);
    EXPECT_TRUE(row["final_valid_loss"].is_number());
    EXPECT_EQ(row["valid"].size(), 3u);  // Steps 0, 2, 4.
    EXPECT_EQ(row["probe"].size(), 4u);  // Every step.
    EXPECT_TRUE(row["probe"][0]["update_norm"].is_number());
    EXPECT_TRUE(row["probe"][0]["update_norm_relative"].is_number()) << row["probe"][0].dump();
    EXPECT_GT(row["wall_s"].get<double>(), 0.0);
    EXPECT_TRUE(std::filesystem::exists(out + "/" + row["log"].get<std::string>()));
  }
  if (!HaveGnuplot())
    GTEST_SKIP() << "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)";
  for (const char* png : {"update_norm.png", "update_norm_relative.png", "update_norm_vs_depth.png",
                          "valid_curves.png", "final_valid_vs_depth.png"}) {
    EXPECT_TRUE(IsPng(out + "/plots/" + png)) << png << "\n" << Read(dir / "log");
  }
  // The plots come from the results file alone.
  std::filesystem::remove(out + "/plots/update_norm.png");
  ASSERT_EQ(Experiment({"plot", out}, dir / "plot.log"), 0) << Read(dir / "plot.log");
  EXPECT_TRUE(IsPng(out + "/plots/update_norm.png"));
  EXPECT_THAT(Read(out + "/plots/summary.tsv"), HasSubstr("norm-deepnorm_depth-2"));
}

TEST(ExperimentE2eTest, StoppedSweepResumesWithoutRedoingFinishedRuns) {
  testing::TempDir dir;
  const std::string out = dir / "out";
  const std::string spec = WriteSpec(dir, 2);
  // Stopped by its run budget: two runs finish, two get "budget" rows.
  ASSERT_EQ(
      Experiment({"run", "--spec", spec, "--out", out, "--no-plots", "--set", "budget.max_runs=2"},
                 dir / "log1"),
      0)
      << Read(dir / "log1");
  auto rows = Rows(out + "/results.jsonl");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_TRUE(Trained(rows[0]["status"]));
  EXPECT_TRUE(Trained(rows[1]["status"]));
  EXPECT_EQ(rows[2]["status"], "budget");
  EXPECT_THAT(rows[3]["reason"].get<std::string>(), HasSubstr("budget.max_runs (2)"));
  // Resumed: only the two unfinished runs run.
  ASSERT_EQ(Experiment({"run", "--spec", spec, "--out", out, "--no-plots"}, dir / "log2"), 0)
      << Read(dir / "log2");
  EXPECT_THAT(Read(dir / "log2"), HasSubstr("2 ran, 2 done earlier"));
  rows = Rows(out + "/results.jsonl");
  ASSERT_EQ(rows.size(), 6u);
  std::map<std::string, nlohmann::json> latest;
  for (const auto& row : rows) latest[row["run_id"]] = row["status"];
  for (const std::string& id : kIds) EXPECT_TRUE(Trained(latest[id])) << id;
}

TEST(ExperimentE2eTest, SigtermStopsTheSweepAndTheSameCommandResumesIt) {
  testing::TempDir dir;
  const std::string out = dir / "out";
  const std::string spec = WriteSpec(dir, 40);
  const std::vector<std::string> args = {DEEPNET_BINARY, "experiment", "run", "--spec",
                                         spec,           "--out",      out,   "--no-plots"};
  {
    testing::Child sweep(args, dir / "log1", {"OPENBLAS_NUM_THREADS=1"});
    // Once the first run has its row, the second is under way: stop the sweep then.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (Rows(out + "/results.jsonl").empty() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(Rows(out + "/results.jsonl").size(), 1u) << Read(dir / "log1");
    kill(sweep.pid(), SIGTERM);
    const int code = sweep.Wait(std::chrono::seconds(120));
    const std::string log = Read(dir / "log1");
    if (code == 0) GTEST_SKIP() << "the sweep finished before SIGTERM arrived:\n" << log;
    EXPECT_EQ(code, 143) << log;
    EXPECT_THAT(log, HasSubstr("interrupted"));
  }
  const size_t rows_before = Rows(out + "/results.jsonl").size();
  EXPECT_LT(rows_before, 4u);
  ASSERT_EQ(Experiment({"run", "--spec", spec, "--out", out, "--no-plots"}, dir / "log2"), 0)
      << Read(dir / "log2");
  const auto rows = Rows(out + "/results.jsonl");
  ASSERT_EQ(rows.size(), 4u) << Read(dir / "log2");  // Every run once: none redone.
  std::map<std::string, int> count;
  for (const auto& row : rows) ++count[row["run_id"]];
  for (const std::string& id : kIds) EXPECT_EQ(count[id], 1) << id;
}

TEST(ExperimentE2eTest, PresetsAreListedAndBadInputNamesWhatIsWrong) {
  testing::TempDir dir;
  ASSERT_EQ(Experiment({"list-presets"}, dir / "list"), 0);
  EXPECT_THAT(Read(dir / "list"), HasSubstr("update-norm\t8 runs"));
  EXPECT_THAT(Read(dir / "list"), HasSubstr("depth-sweep\t16 runs"));
  EXPECT_EQ(Experiment({"run", "--preset", "nope"}, dir / "nope"), 2);
  EXPECT_THAT(Read(dir / "nope"),
              HasSubstr("--preset: unknown preset 'nope' (allowed: update-norm"));
  EXPECT_EQ(Experiment({"run", "--preset", "update-norm", "--set", "axes.depth=[0]"}, dir / "bad"),
            2);
  EXPECT_THAT(Read(dir / "bad"), HasSubstr("axes.depth[0]: depth is a layer count"));
  EXPECT_EQ(Experiment({"run", "--spec", dir / "missing.yaml"}, dir / "missing"), 2);
  EXPECT_THAT(Read(dir / "missing"), HasSubstr("missing.yaml: no such file"));
  EXPECT_EQ(Experiment({"plot", dir / "empty"}, dir / "plot"), 2);
  EXPECT_THAT(Read(dir / "plot"), HasSubstr("no results to plot"));
}

}  // namespace
}  // namespace deepnet
