// The trainer's probe schedule, probe file and per-layer diagnostics as they appear in the
// progress stream (JSON and text), and across a resume.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "job/job_config.h"
#include "tests/json_log_events.h"
#include "tests/temp_dir.h"
#include "train/layer_summary.h"
#include "train/trainer.h"

namespace deepnet::train {
namespace {

using testing::TempDir;

job::JobConfig TinyJob() {
  job::JobConfig c;
  c.model = model::DeepNetConfig()
                .encoder_layers(2)
                .decoder_layers(2)
                .d_model(16)
                .heads(2)
                .ffn_dim(32)
                .vocab_size(0)
                .dropout(0.1)
                .max_positions(64);
  c.data.synthetic.languages = {"rev", "cap"};
  c.data.synthetic.pairs_per_language = 60;
  c.data.synthetic.max_words = 4;
  c.data.max_tokens = 200;
  c.data.max_len = 60;
  c.data.valid_fraction = 0.1;
  c.optim.lr = 2e-3;
  c.optim.warmup_steps = 2;
  c.optim.clip_norm = 0.5;
  c.train.max_steps = 8;
  c.train.log_every = 5;
  c.train.probe_every = 0;
  c.train.diagnostics_every = 0;
  c.train.seed = 3;
  return c;
}

// Runs the job; returns the JSON lines by event (or the text when `text`).
std::string TrainLog(const job::JobConfig& config, LogFormat format = LogFormat::kJson) {
  std::ostringstream out;
  TrainerIo io;
  io.out = &out;
  io.format = format;
  auto trainer = Trainer::Create(config, io);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return "";
  auto summary = (*trainer)->Run();
  EXPECT_TRUE(summary.ok()) << summary.status();
  return out.str();
}

using deepnet::testing::JsonLogEvents;

TEST(ProbeDiagnosticsTest, EveryScheduledStepIsProbedEvenOffTheLogSteps) {
  torch::set_num_threads(1);
  job::JobConfig c = TinyJob();
  c.train.probe_schedule = "1-3,4::4";
  const std::string log = TrainLog(c);
  std::vector<int64_t> steps;
  std::map<int64_t, nlohmann::json> probes;
  for (const auto& p : JsonLogEvents(log, "probe")) {
    const int64_t step = p.at("step").get<int64_t>();
    steps.push_back(step);
    probes[step] = p;
    const double update = p.at("update_norm").get<double>();
    const double f0 = p.at("f0_norm").get<double>();
    EXPECT_GT(update, 0.0);
    EXPECT_GT(f0, 0.0);
    EXPECT_DOUBLE_EQ(p.at("update_norm_relative").get<double>(), update / f0);
    const double logits = p.at("logits_update_norm").get<double>();
    const double logits_f0 = p.at("logits_f0_norm").get<double>();
    EXPECT_GT(logits, 0.0);
    EXPECT_DOUBLE_EQ(p.at("logits_update_norm_relative").get<double>(), logits / logits_f0);
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 8}));
  // Log steps 5 and 8: step 8 carries its probe, step 5 none.
  std::map<int64_t, nlohmann::json> step_lines;
  for (const auto& s : JsonLogEvents(log, "step")) step_lines[s.at("step").get<int64_t>()] = s;
  ASSERT_EQ(step_lines.size(), 2u);
  EXPECT_TRUE(step_lines.at(5).at("update_norm").is_null());
  EXPECT_EQ(step_lines.at(8).at("update_norm").get<double>(),
            probes.at(8).at("update_norm").get<double>());
  EXPECT_EQ(step_lines.at(8).at("update_norm_relative").get<double>(),
            probes.at(8).at("update_norm_relative").get<double>());

  const std::string text = TrainLog(c, LogFormat::kText);
  EXPECT_NE(text.find("[probe] step 2  |dF| "), std::string::npos) << text;
  EXPECT_NE(text.find("|dF|/|F0| "), std::string::npos);
}

