// PipelineEngine's probe (||dF||, ||F0||, the logits) and per-layer diagnostics against direct
// computations on a tiny model.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/loopback_communicator.h"
#include "pipeline/pipeline_engine.h"

namespace deepnet::pipeline {
namespace {

constexpr int64_t kPad = 0;

EngineOptions Options(model::NormVariant norm = model::NormVariant::kDeepNorm) {
  EngineOptions o;
  o.model = model::DeepNetConfig()
                .encoder_layers(2)
                .decoder_layers(3)
                .d_model(16)
                .heads(2)
                .ffn_dim(32)
                .vocab_size(30)
                .dropout(0.0)
                .norm(norm)
                .pad_id(kPad)
                .max_positions(32);
  o.seed = 5;
  return o;
}

// Tokens in [3, 30) with padding at the end of some rows.
MicroBatch PaddedBatch(int64_t seed) {
  torch::manual_seed(seed);
  MicroBatch b;
  b.src = torch::randint(3, 30, {3, 7}, torch::kLong);
  b.tgt_in = torch::randint(3, 30, {3, 5}, torch::kLong);
  b.tgt_out = torch::randint(3, 30, {3, 5}, torch::kLong);
  b.src.index_put_({1, torch::indexing::Slice(4)}, kPad);
  b.src.index_put_({2, torch::indexing::Slice(6)}, kPad);
  b.tgt_in.index_put_({1, torch::indexing::Slice(3)}, kPad);
  b.tgt_out.index_put_({1, torch::indexing::Slice(3)}, kPad);
  b.src_tokens = b.src.ne(kPad).sum().item<int64_t>();
  b.tgt_tokens = b.tgt_out.ne(kPad).sum().item<int64_t>();
  return b;
}

template <typename Layer>
Layer* LayerNamed(model::DeepNetImpl& m, const std::string& name) {
  for (const auto& item : m.named_modules()) {
    if (item.key() == name) return dynamic_cast<Layer*>(item.value().get());
  }
  return nullptr;
}

// Sum over non-padding tokens of the squared per-token L2 norm.
double TokenSumsq(const torch::Tensor& y, const torch::Tensor& tokens) {
  return (y.pow(2).sum(-1) * tokens.ne(kPad).to(torch::kFloat)).sum().item<double>();
}

torch::Tensor Ffn(const torch::Tensor& h, torch::nn::Linear& fc1, torch::nn::Linear& fc2) {
  return fc2(torch::relu(fc1(h)));
}

TEST(PipelineDiagnosticsTest, ProbeScalingTheOutputByThreeGivesRelativeUpdateTwo) {
  comm::LoopbackCommunicator world;
  auto engine = PipelineEngine::Create(Options(), &world);
  ASSERT_TRUE(engine.ok()) << engine.status();
  PipelineEngine& e = **engine;
  const MicroBatch probe = PaddedBatch(1);
  auto first = e.Probe(probe);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->update_norm, 0.0);
  EXPECT_TRUE(first->has_logits);

  // ||F0|| directly: the decoder output with padding rows zeroed.
  torch::NoGradGuard no_grad;
  model::DeepNetImpl& m = e.model();
  m.eval();
  torch::Tensor pad = probe.tgt_out.eq(kPad).unsqueeze(-1);
  torch::Tensor f0 = m.decode(probe.tgt_in, m.encode(probe.src)).masked_fill(pad, 0.0);
  torch::Tensor logits0 = m.output_logits(f0);
  EXPECT_NEAR(first->f0_norm, f0.norm().item<double>(), 1e-5 * first->f0_norm);
  EXPECT_NEAR(first->logits_f0_norm, logits0.norm().item<double>(), 1e-5 * first->logits_f0_norm);

