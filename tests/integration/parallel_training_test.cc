// The distributed engine end to end: `deepnet train` under mpirun (MPI and Gloo backends) and
// as separately started ranks (Gloo), against the single-process run of the same global batch.
#include <gtest/gtest.h>
#include <signal.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "tests/integration/child_process.h"
#include "tests/temp_dir.h"

namespace {

using deepnet::testing::Child;
using deepnet::testing::Slurp;
using deepnet::testing::TempDir;

// 3+3 layers so that 4 stages split inside both stacks; dropout off so that every layout
// computes the same function (dropout masks are per rank). GELU, not ReLU: layouts sum in
// different orders, and a ReLU unit whose input sits within rounding of 0 is on in one layout
// and off in another, which moved one fc1 row by 3x the tolerance after a change of rounding
// elsewhere (the clipping norm's reduction); GELU is smooth, so layouts agree to rounding.
std::string JobYaml(const std::string& ckpt_dir, int64_t max_steps, double dropout = 0.0) {
  std::ostringstream y;
  y << "model: {encoder_layers: 3, decoder_layers: 3, d_model: 32, heads: 2, ffn_dim: 64, "
       "activation: gelu, max_positions: 128, dropout: "
    << dropout
    << "}\n"
       "data: {synthetic: {languages: [rev, cp], pairs_per_language: 300, max_words: 5}, "
       "max_tokens: 160, max_len: 64, prefetch: 2}\n"
       "optim: {lr: 2.0e-3, warmup_steps: 5, clip_norm: 1.0}\n"
    << "train: {max_steps: " << max_steps << ", log_every: 1, probe_every: 5, seed: 3}\n"
    << "checkpoint: {dir: " << ckpt_dir << ", every_steps: 0, keep_last: 0}\n"
    << "runtime: {blas_threads: 1}\n";
  return y.str();
}

struct TrainRun {
  int exit_code = -1;
  std::string log;
  std::map<int64_t, double> losses;  // step -> loss
};

std::vector<std::string> Mpirun(int ranks) {
  return {"mpirun", "--oversubscribe", "--allow-run-as-root", "-np", std::to_string(ranks),
          "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"};
}

TrainRun Launch(const TempDir& dir, const std::string& name, const std::string& job,
           const std::vector<std::string>& sets, int ranks, const std::string& backend,
           int timeout_s = 240) {
  std::vector<std::string> args;
  if (ranks > 1) args = Mpirun(ranks);
  for (const std::string& a : {std::string(DEEPNET_BINARY), std::string("train"),
                               std::string("--config"), job, std::string("--log-format"),
                               std::string("json")}) {
    args.push_back(a);
  }
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  if (ranks > 1) {
    args.insert(args.end(), {"--set", "parallel.backend=" + backend});
    if (backend == "gloo") {
      args.insert(args.end(), {"--set", "parallel.rendezvous=file://" + dir / (name + ".rdv")});
    }
  }
  TrainRun run;
  const std::string log = dir / (name + ".log");
  Child child(args, log);
  run.exit_code = child.Wait(std::chrono::seconds(timeout_s));
  run.log = Slurp(log);
  std::istringstream lines(run.log);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("event", "") == "step") {
      run.losses[j.at("step").get<int64_t>()] = j.at("loss").get<double>();
    }
  }
  return run;
}

std::map<std::string, torch::Tensor> LatestTensors(const std::string& dir) {
  deepnet::checkpoint::CheckpointStoreOptions options;
  options.dir = dir;
  auto store = deepnet::checkpoint::CheckpointStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  std::map<std::string, torch::Tensor> out;
  if (!store.ok()) return out;
  auto ckpt = (*store)->LoadLatest();
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return out;
  for (const auto& [file, tensors] : ckpt->files) {
    for (const auto& [name, t] : tensors) {
      if (name.rfind("rng.", 0) != 0 && name != "tokenizer.model") out[name] = t;
    }
  }
  return out;
}

