#include "cli/plan_command.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "tests/temp_dir.h"

namespace deepnet::cli {
namespace {

using testing::TempDir;

std::string WriteJob(const TempDir& dir) {
  const std::string path = dir.path() + "/job.yaml";
  std::ofstream(path) << "model:\n  encoder_layers: 2\n  decoder_layers: 2\n  d_model: 64\n"
                         "  heads: 4\n  ffn_dim: 256\n  vocab_size: 1000\n"
                         "data:\n  max_tokens: 512\n  max_len: 64\n"
                         "parallel:\n  pipeline_stages: 2\n  data_parallel: 2\n"
                         "  micro_batches: 4\n";
  return path;
}

TEST(PlanCommandTest, ParsesByteSizes) {
  EXPECT_EQ(ParseByteSize("80GB"), 80'000'000'000);
  EXPECT_EQ(ParseByteSize("80GiB"), 80LL << 30);
  EXPECT_EQ(ParseByteSize("81559MiB"), 81559LL << 20);
  EXPECT_EQ(ParseByteSize("1.5TB"), 1'500'000'000'000);
  EXPECT_EQ(ParseByteSize("4096"), 4096);
  EXPECT_EQ(ParseByteSize("80 GB"), 80'000'000'000);
  EXPECT_EQ(ParseByteSize("GB"), -1);
  EXPECT_EQ(ParseByteSize("80XB"), -1);
  EXPECT_EQ(ParseByteSize("0"), -1);
}

TEST(PlanCommandTest, PrintsThePlanOfTheJobsLayout) {
  TempDir dir;
  PlanCommand cmd;
  cmd.config_path = WriteJob(dir);
  cmd.format = "tsv";
  std::ostringstream out, err;
  ASSERT_EQ(RunPlan(cmd, out, err), kExitOk) << err.str();
  EXPECT_NE(out.str().find("stages\t2\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("replicas\t2\n"), std::string::npos);
  EXPECT_NE(out.str().find("tokens_per_micro_batch\t512\n"), std::string::npos);
  EXPECT_NE(out.str().find("fits\tunknown\n"), std::string::npos);

  cmd.stages = 4;
  cmd.replicas = 1;
  cmd.precision = "bf16";
  cmd.format = "text";
  std::ostringstream out2;
  ASSERT_EQ(RunPlan(cmd, out2, err), kExitOk) << err.str();
  EXPECT_NE(out2.str().find("4 stage(s) x 1 replica(s) = 4 GPUs, bf16"), std::string::npos)
      << out2.str();
  EXPECT_NE(out2.str().find("step time: "), std::string::npos);
}

TEST(PlanCommandTest, PlansAtThePrecisionTheTrainerWouldUse) {
  // runtime.precision auto is bf16 on cuda and fp32 on cpu when the job trains; the plan
  // follows the job unless --precision is given.
  TempDir dir;
  PlanCommand cmd;
  cmd.config_path = WriteJob(dir);
  const auto plan_line = [&](const std::vector<std::string>& overrides, const std::string& flag) {
    cmd.overrides = overrides;
    cmd.precision = flag;
    std::ostringstream out, err;
    EXPECT_EQ(RunPlan(cmd, out, err), kExitOk) << err.str();
    const std::string text = out.str();
    const size_t at = text.find("GPUs, ");
    return at == std::string::npos ? text : text.substr(at + 6, 4);
  };
  EXPECT_EQ(plan_line({"runtime.device=cuda"}, ""), "bf16");
  EXPECT_EQ(plan_line({"runtime.device=cpu"}, ""), "fp32");
  EXPECT_EQ(plan_line({"runtime.device=cuda", "runtime.precision=fp32"}, ""), "fp32");
  EXPECT_EQ(plan_line({"runtime.device=cpu", "runtime.precision=bf16"}, ""), "bf16");
  EXPECT_EQ(plan_line({"runtime.device=cuda"}, "fp32"), "fp32");
}

TEST(PlanCommandTest, SimulateReplaysTheStepStageByStage) {
  TempDir dir;
  PlanCommand cmd;
  cmd.config_path = WriteJob(dir);  // 2 stages, 4 micro-batches, 1f1b
  cmd.simulate = true;
  cmd.tflops = 100.0;
  std::ostringstream out, err;
  ASSERT_EQ(RunPlan(cmd, out, err), kExitOk) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("simulated step (1f1b, 2 stage(s), 4 micro-batch(es)"), std::string::npos)
      << text;
  // One row per stage: stage 0 keeps 2 micro-batches live under 1F1B, stage 1 one.
  EXPECT_NE(text.find("\n0      0-"), std::string::npos) << text;
  EXPECT_NE(text.find("\n1      "), std::string::npos) << text;
  EXPECT_EQ(text.find("\n2      "), std::string::npos) << text;

  cmd.overrides = {"parallel.schedule=gpipe"};
  std::ostringstream gpipe;
  ASSERT_EQ(RunPlan(cmd, gpipe, err), kExitOk) << err.str();
  EXPECT_NE(gpipe.str().find("simulated step (gpipe"), std::string::npos) << gpipe.str();

  cmd.p2p_latency_us = -1.0;
  std::ostringstream bad_out, bad_err;
  EXPECT_EQ(RunPlan(cmd, bad_out, bad_err), kExitBadInput);
  EXPECT_NE(bad_err.str().find("--p2p-latency-us"), std::string::npos) << bad_err.str();
  cmd.p2p_latency_us = 10.0;
  cmd.tflops = 0.0;
  std::ostringstream no_rate, no_rate_err;
  EXPECT_EQ(RunPlan(cmd, no_rate, no_rate_err), kExitBadInput);
  EXPECT_NE(no_rate_err.str().find("--tflops"), std::string::npos) << no_rate_err.str();
}

TEST(PlanCommandTest, ExitCodeThreeWhenTheLayoutDoesNotFit) {
  TempDir dir;
  PlanCommand cmd;
  cmd.config_path = WriteJob(dir);
  cmd.gpu_memory = "1MB";
  std::ostringstream out, err;
  EXPECT_EQ(RunPlan(cmd, out, err), kExitDoesNotFit);
  EXPECT_NE(out.str().find("per GPU: NO"), std::string::npos) << out.str();
  cmd.gpu_memory = "80GB";
  EXPECT_EQ(RunPlan(cmd, out, err), kExitOk);
}

TEST(PlanCommandTest, BadInputNamesTheOptionOrField) {
  TempDir dir;
  PlanCommand cmd;
  cmd.config_path = WriteJob(dir);
  cmd.gpu_memory = "lots";
  std::ostringstream out, err;
  EXPECT_EQ(RunPlan(cmd, out, err), kExitBadInput);
  EXPECT_NE(err.str().find("--gpu-memory"), std::string::npos) << err.str();
  cmd.gpu_memory.clear();
  cmd.stages = 5;  // 4 layers
  std::ostringstream err2;
  EXPECT_EQ(RunPlan(cmd, out, err2), kExitBadInput);
  EXPECT_NE(err2.str().find("--stages"), std::string::npos) << err2.str();
  cmd.stages = 0;
  cmd.overrides = {"model.d_model=-1"};
  std::ostringstream err3;
  EXPECT_EQ(RunPlan(cmd, out, err3), kExitBadInput);
  EXPECT_NE(err3.str().find("model.d_model"), std::string::npos) << err3.str();
}

}  // namespace
}  // namespace deepnet::cli
