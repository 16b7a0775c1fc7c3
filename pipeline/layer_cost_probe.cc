#include "pipeline/layer_cost_probe.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "model/deepnet.h"
#include "model/loss.h"

namespace deepnet::pipeline {
namespace {

// Median wall time of `repeats` runs of `step` after one warm-up run.
double MedianSeconds(int repeats, const std::function<void()>& step) {
  step();
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

LayerCostModel MeasureLayerCosts(const model::DeepNetConfig& config,
                                 const LayerCostProbeOptions& o) {
  LayerCostModel costs = EstimateLayerCosts(config, o.source, o.target);
  const bool has_encoder = config.encoder_layers() > 0, has_decoder = config.decoder_layers() > 0;
  // One layer of each stack present: the same modules, shapes and ops as the real model.
  model::DeepNetConfig probe_config = config;
  probe_config.encoder_layers(has_encoder ? 1 : 0).decoder_layers(has_decoder ? 1 : 0).dropout(0.0);
  probe_config.max_positions(std::max({config.max_positions(), o.source, o.target}));
  model::DeepNet probe(probe_config);
  probe->to(o.device);
  probe->train();
  const int64_t d = config.d_model(), v = config.vocab_size();
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(o.device);
  const auto i64 = torch::TensorOptions().dtype(torch::kLong).device(o.device);
  torch::Tensor src = torch::randint(4, std::max<int64_t>(v, 5), {o.batch, o.source}, i64);
  torch::Tensor tgt = torch::randint(4, std::max<int64_t>(v, 5), {o.batch, o.target}, i64);
  model::EncoderOutput enc;
  enc.padding_mask = probe->padding_mask(src);

  double encoder_s = 0.0, decoder_s = 0.0;
  if (has_encoder) {
    encoder_s = MedianSeconds(o.repeats, [&] {
      torch::Tensor x = torch::randn({o.batch, o.source, d}, f32).requires_grad_(true);
      probe->run_encoder_layers(x, enc.padding_mask, 0, 1).sum().backward();
    });
  }
  if (has_decoder) {
    decoder_s = MedianSeconds(o.repeats, [&] {
      torch::Tensor x = torch::randn({o.batch, o.target, d}, f32).requires_grad_(true);
      model::EncoderOutput e;
      if (has_encoder) {
        e.out = torch::randn({o.batch, o.source, d}, f32).requires_grad_(true);
        e.padding_mask = enc.padding_mask;
      }
      probe->run_decoder_layers(x, e, 0, 1).sum().backward();
    });
  }
  const double output_s = MedianSeconds(o.repeats, [&] {
    torch::Tensor h =
        torch::randn({o.batch, has_decoder ? o.target : o.source, d}, f32).requires_grad_(true);
    auto loss = model::LabelSmoothedCrossEntropy(probe->output_logits(h), has_decoder ? tgt : src,
                                                 0.1, config.pad_id());
    loss.loss.backward();
  });
  // Embeddings: the lookup is cheap, but its backward fills a dense [vocab, d] gradient.
  double source_s = 0.0, target_s = 0.0;
  if (has_encoder) {
    source_s = MedianSeconds(o.repeats, [&] { probe->embed_source(src).sum().backward(); });
  }
  if (has_decoder) {
    target_s = MedianSeconds(o.repeats, [&] { probe->embed_target(tgt, 0).sum().backward(); });
  }
  const double unit = has_encoder ? encoder_s : decoder_s;
  if (!(unit > 0.0)) return costs;  // A clock that did not move: keep the FLOP model.
  const double flop_unit = has_encoder ? costs.encoder_layer : costs.decoder_layer;
  costs.encoder_layer = has_encoder ? 1.0 : costs.encoder_layer / flop_unit;
  costs.decoder_layer = has_decoder ? decoder_s / unit : costs.decoder_layer / flop_unit;
  costs.source_embedding = has_encoder ? source_s / unit : 0.0;
  costs.target_embedding = has_decoder ? target_s / unit : 0.0;
  costs.output_layer = output_s / unit;
  return costs;
}

}  // namespace deepnet::pipeline
