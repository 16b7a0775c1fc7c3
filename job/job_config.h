#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_choices.h"
#include "model/deepnet_config.h"

namespace deepnet::job {

/// The generated multilingual task (data.source: synthetic): English-like sentences and their
/// pseudo-language versions. Mirrors data::SyntheticTaskOptions, which the trainer builds from
/// it (train/training_data.cc); this schema stays free of data/.
struct SyntheticDataConfig {
  // Pseudo-languages to generate, from SyntheticDataLanguages(); empty means all.
  std::vector<std::string> languages;
  // Sentence pairs to generate per language.
  int64_t pairs_per_language = 1000;
  // Sentence length in words, inclusive bounds.
  int64_t min_words = 2;
  int64_t max_words = 8;
  // Seeds the generator: the same options give the same corpus on every machine.
  uint64_t seed = 1;
};

/// The pseudo-languages data.synthetic.languages accepts, in a fixed order: exactly those the
/// generator knows (data::SyntheticLanguages(); a trainer test checks the two agree).
std::vector<std::string> SyntheticDataLanguages();
/// Error naming the offending field ("languages", "pairs_per_language", ...) or OK.
[[nodiscard]] absl::Status ValidateSyntheticData(const SyntheticDataConfig& options);

/// The uniform random-token task (data.source: random_tokens): sources of uniformly drawn
/// symbols, targets a deterministic function of them. Mirrors data::RandomTokenTaskOptions
/// (data/random_token_task.h); validation pairs come from data.valid_fraction.
struct RandomTokensConfig {
  // Symbols to draw from (special tokens and the language tag come on top).
  int64_t vocab_size = 64;
  // Pairs to generate (before the validation split).
  int64_t pairs = 10000;
  // Source length in symbols, inclusive bounds.
  int64_t min_len = 4;
  int64_t max_len = 16;
  // The same symbols, or the same symbols in reverse order.
  RandomTokensTarget target = RandomTokensTarget::kCopy;
  uint64_t seed = 1;
};

/// Error naming the offending field ("vocab_size: must be in [2, 1048576] (got 0)") or OK.
[[nodiscard]] absl::Status ValidateRandomTokens(const RandomTokensConfig& options);

/// Where training text comes from and how it is batched.
struct DataConfig {
  // kSynthetic (generated multilingual task, SyntheticDataConfig), kTsv, kShards (binarised
  // shards and SentencePiece model made by `deepnet data prepare`, in shard_dir), or
  // kRandomTokens (RandomTokensConfig, its own symbol tokenizer).
  DataSource source = DataSource::kSynthetic;
  // Folder with shards.json, spm.model and <split>.<src>-<tgt>.bin (source: shards).
  std::string shard_dir;
  SyntheticDataConfig synthetic;
  RandomTokensConfig random_tokens;  // data.source: random_tokens.
  // TSV training file (source: tsv); lines `src<TAB>tgt` or `sl<TAB>tl<TAB>src<TAB>tgt`.
  std::string train_path;
  // TSV validation file; empty means hold out `valid_fraction` of the training pairs.
  std::string valid_path;
  // Languages of two-column TSV lines.
  std::string src_lang = "en";
  std::string tgt_lang = "xx";
  // Fraction of training pairs held out for validation when valid_path is empty, in [0, 0.5].
  double valid_fraction = 0.02;
  // Tokenizer of synthetic and TSV data: byte (UTF-8 bytes + language tags). Shards
  // (data.source: shards) use the SentencePiece model saved beside them instead.
  DataTokenizer tokenizer = DataTokenizer::kByte;
  // Padded tokens per batch (see data::TokenBatcherOptions::max_tokens).
  int64_t max_tokens = 4096;
  // Sentences per batch; 0 means bounded by max_tokens only.
  int64_t max_sentences = 0;
  // Sequence packing: > 0 packs each training batch's pairs into rows of up to this many
  // source and target positions (several pairs per row, attention kept within each pair);
  // 0 keeps one pair per row. Changes no batch's pairs, only their layout.
  int64_t pack_tokens = 0;
  // Longest example in tokens (tag and EOS included); longer pairs are dropped. 0: no limit.
  int64_t max_len = 256;
  // Language pairs are sampled with probability ∝ (n_p / N)^(1/temperature); > 0.
  double temperature = 5.0;
  // Batches the loader thread prepares ahead of training; >= 1.
  int64_t prefetch = 4;
};

struct OptimConfig {
  // Peak learning rate reached at the end of warm-up.
  double lr = 5e-4;
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-8;
  // Decoupled weight decay (AdamW); 0 disables.
  double weight_decay = 0.0;
  // Linear warm-up steps from warmup_init_lr to lr, then lr * sqrt(warmup / step).
  int64_t warmup_steps = 4000;
  double warmup_init_lr = 1e-7;
  // Global gradient-norm clip; 0 disables.
  double clip_norm = 0.0;
  // Batches whose gradients are summed before one optimiser step.
  int64_t accum_steps = 1;
  // Label smoothing epsilon of the cross-entropy, in [0, 1).
  double label_smoothing = 0.1;
};

struct TrainConfig {
  // Optimiser steps to run in total (a resumed run continues to this step).
  int64_t max_steps = 1000;
  // Wall-clock budget in minutes for this invocation; 0 means none. When it runs out the
  // trainer checkpoints and stops.
  double max_minutes = 0.0;
  // Seeds parameters, dropout and data order.
  uint64_t seed = 1;
  // Print progress every k steps.
  int64_t log_every = 10;
  // Measure the model-update norm ||F(x, theta_i) - F(x, theta_0)|| every K steps; 0 disables.
  int64_t probe_every = 100;
  // Sentences in the fixed probe batch.
  int64_t probe_sentences = 8;
  // Steps to probe, e.g. "1-9,10:100:10,200::100" (job/probe_schedule.h); empty: every
  // probe_every steps. When set it replaces probe_every.
  std::string probe_schedule;
  // TSV of "source<TAB>target" probe pairs (the first language pair's direction) instead of the
  // first validation pairs; empty: the validation pairs.
  std::string probe_file;
  // Per-layer diagnostics (LayerNorm-input norms, gradient norms) every k steps; 0 disables.
  int64_t diagnostics_every = 100;
  // Validation loss every k steps (and at the end); 0 disables.
  int64_t valid_every = 0;
  // Validation pairs used per language pair (the first ones of its split); 0 means all.
  int64_t valid_max_pairs = 0;
};

struct CheckpointConfig {
  // Folder for checkpoints; empty disables checkpointing.
  std::string dir;
  // Save every k steps (and at the end); 0 means only at the end.
  int64_t every_steps = 500;
  // Completed checkpoints to keep; 0 keeps all.
  int64_t keep_last = 3;
  // Resume from the latest good checkpoint in `dir` when there is one.
  bool resume = true;
};

struct RuntimeConfig {
  // OpenBLAS threads; 0 means one per core.
  int64_t blas_threads = 0;
  // LibTorch intra-op threads; measured 3-10x slower here when both pools oversubscribe cores.
  int64_t intra_op_threads = 1;
  // cpu, cuda or cuda:N.
  Device device;
  // Attention kernels: "auto" (fused on fp32 CPU, else SDPA with LibTorch >= 2.0, else
  // reference), "sdpa" (at::scaled_dot_product_attention; LibTorch >= 2.0) or "reference".
  AttentionChoice attention = AttentionChoice::kAuto;
  // Activation recomputation: "none" or "layer" (each layer keeps only its input in forward
  // and runs again in backward).
  Recompute recompute = Recompute::kNone;
  // Compute precision: "auto" (bf16 on cuda, fp32 on cpu), "fp32", "bf16" (bf16 matrix products
  // under autocast; fp32 master weights, Adam state, LayerNorm statistics and loss) or "tf32"
  // (fp32 tensors, TF32 matrix products on CUDA; fp32 on CPU). EffectivePrecision resolves auto.
  PrecisionChoice precision = PrecisionChoice::kAuto;
  // Dtype of the data-parallel gradient all-reduce: "fp32" or "bf16" (half the bytes over
  // NCCL; Gloo and MPI sum the bf16-rounded values in fp32). The sum is rounded to bf16 before
  // the fp32 optimiser step.
  GradReduce grad_reduce = GradReduce::kFp32;
};

/// runtime.precision with auto resolved for runtime.device: kFp32, kBf16 or kTf32.
PrecisionChoice EffectivePrecision(const RuntimeConfig& runtime);

/// How the job is split over processes: P pipeline stages x D data-parallel replicas = the
/// world size of the launch (mpirun -np, srun -n, or the coordinator's gang).
struct ParallelConfig {
  // P: the model's layers are split into this many contiguous stages, balanced by cost.
  int64_t pipeline_stages = 1;
  // D: replicas of every stage, each training on its own batches; gradients are summed.
  int64_t data_parallel = 1;
  // Micro-batches each replica pipelines per step (each one batch of the data stream); the
  // step's global batch is micro_batches x optim.accum_steps x data_parallel batches.
  int64_t micro_batches = 1;
  // Pipeline schedule: "1f1b" (activations of at most P micro-batches live) or "gpipe".
  Schedule schedule = Schedule::k1F1B;
  // "gloo" or "mpi" for CPU tensors, "nccl" for CUDA tensors.
  Backend backend = Backend::kGloo;
  // A collective or transfer not done within this many seconds fails the run; in
  // (0, kMaxTimeoutSeconds].
  double timeout_s = 300.0;
  // Where gloo/nccl ranks meet: "tcp://HOST:PORT" (rank 0 serves), "file:///PATH" (shared
  // file system), or empty for MASTER_ADDR/MASTER_PORT, else a file named after the launcher's
  // job id in /tmp.
  std::string rendezvous;
  // Gradient all-reduce bucket size in MiB; buckets are reduced while the backward pass of the
  // last micro-batch continues with earlier layers. > 0.
  double bucket_mb = 25.0;
  // How stages are balanced: "flops" (an analytic estimate; the same split on every run) or
  // "measured" (layer costs timed on rank 0 at start; better balance, may differ by run).
  Partition partition = Partition::kFlops;

