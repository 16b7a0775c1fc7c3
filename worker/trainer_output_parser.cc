#include "worker/trainer_output_parser.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <variant>

namespace deepnet::worker {
namespace {

TrainerGuardEvent GuardEventOf(const job::GuardLine& line) {
  TrainerGuardEvent out;
  out.step = line.step;
  out.kind = std::string(job::GuardActionName(line.action));
  out.trigger = line.trigger;
  out.to_step = std::max<int64_t>(0, line.to_step);
  out.retries = static_cast<int32_t>(std::clamp<int64_t>(line.retries, 0, 1 << 30));
  out.message = line.message;
  return out;
}

TrainerGuardEvent GuardEventOf(const job::PlateauLine& line) {
  TrainerGuardEvent out;
  out.step = line.step;
  out.kind = std::string(job::ProgressEventName(job::ProgressEvent::kPlateau));
  out.message = line.message;
  return out;
}

}  // namespace

TrainerLine ParseTrainerLine(std::string_view text) {
  TrainerLine out;
  std::optional<job::ProgressLine> line = job::ParseProgressLine(text);
  if (!line) return out;
  std::visit(
      [&out](auto&& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, job::StepLine>) {
          out.step.emplace();
          static_cast<job::StepLine&>(*out.step) = std::move(m);
        } else if constexpr (std::is_same_v<T, job::CheckpointLine>) {
          out.checkpoint = std::move(m);
        } else if constexpr (std::is_same_v<T, job::ResumeLine>) {
          out.resumed_step = m.step;
        } else if constexpr (std::is_same_v<T, job::StartLine>) {
          out.start_step = m.from_step;
        } else if constexpr (std::is_same_v<T, job::ProbeLine>) {
          out.probe = std::move(m);
        } else if constexpr (std::is_same_v<T, job::DiagnosticsLine>) {
          m.per_layer.clear();
          out.diagnostics = std::move(m);
        } else if constexpr (std::is_same_v<T, job::GuardLine> ||
                             std::is_same_v<T, job::PlateauLine>) {
          out.guard = GuardEventOf(m);
        }
        // Validation, layout, stage timing, stop and rejected checkpoints: nothing to report.
      },
      *line);
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
