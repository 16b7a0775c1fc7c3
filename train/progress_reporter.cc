#include "train/progress_reporter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace deepnet::train {
namespace {

std::string Format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

std::string ToText(const job::LayerSummary& s) {
  return Format("%.4g", s.min) + "/" + Format("%.4g", s.p50) + "/" + Format("%.4g", s.p90) + "/" +
         Format("%.4g", s.max);
}

}  // namespace

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

ProgressReporter::ProgressReporter(std::ostream* out, LogFormat format, bool live)
    : out_(out), format_(format), live_(live && format == LogFormat::kText) {}

void ProgressReporter::ClearLive() {
  if (live_shown_) {
    *out_ << "\r\033[2K";
    live_shown_ = false;
  }
}

void ProgressReporter::Live(const StepMetrics& m) {
  if (!live_) return;
  const double frac = m.max_steps > 0 ? static_cast<double>(m.step) / m.max_steps : 0.0;
  const int width = 24;
  const int filled = static_cast<int>(frac * width);
  std::string bar(filled, '#');
  bar.resize(width, '.');
  *out_ << "\r\033[2K[" << bar << "] step " << m.step << "/" << m.max_steps << " loss "
        << Format("%.3f", m.loss) << " " << Format("%.0f", m.tokens_per_s) << " tok/s ETA "
        << FormatDuration(m.eta_s) << std::flush;
  live_shown_ = true;
}

void ProgressReporter::Step(const StepMetrics& m) {
  if (format_ == LogFormat::kJson) {
    *out_ << job::FormatProgressLine(static_cast<const job::StepLine&>(m)) << "\n" << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[train] step " << m.step << "/" << m.max_steps << "  loss " << Format("%.4f", m.loss)
        << "  nll " << Format("%.4f", m.nll) << "  ppl "
        << Format("%.2f", job::Perplexity(m.nll)) << "  lr " << Format("%.3e", m.lr) << "  gnorm " << Format("%.3f", m.grad_norm) << "  "
        << Format("%.0f", m.tokens_per_s) << " tok/s";
  if (m.update_norm) *out_ << "  |dF| " << Format("%.4f", *m.update_norm);
  if (m.on_gpu) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    *out_ << "  gpu " << Format("%.2f", static_cast<double>(m.gpu_allocated_bytes) / kGiB) << "/"
          << Format("%.2f", static_cast<double>(m.gpu_reserved_bytes) / kGiB) << " GiB (peak "
          << Format("%.2f", static_cast<double>(m.gpu_peak_allocated_bytes) / kGiB) << ")";
  }
  *out_ << "  elapsed " << FormatDuration(m.elapsed_s) << "  ETA " << FormatDuration(m.eta_s)
        << "\n"
        << std::flush;
}

void ProgressReporter::Valid(const job::ValidLine& m) {
  if (format_ == LogFormat::kJson) {
    *out_ << job::FormatProgressLine(m) << "\n" << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[valid] step " << m.step << "  loss " << Format("%.4f", m.loss) << "  nll "
        << Format("%.4f", m.nll) << "  ppl " << Format("%.2f", job::Perplexity(m.nll)) << "  ("
        << m.tokens << " tokens)\n"
        << std::flush;
}

void ProgressReporter::Probe(const job::ProbeLine& m) {
  if (format_ == LogFormat::kJson) {
    *out_ << job::FormatProgressLine(m) << "\n" << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[probe] step " << m.step << "  |dF| " << Format("%.4g", m.update_norm) << "  |F0| "
        << Format("%.4g", m.f0_norm);
  if (m.update_norm_relative) *out_ << "  |dF|/|F0| " << Format("%.4g", *m.update_norm_relative);
  if (m.logits_update_norm) *out_ << "  logits |dF| " << Format("%.4g", *m.logits_update_norm);
  if (m.logits_update_norm_relative) {
    *out_ << "  logits |dF|/|F0| " << Format("%.4g", *m.logits_update_norm_relative);
  }
  *out_ << "\n" << std::flush;
}

void ProgressReporter::Diagnostics(const job::DiagnosticsLine& m) {
  if (format_ == LogFormat::kJson) {
    *out_ << job::FormatProgressLine(m) << "\n" << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[diag] step " << m.step << "  " << m.layers
        << " layers  LN-input norm min/p50/p90/max " << ToText(m.ln_input_norm)
        << "  grad norm min/p50/p90/max " << ToText(m.grad_norm) << "  other grad norm "
        << Format("%.4g", m.other_grad_norm) << "\n"
        << std::flush;
}

void ProgressReporter::Event(const EventLine& line) {
  const job::ProgressLine progress =
      std::visit([](const auto& m) { return job::ProgressLine(m); }, line);
  if (format_ == LogFormat::kJson) {
    *out_ << job::FormatProgressLine(progress) << "\n" << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[" << job::ProgressEventName(job::EventOf(progress)) << "] "
        << job::ProgressMessage(progress) << "\n"
        << std::flush;
}

}  // namespace deepnet::train
