#include "job/memory_estimate.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

#include "job/job_config.h"

namespace deepnet::job {
namespace {

using model::DeepNetConfig;
using model::NormVariant;

// Saturating arithmetic on counts that are never negative (negative inputs count as 0).
int64_t Add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(std::max<int64_t>(a, 0), std::max<int64_t>(b, 0), &r)) {
    return kMemoryUnbounded;
  }
  return r;
}
int64_t Mul(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return kMemoryUnbounded;
  return r;
}
int64_t Mul(int64_t a, int64_t b, int64_t c) { return Mul(Mul(a, b), c); }

bool SubLayerNorm(const DeepNetConfig& c) { return c.norm() == NormVariant::kDeepNormPreLn; }
bool PreNorm(const DeepNetConfig& c) {
  return c.norm() == NormVariant::kPreLn || c.norm() == NormVariant::kDeepNormPreLn;
}

// Mirrors model/model_stats.cc, which mirrors the modules (tests compare all three).
int64_t AttentionParameters(const DeepNetConfig& c) {
  const int64_t d = c.d_model();
  return Add(Mul(4, Add(Mul(d, d), d)), SubLayerNorm(c) ? Mul(2, d) : 0);
}
int64_t FeedForwardParameters(const DeepNetConfig& c) {
  const int64_t d = c.d_model(), f = c.ffn_dim();
  return Add(Add(Mul(2, d, f), Add(f, d)), SubLayerNorm(c) ? Mul(2, f) : 0);
}
int64_t LayerNormParameters(const DeepNetConfig& c) { return Mul(2, c.d_model()); }

// Elements one token keeps for backward in one layer (docs/MODEL.md "Memory per rank"):
// a self-attention sublayer 8d + 2hS (norm in and out, Q, K, V, context, projection, residual;
// scores and probabilities over S keys), cross-attention the same over the source, the FFN
// 4d + 2f (norm in and out, residual, hidden before and after the activation).
int64_t EncoderLayerActivations(const DeepNetConfig& c, int64_t seq) {
  const int64_t d = c.d_model(), f = c.ffn_dim(), h = c.heads();
  return Add(Add(Mul(12, d), Mul(2, f)), Mul(2, h, seq));
}
int64_t DecoderLayerActivations(const DeepNetConfig& c, int64_t seq) {
  if (c.encoder_layers() <= 0) return EncoderLayerActivations(c, seq);
  const int64_t d = c.d_model(), f = c.ffn_dim(), h = c.heads();
  return Add(Add(Mul(20, d), Mul(2, f)), Mul(4, h, seq));
}

struct Slice {
  int64_t enc_begin = 0, enc_end = 0, dec_begin = 0, dec_end = 0;
  bool has_enc() const { return enc_end > enc_begin; }
  bool has_dec() const { return dec_end > dec_begin; }
};

// Global layers [begin, end) of the order [encoder 0..N-1, decoder 0..M-1].
Slice SliceOfLayers(int64_t begin, int64_t end, int64_t n) {
  Slice slice;
  slice.enc_begin = std::min(begin, n);
  slice.enc_end = std::min(end, n);
  slice.dec_begin = std::max(begin, n) - n;
  slice.dec_end = std::max(end, n) - n;
  return slice;
}

// Where stage s of P over L = N + M layers begins: global layer floor(sL/P).
int64_t StageStart(int64_t stage, int64_t stages, int64_t n, int64_t m) {
  const __int128 layers = static_cast<__int128>(n) + m;
  return static_cast<int64_t>(layers * stage / stages);
}