// ||a - b|| <= 1e-5 ||b|| for every tensor (parameters, Adam moments, probe reference), except
// the key projections' biases: adding b to every key adds q.b to a whole row of scores, which
// softmax ignores, so their true gradient is exactly 0 and they move only by rounding noise,
// which Adam scales to +-lr steps whose signs depend on the order of summation.
void ExpectSameTensors(const std::map<std::string, torch::Tensor>& got,
                       const std::map<std::string, torch::Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, t] : want) {
    if (name.find("k_proj.bias") != std::string::npos) continue;
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": " << name;
    const double scale = t.to(torch::kDouble).norm().item<double>();
    const double diff = (it->second.to(torch::kDouble) - t.to(torch::kDouble)).norm().item<double>();
    EXPECT_LE(diff, 1e-5 * scale + 1e-12) << what << ": " << name;
  }
}

void ExpectSameLosses(const TrainRun& got, const TrainRun& want, const std::string& what) {
  ASSERT_EQ(got.losses.size(), want.losses.size()) << what << "\n" << got.log;
  for (const auto& [step, loss] : want.losses) {
    ASSERT_TRUE(got.losses.count(step)) << what << " step " << step;
    EXPECT_NEAR(got.losses.at(step), loss, 1e-5 * std::abs(loss)) << what << " step " << step;
  }
}

struct Layout {
  int stages;
  int replicas;
};

// 20 steps of 1x1, 2x1, 1x2, 2x2 and 4x1 with both schedules equal the single-process run
// that accumulates the same global batch (4 micro-batches per replica).
void CheckEquivalence(const std::string& backend) {
  TempDir dir;
  const int kSteps = 20, kMicro = 4;
  std::map<int, TrainRun> reference;  // data_parallel -> single-process run
  std::map<int, std::map<std::string, torch::Tensor>> reference_tensors;
  for (int d : {1, 2}) {
    const std::string ckpt = dir / ("ref" + std::to_string(d));
    const std::string job = dir / ("ref" + std::to_string(d) + ".yaml");
    std::ofstream(job) << JobYaml(ckpt, kSteps);
    reference[d] = Launch(dir, "ref" + std::to_string(d), job,
                          {"optim.accum_steps=" + std::to_string(kMicro * d)}, 1, backend);
    ASSERT_EQ(reference[d].exit_code, 0) << reference[d].log;
    ASSERT_EQ(reference[d].losses.size(), static_cast<size_t>(kSteps)) << reference[d].log;
    reference_tensors[d] = LatestTensors(ckpt);
  }
  for (Layout layout : {Layout{1, 1}, Layout{2, 1}, Layout{1, 2}, Layout{2, 2}, Layout{4, 1}}) {
    for (const std::string schedule : {"1f1b", "gpipe"}) {
      if (layout.stages == 1 && schedule == "gpipe") continue;  // One stage: no schedule.
      const std::string name = backend + "-" + std::to_string(layout.stages) + "x" +
                               std::to_string(layout.replicas) + "-" + schedule;
      const std::string ckpt = dir / name;
      const std::string job = dir / (name + ".yaml");
      std::ofstream(job) << JobYaml(ckpt, kSteps);
      TrainRun run = Launch(dir, name, job,
                       {"parallel.pipeline_stages=" + std::to_string(layout.stages),
                        "parallel.data_parallel=" + std::to_string(layout.replicas),
                        "parallel.micro_batches=" + std::to_string(kMicro),
                        "parallel.schedule=" + schedule},
                       layout.stages * layout.replicas, backend);
      ASSERT_EQ(run.exit_code, 0) << name << "\n" << run.log;
      ExpectSameLosses(run, reference[layout.replicas], name);
      ExpectSameTensors(LatestTensors(ckpt), reference_tensors[layout.replicas], name);
    }
  }
}