TEST(ProbeDiagnosticsTest, ProbeEveryStillWorksWithoutASchedule) {
  job::JobConfig c = TinyJob();
  c.train.probe_every = 3;
  std::vector<int64_t> steps;
  for (const auto& p : JsonLogEvents(TrainLog(c), "probe"))
    steps.push_back(p.at("step").get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 6}));
}

TEST(ProbeDiagnosticsTest, LayerGradientNormsAddUpToTheStepsGradientNorm) {
  torch::set_num_threads(1);
  job::JobConfig c = TinyJob();
  c.train.max_steps = 4;
  c.train.log_every = 1;
  c.train.diagnostics_every = 2;
  const std::string log = TrainLog(c);
  std::map<int64_t, double> grad_norm;
  for (const auto& s : JsonLogEvents(log, "step")) {
    grad_norm[s.at("step").get<int64_t>()] = s.at("grad_norm").get<double>();
  }
  const auto diagnostics = JsonLogEvents(log, "diagnostics");
  ASSERT_EQ(diagnostics.size(), 2u);
  for (const auto& d : diagnostics) {
    const int64_t step = d.at("step").get<int64_t>();
    EXPECT_TRUE(step == 2 || step == 4);
    const auto& layers = d.at("layers");
    ASSERT_EQ(layers.size(), 4u);
    std::vector<double> ln, grads;
    double sumsq = std::pow(d.at("summary").at("other_grad_norm").get<double>(), 2);
    for (size_t i = 0; i < layers.size(); ++i) {
      EXPECT_EQ(layers[i].at("stack").get<std::string>(), i < 2 ? "encoder" : "decoder");
      EXPECT_EQ(layers[i].at("layer").get<int64_t>(), static_cast<int64_t>(i % 2));
      ln.push_back(layers[i].at("ln_input_norm").get<double>());
      grads.push_back(layers[i].at("grad_norm").get<double>());
      EXPECT_GT(ln.back(), 0.0);
      EXPECT_GT(grads.back(), 0.0);
      sumsq += grads.back() * grads.back();
    }
    // Before clipping (clip_norm 0.5 does clip here): the step line's global norm.
    EXPECT_NEAR(std::sqrt(sumsq), grad_norm.at(step), 1e-6 * grad_norm.at(step));
    const job::LayerSummary want = SummarizeLayers(ln);
    const auto& got = d.at("summary").at("ln_input_norm");
    EXPECT_DOUBLE_EQ(got.at("min").get<double>(), want.min);
    EXPECT_DOUBLE_EQ(got.at("max").get<double>(), want.max);
    EXPECT_DOUBLE_EQ(got.at("p50").get<double>(), want.p50);
    EXPECT_DOUBLE_EQ(got.at("p90").get<double>(), want.p90);
    EXPECT_DOUBLE_EQ(d.at("summary").at("grad_norm").at("max").get<double>(),
                     *std::max_element(grads.begin(), grads.end()));
  }
  const std::string text = TrainLog(c, LogFormat::kText);
  EXPECT_NE(text.find("[diag] step 2  4 layers  LN-input norm min/p50/p90/max "), std::string::npos)
      << text;
}

TEST(ProbeDiagnosticsTest, DiagnosticsDoNotChangeTraining) {
  torch::set_num_threads(1);
  job::JobConfig c = TinyJob();
  c.train.log_every = 1;
  std::vector<double> plain, diagnosed;
  for (const auto& s : JsonLogEvents(TrainLog(c), "step"))
    plain.push_back(s.at("loss").get<double>());
  c.train.diagnostics_every = 1;
  c.train.probe_schedule = "1::1";
  for (const auto& s : JsonLogEvents(TrainLog(c), "step"))
    diagnosed.push_back(s.at("loss").get<double>());
  EXPECT_EQ(plain, diagnosed);  // Exact: the diagnostic forward draws no random numbers.
}

