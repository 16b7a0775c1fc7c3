// The op budget of a training step (docs/PERFORMANCE.md "Op census"): ATen ops and bytes of
// temporaries per layer per micro-batch on the path GPUs take (ATen ops, no fused CPU kernels),
// counted on the CPU, so that CI sees a regression in the element-wise and copy traffic that
// costs GPU steps their MFU. Counts, not times: the same on every machine.
#include "pipeline/step_census.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>

#include "model/attention.h"
#include "model/kernels/fused_kernels.h"

namespace deepnet::pipeline {
namespace {

using profiling::CensusResult;
using profiling::OpKind;

EngineOptions CensusOptions(model::ComputePrecision precision) {
  EngineOptions o;
  o.model = model::DeepNetConfig()
                .encoder_layers(1)
                .decoder_layers(1)
                .d_model(32)
                .heads(4)
                .ffn_dim(64)
                .vocab_size(48)
                .dropout(0.1)
                .max_positions(64);
  o.seed = 11;
  o.precision = precision;
  o.clip_norm = 1.0;
  return o;
}

// The ATen path (what CUDA runs) for the scope's life.
class AtenPath {
 public:
  AtenPath() : fused_(model::kernels::FusedKernelsEnabled()), backend_(model::GetAttentionBackend()) {
    model::kernels::SetFusedKernelsEnabled(false);
    model::SetAttentionBackend(model::AttentionBackend::kReference);
  }
  ~AtenPath() {
    model::kernels::SetFusedKernelsEnabled(fused_);
    model::SetAttentionBackend(backend_);
  }

 private:
  bool fused_;
  model::AttentionBackend backend_;
};

int64_t Calls(const CensusResult& r, const std::string& op) {
  auto it = r.calls_by_op.find(op);
  return it == r.calls_by_op.end() ? 0 : it->second;
}

struct Budget {
  double ops;    // Top-level ATen ops per layer per micro-batch.
  double bytes;  // Bytes the CPU allocator hands out per layer per micro-batch.
};

void ExpectWithin(const CensusResult& layer, int micro_batches, const Budget& budget,
                  const char* what) {
  const double ops = static_cast<double>(layer.top_level_ops) / micro_batches;
  const double bytes = static_cast<double>(layer.allocated_bytes) / micro_batches;
  EXPECT_LE(ops, budget.ops) << what << ": " << ops << " ops per layer per micro-batch\n"
                             << profiling::FormatCensus(layer, 40, /*times=*/false);
  EXPECT_LE(bytes, budget.bytes) << what << ": " << bytes << " bytes per layer per micro-batch\n"
                                 << profiling::FormatCensus(layer, 40, /*times=*/false);
  EXPECT_GT(ops, 0.0) << what;
  std::cout << what << ": " << ops << " ops, " << bytes << " bytes per layer per micro-batch\n";
}

// d=32, 4 sentences x 16 tokens a side (64 tokens per micro-batch), dropout 0.1, clip 1.0.
// Budgets: what this code measured (docs/PERFORMANCE.md "Op census") plus about 5 %.
constexpr Budget kEncoderFp32{146, 560'000};   // measured 139 ops, 532,512 bytes
constexpr Budget kDecoderFp32{268, 951'000};   // measured 254.5 ops, 905,628 bytes
// bf16 on the CPU: LibTorch 1.13's CPU LayerNorm keeps bf16 statistics in bf16, so the stream's
// norms widen to fp32 here (model::StreamLayerNorm); on CUDA they run on the bf16 tensor.
constexpr Budget kEncoderBf16{167, 636'000};   // measured 159 ops, 605,296 bytes
constexpr Budget kDecoderBf16{301, 1'040'000}; // measured 286.5 ops, 990,242 bytes

TEST(StepCensusTest, Fp32LayersStayWithinTheirOpBudget) {
  AtenPath aten;
  auto census = MeasureStepCensus(CensusOptions(model::ComputePrecision::kFp32), {});
  ASSERT_TRUE(census.ok()) << census.status();
  ExpectWithin(census->encoder_layer, census->micro_batches, kEncoderFp32, "fp32 encoder layer");
  ExpectWithin(census->decoder_layer, census->micro_batches, kDecoderFp32, "fp32 decoder layer");
  // q, k and v are split with unbind: no select (whose backward zero-fills full buffers).
  EXPECT_EQ(Calls(census->decoder_layer, "aten::select"), 0)
      << profiling::FormatCensus(census->decoder_layer, 60, false);
}

TEST(StepCensusTest, Bf16LayersStayWithinTheirOpBudget) {
  AtenPath aten;
  auto census = MeasureStepCensus(CensusOptions(model::ComputePrecision::kBf16), {});
  ASSERT_TRUE(census.ok()) << census.status();
  ExpectWithin(census->encoder_layer, census->micro_batches, kEncoderBf16, "bf16 encoder layer");
  ExpectWithin(census->decoder_layer, census->micro_batches, kDecoderBf16, "bf16 decoder layer");
}

// Waits for the device (item(), i.e. _local_scalar_dense) and weight casts happen once per
// step, not once per micro-batch: a step of 4 micro-batches has as many as a step of 2.
TEST(StepCensusTest, SyncsAndWeightCastsArePerStepNotPerMicroBatch) {
  AtenPath aten;
  const EngineOptions o = CensusOptions(model::ComputePrecision::kBf16);
  CensusBatches two, four;
  two.micro_batches = 2;
  four.micro_batches = 4;
  auto a = MeasureStepCensus(o, two), b = MeasureStepCensus(o, four);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Calls(b->step, "aten::_local_scalar_dense") + Calls(b->step, "aten::item"),
            Calls(a->step, "aten::_local_scalar_dense") + Calls(a->step, "aten::item"))
      << "2 micro-batches:\n" << profiling::FormatCensus(a->step, 60) << "4 micro-batches:\n"
      << profiling::FormatCensus(b->step, 60);
  // Casts per layer: activations' casts grow with micro-batches, the weights' do not. A layer
  // has 6 (encoder) or 10 (decoder) weight matrices and biases cast once per step.
  const int64_t casts2 = Calls(a->decoder_layer, "aten::_to_copy") + Calls(a->decoder_layer, "aten::to");
  const int64_t casts4 = Calls(b->decoder_layer, "aten::_to_copy") + Calls(b->decoder_layer, "aten::to");
  const int64_t per_micro_batch = (casts4 - casts2) / 2;
  const int64_t per_step = casts2 - 2 * per_micro_batch;
  EXPECT_GT(per_step, 0) << "weights are cast once per step";
  std::cout << "decoder layer casts: " << per_step << " per step + " << per_micro_batch
            << " per micro-batch\n";
}

}  // namespace
}  // namespace deepnet::pipeline