TEST(ParallelTrainingTest, LayoutsMatchTheSingleProcessRunOverMpi) { CheckEquivalence("mpi"); }

TEST(ParallelTrainingTest, LayoutsMatchTheSingleProcessRunOverGloo) { CheckEquivalence("gloo"); }

// A checkpoint written at 2x2 resumes at 1x1 and then at 4x1 (weights, Adam moments, schedule
// and data position), continuing the uninterrupted run's losses.
TEST(ParallelTrainingTest, CheckpointsReshardAcrossLayouts) {
  TempDir dir;
  const std::string job = dir / "job.yaml";
  std::ofstream(job) << JobYaml(dir / "ckpt", 10);
  TrainRun whole = Launch(dir, "whole", job, {"optim.accum_steps=4", "checkpoint.dir=" + dir / "whole"},
                     1, "gloo");
  ASSERT_EQ(whole.exit_code, 0) << whole.log;
  TrainRun a = Launch(dir, "a", job,
                 {"train.max_steps=6", "parallel.pipeline_stages=2", "parallel.data_parallel=2",
                  "parallel.micro_batches=2"},
                 4, "gloo");
  ASSERT_EQ(a.exit_code, 0) << a.log;
  TrainRun b = Launch(dir, "b", job, {"train.max_steps=8", "optim.accum_steps=4"}, 1, "gloo");
  ASSERT_EQ(b.exit_code, 0) << b.log;
  EXPECT_NE(b.log.find("resharded"), std::string::npos) << b.log;
  TrainRun c = Launch(dir, "c", job,
                 {"parallel.pipeline_stages=4", "parallel.micro_batches=4"}, 4, "mpi");
  ASSERT_EQ(c.exit_code, 0) << c.log;
  TrainRun chained;
  for (const TrainRun* part : {&a, &b, &c}) chained.losses.insert(part->losses.begin(), part->losses.end());
  chained.log = a.log + b.log + c.log;
  ExpectSameLosses(chained, whole, "2x2 -> 1x1 -> 4x1");
  ExpectSameTensors(LatestTensors(dir / "ckpt"), LatestTensors(dir / "whole"), "resharded");
}

// With dropout on, stopping at step 6 and resuming in the same 2x2 layout reproduces the
// uninterrupted run bit for bit (every rank restores its own generator).
TEST(ParallelTrainingTest, ResumeInTheSameLayoutIsBitExact) {
  TempDir dir;
  const std::vector<std::string> layout{"parallel.pipeline_stages=2", "parallel.data_parallel=2",
                                        "parallel.micro_batches=2"};
  std::ofstream(dir / "full.yaml") << JobYaml(dir / "full", 12, 0.1);
  std::ofstream(dir / "split.yaml") << JobYaml(dir / "split", 12, 0.1);
  TrainRun full = Launch(dir, "full", dir / "full.yaml", layout, 4, "gloo");
  ASSERT_EQ(full.exit_code, 0) << full.log;
  auto first_half = layout;
  first_half.push_back("train.max_steps=6");
  TrainRun first = Launch(dir, "first", dir / "split.yaml", first_half, 4, "gloo");
  ASSERT_EQ(first.exit_code, 0) << first.log;
  TrainRun second = Launch(dir, "second", dir / "split.yaml", layout, 4, "gloo");
  ASSERT_EQ(second.exit_code, 0) << second.log;
  ASSERT_EQ(second.losses.size(), 6u) << second.log;
  for (const auto& [step, loss] : second.losses) EXPECT_EQ(loss, full.losses.at(step)) << step;
  auto a = LatestTensors(dir / "full"), b = LatestTensors(dir / "split");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
}

// JSON lines of `event` from a run's log, by step.
std::map<int64_t, nlohmann::json> EventsByStep(const TrainRun& run, const std::string& event) {
  std::map<int64_t, nlohmann::json> out;
  std::istringstream lines(run.log);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("event", "") == event) out[j.at("step").get<int64_t>()] = j;
  }
  return out;
}

