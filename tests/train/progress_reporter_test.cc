#include "train/progress_reporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepnet::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

StepMetrics GpuStep(bool on_gpu) {
  StepMetrics m;
  m.step = 4;
  m.max_steps = 10;
  m.loss = 2.0;
  m.on_gpu = on_gpu;
  m.gpu_allocated_bytes = int64_t{1} << 30;
  m.gpu_reserved_bytes = int64_t{3} << 30;
  m.gpu_peak_allocated_bytes = int64_t{2} << 30;
  return m;
}

TEST(ProgressReporterTest, GpuMemoryOnlyForGpuSteps) {
  std::ostringstream json;
  ProgressReporter(&json, LogFormat::kJson, false).Step(GpuStep(true));
  const auto j = nlohmann::json::parse(json.str());
  EXPECT_EQ(j.at("gpu_allocated_bytes").get<int64_t>(), int64_t{1} << 30);
  EXPECT_EQ(j.at("gpu_reserved_bytes").get<int64_t>(), int64_t{3} << 30);
  EXPECT_EQ(j.at("gpu_peak_allocated_bytes").get<int64_t>(), int64_t{2} << 30);

  std::ostringstream cpu_json;
  ProgressReporter(&cpu_json, LogFormat::kJson, false).Step(GpuStep(false));
  EXPECT_THAT(cpu_json.str(), Not(HasSubstr("gpu_")));

  std::ostringstream text, cpu_text;
  ProgressReporter(&text, LogFormat::kText, false).Step(GpuStep(true));
  EXPECT_THAT(text.str(), HasSubstr("gpu 1.00/3.00 GiB (peak 2.00)"));
  ProgressReporter(&cpu_text, LogFormat::kText, false).Step(GpuStep(false));
  EXPECT_THAT(cpu_text.str(), Not(HasSubstr("gpu")));
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// What the trainer writes is what the worker's parser (job::ParseProgressLine) reads back.
TEST(ProgressReporterTest, JsonLinesParseBackToWhatWasReported) {
  std::ostringstream out;
  ProgressReporter reporter(&out, LogFormat::kJson, false);
  StepMetrics step = GpuStep(true);
  step.nll = 1.75;
  step.update_norm = 0.25;
  step.stage_compute_s = {0.5};
  step.stage_idle = {0.125};
  reporter.Step(step);
  reporter.Valid({4, 2.5, 2.25, 100});
  reporter.Probe({4, 0.5, 4.0, 0.125, std::nullopt, std::nullopt, std::nullopt});
  job::DiagnosticsLine diagnostics;
  diagnostics.step = 4;
  diagnostics.per_layer = {{"encoder", 0, 2.0, 0.5}, {"decoder", 0, 3.0, 0.25}};
  diagnostics.layers = 2;
  diagnostics.ln_input_norm = {2.0, 3.0, 2.5, 2.5, 2.9};
  reporter.Diagnostics(diagnostics);
  reporter.Event(job::CheckpointLine{4, "/c/step_4"});
  reporter.Event(job::ResumeLine{4, "/c/step_4", true});
  reporter.Event(job::StartLine{"run", 4, 10});
  job::GuardLine guard;
  guard.step = 5;
  guard.action = job::GuardAction::kRollback;
  guard.to_step = 4;
  reporter.Event(guard);
  reporter.Event(job::PlateauLine{6, 2.0, 1.5, 3, 0.01, "none", "flat"});

  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 9u) << out.str();
  std::vector<job::ProgressLine> parsed;
  for (const std::string& line : lines) {
    std::optional<job::ProgressLine> read = job::ParseProgressLine(line);
    ASSERT_TRUE(read.has_value()) << line;
    parsed.push_back(*read);
  }
  const auto& s = std::get<job::StepLine>(parsed[0]);
  EXPECT_EQ(s.step, 4);
  EXPECT_EQ(s.loss, 2.0);
  EXPECT_EQ(s.nll, 1.75);
  EXPECT_EQ(s.update_norm, 0.25);
  EXPECT_EQ(s.stage_compute_s, std::vector<double>{0.5});
  EXPECT_EQ(s.stage_idle, std::vector<double>{0.125});
  EXPECT_TRUE(s.on_gpu);
  EXPECT_EQ(s.gpu_reserved_bytes, int64_t{3} << 30);
  EXPECT_EQ(std::get<job::ValidLine>(parsed[1]).tokens, 100);
  EXPECT_EQ(std::get<job::ProbeLine>(parsed[2]).update_norm_relative, 0.125);
  EXPECT_FALSE(std::get<job::ProbeLine>(parsed[2]).logits_f0_norm.has_value());
  const auto& d = std::get<job::DiagnosticsLine>(parsed[3]);
  ASSERT_EQ(d.per_layer.size(), 2u);
  EXPECT_EQ(d.per_layer[1].stack, "decoder");
  EXPECT_EQ(d.ln_input_norm.p90, 2.9);
  EXPECT_EQ(std::get<job::CheckpointLine>(parsed[4]).path, "/c/step_4");
  EXPECT_TRUE(std::get<job::ResumeLine>(parsed[5]).resharded);
  EXPECT_EQ(std::get<job::StartLine>(parsed[6]).to_step, 10);
  EXPECT_EQ(std::get<job::GuardLine>(parsed[7]).to_step, 4);
  EXPECT_EQ(std::get<job::PlateauLine>(parsed[8]).window, 3);
}

TEST(ProgressReporterTest, TextEventsAreTheEventAndItsMessage) {
  std::ostringstream out;
  ProgressReporter reporter(&out, LogFormat::kText, false);
  reporter.Event(job::CheckpointLine{4, "/c/step_4"});
  reporter.Event(job::RejectedCheckpointLine{"/c/step_6: bad manifest"});
  reporter.Event(job::ResumeLine{4, "/c/step_4", false});
  reporter.Event(job::MessageLine{job::ProgressEvent::kStop, "step 4 (signal)"});
  EXPECT_EQ(out.str(),
            "[checkpoint] saved /c/step_4\n"
            "[checkpoint] rejected: /c/step_6: bad manifest\n"
            "[resume] resumed from step 4 (/c/step_4)\n"
            "[stop] step 4 (signal)\n");
}

}  // namespace
}  // namespace deepnet::train
