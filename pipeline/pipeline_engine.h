#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "model/deepnet.h"
#include "model/precision.h"
#include "pipeline/adamw.h"
#include "pipeline/boundary_transfer.h"
#include "pipeline/flat_parameters.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/stage_compute.h"
#include "pipeline/stage_partition.h"

namespace deepnet::checkpoint {
class CheckpointStore;  // checkpoint/checkpoint.h
}  // namespace deepnet::checkpoint

namespace deepnet::pipeline {

struct EngineOptions {
  // The whole model's shape (vocab_size and pad_id set).
  model::DeepNetConfig model;
  // Seeds the parameters (by global name, so every layout starts from the same weights).
  uint64_t seed = 1;
  // P x D must equal the world communicator's size; rank = stage * D + replica, so a stage's
  // data-parallel group is a run of consecutive ranks (one node, when placed by node).
  int64_t stages = 1;
  int64_t replicas = 1;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  // Gradient bucket size for the data-parallel all-reduce, in bytes.
  int64_t bucket_bytes = 25 << 20;
  // Start a bucket's all-reduce as soon as its segment's backward is done (else after the
  // whole schedule: only for measuring how much the overlap hides).
  bool overlap_reduction = true;
  double label_smoothing = 0.1;
  AdamWOptions adam;
  // Global gradient-norm clip; 0 disables.
  double clip_norm = 0.0;
  torch::Device device = torch::kCPU;
  // runtime.precision: kBf16 runs forward and backward under bf16 autocast (StageCompute) with
  // the fp32 parameters as master weights; kTf32 and kBf16 allow TF32 products on CUDA.
  model::ComputePrecision precision = model::ComputePrecision::kFp32;
  // Dtype pipeline boundary tensors (activations, their gradients) travel in; kBFloat16 halves
  // the bytes. Received tensors are float again.
  torch::ScalarType boundary_dtype = torch::kFloat;
  // Dtype of the data-parallel gradient all-reduce (runtime.grad_reduce): each bucket is
  // rounded to it, summed (in it over NCCL; in fp32 over Gloo and MPI, which cannot sum bf16),
  // and the sum rounded to it and widened back into the fp32 gradients.
  torch::ScalarType grad_reduce_dtype = torch::kFloat;
  // Typical source/target lengths and sentences per micro-batch, for the stage cost model.
  int64_t source_length = 32;
  int64_t target_length = 32;
  int64_t batch_sentences = 16;
  // Balance stages by layer costs timed on rank 0 at start (MeasureLayerCosts) instead of the
  // FLOP estimate; better balanced, but the split may differ between runs.
  bool measure_layer_costs = false;
  // runtime.recompute: layer (StageCompute's recompute_layers).
  bool recompute_layers = false;
};

/// Where one rank's time went in a step.
struct RankTiming {
  double step_s = 0.0;          // Wall time of the whole step.
  double schedule_s = 0.0;      // Wall time of the pipeline schedule (forwards to last send).
  double compute_s = 0.0;       // Wall time in forward and backward.
  double compute_cpu_s = 0.0;   // Thread CPU time in forward and backward (robust to other load).
  double wait_s = 0.0;          // Blocked on receives, reductions and the final statistics.
  double reduce_wait_s = 0.0;   // Of which: waiting for data-parallel and tied reductions.
  double peak_live = 0.0;       // Most micro-batches whose activations were held at once.
};

/// What one step did, summed over every replica (identical on every rank).
struct StepTotals {
  double loss_sum = 0.0;  // Label-smoothed loss summed over target tokens.
  double nll_sum = 0.0;
  int64_t tgt_tokens = 0;
  int64_t src_tokens = 0;
  double grad_norm = 0.0;  // Global norm before clipping.
  std::vector<RankTiming> ranks;  // [world rank]
};

/// What a probe measured on the probe batch x (PipelineEngine::Probe). F is the decoder output
/// (encoder output for encoder-only models), logits its output projection; padding positions
/// are zeroed in both. Norms are Frobenius norms over the whole batch.
struct ProbeNorms {
  double update_norm = 0.0;  // ||F(x, theta) - F(x, theta_0)||; 0 on the reference call.
  double f0_norm = 0.0;      // ||F(x, theta_0)||
  // False when the reference has no logits (resumed from a checkpoint saved before they were).
  bool has_logits = false;
  double logits_update_norm = 0.0;
  double logits_f0_norm = 0.0;
};

/// Per-layer diagnostics of one step (PipelineEngine::Diagnose), in global layer order
/// [encoder 0..N-1, decoder 0..M-1]; identical on every rank.
struct LayerDiagnostics {
  // Root mean square, over the layer's residual LayerNorms and the probe batch's non-padding
  // tokens, of the per-token L2 norm of the LayerNorm input (docs/MODEL.md).
  std::vector<double> ln_input_norm;
  // L2 norm of the gradient of the layer's parameters (before clipping); 0 when the step did
  // not measure gradients (MeasureLayerGradients).
  std::vector<double> grad_norm;
  // L2 norm of the gradient of every parameter outside the layers (embeddings, final norms,
  // output projection); sum of squares of all = the step's grad_norm squared.
  double other_grad_norm = 0.0;
};

/// Where a resumed run starts.
struct ResumePoint {
  int64_t step = 0;
  nlohmann::json metadata;
  std::string path;
  bool same_layout = false;  // Saved with this P x D (RNG states restored), else resharded.
};

/// Global layer index ([encoder..., decoder...]) of a parameter name, or -1 for tables and norms.
int64_t LayerOfParameter(const std::string& name, int64_t encoder_layers);

/// Trains one rank's share of a DeepNet: the pipeline stage this rank holds (a contiguous
/// slice of layers chosen by a cost model), one data-parallel replica of it. Runs a GPipe or
/// 1F1B schedule (checked for matching sends and receives before use) over the step's
/// micro-batches, all-reduces gradient buckets within the stage's data-parallel group while
/// the last backward continues, sums tied embedding gradients over the stages holding them,
/// clips by the global norm and steps AdamW. Every method is collective over the world
/// communicator (every rank calls it in the same order). Not thread-safe.
class PipelineEngine {
 public:
  // `world` must take host tensors and tensors on options.device (bookkeeping sums host tensors,
  // gradients are reduced where they live): one from comm::CreateWorldCommunicator with the
  // trainer's cuda_device does (comm::StageWhereNeeded), as does a LoopbackCommunicator.
  static absl::StatusOr<std::unique_ptr<PipelineEngine>> Create(const EngineOptions& options,
                                                                comm::Communicator* world);
  ~PipelineEngine();