void ExpectNear(const nlohmann::json& got, const nlohmann::json& want, const char* key,
                const std::string& what) {
  const double w = want.at(key).get<double>();
  EXPECT_NEAR(got.at(key).get<double>(), w, 1e-4 * std::abs(w) + 1e-9) << what << " " << key;
}

// The probe (replica 0 through every stage) and the per-layer diagnostics (each stage's layers,
// gathered by one all-reduce) report what the single-process run reports, on every probed and
// diagnosed step, under pipeline and data parallelism.
TEST(ParallelTrainingTest, ProbeAndLayerDiagnosticsMatchTheSingleProcessRun) {
  TempDir dir;
  std::ofstream(dir / "job.yaml") << JobYaml(dir / "ckpt", 6);
  const std::vector<std::string> probing{"train.probe_schedule=1-2,6", "train.diagnostics_every=3",
                                         "train.log_every=6"};
  auto with = [&](std::vector<std::string> sets) {
    sets.insert(sets.end(), probing.begin(), probing.end());
    return sets;
  };
  TrainRun reference =
      Launch(dir, "ref", dir / "job.yaml",
             with({"optim.accum_steps=4", "checkpoint.dir=" + dir / "ref"}), 1, "gloo");
  ASSERT_EQ(reference.exit_code, 0) << reference.log;
  const auto want_probe = EventsByStep(reference, "probe");
  const auto want_diag = EventsByStep(reference, "diagnostics");
  ASSERT_EQ(want_probe.size(), 3u) << reference.log;
  ASSERT_EQ(want_diag.size(), 2u) << reference.log;
  struct Case {
    std::vector<std::string> sets;
    int ranks;
  };
  for (const Case& c :
       std::vector<Case>{{{"parallel.pipeline_stages=2", "parallel.data_parallel=2",
                           "parallel.micro_batches=2", "checkpoint.dir=" + dir / "a"},
                          4},
                         {{"parallel.pipeline_stages=4", "parallel.micro_batches=4",
                           "checkpoint.dir=" + dir / "b"},
                          4}}) {
    TrainRun run = Launch(dir, "layout" + std::to_string(c.sets.size()), dir / "job.yaml",
                          with(c.sets), c.ranks, "gloo");
    const std::string what = c.sets[0] + " " + c.sets[1];
    ASSERT_EQ(run.exit_code, 0) << what << "\n" << run.log;
    const auto probe = EventsByStep(run, "probe");
    ASSERT_EQ(probe.size(), want_probe.size()) << what;
    for (const auto& [step, want] : want_probe) {
      for (const char* key : {"update_norm", "f0_norm", "update_norm_relative",
                              "logits_update_norm", "logits_f0_norm"}) {
        ExpectNear(probe.at(step), want, key, what + " step " + std::to_string(step));
      }
    }
    const auto diag = EventsByStep(run, "diagnostics");
    ASSERT_EQ(diag.size(), want_diag.size()) << what;
    for (const auto& [step, want] : want_diag) {
      const auto& got_layers = diag.at(step).at("layers");
      const auto& want_layers = want.at("layers");
      ASSERT_EQ(got_layers.size(), want_layers.size()) << what;
      for (size_t l = 0; l < want_layers.size(); ++l) {
        const std::string where =
            what + " step " + std::to_string(step) + " layer " + std::to_string(l);
        ExpectNear(got_layers[l], want_layers[l], "ln_input_norm", where);
        ExpectNear(got_layers[l], want_layers[l], "grad_norm", where);
      }
      ExpectNear(diag.at(step).at("summary"), want.at("summary"), "other_grad_norm", what);
    }
  }
}

