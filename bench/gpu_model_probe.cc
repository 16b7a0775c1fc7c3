// First CUDA run of deepnet_model, built by bench/gpu_model_probe.sh against a PyTorch 2.x
// LibTorch with CUDA (not part of the CMake build, which has no CUDA LibTorch here). Prints one
// line per measurement: CPU-vs-CUDA agreement of one training step's loss and gradient norm,
// then fp32 and pure-bf16 (weights and activations in bf16, no fp32 master copy) step times.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "model/deepnet.h"
#include "model/initialization.h"
#include "model/loss.h"

using deepnet::model::DeepNet;
using deepnet::model::DeepNetConfig;

namespace {

struct Batch {
  torch::Tensor src, tgt_in, tgt_out;
};

Batch MakeBatch(int64_t b, int64_t t, int64_t vocab, torch::Device device) {
  torch::manual_seed(7);
  Batch batch;
  batch.src = torch::randint(4, vocab, {b, t}, torch::kLong).to(device);
  auto tgt = torch::randint(4, vocab, {b, t + 1}, torch::kLong).to(device);
  batch.tgt_in = tgt.narrow(1, 0, t).contiguous();
  batch.tgt_out = tgt.narrow(1, 1, t).contiguous();
  return batch;
}

double Step(DeepNet& model, const Batch& batch, int64_t vocab) {
  auto logits = model->forward(batch.src, batch.tgt_in);
  auto out = deepnet::model::LabelSmoothedCrossEntropy(logits, batch.tgt_out, 0.1, 0);
  out.loss.backward();
  return out.nll.item<double>() / static_cast<double>(out.tokens);
}

double GradNorm(DeepNet& model) {
  double sum = 0;
  for (auto& p : model->parameters()) {
    if (p.grad().defined()) sum += p.grad().to(torch::kCPU).pow(2).sum().item<double>();
  }
  return std::sqrt(sum);
}

void Compare() {
  const int64_t vocab = 1000;
  DeepNetConfig c;
  c.encoder_layers(2).decoder_layers(2).d_model(64).heads(4).ffn_dim(256).vocab_size(vocab)
      .dropout(0.0).max_positions(64);
  double nll[2], grad[2];
  for (int i = 0; i < 2; ++i) {
    torch::Device device = i == 0 ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, 0);
    DeepNet model(c);
    deepnet::model::InitializeParameters(*model, 1);
    model->to(device);
    Batch batch = MakeBatch(8, 20, vocab, device);
    nll[i] = Step(model, batch, vocab);
    grad[i] = GradNorm(model);
  }
  std::printf("compare 2L-2L d64: nll cpu %.6f cuda %.6f | grad norm cpu %.6f cuda %.6f\n", nll[0],
              nll[1], grad[0], grad[1]);
}

void Time(int64_t layers, int64_t d, int64_t b, int64_t t, bool bf16) {
  const int64_t vocab = 32000;
  DeepNetConfig c;
  c.encoder_layers(layers).decoder_layers(layers).d_model(d).heads(d / 64).ffn_dim(4 * d)
      .vocab_size(vocab).dropout(0.0).max_positions(1024);
  torch::Device device(torch::kCUDA, 0);
  DeepNet model(c);
  deepnet::model::InitializeParameters(*model, 1);
  model->to(device);
  if (bf16) model->to(torch::kBFloat16);
  int64_t params = 0;
  for (auto& p : model->parameters()) params += p.numel();
  Batch batch = MakeBatch(b, t, vocab, device);
  torch::cuda::synchronize();
  for (int i = 0; i < 2; ++i) { model->zero_grad(); Step(model, batch, vocab); }
  torch::cuda::synchronize();
  const int steps = 5;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) { model->zero_grad(); Step(model, batch, vocab); }
  torch::cuda::synchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens = static_cast<double>(steps * b * t * 2);  // source + target
  const double tflops = 6.0 * static_cast<double>(params) * tokens / 2 / s / 1e12;
  std::printf("time %ldL-%ldL d%ld %s batch %ldx%ld: %.1f ms/step, %.0f tokens/s (src+tgt), ~%.1f TFLOP/s (6*params*tgt tokens), %.0f M params\n",
              layers, layers, d, bf16 ? "bf16(pure)" : "fp32", b, t, 1e3 * s / steps, tokens / s,
              tflops, params / 1e6);
}

}  // namespace

int main() {
  std::printf("torch %s, cuda available %d, devices %ld\n", TORCH_VERSION,
              torch::cuda::is_available(), static_cast<long>(torch::cuda::device_count()));
  if (!torch::cuda::is_available()) return 1;
  try { Compare(); } catch (const std::exception& e) { std::printf("compare FAILED: %s\n", e.what()); }
  for (bool bf16 : {false, true}) {
    try { Time(6, 1024, 16, 256, bf16); } catch (const std::exception& e) { std::printf("time 6L FAILED: %.300s\n", e.what()); }
    try { Time(18, 1024, 16, 256, bf16); } catch (const std::exception& e) { std::printf("time 18L FAILED: %.300s\n", e.what()); }
  }
  return 0;
}
