// `deepnet experiment run --coordinator`: a two-run sweep submitted as jobs to a real
// deepnet-coordinator with one deepnet-worker on loopback (label `service`).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/integration/child_process.h"
#include "tests/integration/service_cluster.h"

namespace deepnet::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ExperimentServiceTest, SweepRunsAsCoordinatorJobsAndGetsTheTrainersLines) {
  ServiceCluster cluster;
  ASSERT_TRUE(cluster.StartCoordinator()) << cluster.Log("coordinator.1.log");
  cluster.StartWorker("node-a", 1);
  const std::string spec = cluster.dir() + "/spec.yaml";
  std::ofstream(spec) << R"(name: service-sweep
job:
  model: {encoder_layers: 1, decoder_layers: 1, d_model: 16, heads: 2, ffn_dim: 32,
          dropout: 0.0, max_positions: 128}
  data:
    synthetic: {languages: [rev], pairs_per_language: 60, min_words: 2, max_words: 4}
    max_tokens: 256
    max_len: 64
  optim: {lr: 5.0e-4, warmup_steps: 0}
  train: {max_steps: 3, log_every: 1, probe_every: 1, probe_sentences: 2, valid_every: 3,
          valid_max_pairs: 4}
  runtime: {blas_threads: 1}
  scheduling: {max_restarts: 0}
axes:
  model.norm: [post_ln, deepnorm]
budget: {minutes: 30}
)";
  const std::string out = cluster.dir() + "/out";
  Child sweep({DEEPNET_BINARY, "experiment", "run", "--spec", spec, "--out", out, "--no-plots",
               "--coordinator", cluster.address(), "--deepnetctl", DEEPNETCTL_BINARY},
              cluster.dir() + "/experiment.log",
              {std::string("DEEPNET_TOKEN=") + kAliceToken, "OPENBLAS_NUM_THREADS=1"});
  ASSERT_EQ(sweep.Wait(std::chrono::seconds(400)), 0)
      << ReadAll(cluster.dir() + "/experiment.log") << cluster.Log("coordinator.1.log");
  std::map<std::string, nlohmann::json> rows;
  std::ifstream in(out + "/results.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    rows[row["run_id"]] = row;
  }
  ASSERT_EQ(rows.size(), 2u) << ReadAll(cluster.dir() + "/experiment.log");
  for (const char* id : {"norm-post_ln", "norm-deepnorm"}) {
    ASSERT_TRUE(rows.count(id)) << id;
    const nlohmann::json& row = rows[id];
    EXPECT_EQ(row["mode"], "coordinator");
    EXPECT_THAT(row["job_id"].get<std::string>(), ::testing::StartsWith("j-"));
    EXPECT_EQ(row["job_state"], "JOB_STATE_SUCCEEDED") << row.dump();
    EXPECT_TRUE(row["status"] == "ok" || row["status"] == "plateau") << row.dump();
    EXPECT_EQ(row["steps"], 3) << row.dump();
    EXPECT_EQ(row["probe"].size(), 3u) << row.dump();
    EXPECT_TRUE(row["final_valid_loss"].is_number()) << row.dump();
  }
}

}  // namespace
}  // namespace deepnet::testing
