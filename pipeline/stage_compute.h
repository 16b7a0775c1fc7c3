#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "model/deepnet.h"

namespace deepnet::pipeline {

/// One micro-batch as the stage sees it: every stage of a replica reads the same batches, so
/// token ids, masks and shapes never travel between stages; only hidden states do.
struct MicroBatch {
  torch::Tensor src;      // [B, S]
  torch::Tensor tgt_in;   // [B, T]
  torch::Tensor tgt_out;  // [B, T]
  // Packed batches (several pairs per row, model/packing.h): segment ids [B, S] and [B, T]
  // int64; undefined for one pair per row.
  torch::Tensor src_segments;
  torch::Tensor tgt_segments;
  int64_t src_tokens = 0;
  int64_t tgt_tokens = 0;

  bool packed() const { return src_segments.defined() || tgt_segments.defined(); }
};

/// Shapes of the tensors that cross the boundary before global layer `boundary` of the order
/// [encoder 0..N-1, decoder 0..M-1], for a micro-batch of B sentences, S source and T target
/// positions: inside the encoder the encoder hidden state [B, S, D]; from the end of the encoder
/// on, the encoder output [B, S, D] (every decoder layer cross-attends to it, so each decoder
/// stage passes it on) followed, inside the decoder, by the decoder hidden state [B, T, D].
/// Decoder-only models pass the decoder hidden state alone. Empty at 0 and at N + M.
std::vector<std::vector<int64_t>> BoundaryShapes(const model::DeepNetConfig& config,
                                                 int64_t boundary, int64_t batch, int64_t source,
                                                 int64_t target);

/// Loss sums of the last stage over the micro-batches it ran. Add keeps the sums on the loss's
/// device (float64), so that a micro-batch never waits for the host; Settle copies them into
/// loss/nll once, when the step reports them.
struct LossSums {
  double loss = 0.0;  // Label-smoothed cross-entropy, summed over target tokens.
  double nll = 0.0;
  int64_t tokens = 0;
  torch::Tensor pending;  // [loss, nll] added since the last Settle, on the device; or undefined.

  void Add(const torch::Tensor& micro_loss, const torch::Tensor& micro_nll, int64_t micro_tokens);
  void Settle();  // One device-to-host copy: pending into loss and nll.
};

/// Forward and backward of one pipeline stage's slice for a sequence of micro-batches, with no
/// communication. The slice's layers are split into `segments` runs whose boundaries are
/// detached, so backward proceeds segment by segment (last first) and reports each finished
/// segment: gradients of parameters used only by later segments are final then, and the
/// data-parallel all-reduce of their bucket can start while earlier segments compute.
/// With `recompute_layers` (runtime.recompute: layer), a training forward keeps only each
/// encoder/decoder layer's inputs and runs the layer again during its segment's backward
/// (pipeline/layer_recompute.h); gradients are the same bits as without.
/// Not thread-safe; owned by the training thread.
class StageCompute {
 public:
  // `model` must outlive this object. `segments` >= 1 (capped at the slice's layer count).
  StageCompute(model::DeepNetImpl* model, int64_t segments, double label_smoothing,
               bool recompute_layers = false);

  // Forward of `micro_batch` (an id, unique among the live ones). `inputs` are the received
  // boundary tensors (empty on the first stage). With autograd enabled the graph is kept for
  // Backward(). Returns the tensors for the next stage; on the last stage returns nothing and
  // adds to *sums, scaling the loss to differentiate by `loss_scale`. With `final_hidden`,
  // the last stage also stores its final hidden states there (for the ||dF|| probe).
  std::vector<torch::Tensor> Forward(int micro_batch, const MicroBatch& batch,
                                     const std::vector<torch::Tensor>& inputs, double loss_scale,
                                     LossSums* sums, torch::Tensor* final_hidden = nullptr);

  // Backward of a forwarded micro-batch from the gradients of its outputs (empty on the last
  // stage). `segment_done(k)` runs after segment k's backward (k from last to 0). Returns the
  // gradients of its inputs, in the order of Forward's `inputs`, and frees the graph.
  std::vector<torch::Tensor> Backward(int micro_batch, const std::vector<torch::Tensor>& output_grads,
                                      const std::function<void(int)>& segment_done = {});

  // bf16 compute (runtime.precision bf16): Forward and Backward run under bf16 autocast for
  // `device`'s type on the calling thread (model/precision.h). Off by default.
  void set_bf16_autocast(bool on, c10::DeviceType device) {
    bf16_autocast_ = on;
    autocast_device_ = device;
  }
  bool bf16_autocast() const { return bf16_autocast_; }

  // The training step's bounds: parameters do not change in between, so every micro-batch's
  // forward reuses autocast's weight casts (one cast per parameter per step, not one per
  // micro-batch). Call EndStep before the parameters change (the optimizer step). Without
  // them the casts are dropped whenever no micro-batch is live.
  void BeginStep();
  void EndStep();

  int num_segments() const { return static_cast<int>(segments_.size()); }
  // Segment holding global layer index `layer` (order [encoder..., decoder...]) of this slice.
  int SegmentOfLayer(int64_t layer) const;
  int64_t first_layer() const { return first_; }
  int64_t end_layer() const { return end_; }
  size_t live_micro_batches() const { return live_.size(); }

 private:
  struct Segment {
    int64_t begin = 0;  // Global layer range [begin, end).
    int64_t end = 0;
  };
  struct SegmentContext {
    std::vector<torch::Tensor> leaves;   // Inputs as graph leaves.
    std::vector<torch::Tensor> outputs;  // Outputs (the loss, scaled, on the last segment).
  };
  std::vector<torch::Tensor> RunSegment(const Segment& segment, const MicroBatch& batch,
                                        const std::vector<torch::Tensor>& inputs,
                                        double loss_scale, LossSums* sums,
                                        torch::Tensor* final_hidden);

  model::DeepNetImpl* model_;
  double label_smoothing_;
  bool recompute_layers_ = false;
  int64_t first_ = 0;
  int64_t end_ = 0;
  std::vector<Segment> segments_;
  std::map<int, std::vector<SegmentContext>> live_;  // micro-batch -> [segment]
  bool bf16_autocast_ = false;
  bool in_step_ = false;  // Between BeginStep and EndStep.
  c10::DeviceType autocast_device_ = c10::DeviceType::CPU;
};

}  // namespace deepnet::pipeline