  // Post-LN output F = LN(y) * w + b of the last layer: w, b times 3 make F = 3 F0, so
  // ||dF|| = 2 ||F0||, and the logits (F times the output embedding) scale the same way.
  auto* last = LayerNamed<model::DecoderLayerImpl>(m, "decoder.layers.2");
  ASSERT_NE(last, nullptr);
  last->final_layer_norm->weight.mul_(3.0);
  last->final_layer_norm->bias.mul_(3.0);
  auto second = e.Probe(probe);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NEAR(second->f0_norm, first->f0_norm, 1e-12);
  EXPECT_NEAR(second->update_norm / second->f0_norm, 2.0, 1e-5);
  EXPECT_NEAR(second->logits_update_norm / second->logits_f0_norm, 2.0, 1e-5);
  // Unchanged parameters: no update.
  last->final_layer_norm->weight.div_(3.0);
  last->final_layer_norm->bias.div_(3.0);
  auto third = e.Probe(probe);
  ASSERT_TRUE(third.ok());
  EXPECT_NEAR(third->update_norm, 0.0, 1e-5 * first->f0_norm);
  EXPECT_NEAR(third->logits_update_norm, 0.0, 1e-5 * first->logits_f0_norm);

  // Another probe shape than the reference's is an error, not a crash.
  MicroBatch other = PaddedBatch(2);
  other.tgt_in = other.tgt_in.narrow(1, 0, 4);
  other.tgt_out = other.tgt_out.narrow(1, 0, 4);
  auto mismatch = e.Probe(other);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(std::string(mismatch.status().message()).find("probe batch"), std::string::npos);
}

void CheckLayerStatistics(model::NormVariant norm) {
  comm::LoopbackCommunicator world;
  EngineOptions options = Options(norm);
  auto engine = PipelineEngine::Create(options, &world);
  ASSERT_TRUE(engine.ok()) << engine.status();
  PipelineEngine& e = **engine;
  e.MeasureLayerGradients();
  auto totals =
      e.TrainStep({PaddedBatch(3), PaddedBatch(4)}, 1, 1e-3);  // No clipping: grads stay raw.
  ASSERT_TRUE(totals.ok()) << totals.status();
  const MicroBatch probe = PaddedBatch(5);
  auto d = e.Diagnose(probe);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->ln_input_norm.size(), 5u);
  ASSERT_EQ(d->grad_norm.size(), 5u);

  // Gradient norms: the layer's parameters, straight from their .grad().
  model::DeepNetImpl& m = e.model();
  std::vector<double> sumsq(5, 0.0);
  double other = 0.0;
  for (const auto& p : m.named_parameters()) {
    const double s = p.value().grad().pow(2).sum().item<double>();
    const int64_t layer = LayerOfParameter(p.key(), 2);
    (layer < 0 ? other : sumsq[layer]) += s;
  }
  for (int l = 0; l < 5; ++l) {
    EXPECT_NEAR(d->grad_norm[l], std::sqrt(sumsq[l]), 1e-5 * std::sqrt(sumsq[l])) << l;
    EXPECT_GT(d->grad_norm[l], 0.0);
  }
  EXPECT_NEAR(d->other_grad_norm, std::sqrt(other), 1e-5 * std::sqrt(other));
  // Layers and the rest together are the step's global gradient norm.
  double all = d->other_grad_norm * d->other_grad_norm;
  for (double g : d->grad_norm) all += g * g;
  EXPECT_NEAR(std::sqrt(all), totals->grad_norm, 1e-5 * totals->grad_norm);

