#pragma once

// Per-rank training memory of a DeepNet job, from its config alone (nothing is allocated): the
// one estimate that the coordinator admits jobs with, `deepnet inspect` prints and `deepnet
// train` checks before it builds the model. No LibTorch. The formulas are in docs/MODEL.md
// ("Memory per rank").
//
// All byte counts saturate at kMemoryUnbounded (INT64_MAX) instead of overflowing: a model with
// d_model 10^9 and a vocabulary of 10^12 gets "more than 8 EiB", never a wrapped small number.

#include <cstdint>
#include <string>
#include <string_view>

#include "model/deepnet_config.h"

namespace deepnet::job {

struct JobConfig;

/// The value every byte count saturates at.
inline constexpr int64_t kMemoryUnbounded = INT64_MAX;

/// Precision of the compute (runtime.precision; tf32 stores fp32 and counts as kFp32). Lower
/// precisions are how the trainer runs them (docs/ARCHITECTURE.md "Mixed precision"): fp32
/// parameters (the master copy) plus one 2-byte cast of them for the matrix products, fp32
/// gradients and Adam moments, 2-byte activations except the fp32 residual stream.
enum class Precision { kFp32, kBf16, kFp16 };
std::string_view ToString(Precision precision);
int64_t BytesPerElement(Precision precision);

/// What the estimate needs besides the model shape.
struct MemoryLayout {
  Precision precision = Precision::kFp32;
  // P: contiguous stages over the global layer order [encoder 0..N-1, decoder 0..M-1].
  int64_t pipeline_stages = 1;
  // m: micro-batches per step and replica.
  int64_t micro_batches = 1;
  // GPipe keeps the activations of all m micro-batches on every stage; 1F1B (the engine's
  // default) keeps at most min(P - s, m) on stage s (pipeline/pipeline_schedule.h).
  bool gpipe = false;
  // Padded tokens of one micro-batch on each side (data.max_tokens bounds source and target).
  int64_t tokens_per_micro_batch = 4096;
  // Longest sequence in tokens: the length attention scores are computed over.
  int64_t sequence_length = 256;
  // runtime.recompute: layer: a micro-batch keeps only the layers' inputs; backward rebuilds
  // one layer's activations at a time.
  bool recompute_layers = false;
};

/// The parts of one stage's memory, in bytes (saturated).
struct StageMemory {
  int64_t stage = 0;
  int64_t layers = 0;           // Encoder and decoder layers on this stage.
  int64_t parameters = 0;       // Parameters this stage holds (a tied table once per stage).
  // fp32, plus the 2-byte working copy below fp32.
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;  // fp32 (gradients accumulate into the fp32 master's).
  // Adam's two fp32 moments.
  int64_t optimizer_bytes = 0;
  // Sinusoidal position table (fp32, max_positions x d_model).
  int64_t buffer_bytes = 0;
  // Activations kept for backward by one micro-batch, logits included on the output stage.
  int64_t activation_bytes_per_micro_batch = 0;
  // Micro-batches whose activations are alive at once under the schedule.
  int64_t live_micro_batches = 1;
  int64_t activation_bytes = 0;
  int64_t total_bytes = 0;
};

/// The estimate for the rank that needs the most: ranks of one stage need the same (data
/// parallelism replicates a stage), so this is the largest stage.
struct MemoryEstimate {
  StageMemory largest;
  int64_t stages = 1;
  bool saturated = false;  // Some count reached kMemoryUnbounded.
  // "activations", "optimizer state", "parameters", "gradients" or "position table": the
  // largest part of `largest`.
  std::string biggest_part() const;
  int64_t biggest_part_bytes() const;
  // One line for error messages: "3.2 GiB per rank (stage 0 of 4: parameters 1.0 GiB,
  // gradients 1.0 GiB, optimizer state 2.0 GiB, activations 200 MiB, position table 2 MiB)".
  std::string Summary() const;
};

/// The estimate. A config the job schema would refuse (no layers, non-positive sizes) gives an
/// all-zero estimate rather than an error: validation is the schema's job. Exact per stage for
/// P <= 65536; beyond, only the stages where the maximum can lie are evaluated.
MemoryEstimate EstimateMemory(const model::DeepNetConfig& model, const MemoryLayout& layout);

/// One stage, 0 <= stage < layout.pipeline_stages <= layers (the caller checks). The stages split
/// the global layer order by count: stage s holds layers [floor(sL/P), floor((s+1)L/P)). The
/// engine balances stages by cost, so its split can differ by a few layers.
StageMemory EstimateStageMemory(const model::DeepNetConfig& model, const MemoryLayout& layout,
                                int64_t stage);
/// The same for a stage holding global layers [begin, end) (a split other than by count, such
/// as the engine's balanced one); `stage` sets how many micro-batches 1F1B keeps live on it.
StageMemory EstimateStageMemoryOfLayers(const model::DeepNetConfig& model,
                                        const MemoryLayout& layout, int64_t stage, int64_t begin,
                                        int64_t end);

/// The layout a job runs with: its parallel section, its schedule, data.max_tokens and the
/// sequence bound (data.max_len, else model.max_positions) and runtime.precision (auto resolved
/// for runtime.device). A model.vocab_size of 0 (the tokenizer's) is estimated with
/// `vocab_when_unset`.
MemoryLayout LayoutOf(const JobConfig& config);
/// The estimate's precision of a job: kBf16 for bf16 (also auto on cuda), else kFp32.
Precision PrecisionOf(const JobConfig& config);
MemoryEstimate EstimateJobMemory(const JobConfig& config, int64_t vocab_when_unset);

/// The vocabulary assumed for a job whose model.vocab_size is 0 when the tokenizer is not at
/// hand (the coordinator): the byte tokenizer's size is below this, a SentencePiece model's may
/// not be (the trainer checks again with the real one).
inline constexpr int64_t kAssumedVocabulary = 512;

/// "1.50 GiB"; "more than 8 EiB" for kMemoryUnbounded.
std::string FormatBytes(int64_t bytes);

/// Parameters of one layer and of the whole model, saturated (the formulas the trainer's modules
/// follow; tests compare them with a real DeepNet).
int64_t EncoderLayerParameterCount(const model::DeepNetConfig& config);
int64_t DecoderLayerParameterCount(const model::DeepNetConfig& config);
int64_t ModelParameterCount(const model::DeepNetConfig& config);

}  // namespace deepnet::job