  int stage() const { return stage_; }
  int replica() const { return replica_; }
  bool first_stage() const { return stage_ == 0; }
  bool last_stage() const { return stage_ + 1 == options_.stages; }
  const StagePlan& plan() const { return plan_; }

  model::DeepNetImpl& model() { return *model_; }
  FlatParameters& flat() { return *flat_; }
  AdamW& optimizer() { return *optimizer_; }

  // One optimiser step at learning rate `lr` over this replica's micro-batches (every stage
  // of the replica passes the same batches). Errors name the rank, stage and micro-batch.
  absl::StatusOr<StepTotals> TrainStep(const std::vector<MicroBatch>& micro, int64_t step,
                                       double lr);
  // Forward-only loss over this replica's batches; sums over all replicas.
  absl::StatusOr<LossSums> Evaluate(const std::vector<MicroBatch>& batches);
  // ||F(x, theta) - F(x, theta_0)|| on the probe batch (decoder output, padding zeroed). The
  // first call, or one after ResetProbe(), records F(x, theta_0) and returns 0.
  absl::StatusOr<double> ProbeUpdateNorm(const MicroBatch& probe);
  bool has_probe_reference() const { return probe_reference_; }
  // ProbeUpdateNorm with ||F0|| and the logits' norms (pipeline/pipeline_diagnostics.cc).
  absl::StatusOr<ProbeNorms> Probe(const MicroBatch& probe);
  // The next TrainStep also records the per-layer gradient norms (cleared by Diagnose).
  void MeasureLayerGradients() { measure_layer_grads_ = true; }
  // The LayerNorm-input norms of a forward pass (eval mode) over `batch`, with the gradient
  // norms recorded by the last TrainStep after MeasureLayerGradients(). Replica 0 of each
  // stage measures its layers; one all-reduce gathers them on every rank.
  absl::StatusOr<LayerDiagnostics> Diagnose(const MicroBatch& batch);

  // True on every rank when `flag` is true on any rank (free with one rank).
  absl::StatusOr<bool> AnyRank(bool flag);
  // Collective: true on every rank when `ok` is true on every rank.
  absl::StatusOr<bool> AllOk(bool ok);
  // Collective: rank 0's string on every rank.
  absl::StatusOr<std::string> BroadcastString(const std::string& text);

