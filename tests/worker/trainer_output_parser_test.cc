#include "worker/trainer_output_parser.h"

#include <gtest/gtest.h>

#include <vector>

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

TEST(TrainerOutputParserTest, ParsesProbeAndDiagnosticsLines) {
  const TrainerLine probe = ParseTrainerLine(
      R"({"event":"probe","step":7,"update_norm":0.5,"f0_norm":4.0,"update_norm_relative":0.125,)"
      R"("logits_update_norm":3.0,"logits_f0_norm":12.0,"logits_update_norm_relative":0.25})");
  ASSERT_TRUE(probe.probe.has_value());
  EXPECT_FALSE(probe.step.has_value());
  EXPECT_EQ(probe.probe->step, 7);
  EXPECT_DOUBLE_EQ(probe.probe->update_norm, 0.5);
  EXPECT_DOUBLE_EQ(probe.probe->f0_norm, 4.0);
  EXPECT_DOUBLE_EQ(*probe.probe->update_norm_relative, 0.125);
  EXPECT_DOUBLE_EQ(*probe.probe->logits_update_norm, 3.0);
  EXPECT_DOUBLE_EQ(*probe.probe->logits_f0_norm, 12.0);
  EXPECT_DOUBLE_EQ(*probe.probe->logits_update_norm_relative, 0.25);
  // null (no logits reference, ||F0|| = 0) stays unset.
  const TrainerLine bare = ParseTrainerLine(
      R"({"event":"probe","step":2,"update_norm":0.0,"f0_norm":0.0,"update_norm_relative":null,)"
      R"("logits_update_norm":null,"logits_f0_norm":null,"logits_update_norm_relative":null})");
  ASSERT_TRUE(bare.probe.has_value());
  EXPECT_FALSE(bare.probe->update_norm_relative.has_value());
  EXPECT_FALSE(bare.probe->logits_update_norm.has_value());

  const TrainerLine diag = ParseTrainerLine(
      R"({"event":"diagnostics","step":20,"layers":[{"stack":"encoder","layer":0,)"
      R"("ln_input_norm":2.0,"grad_norm":0.1}],"summary":{"ln_input_norm":{"min":1.0,)"
      R"("max":9.0,"mean":4.0,"p50":3.0,"p90":8.0},"grad_norm":{"min":0.01,"max":0.2,)"
      R"("mean":0.05,"p50":0.04,"p90":0.15},"other_grad_norm":0.3,"layers":12}})");
  ASSERT_TRUE(diag.diagnostics.has_value());
  EXPECT_EQ(diag.diagnostics->step, 20);
  EXPECT_EQ(diag.diagnostics->layers, 12);
  EXPECT_DOUBLE_EQ(diag.diagnostics->ln_input_norm.min, 1.0);
  EXPECT_DOUBLE_EQ(diag.diagnostics->ln_input_norm.max, 9.0);
  EXPECT_DOUBLE_EQ(diag.diagnostics->ln_input_norm.mean, 4.0);
  EXPECT_DOUBLE_EQ(diag.diagnostics->ln_input_norm.p50, 3.0);
  EXPECT_DOUBLE_EQ(diag.diagnostics->ln_input_norm.p90, 8.0);
  EXPECT_DOUBLE_EQ(diag.diagnostics->grad_norm.p90, 0.15);
  EXPECT_DOUBLE_EQ(diag.diagnostics->other_grad_norm, 0.3);
  // Broken lines give nothing.
  EXPECT_FALSE(ParseTrainerLine(R"({"event":"probe","step":"x"})").probe.has_value());
  EXPECT_FALSE(ParseTrainerLine(R"({"event":"diagnostics","step":3})").diagnostics.has_value());
}

