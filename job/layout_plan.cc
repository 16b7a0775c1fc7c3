#include "job/layout_plan.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace deepnet::job {
namespace {

// 2 per weight per token, plus 2 x (QK^T + AV) = 4 d per attended position and attention.
double LayerFlops(double matmul_weights, double d, double contexts) {
  return 2.0 * matmul_weights + 4.0 * d * contexts;
}

}  // namespace

double ForwardFlops(const model::DeepNetConfig& c, int64_t begin, int64_t end, int64_t tokens,
                    int64_t sequence) {
  const int64_t n = std::max<int64_t>(c.encoder_layers(), 0);
  const int64_t m = std::max<int64_t>(c.decoder_layers(), 0);
  begin = std::clamp<int64_t>(begin, 0, n + m);
  end = std::clamp<int64_t>(end, begin, n + m);
  const double d = static_cast<double>(c.d_model()), f = static_cast<double>(c.ffn_dim());
  const double s = static_cast<double>(std::max<int64_t>(sequence, 1));
  const double attn = 4.0 * d * d, ffn = 2.0 * d * f;
  const double enc_layer = LayerFlops(attn + ffn, d, s);
  const double dec_layer = n > 0 ? LayerFlops(2.0 * attn + ffn, d, (s + 1.0) / 2.0 + s)
                                 : LayerFlops(attn + ffn, d, (s + 1.0) / 2.0);
  const int64_t enc = std::max<int64_t>(0, std::min(end, n) - begin);
  const int64_t dec = std::max<int64_t>(0, end - std::max(begin, n));
  double per_token = static_cast<double>(enc) * enc_layer + static_cast<double>(dec) * dec_layer;
  if (end == n + m && end > begin) per_token += 2.0 * d * static_cast<double>(c.vocab_size());
  return per_token * static_cast<double>(std::max<int64_t>(tokens, 0));
}

LayoutPlan PlanLayout(const model::DeepNetConfig& c, const PlanOptions& o) {
  LayoutPlan plan;
  plan.memory = EstimateMemory(c, o.layout);
  plan.fits = o.gpu_memory_bytes <= 0 || plan.memory.largest.total_bytes <= o.gpu_memory_bytes;
  const int64_t layers =
      std::max<int64_t>(c.encoder_layers(), 0) + std::max<int64_t>(c.decoder_layers(), 0);
  const int64_t stages =
      std::clamp<int64_t>(o.layout.pipeline_stages, 1, std::max<int64_t>(layers, 1));
  const int64_t micro = std::max<int64_t>(o.layout.micro_batches, 1);
  const int64_t replicas = std::max<int64_t>(o.replicas, 1);
  const int64_t tokens = std::max<int64_t>(o.layout.tokens_per_micro_batch, 1);
  const int64_t seq = o.layout.sequence_length;
  // Stage s holds global layers [floor(sL/P), floor((s+1)L/P)), as EstimateMemory assumes.
  int64_t slow_begin = 0, slow_end = layers;
  for (int64_t s = 0; s < stages; ++s) {
    const int64_t begin = static_cast<int64_t>(static_cast<__int128>(layers) * s / stages);
    const int64_t end = static_cast<int64_t>(static_cast<__int128>(layers) * (s + 1) / stages);
    const double flops = 3.0 * ForwardFlops(c, begin, end, tokens, seq);
    if (flops > plan.stage_flops_per_micro_batch) {
      plan.stage_flops_per_micro_batch = flops;
      plan.slowest_stage = s;
      slow_begin = begin;
      slow_end = end;
    }
  }
  plan.model_flops_per_micro_batch = 3.0 * ForwardFlops(c, 0, layers, tokens, seq);
  plan.bubble_fraction = static_cast<double>(stages - 1) / static_cast<double>(micro + stages - 1);
  plan.tokens_per_step = micro * replicas * tokens;
  if (o.peak_tflops <= 0.0 || o.efficiency <= 0.0) return plan;

  const double rate = o.peak_tflops * 1e12 * o.efficiency;
  plan.stage_s_per_micro_batch = plan.stage_flops_per_micro_batch / rate;
  plan.pipeline_s = static_cast<double>(micro + stages - 1) * plan.stage_s_per_micro_batch;
  if (stages > 1 && o.p2p_gbps > 0.0) {
    // What crosses a boundary per micro-batch: the hidden state [tokens, d], plus the encoder
    // output beside it once the decoder has begun, at the precision; an inner stage receives
    // and sends one of each (activations forward, gradients back).
    const int64_t n = std::max<int64_t>(c.encoder_layers(), 0);
    const double streams = (slow_end > n && n > 0) ? 2.0 : 1.0;
    const double bytes = streams * static_cast<double>(tokens) * static_cast<double>(c.d_model()) *
                         static_cast<double>(BytesPerElement(o.layout.precision));
    const double transfers = (slow_begin > 0 ? 1.0 : 0.0) + (slow_end < layers ? 1.0 : 0.0);
    plan.p2p_s = 2.0 * transfers * static_cast<double>(micro) * bytes / (o.p2p_gbps * 1e9);
  }
  if (replicas > 1 && o.allreduce_gbps > 0.0) {
    const double grad = static_cast<double>(plan.memory.largest.gradient_bytes);
    plan.allreduce_s = 2.0 * static_cast<double>(replicas - 1) / static_cast<double>(replicas) *
                       grad / (o.allreduce_gbps * 1e9);
  }
  plan.step_s = plan.pipeline_s + plan.p2p_s + plan.allreduce_s;
  plan.tokens_per_s = static_cast<double>(plan.tokens_per_step) / plan.step_s;
  plan.tflops_per_gpu = plan.model_flops_per_micro_batch * static_cast<double>(micro * replicas) /
                        plan.step_s / static_cast<double>(stages * replicas) / 1e12;
  return plan;
}

