#pragma once
// The trainer's progress lines (`deepnet train --log-format json`): one JSON object per line on
// the trainer's standard output. train/progress_reporter.cc writes them with FormatProgressLine;
// the worker daemon reads them back with ParseProgressLine (worker/trainer_output_parser.cc),
// and people, scripts/ and `deepnet experiment` read the same lines. The event kinds, one
// struct per event and every JSON key are declared here once (the keys in progress_line.cc).
// Torch-free, so that deepnet_worker can link it.
//
// Compatibility: a line's keys come out sorted (nlohmann::json objects are ordered maps); a
// reader ignores keys and events it does not know; a writer may add keys but never renames one
// or changes its type (running workers and scripts/ read these lines). Non-finite numbers are
// written as null.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "job/job_choices.h"

namespace deepnet::job {

// The "event" of a line.
enum class ProgressEvent {
  kStep,         // every train.log_every steps: StepLine
  kValid,        // a validation: ValidLine
  kProbe,        // a probed step (train.probe_schedule): ProbeLine
  kDiagnostics,  // a diagnostics step (train.diagnostics_every): DiagnosticsLine
  kCheckpoint,   // a checkpoint saved (CheckpointLine) or refused on resume (RejectedCheckpointLine)
  kResume,       // ResumeLine
  kStart,        // StartLine
  kLayout,       // MessageLine: the layout of a run of several ranks
  kStages,       // MessageLine: measured against predicted time per pipeline stage
  kStop,         // MessageLine: "step N (REASON) after ..."
  kGuard,        // GuardLine
  kPlateau,      // PlateauLine
};
inline constexpr ProgressEvent kAllProgressEvents[] = {
    ProgressEvent::kStep,   ProgressEvent::kValid,  ProgressEvent::kProbe,
    ProgressEvent::kDiagnostics, ProgressEvent::kCheckpoint, ProgressEvent::kResume,
    ProgressEvent::kStart,  ProgressEvent::kLayout, ProgressEvent::kStages,
    ProgressEvent::kStop,   ProgressEvent::kGuard,  ProgressEvent::kPlateau};

// "step", "valid", ..., the value of the line's "event" key.
std::string_view ProgressEventName(ProgressEvent event);
// The event named `name`; nullopt for a name this version does not know.
std::optional<ProgressEvent> ProgressEventNamed(std::string_view name);

// The perplexity of a negative log-likelihood, exp(min(nll, 50)): the "ppl" that step and
// valid lines carry (a reader does not read it back).
double Perplexity(double nll);

// What one optimiser step did ({"event":"step"}); the line also carries "ppl".
struct StepLine {
  int64_t step = 0;   // >= 0
  double loss = 0.0;  // Label-smoothed cross-entropy per target token (nats).
  double nll = 0.0;   // Negative log-likelihood per target token (nats).
  double lr = 0.0;
  double grad_norm = 0.0;  // Global L2 norm before clipping.
  int64_t src_tokens = 0;
  int64_t tgt_tokens = 0;
  double tokens_per_s = 0.0;  // Source + target tokens per second over recent steps.
  // ||F(x, theta_i) - F(x, theta_0)|| on the probe batch: null on the line when not measured.
  std::optional<double> update_norm;
  std::optional<double> update_norm_relative;  // update_norm / ||F(x, theta_0)||; absent when unset
  double elapsed_s = 0.0;
  double eta_s = 0.0;
  double data_wait_s = 0.0;  // Time this step waited for its batches.
  // Pipeline runs: per stage (replica 0) forward+backward seconds of this step and the
  // fraction of the pipeline schedule it was not computing (the bubble); both absent from the
  // line when stage_compute_s is empty (one process).
  std::vector<double> stage_compute_s;
  std::vector<double> stage_idle;
  // The rank's CUDA memory: the three gpu_* keys are on the line only when on_gpu. A reader
  // sets on_gpu when any of them is there, and takes a missing or negative count as 0.
  bool on_gpu = false;
  int64_t gpu_allocated_bytes = 0;
  int64_t gpu_reserved_bytes = 0;
  int64_t gpu_peak_allocated_bytes = 0;
};

// One validation ({"event":"valid"}); the line also carries "ppl" (see StepLine).
struct ValidLine {
  int64_t step = 0;
  double loss = 0.0;
  double nll = 0.0;
  int64_t tokens = 0;
};

// What one probe measured ({"event":"probe"}); the relative values are null when ||F0|| is 0,
// the logits' values when the reference has no logits (an older checkpoint).
struct ProbeLine {
  int64_t step = 0;
  double update_norm = 0.0;  // ||F(x, theta_step) - F(x, theta_0)||
  double f0_norm = 0.0;      // ||F(x, theta_0)||
  std::optional<double> update_norm_relative;
  std::optional<double> logits_update_norm;
  std::optional<double> logits_f0_norm;
  std::optional<double> logits_update_norm_relative;
};

// Minimum, maximum, mean and quantiles of a per-layer value over the layers.
struct LayerSummary {
  double min = 0.0;
  double max = 0.0;
  double mean = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
};

// One encoder or decoder layer's diagnostics.
struct LayerLine {
  std::string stack;  // "encoder" or "decoder"
  int64_t layer = 0;  // Index within its stack.
  double ln_input_norm = 0.0;
  double grad_norm = 0.0;
};

// Per-layer diagnostics of a step ({"event":"diagnostics"}): every layer under "layers", and
// under "summary" the count of layers and summaries over them.
struct DiagnosticsLine {
  int64_t step = 0;
  std::vector<LayerLine> per_layer;
  int64_t layers = 0;  // "summary"."layers": how many layers the summaries cover.
  LayerSummary ln_input_norm;
  LayerSummary grad_norm;
  double other_grad_norm = 0.0;  // Parameters outside the layers.
};

// A completed checkpoint ({"event":"checkpoint","message":"saved PATH","path":..,"step":..}).
// A reader of a line without "path" takes it from the message, and without "step" from the
// step folder's name (storage::StepOfCheckpointPath).
struct CheckpointLine {
  int64_t step = 0;
  std::string path;  // The checkpoint's folder.
};

// A checkpoint refused on resume ({"event":"checkpoint","message":"rejected: REASON"}).
struct RejectedCheckpointLine {
  std::string reason;  // Names the folder and what was wrong with it.
};

// The step a run resumed from: "resumed from step N (PATH)" or, restored onto another layout,
// "resumed from step N (PATH, resharded to this layout)". A reader takes a "step" key first.
struct ResumeLine {
  int64_t step = 0;
  std::string path;
  bool resharded = false;
};

// The start of a run: "RUN, from step FROM to TO" (FROM: the resumed checkpoint's step, 0 from
// scratch). A reader takes the last " from step " of the message.
struct StartLine {
  std::string run;  // The job's name, shape, precision and data, for people.
  int64_t from_step = 0;
  int64_t to_step = 0;
};

// A line of an event that is only a message: kLayout, kStages or kStop.
struct MessageLine {
  ProgressEvent event = ProgressEvent::kStop;
  std::string message;
};

// What the divergence guard did (train/trainer_guard.cc): the job's guard.action choice
// (job/job_choices.h), so a guard line's "action" key holds the name a job file uses.
// "rollback" or "fail", the value of a guard line's "action" key.
std::string_view GuardActionName(GuardAction action);

// One {"event":"guard"} line.
struct GuardLine {
  int64_t step = 0;  // The step that tripped the guard.
  GuardAction action = GuardAction::kRollback;
  // What tripped it: "nonfinite_loss", "loss_spike", "update_norm" or "other_rank".
  std::string trigger;
  // The value that tripped it and its threshold; NaN (null on the line) when there is none.
  double value = 0.0;
  double threshold = 0.0;
  int64_t retries = 0;  // Rollbacks used so far.
  int64_t max_retries = 0;
  // kRollback only (absent from a kFail line): the checkpoint step and folder restored, the
  // steps whose batches were skipped, and the learning-rate scale from now on.
  int64_t to_step = 0;
  std::string checkpoint;
  int64_t skipped_steps = 0;
  double lr_scale = 1.0;
  std::string message;  // For people; for kFail the failure reason.
};

// One {"event":"plateau"} line: validation loss stopped improving.
struct PlateauLine {
  int64_t step = 0;
  double valid_loss = 0.0;
  double best_valid_loss = 0.0;
  int64_t window = 0;  // guard.plateau_window
  double min_delta = 0.0;
  std::string action;  // guard.plateau_action
  std::string message;
};

using ProgressLine =
    std::variant<StepLine, ValidLine, ProbeLine, DiagnosticsLine, CheckpointLine,
                 RejectedCheckpointLine, ResumeLine, StartLine, MessageLine, GuardLine, PlateauLine>;

ProgressEvent EventOf(const ProgressLine& line);

// The line's "message" ("" for step, valid, probe and diagnostics lines, which have none): what
// the trainer's text format prints after "[EVENT] ".
std::string ProgressMessage(const ProgressLine& line);

// The JSON object of one line, without its newline.
std::string FormatProgressLine(const ProgressLine& line);

// Reads one line (surrounding blanks allowed). nullopt for anything that is not one of the
// lines above: text, broken JSON, an event this version does not know, or a known event
// without what it needs (a step line without an integer "step" >= 0 or a numeric "loss"; a
// probe without "step" or "update_norm"; diagnostics without "step" or "summary"; a checkpoint
// whose step cannot be found; a resume or start whose step cannot be read; a guard line with an
// unknown "action" or without "step"; a plateau without "step"). Missing optional keys read as
// the struct's defaults. Pure function, safe for concurrent use.
std::optional<ProgressLine> ParseProgressLine(std::string_view line);

}  // namespace deepnet::job
