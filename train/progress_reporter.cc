#include "train/progress_reporter.h"

#include "train/layer_summary.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace deepnet::train {
namespace {

double Perplexity(double nll) { return std::exp(std::min(nll, 50.0)); }

std::string Format(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
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
    nlohmann::json j = {{"event", "step"},        {"step", m.step},
                        {"loss", m.loss},         {"nll", m.nll},
                        {"ppl", Perplexity(m.nll)}, {"lr", m.lr},
                        {"grad_norm", m.grad_norm}, {"tokens_per_s", m.tokens_per_s},
                        {"src_tokens", m.src_tokens}, {"tgt_tokens", m.tgt_tokens},
                        {"elapsed_s", m.elapsed_s}, {"eta_s", m.eta_s},
                        {"data_wait_s", m.data_wait_s}};
    j["update_norm"] = m.update_norm ? nlohmann::json(*m.update_norm) : nlohmann::json(nullptr);
    if (m.update_norm_relative) j["update_norm_relative"] = *m.update_norm_relative;
    if (!m.stage_compute_s.empty()) {
      j["stage_compute_s"] = m.stage_compute_s;
      j["stage_idle"] = m.stage_idle;
    }
    if (m.on_gpu) {
      j["gpu_allocated_bytes"] = m.gpu_allocated_bytes;
      j["gpu_reserved_bytes"] = m.gpu_reserved_bytes;
      j["gpu_peak_allocated_bytes"] = m.gpu_peak_allocated_bytes;
    }
    *out_ << j.dump() << "\n" << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[train] step " << m.step << "/" << m.max_steps << "  loss " << Format("%.4f", m.loss)
        << "  nll " << Format("%.4f", m.nll) << "  ppl " << Format("%.2f", Perplexity(m.nll))
        << "  lr " << Format("%.3e", m.lr) << "  gnorm " << Format("%.3f", m.grad_norm) << "  "
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

void ProgressReporter::Valid(const ValidMetrics& m) {
  if (format_ == LogFormat::kJson) {
    *out_ << nlohmann::json({{"event", "valid"},
                             {"step", m.step},
                             {"loss", m.loss},
                             {"nll", m.nll},
                             {"ppl", Perplexity(m.nll)},
                             {"tokens", m.tokens}})
                 .dump()
          << "\n"
          << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[valid] step " << m.step << "  loss " << Format("%.4f", m.loss) << "  nll "
        << Format("%.4f", m.nll) << "  ppl " << Format("%.2f", Perplexity(m.nll)) << "  ("
        << m.tokens << " tokens)\n"
        << std::flush;
}

namespace {

nlohmann::json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json ToJson(const LayerSummary& s) {
  return {{"min", s.min}, {"max", s.max}, {"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}};
}

std::string ToText(const LayerSummary& s) {
  return Format("%.4g", s.min) + "/" + Format("%.4g", s.p50) + "/" + Format("%.4g", s.p90) + "/" +
         Format("%.4g", s.max);
}

}  // namespace

void ProgressReporter::Probe(const ProbeMetrics& m) {
  if (format_ == LogFormat::kJson) {
    const nlohmann::json j = {
        {"event", "probe"},
        {"step", m.step},
        {"update_norm", m.update_norm},
        {"f0_norm", m.f0_norm},
        {"update_norm_relative", OrNull(m.update_norm_relative)},
        {"logits_update_norm", OrNull(m.logits_update_norm)},
        {"logits_f0_norm", OrNull(m.logits_f0_norm)},
        {"logits_update_norm_relative", OrNull(m.logits_update_norm_relative)}};
    *out_ << j.dump() << "\n" << std::flush;
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

void ProgressReporter::Diagnostics(const DiagnosticsMetrics& m) {
  std::vector<double> ln, grad;
  for (const LayerStat& l : m.layers) {
    ln.push_back(l.ln_input_norm);
    grad.push_back(l.grad_norm);
  }
  const LayerSummary ln_summary = SummarizeLayers(ln);
  const LayerSummary grad_summary = SummarizeLayers(grad);
  if (format_ == LogFormat::kJson) {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerStat& l : m.layers) {
      layers.push_back({{"stack", l.stack},
                        {"layer", l.layer},
                        {"ln_input_norm", l.ln_input_norm},
                        {"grad_norm", l.grad_norm}});
    }
    const nlohmann::json j = {{"event", "diagnostics"},
                              {"step", m.step},
                              {"layers", layers},
                              {"summary",
                               {{"ln_input_norm", ToJson(ln_summary)},
                                {"grad_norm", ToJson(grad_summary)},
                                {"other_grad_norm", m.other_grad_norm},
                                {"layers", m.layers.size()}}}};
    *out_ << j.dump() << "\n" << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[diag] step " << m.step << "  " << m.layers.size()
        << " layers  LN-input norm min/p50/p90/max " << ToText(ln_summary)
        << "  grad norm min/p50/p90/max " << ToText(grad_summary) << "  other grad norm "
        << Format("%.4g", m.other_grad_norm) << "\n"
        << std::flush;
}

void ProgressReporter::Checkpoint(int64_t step, const std::string& path) {
  if (format_ != LogFormat::kJson) {
    Event("checkpoint", "saved " + path);
    return;
  }
  const nlohmann::json j = {
      {"event", "checkpoint"}, {"message", "saved " + path}, {"step", step}, {"path", path}};
  *out_ << j.dump() << "\n" << std::flush;
}

void ProgressReporter::Record(const std::string& kind, const nlohmann::json& fields,
                              const std::string& text) {
  if (format_ == LogFormat::kJson) {
    nlohmann::json j = {{"event", kind}};
    j.update(fields);
    j["event"] = kind;
    j["message"] = text;
    *out_ << j.dump() << "\n" << std::flush;
    return;
  }
  Event(kind, text);
}

void ProgressReporter::Event(const std::string& kind, const std::string& message) {
  if (format_ == LogFormat::kJson) {
    *out_ << nlohmann::json({{"event", kind}, {"message", message}}).dump() << "\n" << std::flush;
    return;
  }
  ClearLive();
  *out_ << "[" << kind << "] " << message << "\n" << std::flush;
}

}  // namespace deepnet::train
