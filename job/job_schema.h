#pragma once
// The job schema, declared once: every key of a job file, in file order, with its type (the
// visitor call), its field in JobConfig (default: the struct's initialiser) and, for numbers,
// the bounds docs/CONFIG.md lists. The reader (job/job_config.cc), the dumper
// (job/job_config_dump.cc) and the docs check (tests/job/job_schema_test.cc) all walk it.
// Cross-field rules (d_model divisible by heads, ...) stay in Validate (job/job_config.cc); a
// test holds Validate to the bounds declared here.
//
// A visitor V offers, for `const char* key`:
//   Int(key, int64_t&, IntBounds)   Uint(key, uint64_t&)   Real(key, double&, RealBounds)
//   Bool(key, bool&)   String(key, std::string&, Omit)   StringList(key, vector<string>&)
//   Path(key, std::string&, JobPathUse): a file system path the trainer opens; every one is
//     checked against the storage policy (job/job_paths.h lists them from here)
//   StringMap(key, map<string, string>&)   RealPair(key, double&, double&)
//   Choice(key, E&) for an enum with a job::ChoicesOf table   Device(key, Device&)
//   Section(key, fn): fn(V&) visits the keys of the nested map `key`
//   Forbid(key, why): a key users may not set.
// The references are const when the config is (VisitJob<const JobConfig>).

#include <cstdint>
#include <limits>

#include "job/job_choices.h"
#include "job/job_config.h"
#include "model/deepnet_config.h"