  // Writes this rank's shards and commits the checkpoint (world rank 0 writes `metadata` and
  // `rank0_tensors`). Returns the committed folder on every rank.
  absl::StatusOr<std::string> SaveCheckpoint(
      checkpoint::CheckpointStore& store, int64_t step, const nlohmann::json& metadata,
      const std::vector<std::pair<std::string, torch::Tensor>>& rank0_tensors);
  // Loads the newest checkpoint that every rank can read and verify (tensors by global name,
  // so any saved layout loads into this one). `check` vets its metadata (same on every rank).
  // NotFound when there is none; each rejected checkpoint adds a reason to *rejected.
  absl::StatusOr<ResumePoint> Resume(
      const checkpoint::CheckpointStore& store,
      const std::function<absl::Status(const nlohmann::json&)>& check,
      std::vector<std::string>* rejected);

 private:
  struct Bucket {
    int64_t offset = 0;  // Range of the flat gradient buffer.
    int64_t numel = 0;
    int ready_segment = 0;  // Final once this segment's backward is done.
  };
  struct TiedTable {
    std::string name;
    size_t entry = 0;                      // Index in flat_->entries().
    bool counts_in_norm = false;           // This stage is the first holder.
    std::unique_ptr<comm::Communicator> group;  // Holders of it, all replicas.
  };

  PipelineEngine(const EngineOptions& options, comm::Communicator* world);
  absl::Status Setup();
  void PlanBuckets();
  int WorldRank(int stage, int replica) const {
    return stage * static_cast<int>(options_.replicas) + replica;
  }
  // Runs the transfers schedule_[stage_][begin, end) (one group) together through
  // BoundaryTransfer::Exchange: sends take (and erase) their tensors from `outputs` (activations)
  // or `in_grads` (gradients), receives fill `inputs` or `out_grads`.
  absl::Status RunTransfers(size_t begin, size_t end, const std::vector<MicroBatch>& micro,
                            int64_t step, std::map<int, std::vector<torch::Tensor>>& outputs,
                            std::map<int, std::vector<torch::Tensor>>& in_grads,
                            std::map<int, std::vector<torch::Tensor>>& inputs,
                            std::map<int, std::vector<torch::Tensor>>& out_grads);
  // The expected message of `kind` for `batch` from `from_stage` at the given layer boundary.
  IncomingMessage Expect(int from_stage, int kind, int64_t step, int micro_batch,
                         const MicroBatch& batch, int64_t boundary) const;
  absl::StatusOr<torch::Tensor> ForwardOnly(const MicroBatch& batch, int64_t tag_step,
                                            LossSums* sums, bool want_hidden);
  absl::Status ReduceGradients();
  std::string Where() const;

  EngineOptions options_;
  comm::Communicator* world_;
  int stage_ = 0;
  int replica_ = 0;
  StagePlan plan_;
  std::unique_ptr<comm::Communicator> data_group_;  // This stage's replicas; null when D = 1.
  std::vector<TiedTable> tied_;
  model::DeepNet model_{nullptr};
  std::unique_ptr<FlatParameters> flat_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<StageCompute> compute_;
  PipelineSchedule schedule_;
  int last_backward_ = -1;  // Micro-batch of this stage's last Backward action.
  std::vector<Bucket> buckets_;
  std::unique_ptr<BoundaryTransfer> transfer_;  // Activations and gradients to neighbours.
  std::vector<std::unique_ptr<comm::CommWork>> pending_reductions_;
  // Buckets reduced through another tensor: (fp32 gradient bucket, the copy being reduced, in
  // grad_reduce_dtype); copied back after the wait.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> reduce_copies_;
  int64_t eval_calls_ = 0;  // Tags forward-only passes.
  bool probe_reference_ = false;
  torch::Tensor probe_f0_;  // Last stage: F(x, theta_0).
  torch::Tensor probe_logits0_;  // Last stage: logits of F(x, theta_0), in host memory.
  // Per-layer gradient diagnostics (pipeline/pipeline_diagnostics.cc).
  void RecordLayerGradients();
  bool measure_layer_grads_ = false;
  std::vector<double> layer_grad_sumsq_;  // [global layer]; replica 0, this stage's layers.
  double other_grad_sumsq_ = 0.0;
  std::map<std::string, size_t> entry_index_;
  std::string run_token_;  // Same on every rank of this run; names shared temporary folders.
};

}  // namespace deepnet::pipeline
