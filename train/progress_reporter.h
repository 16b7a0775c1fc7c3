#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <variant>

#include "job/progress_line.h"

namespace deepnet::train {

enum class LogFormat { kText, kJson };

/// What one optimiser step did: its progress line (job/progress_line.h) and the run's length,
/// which the text and live lines show.
struct StepMetrics : job::StepLine {
  int64_t max_steps = 0;
};

/// The lines whose text form is "[EVENT] MESSAGE" (job::ProgressMessage).
using EventLine = std::variant<job::CheckpointLine, job::RejectedCheckpointLine, job::ResumeLine,
                               job::StartLine, job::MessageLine, job::GuardLine, job::PlateauLine>;

/// Writes progress for people (aligned text; on a terminal also a live line with ETA that is
/// redrawn every step) or for machines (one JSON object per line, job::FormatProgressLine).
/// Not thread-safe; owned by the training loop.
class ProgressReporter {
 public:
  ProgressReporter(std::ostream* out, LogFormat format, bool live);

  // Every step: redraws the live line (text on a terminal only).
  void Live(const StepMetrics& m);
  // Every log_every steps: a permanent line / JSON object.
  void Step(const StepMetrics& m);
  void Valid(const job::ValidLine& m);
  // Every probed step, log step or not: {"event":"probe",...} / a "[probe]" line.
  void Probe(const job::ProbeLine& m);
  // Every diagnostics step: {"event":"diagnostics",...} with every layer and the summaries over
  // layers / a "[diag]" line with the summaries.
  void Diagnostics(const job::DiagnosticsLine& m);
  // A saved or rejected checkpoint, the resume, start, layout, stage timing and stop of a run,
  // and the divergence guard's events.
  void Event(const EventLine& line);

 private:
  void ClearLive();
  std::ostream* out_;
  LogFormat format_;
  bool live_;
  bool live_shown_ = false;
};

std::string FormatDuration(double seconds);

}  // namespace deepnet::train