TEST(TrainerOutputParserTest, ProbeAndDiagnosticsTravelWithTheNextStepLine) {
  PendingTrainerValues pending;
  std::vector<TrainerLine> lines;
  for (const char* text :
       {R"({"event":"probe","step":3,"update_norm":0.25,"f0_norm":1.0})",
        R"({"event":"probe","step":4,"update_norm":0.5,"f0_norm":1.0})",
        R"({"event":"diagnostics","step":4,"summary":{"ln_input_norm":{"max":2.0}}})",
        R"({"event":"step","step":5,"loss":1.0})", R"({"event":"step","step":10,"loss":0.9})"}) {
    lines.push_back(ParseTrainerLine(text));
    pending.Merge(lines.back());
  }
  ASSERT_TRUE(lines[3].step.has_value());
  ASSERT_TRUE(lines[3].step->probe.has_value());
  EXPECT_EQ(lines[3].step->probe->step, 4);  // The latest probe before the step line.
  EXPECT_DOUBLE_EQ(lines[3].step->probe->update_norm, 0.5);
  ASSERT_TRUE(lines[3].step->diagnostics.has_value());
  EXPECT_DOUBLE_EQ(lines[3].step->diagnostics->ln_input_norm.max, 2.0);
  // Handed over once.
  EXPECT_FALSE(lines[4].step->probe.has_value());
  EXPECT_FALSE(lines[4].step->diagnostics.has_value());
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

namespace deepnet::worker {
namespace {

bool Empty(const TrainerLine& line) {
  return !line.step && !line.checkpoint && !line.resumed_step && !line.start_step && !line.probe &&
         !line.diagnostics && !line.guard;
}

// Lines as the trainer writes them (job::FormatProgressLine, which train/progress_reporter.cc
// calls) give the worker what the trainer reported.
TEST(TrainerOutputParserTest, ReadsWhatTheTrainerWrites) {
  job::StepLine step;
  step.step = 12;
  step.loss = 2.5;
  step.nll = 2.25;
  step.lr = 0.001;
  step.grad_norm = 1.5;
  step.tokens_per_s = 900.0;
  step.update_norm = 0.75;
  step.on_gpu = true;
  step.gpu_allocated_bytes = 10;
  step.gpu_reserved_bytes = 30;
  step.gpu_peak_allocated_bytes = 20;
  TrainerLine line = ParseTrainerLine(job::FormatProgressLine(step));
  ASSERT_TRUE(line.step.has_value());
  EXPECT_EQ(line.step->step, 12);
  EXPECT_EQ(line.step->loss, 2.5);
  EXPECT_EQ(line.step->nll, 2.25);
  EXPECT_EQ(line.step->lr, 0.001);
  EXPECT_EQ(line.step->grad_norm, 1.5);
  EXPECT_EQ(line.step->tokens_per_s, 900.0);
  EXPECT_EQ(line.step->update_norm, 0.75);
  EXPECT_EQ(line.step->gpu_allocated_bytes, 10);
  EXPECT_EQ(line.step->gpu_reserved_bytes, 30);
  EXPECT_EQ(line.step->gpu_peak_allocated_bytes, 20);

  line =
      ParseTrainerLine(job::FormatProgressLine(job::ProbeLine{12, 0.5, 4.0, 0.125, 1.0, 2.0, 0.5}));
  ASSERT_TRUE(line.probe.has_value());
  EXPECT_EQ(line.probe->logits_f0_norm, 2.0);

  job::DiagnosticsLine diagnostics;
  diagnostics.step = 12;
  diagnostics.per_layer = {{"encoder", 0, 2.0, 0.5}};
  diagnostics.layers = 1;
  diagnostics.grad_norm = {0.5, 0.5, 0.5, 0.5, 0.5};
  diagnostics.other_grad_norm = 0.25;
  line = ParseTrainerLine(job::FormatProgressLine(diagnostics));
  ASSERT_TRUE(line.diagnostics.has_value());
  EXPECT_EQ(line.diagnostics->layers, 1);
  EXPECT_EQ(line.diagnostics->grad_norm.p90, 0.5);
  EXPECT_EQ(line.diagnostics->other_grad_norm, 0.25);
  EXPECT_TRUE(line.diagnostics->per_layer.empty());  // Per-layer values stay in the log.

  line = ParseTrainerLine(job::FormatProgressLine(job::CheckpointLine{12, "/c/step_12"}));
  ASSERT_TRUE(line.checkpoint.has_value());
  EXPECT_EQ(line.checkpoint->step, 12);
  EXPECT_EQ(line.checkpoint->path, "/c/step_12");
  line = ParseTrainerLine(job::FormatProgressLine(job::ResumeLine{8, "/c/step_8", true}));
  EXPECT_EQ(line.resumed_step, 8);
  line = ParseTrainerLine(job::FormatProgressLine(job::StartLine{"job: 2+2 layers", 8, 100}));
  EXPECT_EQ(line.start_step, 8);

  job::GuardLine guard;
  guard.step = 9;
  guard.action = job::GuardAction::kRollback;
  guard.trigger = "loss_spike";
  guard.to_step = 8;
  guard.retries = 2;
  guard.message = "rolled back";
  line = ParseTrainerLine(job::FormatProgressLine(guard));
  ASSERT_TRUE(line.guard.has_value());
  EXPECT_EQ(line.guard->kind, "rollback");
  EXPECT_EQ(line.guard->trigger, "loss_spike");
  EXPECT_EQ(line.guard->to_step, 8);
  EXPECT_EQ(line.guard->retries, 2);
  EXPECT_EQ(line.guard->message, "rolled back");
  line = ParseTrainerLine(
      job::FormatProgressLine(job::PlateauLine{30, 3.5, 3.0, 5, 0.01, "none", "flat"}));
  ASSERT_TRUE(line.guard.has_value());
  EXPECT_EQ(line.guard->kind, "plateau");
  EXPECT_EQ(line.guard->step, 30);

  // Lines the worker has no use for.
  for (const job::ProgressLine& other :
       {job::ProgressLine(job::ValidLine{12, 2.0, 1.9, 50}),
        job::ProgressLine(job::RejectedCheckpointLine{"/c/step_4: bad"}),
        job::ProgressLine(job::MessageLine{job::ProgressEvent::kLayout, "1 stage(s)"}),
        job::ProgressLine(job::MessageLine{job::ProgressEvent::kStages, "stage 0"}),
        job::ProgressLine(job::MessageLine{job::ProgressEvent::kStop, "step 12 (signal)"})}) {
    EXPECT_TRUE(Empty(ParseTrainerLine(job::FormatProgressLine(other))))
        << job::FormatProgressLine(other);
  }
}

}  // namespace
}  // namespace deepnet::worker