  // LayerNorm inputs, layer by layer, in eval mode: RMS over the layer's residual LayerNorms
  // and the non-padding tokens of the per-token norm of alpha * x + G(x) (Pre-LN: of x).
  torch::NoGradGuard no_grad;
  m.eval();
  const bool pre = norm == model::NormVariant::kPreLn;
  auto residual = [&](const torch::Tensor& x, torch::nn::LayerNorm& ln, double alpha,
                      const std::function<torch::Tensor(const torch::Tensor&)>& g,
                      const torch::Tensor& tokens, double* sum) {
    if (pre) {
      *sum += TokenSumsq(x, tokens);
      return torch::Tensor(x + g(ln(x)));
    }
    torch::Tensor y = alpha * x + g(x);
    *sum += TokenSumsq(y, tokens);
    return ln(y);
  };
  const double src_tokens = probe.src.ne(kPad).sum().item<double>();
  const double tgt_tokens = probe.tgt_out.ne(kPad).sum().item<double>();
  const torch::Tensor src_mask = m.padding_mask(probe.src);
  torch::Tensor x = m.embed_source(probe.src);
  for (int l = 0; l < 2; ++l) {
    auto* layer = LayerNamed<model::EncoderLayerImpl>(m, "encoder.layers." + std::to_string(l));
    ASSERT_NE(layer, nullptr);
    const double alpha = layer->options.residual_alpha();
    if (norm == model::NormVariant::kDeepNorm) {
      EXPECT_GT(alpha, 1.0);
    }
    const torch::Tensor expected_out = layer->forward(x, src_mask);
    double sum = 0.0;
    torch::Tensor h = residual(
        x, layer->self_attn_layer_norm, alpha,
        [&](const torch::Tensor& in) { return layer->self_attn(in, in, src_mask, false); },
        probe.src, &sum);
    h = residual(
        h, layer->final_layer_norm, alpha,
        [&](const torch::Tensor& in) { return Ffn(in, layer->fc1, layer->fc2); }, probe.src, &sum);
    EXPECT_TRUE(torch::allclose(h, expected_out, 1e-4, 1e-5)) << "encoder " << l;
    const double want = std::sqrt(sum / (2 * src_tokens));
    EXPECT_NEAR(d->ln_input_norm[l], want, 1e-5 * want) << "encoder " << l;
    x = h;
  }
  const model::EncoderOutput enc{m.finish_encoder(x), src_mask, torch::Tensor()};
  torch::Tensor y = m.embed_target(probe.tgt_in, 0);
  for (int l = 0; l < 3; ++l) {
    auto* layer = LayerNamed<model::DecoderLayerImpl>(m, "decoder.layers." + std::to_string(l));
    ASSERT_NE(layer, nullptr);
    const double alpha = layer->options.residual_alpha();
    const torch::Tensor expected_out = layer->forward(y, enc.out, enc.padding_mask);
    double sum = 0.0;
    torch::Tensor h = residual(
        y, layer->self_attn_layer_norm, alpha,
        [&](const torch::Tensor& in) { return layer->self_attn(in, in, torch::Tensor(), true); },
        probe.tgt_out, &sum);
    h = residual(
        h, layer->encoder_attn_layer_norm, alpha,
        [&](const torch::Tensor& in) {
          return layer->encoder_attn(in, enc.out, enc.padding_mask, false);
        },
        probe.tgt_out, &sum);
    h = residual(
        h, layer->final_layer_norm, alpha,
        [&](const torch::Tensor& in) { return Ffn(in, layer->fc1, layer->fc2); }, probe.tgt_out,
        &sum);
    EXPECT_TRUE(torch::allclose(h, expected_out, 1e-4, 1e-5)) << "decoder " << l;
    const double want = std::sqrt(sum / (3 * tgt_tokens));
    EXPECT_NEAR(d->ln_input_norm[2 + l], want, 1e-5 * want) << "decoder " << l;
    y = h;
  }
}

TEST(PipelineDiagnosticsTest, DeepNormLayerStatisticsMatchADirectComputation) {
  CheckLayerStatistics(model::NormVariant::kDeepNorm);
}

TEST(PipelineDiagnosticsTest, PreLnLayerStatisticsMatchADirectComputation) {
  CheckLayerStatistics(model::NormVariant::kPreLn);
}

TEST(PipelineDiagnosticsTest, StepsWithoutMeasureLeaveNoGradientNormsAndNoRecorders) {
  comm::LoopbackCommunicator world;
  auto engine = PipelineEngine::Create(Options(), &world);
  ASSERT_TRUE(engine.ok());
  PipelineEngine& e = **engine;
  ASSERT_TRUE(e.TrainStep({PaddedBatch(3)}, 1, 1e-3).ok());
  auto d = e.Diagnose(PaddedBatch(5));
  ASSERT_TRUE(d.ok());
  for (double g : d->grad_norm) EXPECT_EQ(g, 0.0);
  for (double n : d->ln_input_norm) EXPECT_GT(n, 0.0);
  // The next step after a diagnosis trains exactly as without it (recorders detached).
  comm::LoopbackCommunicator world2;
  auto plain = PipelineEngine::Create(Options(), &world2);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE((*plain)->TrainStep({PaddedBatch(3)}, 1, 1e-3).ok());
  auto a = e.TrainStep({PaddedBatch(6)}, 2, 1e-3);
  auto b = (*plain)->TrainStep({PaddedBatch(6)}, 2, 1e-3);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->loss_sum, b->loss_sum);
  EXPECT_EQ(a->grad_norm, b->grad_norm);
}

}  // namespace
}  // namespace deepnet::pipeline
