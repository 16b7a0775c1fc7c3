#include "job/progress_line.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

namespace deepnet::job {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A line and its bytes as the trainer wrote them before the schema existed (captured from
// train/progress_reporter.cc at 1384e0f): the schema must keep them byte for byte.
struct Sample {
  ProgressLine line;
  const char* bytes;
};

std::vector<Sample> SamplesOf(ProgressEvent event) {
  switch (event) {
    case ProgressEvent::kStep: {
      StepLine full;
      full.step = 120;
      full.loss = 3.5;
      full.nll = 3.25;
      full.lr = 0.0005;
      full.grad_norm = 1.75;
      full.src_tokens = 10;
      full.tgt_tokens = 12;
      full.tokens_per_s = 2048.5;
      full.update_norm = 0.125;
      full.update_norm_relative = 0.0625;
      full.elapsed_s = 1.5;
      full.eta_s = 20.25;
      full.data_wait_s = 0.001;
      full.stage_compute_s = {0.5, 0.25};
      full.stage_idle = {0.125, 0.375};
      full.on_gpu = true;
      full.gpu_allocated_bytes = int64_t{1} << 30;
      full.gpu_reserved_bytes = int64_t{3} << 30;
      full.gpu_peak_allocated_bytes = int64_t{2} << 30;
      StepLine cpu;
      cpu.step = 7;
      cpu.loss = 2.0;
      cpu.nll = 1.5;
      return {
          {full,
           R"j({"data_wait_s":0.001,"elapsed_s":1.5,"eta_s":20.25,"event":"step","gpu_allocated_bytes":1073741824,"gpu_peak_allocated_bytes":2147483648,"gpu_reserved_bytes":3221225472,"grad_norm":1.75,"loss":3.5,"lr":0.0005,"nll":3.25,"ppl":25.790339917193062,"src_tokens":10,"stage_compute_s":[0.5,0.25],"stage_idle":[0.125,0.375],"step":120,"tgt_tokens":12,"tokens_per_s":2048.5,"update_norm":0.125,"update_norm_relative":0.0625})j"},
          {cpu,
           R"j({"data_wait_s":0.0,"elapsed_s":0.0,"eta_s":0.0,"event":"step","grad_norm":0.0,"loss":2.0,"lr":0.0,"nll":1.5,"ppl":4.4816890703380645,"src_tokens":0,"step":7,"tgt_tokens":0,"tokens_per_s":0.0,"update_norm":null})j"}};
    }
    case ProgressEvent::kValid:
      return {{ValidLine{40, 2.5, 2.25, 1234},
               R"j({"event":"valid","loss":2.5,"nll":2.25,"ppl":9.487735836358526,"step":40,"tokens":1234})j"}};
    case ProgressEvent::kProbe: {
      ProbeLine full{7, 0.5, 4.0, 0.125, 3.0, 12.0, 0.25};
      ProbeLine bare;
      bare.step = 2;
      return {
          {full,
           R"j({"event":"probe","f0_norm":4.0,"logits_f0_norm":12.0,"logits_update_norm":3.0,"logits_update_norm_relative":0.25,"step":7,"update_norm":0.5,"update_norm_relative":0.125})j"},
          {bare,
           R"j({"event":"probe","f0_norm":0.0,"logits_f0_norm":null,"logits_update_norm":null,"logits_update_norm_relative":null,"step":2,"update_norm":0.0,"update_norm_relative":null})j"}};
    }
    case ProgressEvent::kDiagnostics: {
      DiagnosticsLine d;
      d.step = 20;
      d.per_layer = {{"encoder", 0, 2.0, 0.1}, {"encoder", 1, 3.0, 0.2}, {"decoder", 0, 4.0, 0.05}};
      d.layers = 3;
      d.ln_input_norm = {2.0, 4.0, 3.0, 3.0, 3.8};
      d.grad_norm = {0.05, 0.2, 0.11666666666666668, 0.1, 0.18000000000000002};
      d.other_grad_norm = 0.3;
      return {
          {d,
           R"j({"event":"diagnostics","layers":[{"grad_norm":0.1,"layer":0,"ln_input_norm":2.0,"stack":"encoder"},{"grad_norm":0.2,"layer":1,"ln_input_norm":3.0,"stack":"encoder"},{"grad_norm":0.05,"layer":0,"ln_input_norm":4.0,"stack":"decoder"}],"step":20,"summary":{"grad_norm":{"max":0.2,"mean":0.11666666666666668,"min":0.05,"p50":0.1,"p90":0.18000000000000002},"layers":3,"ln_input_norm":{"max":4.0,"mean":3.0,"min":2.0,"p50":3.0,"p90":3.8},"other_grad_norm":0.3}})j"}};
    }
    case ProgressEvent::kCheckpoint:
      return {
          {CheckpointLine{300, "/c/step_0000300"},
           R"j({"event":"checkpoint","message":"saved /c/step_0000300","path":"/c/step_0000300","step":300})j"},
          {RejectedCheckpointLine{"/c/step_0000400: bad manifest"},
           R"j({"event":"checkpoint","message":"rejected: /c/step_0000400: bad manifest"})j"}};
    case ProgressEvent::kResume:
      return {{ResumeLine{400, "/c/step_0000400", false},
               R"j({"event":"resume","message":"resumed from step 400 (/c/step_0000400)"})j"},
              {ResumeLine{400, "/c/step_0000400", true},
               R"j({"event":"resume","message":"resumed from step 400 (/c/step_0000400, resharded to this layout)"})j"}};
    case ProgressEvent::kStart:
      return {{StartLine{"job: 2+2 layers, 10 train / 0 valid pairs in 1 directions", 400, 1000},
               R"j({"event":"start","message":"job: 2+2 layers, 10 train / 0 valid pairs in 1 directions, from step 400 to 1000"})j"}};
    case ProgressEvent::kLayout:
      return {{MessageLine{event, "2 stage(s) x 1 replica(s)\n  rank 0: stage 0, replica 0"},
               R"j({"event":"layout","message":"2 stage(s) x 1 replica(s)\n  rank 0: stage 0, replica 0"})j"}};
    case ProgressEvent::kStages:
      return {{MessageLine{event, "stage 0 0.100 s/step"},
               R"j({"event":"stages","message":"stage 0 0.100 s/step"})j"}};
    case ProgressEvent::kStop:
      return {{MessageLine{event,
                           "step 20 (max_steps) after 00:03; 0 of 20 steps waited for data (0.000 s)"},
               R"j({"event":"stop","message":"step 20 (max_steps) after 00:03; 0 of 20 steps waited for data (0.000 s)"})j"}};
    case ProgressEvent::kGuard: {
      GuardLine fail;
      fail.step = 9;
      fail.action = GuardAction::kFail;
      fail.trigger = "loss_spike";
      fail.value = 2000.0;
      fail.threshold = 10.0;
      fail.retries = 3;
      fail.max_retries = 3;
      fail.message = "guard: x";
      GuardLine rollback;
      rollback.step = 8;
      rollback.action = GuardAction::kRollback;
      rollback.trigger = "other_rank";
      rollback.value = kNaN;
      rollback.threshold = kNaN;
      rollback.to_step = 6;
      rollback.checkpoint = "/c/step_0000006";
      rollback.skipped_steps = 2;
      rollback.retries = 1;
      rollback.max_retries = 3;
      rollback.lr_scale = 0.5;
      rollback.message = "step 8: rolled back";
      return {
          {fail,
           R"j({"action":"fail","event":"guard","max_retries":3,"message":"guard: x","retries":3,"step":9,"threshold":10.0,"trigger":"loss_spike","value":2000.0})j"},
          {rollback,
           R"j({"action":"rollback","checkpoint":"/c/step_0000006","event":"guard","lr_scale":0.5,"max_retries":3,"message":"step 8: rolled back","retries":1,"skipped_steps":2,"step":8,"threshold":null,"to_step":6,"trigger":"other_rank","value":null})j"}};
    }
    case ProgressEvent::kPlateau:
      return {{PlateauLine{30, 3.5, 3.25, 5, 0.01, "rewarm", "flat"},
               R"j({"action":"rewarm","best_valid_loss":3.25,"event":"plateau","message":"flat","min_delta":0.01,"step":30,"valid_loss":3.5,"window":5})j"}};
  }
  return {};
}

// Every field of each line, for comparing parsed with written values. NaN (null on the line)
// compares as "none".
std::optional<double> Value(double v) { return std::isnan(v) ? std::nullopt : std::optional(v); }
auto Fields(const StepLine& l) {
  return std::make_tuple(l.step, l.loss, l.nll, l.lr, l.grad_norm, l.src_tokens, l.tgt_tokens,
                         l.tokens_per_s, l.update_norm, l.update_norm_relative, l.elapsed_s,
                         l.eta_s, l.data_wait_s, l.stage_compute_s, l.stage_idle, l.on_gpu,
                         l.gpu_allocated_bytes, l.gpu_reserved_bytes, l.gpu_peak_allocated_bytes);
}
auto Fields(const ValidLine& l) { return std::make_tuple(l.step, l.loss, l.nll, l.tokens); }
auto Fields(const ProbeLine& l) {
  return std::make_tuple(l.step, l.update_norm, l.f0_norm, l.update_norm_relative,
                         l.logits_update_norm, l.logits_f0_norm, l.logits_update_norm_relative);
}
auto Fields(const LayerSummary& s) { return std::make_tuple(s.min, s.max, s.mean, s.p50, s.p90); }
auto Fields(const DiagnosticsLine& l) {
  std::vector<std::tuple<std::string, int64_t, double, double>> layers;
  for (const LayerLine& x : l.per_layer) {
    layers.emplace_back(x.stack, x.layer, x.ln_input_norm, x.grad_norm);
  }
  return std::make_tuple(l.step, layers, l.layers, Fields(l.ln_input_norm), Fields(l.grad_norm),
                         l.other_grad_norm);
}
auto Fields(const CheckpointLine& l) { return std::make_tuple(l.step, l.path); }
auto Fields(const RejectedCheckpointLine& l) { return std::make_tuple(l.reason); }
auto Fields(const ResumeLine& l) { return std::make_tuple(l.step, l.path, l.resharded); }
auto Fields(const StartLine& l) { return std::make_tuple(l.run, l.from_step, l.to_step); }
auto Fields(const MessageLine& l) { return std::make_tuple(l.event, l.message); }
auto Fields(const GuardLine& l) {
  return std::make_tuple(l.step, l.action, l.trigger, Value(l.value), Value(l.threshold),
                         l.retries, l.max_retries, l.to_step, l.checkpoint, l.skipped_steps,
                         l.lr_scale, l.message);
}
auto Fields(const PlateauLine& l) {
  return std::make_tuple(l.step, l.valid_loss, l.best_valid_loss, l.window, l.min_delta, l.action,
                         l.message);
}

void ExpectSameLine(const ProgressLine& got, const ProgressLine& want) {
  ASSERT_EQ(got.index(), want.index());
  std::visit(
      [&](const auto& w) {
        using T = std::decay_t<decltype(w)>;
        EXPECT_TRUE(Fields(std::get<T>(got)) == Fields(w)) << FormatProgressLine(got);
      },
      want);
}

TEST(ProgressLineTest, EveryEventKindKeepsItsBytesAndRoundTrips) {
  for (ProgressEvent event : kAllProgressEvents) {
    const std::vector<Sample> samples = SamplesOf(event);
    ASSERT_FALSE(samples.empty()) << ProgressEventName(event);
    for (const Sample& sample : samples) {
      SCOPED_TRACE(sample.bytes);
      EXPECT_EQ(EventOf(sample.line), event);
      const std::string written = FormatProgressLine(sample.line);
      EXPECT_EQ(written, sample.bytes);
      const std::optional<ProgressLine> parsed = ParseProgressLine(written);
      ASSERT_TRUE(parsed.has_value());
      ExpectSameLine(*parsed, sample.line);
      EXPECT_EQ(FormatProgressLine(*parsed), written);
    }
  }
}

TEST(ProgressLineTest, EventNamesAreDistinctAndReadBack) {
  std::vector<std::string_view> names;
  for (ProgressEvent event : kAllProgressEvents) {
    const std::string_view name = ProgressEventName(event);
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(ProgressEventNamed(name), event) << name;
    for (std::string_view seen : names) EXPECT_NE(seen, name);
    names.push_back(name);
  }
  EXPECT_FALSE(ProgressEventNamed("threads").has_value());
}

TEST(ProgressLineTest, TextUnknownEventsAndBrokenLinesGiveNothing) {
  for (const char* text :
       {"", "   ", "[train] step 10/100  loss 2.0", "{not json", "[1,2,3]", "{}",
        R"j({"event":"threads","message":"4 intra-op"})j", R"j({"event":7})j",
        R"j({"event":"step","step":"ten","loss":2})j", R"j({"event":"step","loss":2})j",
        R"j({"event":"step","step":-1,"loss":2})j", R"j({"event":"step","step":3,"loss":null})j",
        R"j({"event":"probe","step":"x"})j", R"j({"event":"diagnostics","step":3})j",
        R"j({"event":"checkpoint","message":"saved /c/latest"})j",
        R"j({"event":"checkpoint","message":"wrote it"})j",
        R"j({"event":"resume","message":"resumed from step x"})j",
        R"j({"event":"start","message":"from step x"})j", R"j({"event":"guard","action":"rollback"})j",
        R"j({"event":"guard","step":3,"action":"panic"})j", R"j({"event":"plateau"})j"}) {
    EXPECT_FALSE(ParseProgressLine(text).has_value()) << text;
  }
}

// Lines of older trainers, and lines with keys this version does not know, read as before.
TEST(ProgressLineTest, OlderAndRicherLinesStillRead) {
  std::optional<ProgressLine> line =
      ParseProgressLine(R"j({"event":"checkpoint","message":"saved runs/x/step_0001500"})j");
  ASSERT_TRUE(line.has_value());
  ExpectSameLine(*line, CheckpointLine{1500, "runs/x/step_0001500"});

  line = ParseProgressLine(R"j({"event":"resume","step":12})j");
  ASSERT_TRUE(line.has_value());
  ExpectSameLine(*line, ResumeLine{12, "", false});

  line = ParseProgressLine(R"json({"event":"start","message":"from step 3 to 9: a, from step 0"})json");
  ASSERT_TRUE(line.has_value());
  ExpectSameLine(*line, StartLine{"from step 3 to 9: a", 0, 0});

  line = ParseProgressLine(
      R"(  {"event":"step","step":3,"loss":1.0,"new_key":[1],"gpu_allocated_bytes":-5,"gpu_reserved_bytes":"x"}  )");
  ASSERT_TRUE(line.has_value());
  StepLine step;
  step.step = 3;
  step.loss = 1.0;
  step.on_gpu = true;  // Its gpu_* keys are there, garbage or not.
  ExpectSameLine(*line, step);

  line = ParseProgressLine(R"j({"event":"guard","step":8,"action":"rollback","value":1.5})j");
  ASSERT_TRUE(line.has_value());
  const GuardLine& guard = std::get<GuardLine>(*line);
  EXPECT_EQ(guard.value, 1.5);
  EXPECT_TRUE(std::isnan(guard.threshold));
  EXPECT_EQ(guard.lr_scale, 1.0);
}

TEST(ProgressLineTest, MessagesAreWhatTheTextFormatPrints) {
  EXPECT_EQ(ProgressMessage(CheckpointLine{5, "/c/step_5"}), "saved /c/step_5");
  EXPECT_EQ(ProgressMessage(ResumeLine{5, "/c/step_5", true}),
            "resumed from step 5 (/c/step_5, resharded to this layout)");
  EXPECT_EQ(ProgressMessage(StartLine{"run", 0, 10}), "run, from step 0 to 10");
  EXPECT_EQ(ProgressMessage(ValidLine{}), "");
}

}  // namespace
}  // namespace deepnet::job
