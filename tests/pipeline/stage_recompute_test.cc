// runtime.recompute: layer (pipeline/layer_recompute.h through StageCompute): the same bits as
// without recomputation, float32 on the CPU, with every kind of dropout on.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ostream>
#include <string>
#include <vector>

#include "model/attention.h"
#include "model/deepnet.h"
#include "model/initialization.h"
#include "model/kernels/fused_kernels.h"
#include "pipeline/layer_recompute.h"
#include "pipeline/stage_compute.h"

namespace deepnet::pipeline {
namespace {

model::DeepNetConfig SmallConfig(model::NormVariant norm, int64_t encoder_layers) {
  return model::DeepNetConfig()
      .encoder_layers(encoder_layers)
      .decoder_layers(3)
      .d_model(16)
      .heads(2)
      .ffn_dim(32)
      .vocab_size(23)
      .pad_id(1)
      .dropout(0.2)
      .attention_dropout(0.15)
      .activation_dropout(0.1)
      .norm(norm);
}

MicroBatch RandomBatch(int64_t b, int64_t s, int64_t t) {
  MicroBatch mb;
  mb.src = torch::randint(2, 23, {b, s}, torch::kLong);
  mb.src[0].narrow(0, s - 2, 2).fill_(1);  // Padding at the end of one source.
  mb.tgt_in = torch::randint(2, 23, {b, t}, torch::kLong);
  mb.tgt_out = torch::randint(2, 23, {b, t}, torch::kLong);
  mb.tgt_out[1][t - 1] = 1;
  mb.src_tokens = mb.src.ne(1).sum().item<int64_t>();
  mb.tgt_tokens = mb.tgt_out.ne(1).sum().item<int64_t>();
  return mb;
}

struct StepResult {
  std::vector<torch::Tensor> grads;  // Parameter gradients, in parameter order.
  std::vector<torch::Tensor> input_grads;
  double loss = 0.0;
  torch::Tensor next_draw;  // The generator's next value after the step.
  std::vector<int> segments_done;
};

// Two micro-batches, forwards interleaved with backwards as 1F1B does (F0 F1 B0 F2 B1 B2), so
// that recomputation replays masks while the generator has moved on.
StepResult RunStep(model::DeepNetImpl* m, int64_t segments, bool recompute,
                   const std::vector<MicroBatch>& batches,
                   const std::vector<std::vector<torch::Tensor>>& inputs,
                   const std::vector<std::vector<torch::Tensor>>& output_grads,
                   bool bf16_autocast = false) {
  for (auto& p : m->parameters()) p.mutable_grad() = torch::Tensor();
  torch::manual_seed(1234);
  StageCompute compute(m, segments, 0.1, recompute);
  compute.set_bf16_autocast(bf16_autocast, c10::DeviceType::CPU);
  StepResult r;
  LossSums sums;
  auto forward = [&](int i) { compute.Forward(i, batches[i], inputs[i], 1.0, &sums); };
  auto backward = [&](int i) {
    auto g = compute.Backward(i, output_grads[i], [&](int k) { r.segments_done.push_back(k); });
    for (auto& t : g) r.input_grads.push_back(t);
  };
  forward(0);
  forward(1);
  backward(0);
  forward(2);
  backward(1);
  backward(2);
  EXPECT_EQ(compute.live_micro_batches(), 0u);
  for (auto& p : m->parameters()) {
    r.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  }
  sums.Settle();
  r.loss = sums.loss;
  r.next_draw = torch::rand({4});
  return r;
}

void ExpectBitEqual(const StepResult& plain, const StepResult& recomputed,
                    const std::vector<std::string>& names) {
  EXPECT_EQ(plain.loss, recomputed.loss);
  EXPECT_TRUE(torch::equal(plain.next_draw, recomputed.next_draw))
      << "the generator ends where it would without recomputation";
  EXPECT_EQ(plain.segments_done, recomputed.segments_done);
  ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
  int with_grad = 0;
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    ASSERT_EQ(plain.grads[i].defined(), recomputed.grads[i].defined()) << names[i];
    if (!plain.grads[i].defined()) continue;
    ++with_grad;
    EXPECT_TRUE(torch::equal(plain.grads[i], recomputed.grads[i])) << names[i];
  }
  EXPECT_GT(with_grad, 0);
  ASSERT_EQ(plain.input_grads.size(), recomputed.input_grads.size());
  for (size_t i = 0; i < plain.input_grads.size(); ++i) {
    EXPECT_TRUE(torch::equal(plain.input_grads[i], recomputed.input_grads[i]))
        << "input gradient " << i;
  }
}

std::vector<std::string> Names(model::DeepNetImpl& m) {
  std::vector<std::string> names;
  for (const auto& p : m.named_parameters()) names.push_back(p.key());
  return names;
}

struct Variant {
  const char* name;
  model::NormVariant norm;
  int64_t encoder_layers;
  bool fused;
  model::AttentionBackend attention;
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class StageRecomputeTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    saved_fused_ = model::kernels::FusedKernelsEnabled();
    saved_attention_ = model::GetAttentionBackend();
    model::kernels::SetFusedKernelsEnabled(GetParam().fused);
    model::SetAttentionBackend(GetParam().attention);
  }
  void TearDown() override {
    model::kernels::SetFusedKernelsEnabled(saved_fused_);
    model::SetAttentionBackend(saved_attention_);
  }

 private:
  bool saved_fused_ = true;
  model::AttentionBackend saved_attention_ = model::AttentionBackend::kAuto;
};