  int64_t world_size() const { return pipeline_stages * data_parallel; }
};

/// The longest timeout a job may ask for (parallel.timeout_s, scheduling.hang_timeout_s,
/// scheduling.start_timeout_s): 30 days. Every timeout becomes milliseconds in an int64 and a
/// protobuf Duration somewhere; the bound keeps both far inside their ranges, so no job can make
/// the coordinator or a trainer overflow or abort.
inline constexpr double kMaxTimeoutSeconds = 30.0 * 24 * 3600;

/// Upper bounds of the spec's counts and sizes (docs/CONFIG.md, "Ranges"). They keep every
/// product the trainer or coordinator forms (parameters, tokens per batch, ranks, bytes) far
/// inside an int64 and a tensor's index range, so no spec can overflow or abort anything; the
/// memory admission check refuses what no slot can hold.
struct SpecCaps {
  static constexpr int64_t kLayers = 2000;                // model.encoder_layers, decoder_layers
  static constexpr int64_t kDModel = 65536;               // model.d_model
  static constexpr int64_t kHeads = 1024;                 // model.heads
  static constexpr int64_t kFfnDim = 262144;              // model.ffn_dim
  static constexpr int64_t kVocab = 4194304;              // model.vocab_size
  static constexpr int64_t kPositions = 1048576;          // model.max_positions (and data.max_len)
  static constexpr int64_t kMaxTokens = 16777216;         // data.max_tokens
  static constexpr int64_t kMaxSentences = 1048576;       // data.max_sentences
  static constexpr int64_t kPrefetch = 1024;              // data.prefetch
  static constexpr int64_t kPairsPerLanguage = 10000000;  // data.synthetic.pairs_per_language
  static constexpr int64_t kRandomSymbols = 1048576;      // data.random_tokens.vocab_size
  static constexpr int64_t kRandomPairs = 10000000;       // data.random_tokens.pairs
  static constexpr int64_t kRandomLength = 4096;          // data.random_tokens.min_len, max_len
  static constexpr int64_t kWords = 1000;                 // data.synthetic.min_words, max_words
  static constexpr int64_t kSteps = 1000000000000;        // steps and step intervals (10^12)
  static constexpr int64_t kBatches = 65536;              // optim.accum_steps, micro_batches
  static constexpr int64_t kProbeSentences = 4096;        // train.probe_sentences
  static constexpr int64_t kValidPairs = 1000000000;      // train.valid_max_pairs
  static constexpr int64_t kKeepLast = 1000000;           // checkpoint.keep_last
  static constexpr int64_t kThreads = 1024;               // runtime.*_threads
  static constexpr int64_t kRanks = 65536;                // pipeline_stages x data_parallel
  static constexpr int64_t kRestarts = 1000;              // max_restarts, guard.max_retries
  static constexpr int64_t kGuardWindow = 100000;         // guard.loss/plateau_window
  static constexpr int64_t kLabels = 64;                  // scheduling.labels entries
  static constexpr size_t kStringBytes = 4096;            // any string value (paths: PATH_MAX)
  static constexpr size_t kNameBytes = 256;               // name
  static constexpr double kMaxMinutes = 525600;           // train.max_minutes (365 days)
  static constexpr double kBucketMb = 65536;              // parallel.bucket_mb
  static constexpr double kTemperatureMin = 0.01;         // data.temperature in [min, max]
  static constexpr double kTemperatureMax = 1000;
  static constexpr double kRealMax = 1e9;  // lr, clip_norm, weight_decay, eps
};

/// How the coordinator schedules and supervises the job. `deepnet train` accepts and ignores it.
struct SchedulingConfig {
  // Higher runs first; any sign, within 32 bits.
  int64_t priority = 0;
  // Times a failed attempt is restarted (from the latest checkpoint) before the job fails; >= 0.
  int64_t max_restarts = 2;
  // An attempt that reports no progress for this many seconds is treated as hung; 0 disables.
  // In [0, kMaxTimeoutSeconds].
  double hang_timeout_s = 0.0;
  // How long all ranks of an attempt may take to start and meet at the rendezvous; in
  // (0, kMaxTimeoutSeconds].
  double start_timeout_s = 300.0;
  // Free-form labels; keys match [a-z0-9_.-]{1,63}, values are at most 256 characters.
  std::map<std::string, std::string> labels;
  // Team the job is charged to for fair sharing, besides its owner; one of the submitter's teams
  // (the coordinator checks). Empty: none.
  std::string team;
};

/// The divergence and plateau guard (train/training_guard.h, docs/CONFIG.md "guard"). A trigger
/// (a non-finite loss, a loss above loss_spike_factor x the median of the last loss_window steps,
/// or a relative update norm above update_bound) rolls the run back to its last good checkpoint,
/// optionally skipping the batches since then and lowering the learning rate; after max_retries
/// rollbacks the next trigger fails the job. A plateau of the validation loss is flagged.
struct GuardConfig {
  // "auto" (on when model.norm is deepnorm), "true" or "false". Off: a non-finite loss fails
  // the run at once, as before the guard existed.
  GuardSwitch enabled = GuardSwitch::kAuto;
  // "rollback" (restore the last good checkpoint and continue) or "fail" (stop with the reason).
  GuardAction action = GuardAction::kRollback;
  // Rollbacks allowed per job (kept in checkpoints); the trigger after the last one fails the
  // job. In [0, SpecCaps::kRestarts].
  int64_t max_retries = 3;
  // After a rollback, do not train again on the batches between the restored checkpoint and the
  // offending step (inclusive): the data stream continues where the offending step left it.
  bool skip_batches = true;
  // Factor applied to the learning rate at each rollback (cumulative), in (0, 1].
  double lr_factor = 0.5;
  // A step's loss above this many times the running median of the last loss_window steps is a
  // spike; 0 disables. 0 or > 1, at most SpecCaps::kRealMax.
  double loss_spike_factor = 10.0;
  // Steps in the running median; spikes are checked once it is full (the guard keeps twice as
  // many, so a rollback leaves it full). In [1, SpecCaps::kGuardWindow].
  int64_t loss_window = 50;
  // A relative update norm ||dF|| / ||F0|| (measured on probe steps) above this bound is a
  // trigger; 0 disables. In [0, SpecCaps::kRealMax].
  double update_bound = 0.0;
  // Validations without an improvement of the best validation loss by more than
  // plateau_min_delta that flag a plateau; 0 disables. In [0, SpecCaps::kGuardWindow].
  int64_t plateau_window = 5;
  double plateau_min_delta = 0.01;
  // On a plateau: "none" (event and metric only) or "rewarm" (restart the learning-rate
  // warm-up, optim.warmup_steps long, from the current step).
  PlateauAction plateau_action = PlateauAction::kNone;
};

/// The exit code of a `deepnet train` whose guard ran out of retries: restarting the job from
/// its checkpoints would replay the same divergence, so the coordinator fails it at once.
inline constexpr int kGuardExhaustedExitCode = 78;

/// A training job: one YAML schema shared by `deepnet train --config` and the coordinator's job
/// spec (coordinator/core/job_spec.h). Every field has a default; see docs/CONFIG.md.
struct JobConfig {
  std::string name = "deepnet";
  // vocab_size 0 means "take the tokenizer's vocabulary size".
  model::DeepNetConfig model = model::DeepNetConfig().vocab_size(0);
  DataConfig data;
  OptimConfig optim;
  TrainConfig train;
  CheckpointConfig checkpoint;
  RuntimeConfig runtime;
  ParallelConfig parallel;
  SchedulingConfig scheduling;
  GuardConfig guard;
};

/// Whether the guard runs for `config` (guard.enabled, "auto" resolved by model.norm).
bool GuardEnabled(const JobConfig& config);

class ConfigProblems;  // job/yaml_reader.h

/// Rules a caller adds on top of ParseJobConfig's own (the coordinator's service rules). It sees
/// the config as parsed, where a value that failed to parse kept its default, and adds its
/// problems to `problems` (whose Bad(path) tells which fields were already reported).
using JobConfigCheck = std::function<void(const JobConfig& config, ConfigProblems* problems)>;

/// Parses YAML text into a JobConfig. `overrides` are `dotted.key=value` strings applied on
/// top of the text (value parsed as YAML), e.g. "train.max_steps=10". Every problem is
/// reported at once, one per line, each naming the key path and the allowed values, e.g.
///   "optim.lr: must be > 0 (got -1)", "model.nrom: unknown key (allowed: encoder_layers, ...)".
/// `source_name` prefixes the error (usually the file path).
absl::StatusOr<JobConfig> ParseJobConfig(const std::string& yaml_text,
                                         const std::vector<std::string>& overrides = {},
                                         const std::string& source_name = "<config>");

/// ParseJobConfig with `extra_check` run after the schema's checks, even when they found
/// problems, so that one error lists every problem of both.
absl::StatusOr<JobConfig> ParseJobConfig(const std::string& yaml_text,
                                         const std::vector<std::string>& overrides,
                                         const std::string& source_name,
                                         const JobConfigCheck& extra_check);

/// Reads and parses a YAML file; an unreadable file is an error naming the path.
absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path,
                                        const std::vector<std::string>& overrides = {});

/// The effective configuration as YAML, every field present; ParseJobConfig(Dump(c)) == c.
std::string DumpJobConfig(const JobConfig& config);

}  // namespace deepnet::job