TEST(ProbeDiagnosticsTest, LayerSummaryQuantilesInterpolate) {
  const job::LayerSummary s = SummarizeLayers({4, 1, 3, 2});
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 4);
  EXPECT_EQ(s.mean, 2.5);
  EXPECT_EQ(s.p50, 2.5);
  EXPECT_DOUBLE_EQ(s.p90, 3.7);
  const job::LayerSummary one = SummarizeLayers({7});
  EXPECT_EQ(one.p50, 7);
  EXPECT_EQ(one.p90, 7);
  EXPECT_EQ(SummarizeLayers({}).max, 0);
}

TEST(ProbeDiagnosticsTest, ProbeFileMakesTheProbeBatch) {
  TempDir dir;
  const std::string path = dir / "probe.tsv";
  std::ofstream(path) << "one two three\tthree two one\nfour five\tfive four\n";
  job::JobConfig c = TinyJob();
  c.train.max_steps = 2;
  c.train.probe_every = 1;
  const auto with_default = JsonLogEvents(TrainLog(c), "probe");
  c.train.probe_file = path;
  const auto with_file = JsonLogEvents(TrainLog(c), "probe");
  ASSERT_EQ(with_file.size(), 2u);
  ASSERT_EQ(with_default.size(), 2u);
  // Another batch: another ||F0|| (2 pairs of the file against 8 validation pairs).
  EXPECT_NE(with_file[0].at("f0_norm").get<double>(), with_default[0].at("f0_norm").get<double>());
  EXPECT_GT(with_file[1].at("update_norm").get<double>(), 0.0);
}

TEST(ProbeDiagnosticsTest, ABadProbeFileIsAnErrorNamingIt) {
  TempDir dir;
  const std::string empty = dir / "empty.tsv", long_line = dir / "long.tsv";
  std::ofstream(empty) << "\n";
  std::ofstream(long_line) << std::string(100, 'a') << "\tb\n";
  struct Case {
    std::string path, message;
  };
  for (const Case& k : std::vector<Case>{{dir / "missing.tsv", "cannot open"},
                                         {empty, "has no probe pairs"},
                                         {long_line, "longer than model.max_positions (64"}}) {
    job::JobConfig c = TinyJob();
    c.train.probe_file = k.path;
    TrainerIo io;
    auto trainer = Trainer::Create(c, io);
    ASSERT_FALSE(trainer.ok()) << k.path;
    const std::string message(trainer.status().message());
    EXPECT_EQ(message.rfind("train.probe_file: ", 0), 0u) << message;
    EXPECT_NE(message.find(k.path), std::string::npos) << message;
    EXPECT_NE(message.find(k.message), std::string::npos) << message;
  }
}

TEST(ProbeDiagnosticsTest, ProbeAndItsLogitsContinueAcrossAResume) {
  torch::set_num_threads(1);
  TempDir a, b;
  job::JobConfig c = TinyJob();
  c.train.probe_schedule = "1::1";
  c.checkpoint.every_steps = 4;
  c.checkpoint.keep_last = 0;
  c.checkpoint.dir = a.path();
  const auto full = JsonLogEvents(TrainLog(c), "probe");
  ASSERT_EQ(full.size(), 8u);
  c.checkpoint.dir = b.path();
  c.train.max_steps = 4;
  TrainLog(c);
  c.train.max_steps = 8;
  const auto resumed = JsonLogEvents(TrainLog(c), "probe");
  ASSERT_EQ(resumed.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const auto& want = full[4 + i];
    const auto& got = resumed[i];
    EXPECT_EQ(got.at("step"), want.at("step"));
    for (const char* key : {"update_norm", "f0_norm", "logits_update_norm", "logits_f0_norm"}) {
      EXPECT_EQ(got.at(key).get<double>(), want.at(key).get<double>()) << key << " " << i;
    }
  }
}

}  // namespace
}  // namespace deepnet::train
