#include "job/progress_line.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "storage/checkpoint_folder.h"

namespace deepnet::job {
namespace {

using Json = nlohmann::json;

// Every key of every line, once. Lines of different events share a key when it means the same
// (step, loss, message, ...).
namespace key {
constexpr char kEvent[] = "event";
constexpr char kMessage[] = "message";
constexpr char kStep[] = "step";
constexpr char kLoss[] = "loss";
constexpr char kNll[] = "nll";
constexpr char kPpl[] = "ppl";
constexpr char kLr[] = "lr";
constexpr char kGradNorm[] = "grad_norm";
constexpr char kSrcTokens[] = "src_tokens";
constexpr char kTgtTokens[] = "tgt_tokens";
constexpr char kTokensPerS[] = "tokens_per_s";
constexpr char kUpdateNorm[] = "update_norm";
constexpr char kUpdateNormRelative[] = "update_norm_relative";
constexpr char kElapsedS[] = "elapsed_s";
constexpr char kEtaS[] = "eta_s";
constexpr char kDataWaitS[] = "data_wait_s";
constexpr char kStageComputeS[] = "stage_compute_s";
constexpr char kStageIdle[] = "stage_idle";
constexpr char kGpuAllocatedBytes[] = "gpu_allocated_bytes";
constexpr char kGpuReservedBytes[] = "gpu_reserved_bytes";
constexpr char kGpuPeakAllocatedBytes[] = "gpu_peak_allocated_bytes";
constexpr char kTokens[] = "tokens";
constexpr char kF0Norm[] = "f0_norm";
constexpr char kLogitsUpdateNorm[] = "logits_update_norm";
constexpr char kLogitsF0Norm[] = "logits_f0_norm";
constexpr char kLogitsUpdateNormRelative[] = "logits_update_norm_relative";
constexpr char kLayers[] = "layers";  // The per-layer array, and in "summary" their count.
constexpr char kStack[] = "stack";
constexpr char kLayer[] = "layer";
constexpr char kLnInputNorm[] = "ln_input_norm";
constexpr char kSummary[] = "summary";
constexpr char kOtherGradNorm[] = "other_grad_norm";
constexpr char kMin[] = "min";
constexpr char kMax[] = "max";
constexpr char kMean[] = "mean";
constexpr char kP50[] = "p50";
constexpr char kP90[] = "p90";
constexpr char kPath[] = "path";
constexpr char kAction[] = "action";
constexpr char kTrigger[] = "trigger";
constexpr char kValue[] = "value";
constexpr char kThreshold[] = "threshold";
constexpr char kRetries[] = "retries";
constexpr char kMaxRetries[] = "max_retries";
constexpr char kToStep[] = "to_step";
constexpr char kCheckpoint[] = "checkpoint";
constexpr char kSkippedSteps[] = "skipped_steps";
constexpr char kLrScale[] = "lr_scale";
constexpr char kValidLoss[] = "valid_loss";
constexpr char kBestValidLoss[] = "best_valid_loss";
constexpr char kWindow[] = "window";
constexpr char kMinDelta[] = "min_delta";
}  // namespace key

// The texts inside messages that readers rely on.
constexpr char kSavedPrefix[] = "saved ";
constexpr char kRejectedPrefix[] = "rejected: ";
constexpr char kResumedPrefix[] = "resumed from step ";
constexpr char kReshardedSuffix[] = ", resharded to this layout";
constexpr char kFromStep[] = " from step ";
constexpr char kToStepText[] = " to ";

struct NamedEvent {
  ProgressEvent event;
  const char* name;
};
constexpr NamedEvent kEventNames[] = {
    {ProgressEvent::kStep, "step"},
    {ProgressEvent::kValid, "valid"},
    {ProgressEvent::kProbe, "probe"},
    {ProgressEvent::kDiagnostics, "diagnostics"},
    {ProgressEvent::kCheckpoint, "checkpoint"},
    {ProgressEvent::kResume, "resume"},
    {ProgressEvent::kStart, "start"},
    {ProgressEvent::kLayout, "layout"},
    {ProgressEvent::kStages, "stages"},
    {ProgressEvent::kStop, "stop"},
    {ProgressEvent::kGuard, "guard"},
    {ProgressEvent::kPlateau, "plateau"},
};

// std::visit over one lambda per alternative.
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

Json OrNull(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

// --- Writing. ---

Json Line(ProgressEvent event) { return Json{{key::kEvent, ProgressEventName(event)}}; }

Json ToJson(const LayerSummary& s) {
  return {{key::kMin, s.min}, {key::kMax, s.max}, {key::kMean, s.mean}, {key::kP50, s.p50},
          {key::kP90, s.p90}};
}

Json ToJson(const StepLine& m) {
  Json j = Line(ProgressEvent::kStep);
  j[key::kStep] = m.step;
  j[key::kLoss] = m.loss;
  j[key::kNll] = m.nll;
  j[key::kPpl] = Perplexity(m.nll);
  j[key::kLr] = m.lr;
  j[key::kGradNorm] = m.grad_norm;
  j[key::kTokensPerS] = m.tokens_per_s;
  j[key::kSrcTokens] = m.src_tokens;
  j[key::kTgtTokens] = m.tgt_tokens;
  j[key::kElapsedS] = m.elapsed_s;
  j[key::kEtaS] = m.eta_s;
  j[key::kDataWaitS] = m.data_wait_s;
  j[key::kUpdateNorm] = OrNull(m.update_norm);
  if (m.update_norm_relative) j[key::kUpdateNormRelative] = *m.update_norm_relative;
  if (!m.stage_compute_s.empty()) {
    j[key::kStageComputeS] = m.stage_compute_s;
    j[key::kStageIdle] = m.stage_idle;
  }
  if (m.on_gpu) {
    j[key::kGpuAllocatedBytes] = m.gpu_allocated_bytes;
    j[key::kGpuReservedBytes] = m.gpu_reserved_bytes;
    j[key::kGpuPeakAllocatedBytes] = m.gpu_peak_allocated_bytes;
  }
  return j;
}

Json ToJson(const ValidLine& m) {
  Json j = Line(ProgressEvent::kValid);
  j[key::kStep] = m.step;
  j[key::kLoss] = m.loss;
  j[key::kNll] = m.nll;
  j[key::kPpl] = Perplexity(m.nll);
  j[key::kTokens] = m.tokens;
  return j;
}

Json ToJson(const ProbeLine& m) {
  Json j = Line(ProgressEvent::kProbe);
  j[key::kStep] = m.step;
  j[key::kUpdateNorm] = m.update_norm;
  j[key::kF0Norm] = m.f0_norm;
  j[key::kUpdateNormRelative] = OrNull(m.update_norm_relative);
  j[key::kLogitsUpdateNorm] = OrNull(m.logits_update_norm);
  j[key::kLogitsF0Norm] = OrNull(m.logits_f0_norm);
  j[key::kLogitsUpdateNormRelative] = OrNull(m.logits_update_norm_relative);
  return j;
}

Json ToJson(const DiagnosticsLine& m) {
  Json layers = Json::array();
  for (const LayerLine& l : m.per_layer) {
    layers.push_back({{key::kStack, l.stack},
                      {key::kLayer, l.layer},
                      {key::kLnInputNorm, l.ln_input_norm},
                      {key::kGradNorm, l.grad_norm}});
  }
  Json j = Line(ProgressEvent::kDiagnostics);
  j[key::kStep] = m.step;
  j[key::kLayers] = std::move(layers);
  j[key::kSummary] = {{key::kLnInputNorm, ToJson(m.ln_input_norm)},
                      {key::kGradNorm, ToJson(m.grad_norm)},
                      {key::kOtherGradNorm, m.other_grad_norm},
                      {key::kLayers, m.layers}};
  return j;
}

Json ToJson(const CheckpointLine& m) {
  Json j = Line(ProgressEvent::kCheckpoint);
  j[key::kMessage] = ProgressMessage(m);
  j[key::kStep] = m.step;
  j[key::kPath] = m.path;
  return j;
}

Json ToJson(const GuardLine& m) {
  Json j = Line(ProgressEvent::kGuard);
  j[key::kStep] = m.step;
  j[key::kAction] = GuardActionName(m.action);
  j[key::kTrigger] = m.trigger;
  j[key::kValue] = m.value;
  j[key::kThreshold] = m.threshold;
  j[key::kRetries] = m.retries;
  j[key::kMaxRetries] = m.max_retries;
  if (m.action == GuardAction::kRollback) {
    j[key::kToStep] = m.to_step;
    j[key::kCheckpoint] = m.checkpoint;
    j[key::kSkippedSteps] = m.skipped_steps;
    j[key::kLrScale] = m.lr_scale;
  }
  j[key::kMessage] = m.message;
  return j;
}

Json ToJson(const PlateauLine& m) {
  Json j = Line(ProgressEvent::kPlateau);
  j[key::kStep] = m.step;
  j[key::kValidLoss] = m.valid_loss;
  j[key::kBestValidLoss] = m.best_valid_loss;
  j[key::kWindow] = m.window;
  j[key::kMinDelta] = m.min_delta;
  j[key::kAction] = m.action;
  j[key::kMessage] = m.message;
  return j;
}

// Lines that are an event and its message only.
Json MessageOnly(const ProgressLine& line) {
  Json j = Line(EventOf(line));
  j[key::kMessage] = ProgressMessage(line);
  return j;
}
Json ToJson(const RejectedCheckpointLine& m) { return MessageOnly(m); }
Json ToJson(const ResumeLine& m) { return MessageOnly(m); }
Json ToJson(const StartLine& m) { return MessageOnly(m); }
Json ToJson(const MessageLine& m) { return MessageOnly(m); }

// --- Reading. ---

// A number at `name`, else nullopt (missing, null, a string, ...).
std::optional<double> Number(const Json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<int64_t> Integer(const Json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::string String(const Json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The numbers of an array at `name`; empty when there is none.
std::vector<double> Numbers(const Json& j, const char* name) {
  std::vector<double> out;
  auto it = j.find(name);
  if (it == j.end() || !it->is_array()) return out;
  for (const Json& v : *it) {
    out.push_back(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

std::optional<int64_t> StepOf(const Json& j) {
  std::optional<int64_t> step = Integer(j, key::kStep);
  if (!step || *step < 0) return std::nullopt;
  return step;
}

// A step count written inside a message: digits up to the next blank or the end.
std::optional<int64_t> LeadingStep(absl::string_view text) {
  int64_t step = 0;
  if (!absl::SimpleAtoi(text.substr(0, text.find(' ')), &step) || step < 0) return std::nullopt;
  return step;
}

std::optional<ProgressLine> ParseStep(const Json& j) {
  std::optional<int64_t> step = StepOf(j);
  std::optional<double> loss = Number(j, key::kLoss);
  if (!step || !loss) return std::nullopt;
  StepLine out;
  out.step = *step;
  out.loss = *loss;
  out.nll = Number(j, key::kNll).value_or(0.0);
  out.lr = Number(j, key::kLr).value_or(0.0);
  out.grad_norm = Number(j, key::kGradNorm).value_or(0.0);
  out.src_tokens = Integer(j, key::kSrcTokens).value_or(0);
  out.tgt_tokens = Integer(j, key::kTgtTokens).value_or(0);
  out.tokens_per_s = Number(j, key::kTokensPerS).value_or(0.0);
  out.update_norm = Number(j, key::kUpdateNorm);
  out.update_norm_relative = Number(j, key::kUpdateNormRelative);
  out.elapsed_s = Number(j, key::kElapsedS).value_or(0.0);
  out.eta_s = Number(j, key::kEtaS).value_or(0.0);
  out.data_wait_s = Number(j, key::kDataWaitS).value_or(0.0);
  out.stage_compute_s = Numbers(j, key::kStageComputeS);
  out.stage_idle = Numbers(j, key::kStageIdle);
  // Byte counts: non-negative integers, else 0.
  auto bytes = [&](const char* name) {
    out.on_gpu = out.on_gpu || j.contains(name);
    return std::max<int64_t>(0, Integer(j, name).value_or(0));
  };
  out.gpu_allocated_bytes = bytes(key::kGpuAllocatedBytes);
  out.gpu_reserved_bytes = bytes(key::kGpuReservedBytes);
  out.gpu_peak_allocated_bytes = bytes(key::kGpuPeakAllocatedBytes);
  return out;
}

std::optional<ProgressLine> ParseValid(const Json& j) {
  std::optional<int64_t> step = StepOf(j);
  std::optional<double> loss = Number(j, key::kLoss);
  if (!step || !loss) return std::nullopt;
  ValidLine out;
  out.step = *step;
  out.loss = *loss;
  out.nll = Number(j, key::kNll).value_or(0.0);
  out.tokens = Integer(j, key::kTokens).value_or(0);
  return out;
}

std::optional<ProgressLine> ParseProbe(const Json& j) {
  std::optional<int64_t> step = StepOf(j);
  std::optional<double> update = Number(j, key::kUpdateNorm);
  if (!step || !update) return std::nullopt;
  ProbeLine out;
  out.step = *step;
  out.update_norm = *update;
  out.f0_norm = Number(j, key::kF0Norm).value_or(0.0);
  out.update_norm_relative = Number(j, key::kUpdateNormRelative);
  out.logits_update_norm = Number(j, key::kLogitsUpdateNorm);
  out.logits_f0_norm = Number(j, key::kLogitsF0Norm);
  out.logits_update_norm_relative = Number(j, key::kLogitsUpdateNormRelative);
  return out;
}

LayerSummary ParseLayerSummary(const Json& summary, const char* name) {
  LayerSummary out;
  auto it = summary.find(name);
  if (it == summary.end() || !it->is_object()) return out;
  out.min = Number(*it, key::kMin).value_or(0.0);
  out.max = Number(*it, key::kMax).value_or(0.0);
  out.mean = Number(*it, key::kMean).value_or(0.0);
  out.p50 = Number(*it, key::kP50).value_or(0.0);
  out.p90 = Number(*it, key::kP90).value_or(0.0);
  return out;
}

std::optional<ProgressLine> ParseDiagnostics(const Json& j) {
  std::optional<int64_t> step = StepOf(j);
  auto summary = j.find(key::kSummary);
  if (!step || summary == j.end() || !summary->is_object()) return std::nullopt;
  DiagnosticsLine out;
  out.step = *step;
  if (auto layers = j.find(key::kLayers); layers != j.end() && layers->is_array()) {
    for (const Json& l : *layers) {
      if (!l.is_object()) continue;
      out.per_layer.push_back({String(l, key::kStack), Integer(l, key::kLayer).value_or(0),
                               Number(l, key::kLnInputNorm).value_or(0.0),
                               Number(l, key::kGradNorm).value_or(0.0)});
    }
  }
  out.layers = std::max<int64_t>(0, Integer(*summary, key::kLayers).value_or(0));
  out.ln_input_norm = ParseLayerSummary(*summary, key::kLnInputNorm);
  out.grad_norm = ParseLayerSummary(*summary, key::kGradNorm);
  out.other_grad_norm = Number(*summary, key::kOtherGradNorm).value_or(0.0);
  return out;
}

std::optional<ProgressLine> ParseCheckpoint(const Json& j) {
  std::string path = String(j, key::kPath);
  if (path.empty()) {
    const std::string text = String(j, key::kMessage);
    absl::string_view message = text;
    if (absl::ConsumePrefix(&message, kRejectedPrefix)) {
      return RejectedCheckpointLine{std::string(message)};
    }
    if (!absl::ConsumePrefix(&message, kSavedPrefix)) return std::nullopt;
    path = std::string(message);
  }
  std::optional<int64_t> step = Integer(j, key::kStep);
  if (!step) step = storage::StepOfCheckpointPath(path);
  if (!step || *step < 0) return std::nullopt;
  return CheckpointLine{*step, path};
}

std::optional<ProgressLine> ParseResume(const Json& j) {
  ResumeLine out;
  const std::string text = String(j, key::kMessage);
  absl::string_view message = text;
  const bool worded = absl::ConsumePrefix(&message, kResumedPrefix);
  if (std::optional<int64_t> step = Integer(j, key::kStep)) {
    out.step = *step;
  } else if (std::optional<int64_t> said = worded ? LeadingStep(message) : std::nullopt) {
    out.step = *said;
  } else {
    return std::nullopt;
  }
  // "N (PATH)" or "N (PATH, resharded to this layout)".
  const size_t open = message.find(" (");
  if (worded && open != absl::string_view::npos && absl::EndsWith(message, ")")) {
    absl::string_view path = message.substr(open + 2, message.size() - open - 3);
    out.resharded = absl::ConsumeSuffix(&path, kReshardedSuffix);
    out.path = std::string(path);
  }
  return out;
}

std::optional<ProgressLine> ParseStart(const Json& j) {
  const std::string text = String(j, key::kMessage);
  const size_t at = text.rfind(kFromStep);
  if (at == std::string::npos) return std::nullopt;
  const absl::string_view rest = absl::string_view(text).substr(at + sizeof(kFromStep) - 1);
  std::optional<int64_t> from = LeadingStep(rest);
  if (!from) return std::nullopt;
  StartLine out;
  out.from_step = *from;
  absl::string_view run = absl::string_view(text).substr(0, at);
  absl::ConsumeSuffix(&run, ",");
  out.run = std::string(run);
  const size_t to = rest.find(kToStepText);
  if (to != absl::string_view::npos) {
    out.to_step = LeadingStep(rest.substr(to + sizeof(kToStepText) - 1)).value_or(0);
  }
  return out;
}

std::optional<ProgressLine> ParseGuard(const Json& j) {
  std::optional<int64_t> step = StepOf(j);
  if (!step) return std::nullopt;
  GuardLine out;
  out.step = *step;
  const std::string action = String(j, key::kAction);
  const std::optional<GuardAction> named = ParseChoice<GuardAction>(action);
  if (!named) return std::nullopt;
  out.action = *named;
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  out.trigger = String(j, key::kTrigger);
  out.value = Number(j, key::kValue).value_or(kNone);
  out.threshold = Number(j, key::kThreshold).value_or(kNone);
  out.retries = Integer(j, key::kRetries).value_or(0);
  out.max_retries = Integer(j, key::kMaxRetries).value_or(0);
  out.to_step = Integer(j, key::kToStep).value_or(0);
  out.checkpoint = String(j, key::kCheckpoint);
  out.skipped_steps = Integer(j, key::kSkippedSteps).value_or(0);
  out.lr_scale = Number(j, key::kLrScale).value_or(1.0);
  out.message = String(j, key::kMessage);
  return out;
}

std::optional<ProgressLine> ParsePlateau(const Json& j) {
  std::optional<int64_t> step = StepOf(j);
  if (!step) return std::nullopt;
  PlateauLine out;
  out.step = *step;
  out.valid_loss = Number(j, key::kValidLoss).value_or(0.0);
  out.best_valid_loss = Number(j, key::kBestValidLoss).value_or(0.0);
  out.window = Integer(j, key::kWindow).value_or(0);
  out.min_delta = Number(j, key::kMinDelta).value_or(0.0);
  out.action = String(j, key::kAction);
  out.message = String(j, key::kMessage);
  return out;
}

}  // namespace

double Perplexity(double nll) { return std::exp(std::min(nll, 50.0)); }

std::string_view ProgressEventName(ProgressEvent event) {
  for (const auto& [value, name] : kEventNames) {
    if (value == event) return name;
  }
  return "";
}

std::optional<ProgressEvent> ProgressEventNamed(std::string_view name) {
  for (const auto& [value, known] : kEventNames) {
    if (name == known) return value;
  }
  return std::nullopt;
}

std::string_view GuardActionName(GuardAction action) {
  for (const auto& [value, name] : ChoicesOf(action).names) {
    if (value == action) return name;
  }
  return "";
}

ProgressEvent EventOf(const ProgressLine& line) {
  return std::visit(
      Overloaded{[](const StepLine&) { return ProgressEvent::kStep; },
                 [](const ValidLine&) { return ProgressEvent::kValid; },
                 [](const ProbeLine&) { return ProgressEvent::kProbe; },
                 [](const DiagnosticsLine&) { return ProgressEvent::kDiagnostics; },
                 [](const CheckpointLine&) { return ProgressEvent::kCheckpoint; },
                 [](const RejectedCheckpointLine&) { return ProgressEvent::kCheckpoint; },
                 [](const ResumeLine&) { return ProgressEvent::kResume; },
                 [](const StartLine&) { return ProgressEvent::kStart; },
                 [](const MessageLine& m) { return m.event; },
                 [](const GuardLine&) { return ProgressEvent::kGuard; },
                 [](const PlateauLine&) { return ProgressEvent::kPlateau; }},
      line);
}

std::string ProgressMessage(const ProgressLine& line) {
  return std::visit(
      Overloaded{
          [](const CheckpointLine& m) { return kSavedPrefix + m.path; },
          [](const RejectedCheckpointLine& m) { return kRejectedPrefix + m.reason; },
          [](const ResumeLine& m) {
            return absl::StrCat(kResumedPrefix, m.step, " (", m.path,
                                m.resharded ? kReshardedSuffix : "", ")");
          },
          [](const StartLine& m) {
            return absl::StrCat(m.run, ",", kFromStep, m.from_step, kToStepText, m.to_step);
          },
          [](const MessageLine& m) { return m.message; },
          [](const GuardLine& m) { return m.message; },
          [](const PlateauLine& m) { return m.message; },
          // Lines of values have no message.
          [](const StepLine&) { return std::string(); },
          [](const ValidLine&) { return std::string(); },
          [](const ProbeLine&) { return std::string(); },
          [](const DiagnosticsLine&) { return std::string(); }},
      line);
}

std::string FormatProgressLine(const ProgressLine& line) {
  return std::visit([](const auto& m) { return ToJson(m).dump(); }, line);
}

std::optional<ProgressLine> ParseProgressLine(std::string_view text) {
  // Debian's abseil has its own string_view type.
  const absl::string_view line =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (line.empty() || line.front() != '{') return std::nullopt;
  const Json j = Json::parse(line.begin(), line.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;  // Discarded (malformed) or not an object.
  const std::optional<ProgressEvent> event = ProgressEventNamed(String(j, key::kEvent));
  if (!event) return std::nullopt;
  switch (*event) {
    case ProgressEvent::kStep:
      return ParseStep(j);
    case ProgressEvent::kValid:
      return ParseValid(j);
    case ProgressEvent::kProbe:
      return ParseProbe(j);
    case ProgressEvent::kDiagnostics:
      return ParseDiagnostics(j);
    case ProgressEvent::kCheckpoint:
      return ParseCheckpoint(j);
    case ProgressEvent::kResume:
      return ParseResume(j);
    case ProgressEvent::kStart:
      return ParseStart(j);
    case ProgressEvent::kLayout:
    case ProgressEvent::kStages:
    case ProgressEvent::kStop:
      return MessageLine{*event, String(j, key::kMessage)};
    case ProgressEvent::kGuard:
      return ParseGuard(j);
    case ProgressEvent::kPlateau:
      return ParsePlateau(j);
  }
  return std::nullopt;
}

}  // namespace deepnet::job
