#include "worker/trainer_output_parser.h"

#include <gtest/gtest.h>

namespace deepnet::worker {
namespace {

TEST(TrainerOutputParserTest, ParsesAStepLine) {
  const TrainerLine line =
      ParseTrainerLine(R"({"event":"step","step":120,"loss":3.5,"nll":3.25,"ppl":25.8,"lr":0.0005,)"
                       R"("grad_norm":1.75,"tokens_per_s":2048.5,"src_tokens":10,"tgt_tokens":12,)"
                       R"("elapsed_s":1.0,"eta_s":2.0,"data_wait_s":0.0,"update_norm":0.125})");
  ASSERT_TRUE(line.step.has_value());
  EXPECT_FALSE(line.checkpoint.has_value());
  EXPECT_EQ(line.step->step, 120);
  EXPECT_DOUBLE_EQ(line.step->loss, 3.5);
  EXPECT_DOUBLE_EQ(line.step->nll, 3.25);
  EXPECT_DOUBLE_EQ(line.step->lr, 0.0005);
  EXPECT_DOUBLE_EQ(line.step->grad_norm, 1.75);
  EXPECT_DOUBLE_EQ(line.step->tokens_per_s, 2048.5);
  ASSERT_TRUE(line.step->update_norm.has_value());
  EXPECT_DOUBLE_EQ(*line.step->update_norm, 0.125);
}

TEST(TrainerOutputParserTest, ReadsGpuMemoryWhenPresent) {
  const TrainerLine gpu =
      ParseTrainerLine(R"({"event":"step","step":3,"loss":1.0,"gpu_allocated_bytes":1024,)"
                       R"("gpu_reserved_bytes":4096,"gpu_peak_allocated_bytes":2048})");
  ASSERT_TRUE(gpu.step.has_value());
  EXPECT_EQ(gpu.step->gpu_allocated_bytes, 1024);
  EXPECT_EQ(gpu.step->gpu_reserved_bytes, 4096);
  EXPECT_EQ(gpu.step->gpu_peak_allocated_bytes, 2048);
  // A CPU trainer writes none; garbage counts as none.
  const TrainerLine cpu = ParseTrainerLine(
      R"({"event":"step","step":3,"loss":1.0,"gpu_allocated_bytes":-5,"gpu_reserved_bytes":"x"})");
  ASSERT_TRUE(cpu.step.has_value());
  EXPECT_EQ(cpu.step->gpu_allocated_bytes, 0);
  EXPECT_EQ(cpu.step->gpu_reserved_bytes, 0);
  EXPECT_EQ(cpu.step->gpu_peak_allocated_bytes, 0);
}

TEST(TrainerOutputParserTest, NullUpdateNormMeansNotMeasured) {
  const TrainerLine line =
      ParseTrainerLine(R"({"event":"step","step":7,"loss":1.0,"nll":0.9,"lr":0.1,"grad_norm":2.0,)"
                       R"("tokens_per_s":5.0,"update_norm":null}  )");
  ASSERT_TRUE(line.step.has_value());
  EXPECT_EQ(line.step->step, 7);
  EXPECT_FALSE(line.step->update_norm.has_value());
}

TEST(TrainerOutputParserTest, CheckpointTakesStepAndPathFields) {
  const TrainerLine line = ParseTrainerLine(
      R"({"event":"checkpoint","message":"saved /c/step_0000300","step":300,"path":"/c/step_0000300"})");
  ASSERT_TRUE(line.checkpoint.has_value());
  EXPECT_EQ(line.checkpoint->step, 300);
  EXPECT_EQ(line.checkpoint->path, "/c/step_0000300");
}

TEST(TrainerOutputParserTest, CheckpointStepFallsBackToTheFolderName) {
  const TrainerLine line =
      ParseTrainerLine(R"({"event":"checkpoint","message":"saved runs/x/step_0001500"})");
  ASSERT_TRUE(line.checkpoint.has_value());
  EXPECT_EQ(line.checkpoint->step, 1500);
  EXPECT_EQ(line.checkpoint->path, "runs/x/step_0001500");
}

TEST(TrainerOutputParserTest, RejectedCheckpointIsNotACompletedOne) {
  EXPECT_FALSE(ParseTrainerLine(
                   R"({"event":"checkpoint","message":"rejected: /c/step_0000300: bad manifest"})")
                   .checkpoint.has_value());
}

TEST(TrainerOutputParserTest, ResumeGivesTheStep) {
  const TrainerLine line = ParseTrainerLine(
      R"json({"event":"resume","message":"resumed from step 400 (/c/step_0000400)"})json");
  ASSERT_TRUE(line.resumed_step.has_value());
  EXPECT_EQ(*line.resumed_step, 400);
}

TEST(TrainerOutputParserTest, StartGivesTheStepTheRunStartsFrom) {
  TrainerLine line = ParseTrainerLine(
      R"json({"event":"start","message":"job: 2+2 layers, 10 train / 0 valid pairs in 1 directions, from step 400 to 1000"})json");
  ASSERT_TRUE(line.start_step.has_value());
  EXPECT_EQ(*line.start_step, 400);
  line = ParseTrainerLine(
      R"json({"event":"start","message":"from step 3 to 9: name, from step 0 to 100"})json");
  ASSERT_TRUE(line.start_step.has_value());
  EXPECT_EQ(*line.start_step, 0);
  EXPECT_FALSE(ParseTrainerLine(R"json({"event":"start","message":"from step x"})json").start_step);
}

TEST(TrainerOutputParserTest, OtherLinesGiveNothing) {
  for (const char* text :
       {"", "[train] step 10/100 loss 2.0", "{not json", R"({"event":"valid","step":10,"loss":2})",
        R"({"event":"step","step":"ten","loss":2})", R"({"event":"step","loss":2})",
        R"({"event":"checkpoint","message":"saved /c/latest"})", "[1,2,3]"}) {
    const TrainerLine line = ParseTrainerLine(text);
    EXPECT_FALSE(line.step || line.checkpoint || line.resumed_step || line.start_step) << text;
  }
}

}  // namespace
}  // namespace deepnet::worker

