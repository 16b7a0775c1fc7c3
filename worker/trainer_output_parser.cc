#include "worker/trainer_output_parser.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "storage/checkpoint_folder.h"

namespace deepnet::worker {
namespace {

using Json = nlohmann::json;

// A finite number at `key`, else nullopt (missing, null, string, ...).
std::optional<double> Number(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<int64_t> Integer(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::string String(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<TrainerStep> ParseStep(const Json& j) {
  std::optional<int64_t> step = Integer(j, "step");
  std::optional<double> loss = Number(j, "loss");
  if (!step || *step < 0 || !loss) return std::nullopt;
  TrainerStep out;
  out.step = *step;
  out.loss = *loss;
  out.nll = Number(j, "nll").value_or(0.0);
  out.lr = Number(j, "lr").value_or(0.0);
  out.grad_norm = Number(j, "grad_norm").value_or(0.0);
  out.tokens_per_s = Number(j, "tokens_per_s").value_or(0.0);
  out.update_norm = Number(j, "update_norm");
  // Byte counts: non-negative integers, else absent (0).
  auto bytes = [&](const char* key) { return std::max<int64_t>(0, Integer(j, key).value_or(0)); };
  out.gpu_allocated_bytes = bytes("gpu_allocated_bytes");
  out.gpu_reserved_bytes = bytes("gpu_reserved_bytes");
  out.gpu_peak_allocated_bytes = bytes("gpu_peak_allocated_bytes");
  return out;
}

std::optional<TrainerProbe> ParseProbe(const Json& j) {
  std::optional<int64_t> step = Integer(j, "step");
  std::optional<double> update = Number(j, "update_norm");
  if (!step || *step < 0 || !update) return std::nullopt;
  TrainerProbe out;
  out.step = *step;
  out.update_norm = *update;
  out.f0_norm = Number(j, "f0_norm").value_or(0.0);
  out.update_norm_relative = Number(j, "update_norm_relative");
  out.logits_update_norm = Number(j, "logits_update_norm");
  out.logits_f0_norm = Number(j, "logits_f0_norm");
  out.logits_update_norm_relative = Number(j, "logits_update_norm_relative");
  return out;
}

TrainerLayerSummary ParseLayerSummary(const Json& summary, const char* key) {
  TrainerLayerSummary out;
  auto it = summary.find(key);
  if (it == summary.end() || !it->is_object()) return out;
  out.min = Number(*it, "min").value_or(0.0);
  out.max = Number(*it, "max").value_or(0.0);
  out.mean = Number(*it, "mean").value_or(0.0);
  out.p50 = Number(*it, "p50").value_or(0.0);
  out.p90 = Number(*it, "p90").value_or(0.0);
  return out;
}

std::optional<TrainerDiagnostics> ParseDiagnostics(const Json& j) {
  std::optional<int64_t> step = Integer(j, "step");
  auto summary = j.find("summary");
  if (!step || *step < 0 || summary == j.end() || !summary->is_object()) return std::nullopt;
  TrainerDiagnostics out;
  out.step = *step;
  out.layers = std::max<int64_t>(0, Integer(*summary, "layers").value_or(0));
  out.ln_input_norm = ParseLayerSummary(*summary, "ln_input_norm");
  out.grad_norm = ParseLayerSummary(*summary, "grad_norm");
  out.other_grad_norm = Number(*summary, "other_grad_norm").value_or(0.0);
  return out;
}

std::optional<TrainerCheckpoint> ParseCheckpoint(const Json& j) {
  std::string path = String(j, "path");
  if (path.empty()) {
    const std::string text = String(j, "message");
    absl::string_view message = text;
    // "rejected: ..." lines name checkpoints that failed verification on resume.
    if (!absl::ConsumePrefix(&message, "saved ")) return std::nullopt;
    path = std::string(message);
  }
  std::optional<int64_t> step = Integer(j, "step");
  if (!step) step = storage::StepOfCheckpointPath(path);
  if (!step || *step < 0) return std::nullopt;
  return TrainerCheckpoint{*step, path};
}

std::optional<int64_t> ParseResume(const Json& j) {
  if (std::optional<int64_t> step = Integer(j, "step")) return step;
  const std::string text = String(j, "message");
  absl::string_view message = text;
  if (!absl::ConsumePrefix(&message, "resumed from step ")) return std::nullopt;
  const size_t end = message.find(' ');
  int64_t step = 0;
  if (!absl::SimpleAtoi(message.substr(0, end), &step) || step < 0) return std::nullopt;
  return step;
}

std::optional<int64_t> ParseStart(const Json& j) {
  const std::string text = String(j, "message");
  const size_t at = text.rfind(" from step ");
  if (at == std::string::npos) return std::nullopt;
  const absl::string_view rest = absl::string_view(text).substr(at + 11);
  int64_t step = 0;
  if (!absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &step) || step < 0) return std::nullopt;
  return step;
}

std::optional<TrainerGuardEvent> ParseGuard(const Json& j, bool plateau) {
  std::optional<int64_t> step = Integer(j, "step");
  if (!step || *step < 0) return std::nullopt;
  TrainerGuardEvent out;
  out.step = *step;
  out.kind = plateau ? "plateau" : String(j, "action");
  if (out.kind != "rollback" && out.kind != "fail" && out.kind != "plateau") return std::nullopt;
  if (!plateau) out.trigger = String(j, "trigger");
  out.to_step = std::max<int64_t>(0, Integer(j, "to_step").value_or(0));
  out.retries =
      static_cast<int32_t>(std::clamp<int64_t>(Integer(j, "retries").value_or(0), 0, 1 << 30));
  out.message = String(j, "message");
  return out;
}

}  // namespace

TrainerLine ParseTrainerLine(std::string_view text) {
  TrainerLine out;
  // Debian's abseil has its own string_view type.
  const absl::string_view line =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (line.empty() || line.front() != '{') return out;
  const Json j = Json::parse(line.begin(), line.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;  // Discarded (malformed) or not an object.
  const std::string event = String(j, "event");
  if (event == "step") {
    out.step = ParseStep(j);
  } else if (event == "checkpoint") {
    out.checkpoint = ParseCheckpoint(j);
  } else if (event == "resume") {
    out.resumed_step = ParseResume(j);
  } else if (event == "start") {
    out.start_step = ParseStart(j);
  } else if (event == "probe") {
    out.probe = ParseProbe(j);
  } else if (event == "diagnostics") {
    out.diagnostics = ParseDiagnostics(j);
  } else if (event == "guard" || event == "plateau") {
    out.guard = ParseGuard(j, event == "plateau");
  }
  return out;
}

void PendingTrainerValues::Merge(TrainerLine& line) {
  if (line.probe) probe_ = line.probe;
  if (line.diagnostics) diagnostics_ = line.diagnostics;
  if (!line.step) return;
  // Values of a later step than the point's (cannot happen with one trainer) stay pending.
  if (probe_ && probe_->step <= line.step->step) {
    line.step->probe = std::move(probe_);
    probe_.reset();
  }
  if (diagnostics_ && diagnostics_->step <= line.step->step) {
    line.step->diagnostics = std::move(diagnostics_);
    diagnostics_.reset();
  }
}

}  // namespace deepnet::worker
