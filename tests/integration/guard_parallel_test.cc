// The divergence guard in a 2 x 2 pipeline/data-parallel run under mpirun (Gloo): every rank
// rolls back together, trains on to max_steps, and fails together (exit code 78) when the
// retries run out. Faults come from DEEPNET_GUARD_FAULT (a test facility).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/child_process.h"
#include "tests/temp_dir.h"

namespace {

using deepnet::testing::Child;
using deepnet::testing::Slurp;
using deepnet::testing::TempDir;

struct GuardRun {
  int exit_code = -1;
  std::string log;
  std::vector<nlohmann::json> guard;  // {"event":"guard"} lines, in order
};

GuardRun RunGuarded(const TempDir& dir, const std::string& name, const std::string& fault) {
  std::ostringstream y;
  y << "model: {encoder_layers: 2, decoder_layers: 2, d_model: 16, heads: 2, ffn_dim: 32, "
       "max_positions: 64, dropout: 0.0}\n"
       "data: {synthetic: {languages: [rev, cp], pairs_per_language: 100, max_words: 4}, "
       "max_tokens: 200, max_len: 50, prefetch: 2}\n"
       "optim: {warmup_steps: 4}\n"
       "train: {max_steps: 10, log_every: 1, probe_every: 0}\n"
    << "checkpoint: {dir: " << dir / (name + "-ckpt") << ", every_steps: 3, keep_last: 2}\n"
    << "runtime: {blas_threads: 1}\n"
    << "parallel: {pipeline_stages: 2, data_parallel: 2, backend: gloo, timeout_s: 60, "
    << "rendezvous: \"file://" << dir / (name + ".rdv") << "\"}\n"
    << "guard: {max_retries: 2, loss_window: 3}\n";
  const std::string job = dir / (name + ".yaml");
  std::ofstream(job) << y.str();
  const std::vector<std::string> args = {"mpirun",
                                         "--oversubscribe",
                                         "--allow-run-as-root",
                                         "-np",
                                         "4",
                                         "--mca",
                                         "btl",
                                         "self,tcp",
                                         "--mca",
                                         "btl_tcp_if_include",
                                         "lo",
                                         "-x",
                                         "DEEPNET_GUARD_FAULT",
                                         DEEPNET_BINARY,
                                         "train",
                                         "--config",
                                         job,
                                         "--log-format",
                                         "json"};
  GuardRun run;
  const std::string log = dir / (name + ".log");
  Child child(args, log, {"DEEPNET_GUARD_FAULT=" + fault});
  run.exit_code = child.Wait(std::chrono::seconds(240));
  run.log = Slurp(log);
  std::istringstream lines(run.log);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("event", "") == "guard") run.guard.push_back(j);
  }
  return run;
}

std::set<std::string> Folders(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) == 0) out.insert(name);
  }
  return out;
}

TEST(GuardParallelTest, AllRanksRollBackTogetherAndTrainOn) {
  TempDir dir;
  const GuardRun run = RunGuarded(dir, "ok", "nan@5,spike@8");
  ASSERT_EQ(run.exit_code, 0) << run.log;
  ASSERT_EQ(run.guard.size(), 2u) << run.log;  // Rank 0 reports.
  EXPECT_EQ(run.guard[0]["to_step"], 3);
  EXPECT_EQ(run.guard[0]["trigger"], "nonfinite_loss");
  EXPECT_EQ(run.guard[1]["to_step"], 6);
  EXPECT_EQ(run.guard[1]["trigger"], "loss_spike");
  EXPECT_NE(run.log.find("\"step\":10"), std::string::npos);
  EXPECT_EQ(Folders(dir / "ok-ckpt"), (std::set<std::string>{"step_000000009", "step_000000010"}));
}

TEST(GuardParallelTest, AFaultOnOneRankRollsEveryRankBack) {
  TempDir dir;
  // Only rank 3 (stage 1, replica 1) sees the NaN; the others learn of it through the guard.
  const GuardRun run = RunGuarded(dir, "one", "nan@5:rank3");
  ASSERT_EQ(run.exit_code, 0) << run.log;
  ASSERT_EQ(run.guard.size(), 1u) << run.log;  // Rank 0 reports, for a trigger it did not see.
  EXPECT_EQ(run.guard[0]["to_step"], 3);
  EXPECT_EQ(run.guard[0]["trigger"], "other_rank");
  EXPECT_NE(run.log.find("\"step\":10"), std::string::npos);
  EXPECT_EQ(Folders(dir / "one-ckpt"), (std::set<std::string>{"step_000000009", "step_000000010"}));
}

TEST(GuardParallelTest, RetriesRunOutAndEveryRankExitsWithTheGuardCode) {
  TempDir dir;
  const GuardRun run = RunGuarded(dir, "fail", "nan@5..");
  EXPECT_NE(run.exit_code, 0);
  ASSERT_FALSE(run.guard.empty()) << run.log;
  EXPECT_EQ(run.guard.back()["action"], "fail");
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(run.log.find("deepnet train: rank " + std::to_string(rank) + ": guard: step 5"),
              std::string::npos)
        << "rank " << rank << "\n"
        << run.log;
  }
}

}  // namespace