std::string FormatPlan(const LayoutPlan& p, const PlanOptions& o, const std::string& format) {
  const StageMemory& m = p.memory.largest;
  const bool timed = p.step_s > 0.0;
  if (format == "tsv") {
    std::string out;
    auto row = [&out](const std::string& key, const std::string& value) {
      absl::StrAppend(&out, key, "\t", value, "\n");
    };
    row("precision", std::string(ToString(o.layout.precision)));
    row("stages", absl::StrCat(p.memory.stages));
    row("replicas", absl::StrCat(o.replicas));
    row("micro_batches", absl::StrCat(o.layout.micro_batches));
    row("tokens_per_micro_batch", absl::StrCat(o.layout.tokens_per_micro_batch));
    row("memory_bytes", absl::StrCat(m.total_bytes));
    row("memory_stage", absl::StrCat(m.stage));
    row("parameter_bytes", absl::StrCat(m.parameter_bytes));
    row("gradient_bytes", absl::StrCat(m.gradient_bytes));
    row("optimizer_bytes", absl::StrCat(m.optimizer_bytes));
    row("activation_bytes", absl::StrCat(m.activation_bytes));
    row("gpu_memory_bytes", absl::StrCat(o.gpu_memory_bytes));
    row("fits", o.gpu_memory_bytes > 0 ? (p.fits ? "yes" : "no") : "unknown");
    row("model_flops_per_micro_batch", absl::StrFormat("%.6g", p.model_flops_per_micro_batch));
    row("stage_flops_per_micro_batch", absl::StrFormat("%.6g", p.stage_flops_per_micro_batch));
    row("bubble_fraction", absl::StrFormat("%.4f", p.bubble_fraction));
    row("step_s", absl::StrFormat("%.6g", p.step_s));
    row("pipeline_s", absl::StrFormat("%.6g", p.pipeline_s));
    row("p2p_s", absl::StrFormat("%.6g", p.p2p_s));
    row("allreduce_s", absl::StrFormat("%.6g", p.allreduce_s));
    row("tokens_per_step", absl::StrCat(p.tokens_per_step));
    row("tokens_per_s", absl::StrFormat("%.6g", p.tokens_per_s));
    row("tflops_per_gpu", absl::StrFormat("%.6g", p.tflops_per_gpu));
    return out;
  }
  std::string out =
      absl::StrCat("layout: ", p.memory.stages, " stage(s) x ", o.replicas,
                   " replica(s) = ", p.memory.stages * o.replicas, " GPUs, ",
                   std::string(ToString(o.layout.precision)), ", ", o.layout.micro_batches,
                   " micro-batch(es) of ", o.layout.tokens_per_micro_batch, " tokens per side\n");
  absl::StrAppend(&out, "memory per GPU (largest: stage ", m.stage, ", ", m.layers,
                  " layers): ", FormatBytes(m.total_bytes), " = parameters ",
                  FormatBytes(m.parameter_bytes), " + gradients ", FormatBytes(m.gradient_bytes),
                  " + optimizer ", FormatBytes(m.optimizer_bytes), " + activations ",
                  FormatBytes(m.activation_bytes), " (", m.live_micro_batches,
                  " micro-batch(es) live) + position table ", FormatBytes(m.buffer_bytes), "\n");
  if (o.gpu_memory_bytes > 0) {
    absl::StrAppend(
        &out, "fits ", FormatBytes(o.gpu_memory_bytes), " per GPU: ", p.fits ? "yes" : "NO",
        absl::StrFormat(" (%.0f%% of it)\n", 100.0 * static_cast<double>(m.total_bytes) /
                                                 static_cast<double>(o.gpu_memory_bytes)));
  }
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "training FLOPs per micro-batch: %.3g (model), %.3g (slowest stage %d); bubble %.1f%%\n",
          p.model_flops_per_micro_batch, p.stage_flops_per_micro_batch,
          static_cast<int>(p.slowest_stage), 100.0 * p.bubble_fraction));
  if (timed) {
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "step time: %.3f s = pipeline %.3f s (%.1f TFLOP/s x %.0f%% per GPU) + stage transfers "
            "%.3f s + all-reduce %.3f s\n",
            p.step_s, p.pipeline_s, o.peak_tflops, 100.0 * o.efficiency, p.p2p_s, p.allreduce_s));
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "throughput: %lld target tokens per step, %.0f tokens/s, %.1f useful TFLOP/s per GPU\n",
            static_cast<long long>(p.tokens_per_step), p.tokens_per_s, p.tflops_per_gpu));
  } else {
    absl::StrAppend(&out, "step time: give --tflops (deepnet_bench_gpu measures it)\n");
  }
  return out;
}

}  // namespace deepnet::job
