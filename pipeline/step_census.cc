#include "pipeline/step_census.h"

#include <torch/torch.h>

#include <vector>

#include "comm/loopback_communicator.h"

namespace deepnet::pipeline {
namespace {

// The census of the second step of a fresh engine for `options`.
absl::StatusOr<profiling::CensusResult> CensusOfStep(const EngineOptions& options,
                                                      const CensusBatches& batches) {
  comm::LoopbackCommunicator world;
  auto engine = PipelineEngine::Create(options, &world);
  if (!engine.ok()) return engine.status();
  const std::vector<MicroBatch> micro =
      RandomMicroBatches(options.model.vocab_size(), batches, options.device, 4321);
  if (auto warm = (*engine)->TrainStep(micro, 1, 1e-4); !warm.ok()) return warm.status();
  profiling::OpCensus census;
  auto step = (*engine)->TrainStep(micro, 2, 1e-4);
  profiling::CensusResult result = census.Stop();
  if (!step.ok()) return step.status();
  return result;
}

}  // namespace

std::vector<MicroBatch> RandomMicroBatches(int64_t vocab, const CensusBatches& b,
                                           const torch::Device& device, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  const int64_t first_word = 4;  // Ids below are pad/bos/eos/unk in the real tokenizers.
  std::vector<MicroBatch> out;
  for (int i = 0; i < b.micro_batches; ++i) {
    MicroBatch m;
    m.src = torch::randint(first_word, vocab, {b.sentences, b.source_length}, gen, torch::kLong)
                .to(device);
    auto tgt =
        torch::randint(first_word, vocab, {b.sentences, b.target_length + 1}, gen, torch::kLong);
    m.tgt_in = tgt.narrow(1, 0, b.target_length).contiguous().to(device);
    m.tgt_out = tgt.narrow(1, 1, b.target_length).contiguous().to(device);
    m.src_tokens = m.src.numel();
    m.tgt_tokens = m.tgt_out.numel();
    out.push_back(std::move(m));
  }
  return out;
}

absl::StatusOr<StepCensus> MeasureStepCensus(const EngineOptions& options,
                                             const CensusBatches& batches) {
  StepCensus out;
  out.micro_batches = batches.micro_batches;
  auto base = CensusOfStep(options, batches);
  if (!base.ok()) return base.status();
  out.step = *base;
  const model::DeepNetConfig& c = options.model;
  if (c.encoder_layers() > 0) {
    EngineOptions deeper = options;
    deeper.model.encoder_layers(c.encoder_layers() + 1);
    auto r = CensusOfStep(deeper, batches);
    if (!r.ok()) return r.status();
    out.encoder_layer = profiling::Difference(*r, *base);
  }
  if (c.decoder_layers() > 0) {
    EngineOptions deeper = options;
    deeper.model.decoder_layers(c.decoder_layers() + 1);
    auto r = CensusOfStep(deeper, batches);
    if (!r.ok()) return r.status();
    out.decoder_layer = profiling::Difference(*r, *base);
  }
  return out;
}

}  // namespace deepnet::pipeline
