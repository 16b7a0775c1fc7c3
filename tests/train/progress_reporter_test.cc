#include "train/progress_reporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

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

}  // namespace
}  // namespace deepnet::train
