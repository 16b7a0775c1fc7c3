#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.h"
#include "comm/communicator.h"
#include "data/multilingual_stream.h"
#include "job/job_config.h"
#include "job/probe_schedule.h"
#include "model/deepnet.h"
#include "pipeline/adamw.h"
#include "pipeline/pipeline_engine.h"
#include "train/batch_prefetcher.h"
#include "train/memory_check.h"
#include "train/progress_reporter.h"
#include "train/training_data.h"
#include "train/training_guard.h"

namespace deepnet::train {

/// Where the trainer writes progress and what can stop it early.
struct TrainerIo {
  std::ostream* out = nullptr;  // Progress; null discards it.
  LogFormat format = LogFormat::kText;
  bool live = false;  // Redraw a live progress line (a terminal).
  // Set (e.g. by a SIGTERM handler) to finish the current step, checkpoint and stop.
  const std::atomic<bool>* stop = nullptr;
  // Memory this rank may use (train/memory_check.h); Create() refuses, before it builds the
  // model, a job whose estimate is larger. bytes 0: not checked.
  MemoryBudget memory;
  // Which job attempt writes checkpoints (storage/checkpoint_fence.h): deepnet-worker's
  // DEEPNET_JOB_ID and DEEPNET_ATTEMPT; attempt 0 (a standalone run) is not fenced.
  storage::FenceToken checkpoint_fence;
  // Test facility (train/training_guard.h, DEEPNET_GUARD_FAULT): alters each step's metrics
  // before the divergence guard looks at them, e.g. to force a NaN loss at a chosen step.
  StepFault step_fault;
};

/// What a Run() did.
struct TrainSummary {
  int64_t start_step = 0;  // Step the run started from (non-zero after a resume).
  int64_t final_step = 0;
  std::string stop_reason;  // "max_steps", "max_minutes" or "signal".
  std::vector<double> losses;  // Per-step training loss of this run, in order.
  std::optional<job::ValidLine> last_valid;
  std::string last_checkpoint;  // Folder of the last checkpoint written, if any.
  std::vector<std::string> rejected_checkpoints;  // Skipped on resume, with reasons.
  // Steps of this run that had to wait more than 1 ms for a batch, and the total wait.
  int64_t steps_waited_for_data = 0;
  double data_wait_s = 0.0;
  // The divergence guard's rollbacks and plateaus flagged in this run (train/training_guard.h).
  int64_t guard_rollbacks = 0;
  int64_t plateaus = 0;
};

/// DeepNet training of one rank: AdamW with inverse-sqrt warm-up schedule, gradient clipping
/// and accumulation, token-bounded batches, progress with the model-update norm ||dF||,
/// validation, and atomic (sharded) checkpoints from which a run resumes bit for bit. The
/// model, the step and the checkpoints go through a PipelineEngine: one process is the 1 x 1
/// layout; under a launcher every rank runs a Trainer over the world communicator and only
/// rank 0 reports progress. Not thread-safe; the caller's thread runs it.
class Trainer {
 public:
  // `world` (not owned; outlives the trainer) spans parallel.pipeline_stages x
  // parallel.data_parallel ranks; null means one process with no peers.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const job::JobConfig& config,
                                                         const TrainerIo& io,
                                                         comm::Communicator* world = nullptr);
  ~Trainer();

  // Trains from the current step to train.max_steps (or until the time budget or stop flag);
  // checkpoints as configured and at the end. Compute errors come back as a Status.
  absl::StatusOr<TrainSummary> Run();

  model::DeepNetImpl& model() { return engine_->model(); }
  const pipeline::PipelineEngine& engine() const { return *engine_; }
  int64_t step() const { return step_; }
  const TrainingData& data() const { return data_; }

 private:
  Trainer(const job::JobConfig& config, const TrainerIo& io);
  absl::Status Setup(comm::Communicator* world);
  absl::Status Resume();
  // Vets a checkpoint's metadata against this model (Resume's `check`).
  absl::Status CheckResumable(const nlohmann::json& metadata) const;
  // Sets the data stream to the position a checkpoint's metadata records.
  absl::Status RestoreStream(const pipeline::ResumePoint& point);
  void StartPrefetcher();
  // The guard's hooks (train/trainer_guard.cc). GuardStep: true when it rolled back.
  absl::StatusOr<bool> GuardStep(const StepMetrics& m, TrainSummary* summary);
  absl::Status RollBack(int64_t target, const GuardTrigger& trigger, TrainSummary* summary);
  void GuardValidation(const job::ValidLine& v, TrainSummary* summary);
  absl::StatusOr<StepMetrics> TrainStep();
  absl::StatusOr<job::ValidLine> Validate();
  absl::StatusOr<pipeline::ProbeNorms> ProbeNorm();
  const pipeline::MicroBatch& ProbeBatch();  // Built on first use, then kept.
  const std::vector<data::TokenizedExample>& ProbeSet() const;
  // train/trainer_probe.cc: the probe schedule and batch (train.probe_file), and after each
  // step the probe and per-layer diagnostics it is due for (events, and m->update_norm*).
  absl::Status SetUpProbe();
  bool DiagnosticStep(int64_t step) const;
  absl::Status ProbeAndDiagnose(StepMetrics* m);
  absl::StatusOr<std::string> SaveCheckpoint();
  bool reports() const;  // This rank writes progress (rank 0).

  job::JobConfig config_;
  TrainerIo io_;
  std::unique_ptr<std::ostream> null_out_;
  std::unique_ptr<ProgressReporter> reporter_;
  TrainingData data_;
  torch::Device device_ = torch::kCPU;
  std::unique_ptr<comm::Communicator> own_world_;  // Loopback when no world was given.
  comm::Communicator* world_ = nullptr;
  std::unique_ptr<pipeline::PipelineEngine> engine_;
  std::unique_ptr<data::MultilingualBatchStream> stream_;
  std::unique_ptr<BatchPrefetcher> prefetcher_;  // Started by Run(); owns stream_ from then.
  data::StreamState consumed_state_;  // Stream state after the last batch trained on.
  double last_data_wait_s_ = 0.0;     // Wait of the last step.
  std::unique_ptr<checkpoint::CheckpointStore> store_;
  std::vector<int64_t> probe_indices_;
  std::optional<pipeline::MicroBatch> probe_batch_;  // ProbeBatch()'s, once built.
  job::ProbeSchedule probe_schedule_;
  std::vector<data::TokenizedExample> probe_file_examples_;  // train.probe_file's pairs.
  torch::Tensor tokenizer_model_;  // SentencePiece model bytes (uint8), saved in checkpoints.
  int64_t step_ = 0;
  std::vector<std::string> rejected_;
  std::vector<double> stage_compute_;  // [stage] forward+backward seconds of this run.
  std::unique_ptr<TrainingGuard> guard_;  // Null when guard.enabled resolves to false.
};

}  // namespace deepnet::train
