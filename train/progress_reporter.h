#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepnet::train {

enum class LogFormat { kText, kJson };

/// What one optimiser step did.
struct StepMetrics {
  int64_t step = 0;
  int64_t max_steps = 0;
  double loss = 0.0;  // Label-smoothed cross-entropy per target token (nats).
  double nll = 0.0;   // Negative log-likelihood per target token (nats).
  double lr = 0.0;
  double grad_norm = 0.0;  // Global L2 norm before clipping.
  int64_t src_tokens = 0;
  int64_t tgt_tokens = 0;
  double tokens_per_s = 0.0;  // Source + target tokens per second over recent steps.
  std::optional<double> update_norm;  // ||F(x, theta_i) - F(x, theta_0)|| on the probe batch.
  std::optional<double> update_norm_relative;  // update_norm / ||F(x, theta_0)||
  double elapsed_s = 0.0;
  double eta_s = 0.0;
  double data_wait_s = 0.0;  // Time this step waited for its batches.
  // Pipeline runs: per stage (replica 0) forward+backward seconds of this step and the
  // fraction of the pipeline schedule it was not computing (the bubble); empty for one process.
  std::vector<double> stage_compute_s;
  std::vector<double> stage_idle;
  // This rank's CUDA memory (train::CudaMemory) when it trains on a GPU; unset on CPU.
  bool on_gpu = false;
  int64_t gpu_allocated_bytes = 0;
  int64_t gpu_reserved_bytes = 0;
  int64_t gpu_peak_allocated_bytes = 0;
};

/// What one probe measured ({"event":"probe"}); relative values are unset when ||F0|| is 0,
/// the logits' values when the reference has no logits (an older checkpoint).
struct ProbeMetrics {
  int64_t step = 0;
  double update_norm = 0.0;  // ||F(x, theta_step) - F(x, theta_0)||
  double f0_norm = 0.0;      // ||F(x, theta_0)||
  std::optional<double> update_norm_relative;
  std::optional<double> logits_update_norm;
  std::optional<double> logits_f0_norm;
  std::optional<double> logits_update_norm_relative;
};

/// One encoder/decoder layer's diagnostics.
struct LayerStat {
  std::string stack;  // "encoder" or "decoder"
  int64_t layer = 0;  // Index within its stack.
  double ln_input_norm = 0.0;
  double grad_norm = 0.0;
};

/// Per-layer diagnostics of a step ({"event":"diagnostics"}).
struct DiagnosticsMetrics {
  int64_t step = 0;
  std::vector<LayerStat> layers;
  double other_grad_norm = 0.0;  // Parameters outside the layers.
};

struct ValidMetrics {
  int64_t step = 0;
  double loss = 0.0;
  double nll = 0.0;
  int64_t tokens = 0;
};

/// Writes progress for people (aligned text; on a terminal also a live line with ETA that is
/// redrawn every step) or for machines (one JSON object per line).
/// Not thread-safe; owned by the training loop.
class ProgressReporter {
 public:
  ProgressReporter(std::ostream* out, LogFormat format, bool live);

  // Every step: redraws the live line (text on a terminal only).
  void Live(const StepMetrics& m);
  // Every log_every steps: a permanent line / JSON object.
  void Step(const StepMetrics& m);
  void Valid(const ValidMetrics& m);
  // Every probed step, log step or not: {"event":"probe",...} / a "[probe]" line.
  void Probe(const ProbeMetrics& m);
  // Every diagnostics step: {"event":"diagnostics",...} with every layer and a summary over
  // layers / a "[diag]" line with the summary.
  void Diagnostics(const DiagnosticsMetrics& m);
  // A completed checkpoint of `step` in folder `path`: the "checkpoint" event with message
  // "saved PATH" and, in JSON, "step" and "path" fields too (for deepnet-worker).
  void Checkpoint(int64_t step, const std::string& path);
  // Free-form event ("checkpoint", "resume", "start", "stop") with a message.
  void Event(const std::string& kind, const std::string& message);
  // An event with fields of its own: `fields` (with "event" = kind) as one JSON line, or
  // "[kind] text" in text format.
  void Record(const std::string& kind, const nlohmann::json& fields, const std::string& text);

 private:
  void ClearLive();
  std::ostream* out_;
  LogFormat format_;
  bool live_;
  bool live_shown_ = false;
};

std::string FormatDuration(double seconds);

}  // namespace deepnet::train