// Embedding and output tables (each V x d) the slice holds; mirrors TableParameterNames
// (model/model_slice.cc): a tied table is held by every slice that needs it, once per slice.
int64_t Tables(const DeepNetConfig& c, const Slice& s) {
  const bool needs_src = s.has_enc() && s.enc_begin == 0;
  const bool needs_tgt = s.has_dec() && s.dec_begin == 0;
  const bool needs_out = c.decoder_layers() > 0 ? s.has_dec() && s.dec_end == c.decoder_layers()
                                                : s.has_enc() && s.enc_end == c.encoder_layers();
  if (c.share_all_embeddings()) return (needs_src || needs_tgt || needs_out) ? 1 : 0;
  const bool untied_output = !c.share_decoder_input_output();
  const bool decoder_model = c.decoder_layers() > 0;
  int64_t tables = 0;
  auto stack = [&](bool owns_input, bool owns_out) {
    if (owns_input || (owns_out && !untied_output)) ++tables;
    if (owns_out && untied_output) ++tables;
  };
  if (s.has_enc()) stack(needs_src, needs_out && !decoder_model);
  if (s.has_dec()) stack(needs_tgt, needs_out);
  return tables;
}

}  // namespace

StageMemory EstimateStageMemory(const DeepNetConfig& c, const MemoryLayout& layout, int64_t stage) {
  const int64_t n = std::max<int64_t>(c.encoder_layers(), 0);
  const int64_t m = std::max<int64_t>(c.decoder_layers(), 0);
  const int64_t p = layout.pipeline_stages;
  return EstimateStageMemoryOfLayers(c, layout, stage, StageStart(stage, p, n, m),
                                     StageStart(stage + 1, p, n, m));
}

StageMemory EstimateStageMemoryOfLayers(const DeepNetConfig& c, const MemoryLayout& layout,
                                        int64_t stage, int64_t begin, int64_t end) {
  const int64_t n = std::max<int64_t>(c.encoder_layers(), 0);
  const int64_t m = std::max<int64_t>(c.decoder_layers(), 0);
  const Slice s = SliceOfLayers(begin, end, n);
  const int64_t enc_layers = s.enc_end - s.enc_begin, dec_layers = s.dec_end - s.dec_begin;
  const int64_t d = c.d_model(), v = c.vocab_size();
  const int64_t b = BytesPerElement(layout.precision);
  const int64_t t = std::max<int64_t>(layout.tokens_per_micro_batch, 1);
  const int64_t seq = std::max<int64_t>(layout.sequence_length, 1);

  StageMemory out;
  out.stage = stage;
  out.layers = Add(enc_layers, dec_layers);
  int64_t params = Add(Mul(enc_layers, EncoderLayerParameterCount(c)),
                       Mul(dec_layers, DecoderLayerParameterCount(c)));
  params = Add(params, Mul(Tables(c, s), Mul(v, d)));
  const int64_t positions = std::max<int64_t>(c.max_positions(), 0);
  const bool learned = c.positions() == model::PositionKind::kLearned;
  if (learned) {  // One learned table per stack, on the slice that embeds its input.
    if (s.has_enc() && s.enc_begin == 0) params = Add(params, Mul(positions, d));
    if (s.has_dec() && s.dec_begin == 0) params = Add(params, Mul(positions, d));
  }
  if (PreNorm(c)) {
    if (s.has_enc() && s.enc_end == n) params = Add(params, LayerNormParameters(c));
    if (s.has_dec() && s.dec_end == m) params = Add(params, LayerNormParameters(c));
  }
  out.parameters = params;
  const bool low = layout.precision != Precision::kFp32;
  out.parameter_bytes = Mul(params, low ? 4 + b : 4);
  out.gradient_bytes = Mul(params, 4);
  out.optimizer_bytes = Mul(params, 8);
  out.buffer_bytes = learned ? 0 : Mul(positions, d, 4);

  int64_t elements = Add(Mul(enc_layers, EncoderLayerActivations(c, seq)),
                         Mul(dec_layers, DecoderLayerActivations(c, seq)));
  int64_t embeddings = 0;
  if (s.has_enc() && s.enc_begin == 0) embeddings = Add(embeddings, Mul(2, d));
  if (s.has_dec() && s.dec_begin == 0) embeddings = Add(embeddings, Mul(2, d));
  int64_t per_micro_batch = 0;
  int64_t recompute_bytes = 0;  // One layer's activations, rebuilt in backward.
  if (layout.recompute_layers && out.layers > 0) {
    // Each layer's input and the encoder output decoder layers share (d per token each, in
    // the residual stream's dtype: b bytes, model::ToStreamDtype), and the embeddings.
    const int64_t inputs = Add(Mul(out.layers, d), s.has_dec() && n > 0 ? d : 0);
    per_micro_batch = Mul(Mul(Add(inputs, embeddings), t), b);
    const int64_t enc_one = s.has_enc() ? Mul(Mul(EncoderLayerActivations(c, seq), t), b) : 0;
    const int64_t dec_one = s.has_dec() ? Mul(Mul(DecoderLayerActivations(c, seq), t), b) : 0;
    recompute_bytes = std::max(enc_one, dec_one);
  } else {
    // Below fp32 the residual stream is in the compute dtype too (model::ToStreamDtype).
    per_micro_batch = Mul(Mul(Add(elements, embeddings), t), b);
  }
  const bool owns_output = m > 0 ? s.has_dec() && s.dec_end == m : s.has_enc() && s.enc_end == n;
  // The logits and their gradient in the compute dtype, and the loss's fp32 rows: it widens
  // at most 2^24 logits at a time (model/loss.cc), so no fp32 copy of them all exists.
  if (owns_output) {
    const int64_t logits = Mul(t, v);
    per_micro_batch = Add(per_micro_batch,
                          Add(Mul(Mul(2, logits), b), Mul(std::min<int64_t>(logits, 1 << 24), 4)));
  }
  out.activation_bytes_per_micro_batch = per_micro_batch;
  const int64_t micro = std::max<int64_t>(layout.micro_batches, 1);
  out.live_micro_batches = layout.gpipe ? micro : std::min(micro, layout.pipeline_stages - stage);
  out.activation_bytes = Add(Mul(per_micro_batch, out.live_micro_batches), recompute_bytes);
  out.total_bytes = Add(
      Add(Add(out.parameter_bytes, out.gradient_bytes), Add(out.optimizer_bytes, out.buffer_bytes)),
      out.activation_bytes);
  return out;
}