namespace deepnet::job {

/// Inclusive bounds of an integer key as documented; Validate may add cross-field rules.
struct IntBounds {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
};

/// Bounds of a real key: [min, max], with an open end where `min_open` / `max_open`.
struct RealBounds {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = false;
};

/// Whether the dump leaves out an empty string (scheduling.team).
enum class Omit { kNever, kWhenEmpty };

/// How the trainer uses a path key; the storage policy checks each use (storage_policy.h).
enum class JobPathUse {
  kReadFile,  // data.train_path, data.valid_path, train.probe_file
  kReadDir,   // data.shard_dir
  kWriteDir,  // checkpoint.dir (created by the trainer when missing)
};

namespace schema {
inline constexpr IntBounds AtLeast(int64_t min, int64_t max) { return {min, max}; }
inline constexpr RealBounds Closed(double min, double max) { return {min, max, false, false}; }
inline constexpr RealBounds HalfOpen(double min, double max) { return {min, max, false, true}; }
inline constexpr RealBounds OpenClosed(double min, double max) { return {min, max, true, false}; }
}  // namespace schema

template <typename Model, typename V>
void VisitModel(Model& m, V& v) {
  using schema::AtLeast;
  v.Int("encoder_layers", m.encoder_layers(), AtLeast(0, SpecCaps::kLayers));
  v.Int("decoder_layers", m.decoder_layers(), AtLeast(0, SpecCaps::kLayers));
  v.Int("d_model", m.d_model(), AtLeast(1, SpecCaps::kDModel));
  v.Int("heads", m.heads(), AtLeast(1, SpecCaps::kHeads));
  v.Int("ffn_dim", m.ffn_dim(), AtLeast(1, SpecCaps::kFfnDim));
  v.Int("vocab_size", m.vocab_size(), AtLeast(0, SpecCaps::kVocab));
  v.Forbid("pad_id", "not user-settable (the padding id comes from the tokenizer)");
  v.Real("dropout", m.dropout(), schema::HalfOpen(0, 1));
  v.Real("attention_dropout", m.attention_dropout(), schema::HalfOpen(0, 1));
  v.Real("activation_dropout", m.activation_dropout(), schema::HalfOpen(0, 1));
  v.Choice("activation", m.activation());
  v.Int("max_positions", m.max_positions(), AtLeast(1, SpecCaps::kPositions));
  v.Bool("share_all_embeddings", m.share_all_embeddings());
  v.Bool("share_decoder_input_output", m.share_decoder_input_output());
  v.Choice("norm", m.norm());
  v.Real("layer_norm_eps", m.layer_norm_eps(), schema::OpenClosed(0, 1));
  v.Choice("init", m.init());
  v.Choice("positions", m.positions());
}

template <typename Data, typename V>
void VisitData(Data& d, V& v) {
  using schema::AtLeast;
  v.Choice("source", d.source);
  v.Path("shard_dir", d.shard_dir, JobPathUse::kReadDir);
  v.Section("synthetic", [&d](V& s) {
    s.StringList("languages", d.synthetic.languages);
    s.Int("pairs_per_language", d.synthetic.pairs_per_language,
          AtLeast(1, SpecCaps::kPairsPerLanguage));
    s.Int("min_words", d.synthetic.min_words, AtLeast(1, SpecCaps::kWords));
    s.Int("max_words", d.synthetic.max_words, AtLeast(1, SpecCaps::kWords));
    s.Uint("seed", d.synthetic.seed);
  });
  v.Section("random_tokens", [&d](V& r) {
    r.Int("vocab_size", d.random_tokens.vocab_size, AtLeast(2, SpecCaps::kRandomSymbols));
    r.Int("pairs", d.random_tokens.pairs, AtLeast(1, SpecCaps::kRandomPairs));
    r.Int("min_len", d.random_tokens.min_len, AtLeast(1, SpecCaps::kRandomLength));
    r.Int("max_len", d.random_tokens.max_len, AtLeast(1, SpecCaps::kRandomLength));
    r.Choice("target", d.random_tokens.target);
    r.Uint("seed", d.random_tokens.seed);
  });
  v.Path("train_path", d.train_path, JobPathUse::kReadFile);
  v.Path("valid_path", d.valid_path, JobPathUse::kReadFile);
  v.String("src_lang", d.src_lang, Omit::kNever);
  v.String("tgt_lang", d.tgt_lang, Omit::kNever);
  v.Real("valid_fraction", d.valid_fraction, schema::Closed(0, 0.5));
  v.Choice("tokenizer", d.tokenizer);
  v.Int("max_tokens", d.max_tokens, AtLeast(1, SpecCaps::kMaxTokens));
  v.Int("max_sentences", d.max_sentences, AtLeast(0, SpecCaps::kMaxSentences));
  v.Int("pack_tokens", d.pack_tokens, AtLeast(0, SpecCaps::kPositions));
  v.Int("max_len", d.max_len, AtLeast(0, SpecCaps::kPositions));
  v.Real("temperature", d.temperature,
         schema::Closed(SpecCaps::kTemperatureMin, SpecCaps::kTemperatureMax));
  v.Int("prefetch", d.prefetch, AtLeast(1, SpecCaps::kPrefetch));
}

template <typename Optim, typename V>
void VisitOptim(Optim& o, V& v) {
  using schema::AtLeast;
  v.Real("lr", o.lr, schema::OpenClosed(0, SpecCaps::kRealMax));
  v.RealPair("betas", o.beta1, o.beta2);
  v.Real("eps", o.eps, schema::OpenClosed(0, SpecCaps::kRealMax));
  v.Real("weight_decay", o.weight_decay, schema::Closed(0, SpecCaps::kRealMax));
  v.Int("warmup_steps", o.warmup_steps, AtLeast(0, SpecCaps::kSteps));
  v.Real("warmup_init_lr", o.warmup_init_lr, schema::Closed(0, SpecCaps::kRealMax));
  v.Real("clip_norm", o.clip_norm, schema::Closed(0, SpecCaps::kRealMax));
  v.Int("accum_steps", o.accum_steps, AtLeast(1, SpecCaps::kBatches));
  v.Real("label_smoothing", o.label_smoothing, schema::HalfOpen(0, 1));
}

template <typename Train, typename V>
void VisitTrain(Train& t, V& v) {
  using schema::AtLeast;
  v.Int("max_steps", t.max_steps, AtLeast(1, SpecCaps::kSteps));
  v.Real("max_minutes", t.max_minutes, schema::Closed(0, SpecCaps::kMaxMinutes));
  v.Uint("seed", t.seed);
  v.Int("log_every", t.log_every, AtLeast(1, SpecCaps::kSteps));
  v.Int("probe_every", t.probe_every, AtLeast(0, SpecCaps::kSteps));
  v.Int("probe_sentences", t.probe_sentences, AtLeast(1, SpecCaps::kProbeSentences));
  v.String("probe_schedule", t.probe_schedule, Omit::kNever);
  v.Path("probe_file", t.probe_file, JobPathUse::kReadFile);
  v.Int("diagnostics_every", t.diagnostics_every, AtLeast(0, SpecCaps::kSteps));
  v.Int("valid_every", t.valid_every, AtLeast(0, SpecCaps::kSteps));
  v.Int("valid_max_pairs", t.valid_max_pairs, AtLeast(0, SpecCaps::kValidPairs));
}

template <typename Checkpoint, typename V>
void VisitCheckpoint(Checkpoint& c, V& v) {
  v.Path("dir", c.dir, JobPathUse::kWriteDir);
  v.Int("every_steps", c.every_steps, schema::AtLeast(0, SpecCaps::kSteps));
  v.Int("keep_last", c.keep_last, schema::AtLeast(0, SpecCaps::kKeepLast));
  v.Bool("resume", c.resume);
}

template <typename Runtime, typename V>
void VisitRuntime(Runtime& r, V& v) {
  v.Int("blas_threads", r.blas_threads, schema::AtLeast(0, SpecCaps::kThreads));
  v.Int("intra_op_threads", r.intra_op_threads, schema::AtLeast(1, SpecCaps::kThreads));
  v.Device("device", r.device);
  v.Choice("attention", r.attention);
  v.Choice("recompute", r.recompute);
  v.Choice("precision", r.precision);
  v.Choice("grad_reduce", r.grad_reduce);
}

template <typename Parallel, typename V>
void VisitParallel(Parallel& p, V& v) {
  v.Int("pipeline_stages", p.pipeline_stages, schema::AtLeast(1, SpecCaps::kRanks));
  v.Int("data_parallel", p.data_parallel, schema::AtLeast(1, SpecCaps::kRanks));
  v.Int("micro_batches", p.micro_batches, schema::AtLeast(1, SpecCaps::kBatches));
  v.Choice("schedule", p.schedule);
  v.Choice("backend", p.backend);
  v.Real("timeout_s", p.timeout_s, schema::OpenClosed(0, kMaxTimeoutSeconds));
  v.String("rendezvous", p.rendezvous, Omit::kNever);
  v.Real("bucket_mb", p.bucket_mb, schema::OpenClosed(0, SpecCaps::kBucketMb));
  v.Choice("partition", p.partition);
}

template <typename Scheduling, typename V>
void VisitScheduling(Scheduling& s, V& v) {
  v.Int("priority", s.priority,
        IntBounds{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()});
  v.Int("max_restarts", s.max_restarts, schema::AtLeast(0, SpecCaps::kRestarts));
  v.Real("hang_timeout_s", s.hang_timeout_s, schema::Closed(0, kMaxTimeoutSeconds));
  v.Real("start_timeout_s", s.start_timeout_s, schema::OpenClosed(0, kMaxTimeoutSeconds));
  v.StringMap("labels", s.labels);
  v.String("team", s.team, Omit::kWhenEmpty);
}

template <typename Guard, typename V>
void VisitGuard(Guard& g, V& v) {
  v.Choice("enabled", g.enabled);
  v.Choice("action", g.action);
  v.Int("max_retries", g.max_retries, schema::AtLeast(0, SpecCaps::kRestarts));
  v.Bool("skip_batches", g.skip_batches);
  v.Real("lr_factor", g.lr_factor, schema::OpenClosed(0, 1));
  // 0 (off) or in (1, kRealMax]: Validate states the gap.
  v.Real("loss_spike_factor", g.loss_spike_factor, schema::Closed(0, SpecCaps::kRealMax));
  v.Int("loss_window", g.loss_window, schema::AtLeast(1, SpecCaps::kGuardWindow));
  v.Real("update_bound", g.update_bound, schema::Closed(0, SpecCaps::kRealMax));
  v.Int("plateau_window", g.plateau_window, schema::AtLeast(0, SpecCaps::kGuardWindow));
  v.Real("plateau_min_delta", g.plateau_min_delta, schema::Closed(0, SpecCaps::kRealMax));
  v.Choice("plateau_action", g.plateau_action);
}

/// Every key of a job file, in the order of the file and the dump. `Config` is JobConfig or
/// const JobConfig.
template <typename Config, typename V>
void VisitJob(Config& c, V& v) {
  v.String("name", c.name, Omit::kNever);
  v.Section("model", [&c](V& s) { VisitModel(c.model, s); });
  v.Section("data", [&c](V& s) { VisitData(c.data, s); });
  v.Section("optim", [&c](V& s) { VisitOptim(c.optim, s); });
  v.Section("train", [&c](V& s) { VisitTrain(c.train, s); });
  v.Section("checkpoint", [&c](V& s) { VisitCheckpoint(c.checkpoint, s); });
  v.Section("runtime", [&c](V& s) { VisitRuntime(c.runtime, s); });
  v.Section("parallel", [&c](V& s) { VisitParallel(c.parallel, s); });
  v.Section("scheduling", [&c](V& s) { VisitScheduling(c.scheduling, s); });
  v.Section("guard", [&c](V& s) { VisitGuard(c.guard, s); });
}

}  // namespace deepnet::job
