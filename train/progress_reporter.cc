#include "train/progress_reporter.h"

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