namespace {

// The stages to evaluate: all of them up to 65536; otherwise windows where the maximum can lie.
// Inside one stack every stage has floor or ceil(L/P) layers and the same tables (none), and
// live micro-batches only fall with s, so the candidates are the first stages of each stack,
// the stage crossing from encoder to decoder and the last stages.
std::vector<int64_t> CandidateStages(int64_t stages, int64_t n, int64_t m) {
  std::vector<int64_t> out;
  constexpr int64_t kExact = 65536, kWindow = 1024;
  if (stages <= kExact) {
    for (int64_t s = 0; s < stages; ++s) out.push_back(s);
    return out;
  }
  std::set<int64_t> picked;
  const __int128 layers = static_cast<__int128>(n) + m;
  const int64_t boundary = static_cast<int64_t>(static_cast<__int128>(n) * stages / layers);
  for (int64_t start : {int64_t{0}, boundary - 2, stages - kWindow}) {
    for (int64_t s = std::max<int64_t>(start, 0); s < std::min(start + kWindow, stages); ++s) {
      picked.insert(s);
    }
  }
  return {picked.begin(), picked.end()};
}

}  // namespace

std::string_view ToString(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
  }
  return "unknown";
}

int64_t BytesPerElement(Precision precision) { return precision == Precision::kFp32 ? 4 : 2; }

int64_t EncoderLayerParameterCount(const DeepNetConfig& c) {
  return Add(Add(AttentionParameters(c), FeedForwardParameters(c)), Mul(2, LayerNormParameters(c)));
}

int64_t DecoderLayerParameterCount(const DeepNetConfig& c) {
  const bool cross = c.encoder_layers() > 0;
  return Add(Add(Mul(cross ? 2 : 1, AttentionParameters(c)), FeedForwardParameters(c)),
             Mul(cross ? 3 : 2, LayerNormParameters(c)));
}

int64_t ModelParameterCount(const DeepNetConfig& c) {
  MemoryLayout whole;
  return EstimateStageMemory(c, whole, 0).parameters;
}

