#include "pipeline/stage_compute.h"

#include <torch/torch.h>

#include <algorithm>

#include "model/loss.h"
#include "model/packing.h"
#include "model/precision.h"
#include "pipeline/layer_recompute.h"

namespace deepnet::pipeline {

std::vector<std::vector<int64_t>> BoundaryShapes(const model::DeepNetConfig& c, int64_t boundary,
                                                 int64_t batch, int64_t source, int64_t target) {
  const int64_t n = c.encoder_layers(), m = c.decoder_layers(), d = c.d_model();
  if (boundary <= 0 || boundary >= n + m) return {};
  if (boundary < n) return {{batch, source, d}};
  if (n == 0) return {{batch, target, d}};
  std::vector<std::vector<int64_t>> shapes{{batch, source, d}};
  if (boundary > n) shapes.push_back({batch, target, d});
  return shapes;
}

StageCompute::StageCompute(model::DeepNetImpl* model, int64_t segments, double label_smoothing,
                           bool recompute_layers)
    : model_(model), label_smoothing_(label_smoothing), recompute_layers_(recompute_layers) {
  const auto& slice = model_->slice();
  const int64_t n = model_->config().encoder_layers();
  first_ = slice.encoder.empty() ? n + slice.decoder.begin : slice.encoder.begin;
  end_ = slice.decoder.empty() ? slice.encoder.end : n + slice.decoder.end;
  const int64_t layers = end_ - first_;
  segments = std::max<int64_t>(1, std::min(segments, layers));
  for (int64_t k = 0; k < segments; ++k) {
    segments_.push_back({first_ + layers * k / segments, first_ + layers * (k + 1) / segments});
  }
}

void StageCompute::BeginStep() {
  if (bf16_autocast_) model::ClearAutocastCache();
  in_step_ = true;
}

void StageCompute::EndStep() {
  if (bf16_autocast_) model::ClearAutocastCache();
  in_step_ = false;
}

int StageCompute::SegmentOfLayer(int64_t layer) const {
  for (size_t k = 0; k < segments_.size(); ++k) {
    if (layer < segments_[k].end) return static_cast<int>(k);
  }
  return static_cast<int>(segments_.size()) - 1;
}

void LossSums::Add(const torch::Tensor& micro_loss, const torch::Tensor& micro_nll,
                   int64_t micro_tokens) {
  // float -> double is exact and the additions run in the same order as on the host before.
  torch::Tensor both =
      torch::stack({micro_loss.detach().to(torch::kDouble), micro_nll.detach().to(torch::kDouble)});
  pending = pending.defined() ? pending + both : both;
  tokens += micro_tokens;
}

void LossSums::Settle() {
  if (!pending.defined()) return;
  const torch::Tensor host = pending.cpu();
  loss += host[0].item<double>();
  nll += host[1].item<double>();
  pending = torch::Tensor();
}

std::vector<torch::Tensor> StageCompute::RunSegment(const Segment& seg, const MicroBatch& batch,
                                                    const std::vector<torch::Tensor>& inputs,
                                                    double loss_scale, LossSums* sums,
                                                    torch::Tensor* final_hidden) {
  const auto& c = model_->config();
  const int64_t n = c.encoder_layers(), m = c.decoder_layers();
  TORCH_CHECK(inputs.size() == BoundaryShapes(c, seg.begin, 1, 1, 1).size(), "layers [",
              seg.begin, ",", seg.end, ") expect ", BoundaryShapes(c, seg.begin, 1, 1, 1).size(),
              " input tensors, got ", inputs.size());
  model::EncoderOutput enc;
  torch::Tensor enc_hidden, dec_hidden;
  torch::Tensor encoder_mask;  // Keys hidden from encoder self-attention.
  torch::Tensor src_positions, tgt_positions;  // Packed batches: positions restart per pair.
  if (batch.packed()) {
    const model::PackedLayout packed = model::LayoutOfPacked(
        n > 0 ? batch.src_segments : torch::Tensor(), m > 0 ? batch.tgt_segments : torch::Tensor());
    encoder_mask = packed.encoder_mask;
    enc.padding_mask = packed.cross_mask;
    enc.target_mask = packed.decoder_mask;
    src_positions = packed.source_positions;
    tgt_positions = packed.target_positions;
  } else if (n > 0 && batch.src_tokens != batch.src.numel()) {
    // A batch without padding (every row full: the builder's count says so) has no mask, so
    // that attention takes its unmasked (flash) kernels.
    enc.padding_mask = model_->padding_mask(batch.src);
    encoder_mask = enc.padding_mask;
  }
  // Unpack the boundary before seg.begin (see BoundaryShapes). Received tensors join the
  // residual stream in its dtype (bf16 under autocast: model::ToStreamDtype).
  const auto input = [&](size_t i) { return model::ToStreamDtype(inputs[i]); };
  if (seg.begin < n) {
    enc_hidden = seg.begin == 0 ? model_->embed_source(batch.src, src_positions) : input(0);
  } else if (n > 0) {
    enc.out = input(0);
    if (seg.begin > n) dec_hidden = input(1);
  } else if (seg.begin > 0) {
    dec_hidden = input(0);
  }
  // Layer by layer through RunRecomputed with recomputation (a plain call without autograd).
  const bool recompute = recompute_layers_ && torch::GradMode::is_enabled();
  if (seg.begin < n) {
    const int64_t stop = std::min(seg.end, n);
    if (recompute) {
      for (int64_t i = seg.begin; i < stop; ++i) {
        enc_hidden = RunRecomputed({enc_hidden}, [model = model_, mask = encoder_mask,
                                                  i](const std::vector<torch::Tensor>& in) {
          return model->run_encoder_layers(in[0], mask, i, i + 1);
        });
      }
    } else {
      enc_hidden = model_->run_encoder_layers(enc_hidden, encoder_mask, seg.begin, stop);
    }
    if (stop == n) enc.out = model_->finish_encoder(enc_hidden);
  }
  if (seg.end > n) {
    const int64_t from = std::max(seg.begin, n) - n, to = seg.end - n;
    if (from == 0) dec_hidden = model_->embed_target(batch.tgt_in, 0, tgt_positions);
    if (recompute) {
      for (int64_t i = from; i < to; ++i) {
        std::vector<torch::Tensor> in{dec_hidden};
        if (enc.out.defined()) in.push_back(enc.out);
        dec_hidden = RunRecomputed(
            in, [model = model_, mask = enc.padding_mask, target_mask = enc.target_mask,
                 i](const std::vector<torch::Tensor>& in) {
              model::EncoderOutput encoder;
              if (in.size() > 1) encoder.out = in[1];
              encoder.padding_mask = mask;
              encoder.target_mask = target_mask;
              return model->run_decoder_layers(in[0], encoder, i, i + 1);
            });
      }
    } else {
      dec_hidden = model_->run_decoder_layers(dec_hidden, enc, from, to);
    }
    if (to == m) dec_hidden = model_->finish_decoder(dec_hidden);
  }
  if (seg.end < n) return {enc_hidden};
  if (seg.end < n + m) {
    if (n == 0) return {dec_hidden};
    if (seg.end == n) return {enc.out};
    return {enc.out, dec_hidden};
  }
  // Last layer of the model: logits and the loss.
  torch::Tensor hidden = m > 0 ? dec_hidden : enc.out;
  if (final_hidden != nullptr) *final_hidden = hidden;
  // The batch builder counted the targets (a count here would wait for the device).
  auto out = model::LabelSmoothedCrossEntropy(model_->output_logits(hidden), batch.tgt_out,
                                              label_smoothing_, c.pad_id(),
                                              batch.tgt_tokens > 0 ? batch.tgt_tokens : -1);
  if (sums != nullptr) sums->Add(out.loss, out.nll, out.tokens);
  return {out.loss * loss_scale};
}

std::vector<torch::Tensor> StageCompute::Forward(int micro_batch, const MicroBatch& batch,
                                                 const std::vector<torch::Tensor>& inputs,
                                                 double loss_scale, LossSums* sums,
                                                 torch::Tensor* final_hidden) {
  const bool grad = torch::GradMode::is_enabled();
  // Autocast caches one bf16 cast per parameter on this thread. Parameters change only between
  // steps: between BeginStep (which drops the casts) and EndStep every micro-batch reuses them;
  // outside a step they are dropped whenever no micro-batch is live. Casts made without
  // autograd carry no graph, so a forward-only pass drops them before and after.
  struct CacheReset {
    bool on;
    ~CacheReset() {
      if (on) model::ClearAutocastCache();
    }
  } reset_after{bf16_autocast_ && !grad};
  if (bf16_autocast_ && (!grad || (!in_step_ && live_.empty()))) model::ClearAutocastCache();
  model::Bf16AutocastScope autocast(autocast_device_, bf16_autocast_);
  std::vector<SegmentContext> contexts;
  std::vector<torch::Tensor> current = inputs;
  for (const Segment& seg : segments_) {
    SegmentContext ctx;
    if (grad) {
      // Detached leaves: the segment's backward stops here and hands their gradients back.
      for (const auto& t : current) ctx.leaves.push_back(t.detach().requires_grad_(true));
    } else {
      ctx.leaves = current;
    }
    ctx.outputs = RunSegment(seg, batch, ctx.leaves, loss_scale, sums, final_hidden);
    current = ctx.outputs;
    if (grad) contexts.push_back(std::move(ctx));
  }
  if (grad) {
    TORCH_CHECK(live_.count(micro_batch) == 0, "micro-batch ", micro_batch, " is already live");
    live_[micro_batch] = std::move(contexts);
  }
  if (end_ == model_->config().encoder_layers() + model_->config().decoder_layers()) return {};
  std::vector<torch::Tensor> out;
  for (const auto& t : current) out.push_back(t.detach());
  return out;
}

std::vector<torch::Tensor> StageCompute::Backward(int micro_batch,
                                                  const std::vector<torch::Tensor>& output_grads,
                                                  const std::function<void(int)>& segment_done) {
  auto it = live_.find(micro_batch);
  TORCH_CHECK(it != live_.end(), "backward of micro-batch ", micro_batch,
              " that has no forward on this stage");
  std::vector<SegmentContext>& contexts = it->second;
  // The same autocast state as Forward, for anything that reruns forward ops in backward.
  model::Bf16AutocastScope autocast(autocast_device_, bf16_autocast_);
  std::vector<torch::Tensor> grads = output_grads;
  for (int k = static_cast<int>(contexts.size()) - 1; k >= 0; --k) {
    SegmentContext& ctx = contexts[k];
    const bool last_of_model = k + 1 == static_cast<int>(contexts.size()) && grads.empty();
    if (last_of_model) {
      torch::autograd::backward(ctx.outputs);
    } else {
      TORCH_CHECK(grads.size() == ctx.outputs.size(), "micro-batch ", micro_batch, ": ",
                  grads.size(), " gradients for ", ctx.outputs.size(), " outputs");
      torch::autograd::backward(ctx.outputs, grads);
    }
    grads.clear();
    for (auto& leaf : ctx.leaves) {
      // An input the segment did not use (none today) still owes its sender a gradient.
      grads.push_back(leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf));
    }
    ctx = SegmentContext();
    if (segment_done) segment_done(k);
  }
  live_.erase(it);
  return grads;
}

}  // namespace deepnet::pipeline