TEST_P(StageRecomputeTest, WholeModelGradientsAreBitEqual) {
  const model::DeepNetConfig c = SmallConfig(GetParam().norm, GetParam().encoder_layers);
  model::DeepNet net(c);
  model::InitializeParameters(*net, 5);
  net->train();
  torch::manual_seed(99);
  std::vector<MicroBatch> batches{RandomBatch(3, 7, 6), RandomBatch(2, 5, 8), RandomBatch(3, 6, 6)};
  const std::vector<std::vector<torch::Tensor>> none(3);
  for (int64_t segments : {1, 2, 4}) {
    SCOPED_TRACE("segments " + std::to_string(segments));
    StepResult plain = RunStep(net.get(), segments, false, batches, none, none);
    StepResult recomputed = RunStep(net.get(), segments, true, batches, none, none);
    ExpectBitEqual(plain, recomputed, Names(*net));
  }
}

TEST_P(StageRecomputeTest, MiddleStageGradientsAreBitEqual) {
  // A stage holding the encoder's last layer and the decoder's first two: it receives the
  // encoder hidden state and sends the encoder output and the decoder hidden state.
  const model::DeepNetConfig c = SmallConfig(GetParam().norm, 2);
  model::ModelSlice slice;
  slice.encoder = {1, 2};
  slice.decoder = {0, 2};
  model::DeepNet net(c, slice);
  model::InitializeParameters(*net, 5);
  net->train();
  torch::manual_seed(99);
  std::vector<MicroBatch> batches{RandomBatch(3, 7, 6), RandomBatch(2, 5, 8), RandomBatch(3, 6, 6)};
  std::vector<std::vector<torch::Tensor>> inputs, output_grads;
  for (const auto& mb : batches) {
    const int64_t b = mb.src.size(0), s = mb.src.size(1), t = mb.tgt_in.size(1);
    inputs.push_back({torch::randn({b, s, 16})});
    output_grads.push_back({torch::randn({b, s, 16}), torch::randn({b, t, 16})});
  }
  for (int64_t segments : {1, 3}) {
    SCOPED_TRACE("segments " + std::to_string(segments));
    StepResult plain = RunStep(net.get(), segments, false, batches, inputs, output_grads);
    StepResult recomputed = RunStep(net.get(), segments, true, batches, inputs, output_grads);
    ExpectBitEqual(plain, recomputed, Names(*net));
  }
}

TEST_P(StageRecomputeTest, Bf16AutocastGradientsAreBitEqual) {
  // runtime.precision: bf16 on the CPU: StageCompute's autocast covers the recomputation too.
  const model::DeepNetConfig c = SmallConfig(GetParam().norm, GetParam().encoder_layers);
  model::DeepNet net(c);
  model::InitializeParameters(*net, 5);
  net->train();
  torch::manual_seed(99);
  std::vector<MicroBatch> batches{RandomBatch(3, 7, 6), RandomBatch(2, 5, 8), RandomBatch(3, 6, 6)};
  const std::vector<std::vector<torch::Tensor>> none(3);
  // One segment: with a segment boundary at the encoder's end, autocast would cache the bf16
  // cast of that boundary leaf (as it does for weights) and the plain path would sum the decoder
  // layers' gradients of the encoder output in bf16, where recomputation sums them in fp32.
  StepResult plain = RunStep(net.get(), 1, false, batches, none, none, true);
  StepResult recomputed = RunStep(net.get(), 1, true, batches, none, none, true);
  ExpectBitEqual(plain, recomputed, Names(*net));
}

std::vector<Variant> Variants() {
  std::vector<Variant> v = {
      {"DeepNormFused", model::NormVariant::kDeepNorm, 2, true, model::AttentionBackend::kAuto},
      {"DeepNormAten", model::NormVariant::kDeepNorm, 2, false,
       model::AttentionBackend::kReference},
      {"PreLnReference", model::NormVariant::kPreLn, 2, true, model::AttentionBackend::kReference},
      {"DecoderOnlyFused", model::NormVariant::kDeepNorm, 0, true, model::AttentionBackend::kAuto},
  };
  if (model::SdpaAvailable()) {
    v.push_back(
        {"DeepNormSdpa", model::NormVariant::kDeepNorm, 2, true, model::AttentionBackend::kSdpa});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Variants, StageRecomputeTest, ::testing::ValuesIn(Variants()),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.name);
                         });

TEST(LayerRecomputeTest, KeepsOnlyTheInputsAndRefusesInputsChangedInPlace) {
  torch::Tensor w = torch::randn({8, 8}, torch::requires_grad());
  torch::Tensor x = torch::randn({4, 8}, torch::requires_grad());
  int calls = 0;
  auto layer = [&](const std::vector<torch::Tensor>& in) {
    ++calls;
    return torch::dropout(torch::tanh(torch::mm(in[0], w)), 0.5, true);
  };
  torch::Tensor h = x * 2;
  torch::Tensor out = RunRecomputed({h}, layer);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(out.requires_grad());
  EXPECT_EQ(out.grad_fn()->name(), "RecomputedLayerBackward");
  out.sum().backward();
  EXPECT_EQ(calls, 2);
  ASSERT_TRUE(x.grad().defined());
  ASSERT_TRUE(w.grad().defined());

  torch::Tensor h2 = x * 2;
  torch::Tensor out2 = RunRecomputed({h2}, layer);
  {
    torch::NoGradGuard no_grad;
    h2.add_(1.0);
  }
  EXPECT_THROW(out2.sum().backward(), c10::Error);

  // Without autograd, a plain call.
  torch::NoGradGuard no_grad;
  torch::Tensor plain = RunRecomputed({x}, layer);
  EXPECT_FALSE(plain.requires_grad());
}

}  // namespace
}  // namespace deepnet::pipeline
