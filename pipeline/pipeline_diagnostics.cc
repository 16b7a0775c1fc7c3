// PipelineEngine's measurements for people: the model-update probe (||dF|| with ||F0|| and the
// logits) and the per-layer diagnostics (LayerNorm-input norms, gradient norms).

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/ln_input_recorder.h"
#include "pipeline/pipeline_engine.h"

namespace deepnet::pipeline {
namespace {

// Probe reduction slots.
enum ProbeSlot { kUpdate, kF0, kLogitsUpdate, kLogitsF0, kHasLogits, kMismatch, kProbeSlots };

// Global layer index of a module named "encoder.layers.N" / "decoder.layers.N", else -1.
int64_t LayerOfModule(const std::string& name, int64_t encoder_layers) {
  for (const auto& [prefix, base] : {std::pair<std::string, int64_t>{"encoder.layers.", 0},
                                     {"decoder.layers.", encoder_layers}}) {
    if (name.rfind(prefix, 0) != 0) continue;
    int64_t index = 0;
    if (absl::SimpleAtoi(name.substr(prefix.size()), &index)) return base + index;
  }
  return -1;
}

}  // namespace

absl::StatusOr<ProbeNorms> PipelineEngine::Probe(const MicroBatch& probe) {
  // Replica 0 runs the probe; the other replicas only join the final reduction.
  torch::Tensor value = torch::zeros({kProbeSlots}, torch::kDouble);
  if (replica_ == 0) {
    const bool was_training = model_->is_training();
    model_->eval();
    auto hidden = ForwardOnly(probe, -(++eval_calls_), nullptr, true);
    model_->train(was_training);
    if (!hidden.ok()) return hidden.status();
    if (last_stage()) {
      torch::NoGradGuard no_grad;
      const auto& c = options_.model;
      const torch::Tensor& tokens = c.decoder_layers() > 0 ? probe.tgt_out : probe.src;
      const torch::Tensor pad = tokens.eq(c.pad_id()).unsqueeze(-1);
      torch::Tensor f = hidden->detach().to(torch::kFloat).masked_fill(pad, 0.0);
      // Logits in fp32 from the fp32 hidden states, kept in host memory (B x T x V floats).
      torch::Tensor logits = model_->output_logits(f).masked_fill(pad, 0.0).cpu();
      auto v = value.accessor<double, 1>();
      if (!probe_reference_) {
        probe_f0_ = f.clone();
        probe_logits0_ = logits;
      } else if (!probe_f0_.sizes().equals(f.sizes())) {
        v[kMismatch] = 1.0;
      } else {
        v[kUpdate] = (f - probe_f0_).norm().item<double>();
        if (probe_logits0_.defined() && probe_logits0_.sizes().equals(logits.sizes())) {
          v[kLogitsUpdate] = (logits - probe_logits0_).norm().item<double>();
        }
      }
      v[kF0] = probe_f0_.norm().item<double>();
      if (probe_logits0_.defined()) {
        v[kLogitsF0] = probe_logits0_.norm().item<double>();
        v[kHasLogits] = 1.0;
      }
    }
  } else {
    ++eval_calls_;
  }
  probe_reference_ = true;
  if (auto s = world_->AllReduceSum(value); !s.ok()) return s;
  auto v = value.accessor<double, 1>();
  if (v[kMismatch] > 0.5) {
    return absl::FailedPreconditionError(
        "the probe batch differs in shape from the one F(x, theta_0) was recorded with "
        "(train.probe_file or train.probe_sentences changed since the run started); start a "
        "new checkpoint.dir or restore the probe settings");
  }
  ProbeNorms out;
  out.update_norm = v[kUpdate];
  out.f0_norm = v[kF0];
  out.has_logits = v[kHasLogits] > 0.5;
  out.logits_update_norm = v[kLogitsUpdate];
  out.logits_f0_norm = v[kLogitsF0];
  return out;
}

void PipelineEngine::RecordLayerGradients() {
  const int64_t n = options_.model.encoder_layers();
  const int64_t layers = n + options_.model.decoder_layers();
  layer_grad_sumsq_.assign(layers, 0.0);
  other_grad_sumsq_ = 0.0;
  if (replica_ != 0) return;  // Reduced gradients are the same on every replica.
  torch::NoGradGuard no_grad;
  std::vector<bool> skip(flat_->entries().size(), false);
  for (const auto& t : tied_) skip[t.entry] = !t.counts_in_norm;
  // Runs of adjacent entries of one layer (-1: outside the layers): one reduction per run.
  struct Run {
    int64_t layer, offset, numel;
  };
  std::vector<Run> runs;
  const auto& entries = flat_->entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (skip[i]) continue;
    const int64_t layer = LayerOfParameter(entries[i].name, n);
    if (!runs.empty() && runs.back().layer == layer &&
        runs.back().offset + runs.back().numel == entries[i].offset) {
      runs.back().numel += entries[i].numel;
    } else {
      runs.push_back({layer, entries[i].offset, entries[i].numel});
    }
  }
  if (runs.empty()) return;
  std::vector<torch::Tensor> sums;
  sums.reserve(runs.size());
  for (const Run& r : runs) {
    sums.push_back(flat_->grads().narrow(0, r.offset, r.numel).pow(2).sum(torch::kDouble));
  }
  const torch::Tensor host = torch::stack(sums).cpu();  // One wait for the device.
  auto h = host.accessor<double, 1>();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].layer < 0) {
      other_grad_sumsq_ += h[i];
    } else {
      layer_grad_sumsq_[runs[i].layer] += h[i];
    }
  }
}