TEST(ParallelTrainingTest, WorldSizeThatIsNotStagesTimesReplicasIsAnError) {
  TempDir dir;
  std::ofstream(dir / "job.yaml") << JobYaml(dir / "ckpt", 2);
  TrainRun run = Launch(dir, "bad", dir / "job.yaml",
                   {"parallel.pipeline_stages=2", "parallel.data_parallel=2"}, 3, "mpi", 120);
  EXPECT_NE(run.exit_code, 0) << run.log;
  EXPECT_NE(run.log.find("pipeline_stages x parallel.data_parallel = 2 x 2 = 4"), std::string::npos)
      << run.log;
}

// Ranks started on their own (as the coordinator's workers will): when one is killed, the
// others notice the broken connections and exit non-zero instead of hanging.
TEST(ParallelTrainingTest, KillingOneRankStopsTheOthers) {
  TempDir dir;
  std::ofstream(dir / "job.yaml") << JobYaml(dir / "ckpt", 100000);
  std::vector<std::unique_ptr<Child>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<Child>(
        std::vector<std::string>{DEEPNET_BINARY, "train", "--config", dir / "job.yaml",
                                 "--log-format", "json", "--set",
                                 "parallel.pipeline_stages=2", "--set", "parallel.data_parallel=2",
                                 "--set", "parallel.micro_batches=2", "--set",
                                 "parallel.rendezvous=file://" + dir / "rdv", "--set",
                                 "parallel.timeout_s=600"},
        dir / ("rank" + std::to_string(r) + ".log"),
        std::vector<std::string>{"DEEPNET_RANK=" + std::to_string(r), "DEEPNET_WORLD_SIZE=4",
                                 "DEEPNET_LOCAL_RANK=" + std::to_string(r), "DEEPNET_LOCAL_SIZE=4"}));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (Slurp(dir / "rank0.log").find("\"step\":3,") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << Slurp(dir / "rank0.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ranks[2]->Kill();  // Stage 1, replica 0.
  const auto killed = std::chrono::steady_clock::now();
  for (int r : {0, 1, 3}) {
    // A liveness bound, far below the 600 s collective timeout: failure is noticed, not waited out.
    const int code = ranks[r]->Wait(std::chrono::seconds(60));
    EXPECT_NE(code, 0) << "rank " << r << "\n" << Slurp(dir / ("rank" + std::to_string(r) + ".log"));
    EXPECT_NE(code, -1000) << "rank " << r << " still running";
  }
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(120));
}

// Stages that disagree about the batches (here: different batch bounds) fail with an error
// naming the stage and the micro-batch instead of hanging or training on garbage.
TEST(ParallelTrainingTest, StagesThatDisagreeAboutABatchFailNamingIt) {
  TempDir dir;
  std::ofstream(dir / "job.yaml") << JobYaml(dir / "ckpt", 5);
  std::vector<std::unique_ptr<Child>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<Child>(
        std::vector<std::string>{DEEPNET_BINARY, "train", "--config", dir / "job.yaml", "--set",
                                 "parallel.pipeline_stages=2", "--set",
                                 "data.max_tokens=" + std::string(r == 0 ? "160" : "96"), "--set",
                                 "parallel.rendezvous=file://" + dir / "rdv"},
        dir / ("rank" + std::to_string(r) + ".log"),
        std::vector<std::string>{"DEEPNET_RANK=" + std::to_string(r), "DEEPNET_WORLD_SIZE=2"}));
  }
  for (int r = 0; r < 2; ++r) {
    const int code = ranks[r]->Wait(std::chrono::seconds(120));
    EXPECT_NE(code, 0) << Slurp(dir / ("rank" + std::to_string(r) + ".log"));
    EXPECT_NE(code, -1000) << "rank " << r << " hangs";
  }
  const std::string log = Slurp(dir / "rank1.log");
  EXPECT_NE(log.find("rank 1 (stage 1, replica 0): expected the activation of micro-batch 0 of "
                     "step 1 from stage 0"),
            std::string::npos)
      << log;
}

}  // namespace