namespace deepnet::worker {
namespace {

TEST(TrainerOutputParserTest, GuardAndPlateauEvents) {
  TrainerLine line = ParseTrainerLine(
      R"({"event":"guard","step":8,"action":"rollback","trigger":"nonfinite_loss","value":null,)"
      R"("threshold":null,"to_step":6,"retries":1,"max_retries":3,"lr_scale":0.5,)"
      R"("message":"step 8: loss is nan; rolled back to step 6"})");
  ASSERT_TRUE(line.guard.has_value());
  EXPECT_FALSE(line.step.has_value());
  EXPECT_EQ(line.guard->step, 8);
  EXPECT_EQ(line.guard->kind, "rollback");
  EXPECT_EQ(line.guard->trigger, "nonfinite_loss");
  EXPECT_EQ(line.guard->to_step, 6);
  EXPECT_EQ(line.guard->retries, 1);
  EXPECT_EQ(line.guard->message, "step 8: loss is nan; rolled back to step 6");
  line = ParseTrainerLine(
      R"({"event":"guard","step":9,"action":"fail","trigger":"loss_spike","retries":3,"message":"guard: x"})");
  ASSERT_TRUE(line.guard.has_value());
  EXPECT_EQ(line.guard->kind, "fail");
  EXPECT_EQ(line.guard->message, "guard: x");
  line = ParseTrainerLine(
      R"({"event":"plateau","step":30,"valid_loss":3.5,"action":"none","message":"flat"})");
  ASSERT_TRUE(line.guard.has_value());
  EXPECT_EQ(line.guard->kind, "plateau");
  EXPECT_EQ(line.guard->trigger, "");
  EXPECT_EQ(line.guard->step, 30);
  // Malformed: no step, or an unknown action.
  EXPECT_FALSE(ParseTrainerLine(R"({"event":"guard","action":"rollback"})").guard);
  EXPECT_FALSE(ParseTrainerLine(R"({"event":"guard","step":3,"action":"panic"})").guard);
}

}  // namespace
}  // namespace deepnet::worker