absl::StatusOr<LayerDiagnostics> PipelineEngine::Diagnose(const MicroBatch& batch) {
  const auto& c = options_.model;
  const int64_t n = c.encoder_layers();
  const int64_t layers = n + c.decoder_layers();
  // [ln sum of squares x layers][ln token count x layers][grad sum of squares x layers][other]
  torch::Tensor value = torch::zeros({3 * layers + 1}, torch::kDouble);
  auto v = value.accessor<double, 1>();
  if (replica_ == 0) {
    torch::NoGradGuard no_grad;
    auto weight = [&](const torch::Tensor& tokens) {
      return tokens.defined() && tokens.dim() == 2 ? tokens.ne(c.pad_id()).to(torch::kFloat)
                                                   : torch::Tensor();
    };
    const torch::Tensor enc_weight = weight(batch.src);
    const torch::Tensor dec_weight = weight(batch.tgt_out);
    const double enc_tokens = enc_weight.defined() ? enc_weight.sum().item<double>() : 0.0;
    const double dec_tokens = dec_weight.defined() ? dec_weight.sum().item<double>() : 0.0;
    std::map<int64_t, model::LnInputRecorder> recorders;
    std::vector<std::pair<int64_t, torch::nn::Module*>> attached;
    for (const auto& item : model_->named_modules()) {
      const int64_t layer = LayerOfModule(item.key(), n);
      if (layer < 0) continue;
      model::LnInputRecorder& r = recorders[layer];
      r.token_weight = layer < n ? enc_weight : dec_weight;
      if (auto* enc = dynamic_cast<model::EncoderLayerImpl*>(item.value().get())) {
        enc->set_ln_input_recorder(&r);
      } else if (auto* dec = dynamic_cast<model::DecoderLayerImpl*>(item.value().get())) {
        dec->set_ln_input_recorder(&r);
      } else {
        continue;
      }
      attached.emplace_back(layer, item.value().get());
    }
    auto detach_all = [&] {
      for (auto& [layer, module] : attached) {
        if (auto* enc = dynamic_cast<model::EncoderLayerImpl*>(module)) {
          enc->set_ln_input_recorder(nullptr);
        } else if (auto* dec = dynamic_cast<model::DecoderLayerImpl*>(module)) {
          dec->set_ln_input_recorder(nullptr);
        }
      }
    };
    const bool was_training = model_->is_training();
    model_->eval();
    auto hidden = ForwardOnly(batch, -(++eval_calls_), nullptr, false);
    model_->train(was_training);
    detach_all();
    if (!hidden.ok()) return hidden.status();
    for (auto& [layer, r] : recorders) {
      if (r.inputs == 0 || !r.sumsq.defined()) continue;
      v[layer] = r.sumsq.item<double>();
      v[layers + layer] = static_cast<double>(r.inputs) * (layer < n ? enc_tokens : dec_tokens);
    }
    for (size_t l = 0; l < layer_grad_sumsq_.size() && static_cast<int64_t>(l) < layers; ++l) {
      v[2 * layers + l] = layer_grad_sumsq_[l];
    }
    // The "other" parameters of every stage; their holders add up over the stages.
    v[3 * layers] = other_grad_sumsq_;
  } else {
    ++eval_calls_;
  }
  measure_layer_grads_ = false;
  layer_grad_sumsq_.clear();
  other_grad_sumsq_ = 0.0;
  if (auto s = world_->AllReduceSum(value); !s.ok()) return s;
  LayerDiagnostics out;
  for (int64_t l = 0; l < layers; ++l) {
    const double count = v[layers + l];
    out.ln_input_norm.push_back(count > 0 ? std::sqrt(v[l] / count) : 0.0);
    out.grad_norm.push_back(std::sqrt(std::max(0.0, v[2 * layers + l])));
  }
  out.other_grad_norm = std::sqrt(std::max(0.0, v[3 * layers]));
  return out;
}

}  // namespace deepnet::pipeline