MemoryEstimate EstimateMemory(const DeepNetConfig& c, const MemoryLayout& layout) {
  MemoryEstimate estimate;
  const int64_t n = c.encoder_layers(), m = c.decoder_layers();
  if (n < 0 || m < 0 || (n == 0 && m == 0) || c.d_model() <= 0 || c.heads() <= 0 ||
      c.ffn_dim() <= 0 || layout.pipeline_stages < 1 ||
      layout.pipeline_stages > static_cast<__int128>(n) + m) {
    return estimate;
  }
  estimate.stages = layout.pipeline_stages;
  bool first = true;
  for (int64_t stage : CandidateStages(layout.pipeline_stages, n, m)) {
    StageMemory s = EstimateStageMemory(c, layout, stage);
    if (first || s.total_bytes > estimate.largest.total_bytes) estimate.largest = s;
    first = false;
    for (int64_t part : {s.parameter_bytes, s.optimizer_bytes, s.activation_bytes, s.total_bytes,
                         s.buffer_bytes}) {
      if (part == kMemoryUnbounded) estimate.saturated = true;
    }
  }
  return estimate;
}

std::string MemoryEstimate::biggest_part() const {
  const std::pair<int64_t, const char*> parts[] = {{largest.activation_bytes, "activations"},
                                                   {largest.optimizer_bytes, "optimizer state"},
                                                   {largest.parameter_bytes, "parameters"},
                                                   {largest.gradient_bytes, "gradients"},
                                                   {largest.buffer_bytes, "position table"}};
  const auto* best = &parts[0];
  for (const auto& part : parts) {
    if (part.first > best->first) best = &part;
  }
  return best->second;
}

int64_t MemoryEstimate::biggest_part_bytes() const {
  return std::max({largest.activation_bytes, largest.optimizer_bytes, largest.parameter_bytes,
                   largest.gradient_bytes, largest.buffer_bytes});
}

std::string MemoryEstimate::Summary() const {
  return FormatBytes(largest.total_bytes) + " per rank (stage " + std::to_string(largest.stage) +
         " of " + std::to_string(stages) + ": parameters " + FormatBytes(largest.parameter_bytes) +
         ", gradients " + FormatBytes(largest.gradient_bytes) + ", optimizer state " +
         FormatBytes(largest.optimizer_bytes) + ", activations " +
         FormatBytes(largest.activation_bytes) + " for " +
         std::to_string(largest.live_micro_batches) + " live micro-batch(es), position table " +
         FormatBytes(largest.buffer_bytes) + ")";
}

MemoryLayout LayoutOf(const JobConfig& config) {
  MemoryLayout layout;
  layout.precision = PrecisionOf(config);
  layout.pipeline_stages = config.parallel.pipeline_stages;
  layout.micro_batches = config.parallel.micro_batches;
  layout.gpipe = config.parallel.schedule == Schedule::kGPipe;
  layout.recompute_layers = config.runtime.recompute == Recompute::kLayer;
  layout.sequence_length =
      config.data.max_len > 0 ? config.data.max_len : config.model.max_positions();
  // One example longer than max_tokens still forms a batch of one.
  layout.tokens_per_micro_batch = std::max(config.data.max_tokens, layout.sequence_length);
  return layout;
}

Precision PrecisionOf(const JobConfig& config) {
  // tf32 stores fp32.
  return EffectivePrecision(config.runtime) == PrecisionChoice::kBf16 ? Precision::kBf16
                                                                      : Precision::kFp32;
}

MemoryEstimate EstimateJobMemory(const JobConfig& config, int64_t vocab_when_unset) {
  model::DeepNetConfig model = config.model;
  if (model.vocab_size() == 0) model.vocab_size(vocab_when_unset);
  return EstimateMemory(model, LayoutOf(config));
}

std::string FormatBytes(int64_t bytes) {
  if (bytes >= kMemoryUnbounded) return "more than 8 EiB";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(std::max<int64_t>(bytes, 0));
  int i = 0;
  while (value >= 1024.0 && i < 6) value /= 1024.0, ++i;
  char buf[64];
  if (i == 0) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f %s", value, units[i]);
  }
  return buf;
}

}  // namespace deepnet::job
