#include "job/job_config.h"
#include "job/probe_schedule.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "job/yaml_limits.h"
#include "job/guard_config.h"
#include "job/yaml_reader.h"

namespace deepnet::job {
namespace {

void ReadModel(YamlMapReader r, model::DeepNetConfig* m) {
  r.Int("encoder_layers", &m->encoder_layers());
  r.Int("decoder_layers", &m->decoder_layers());
  r.Int("d_model", &m->d_model());
  r.Int("heads", &m->heads());
  r.Int("ffn_dim", &m->ffn_dim());
  r.Int("vocab_size", &m->vocab_size());
  r.Forbid("pad_id", "not user-settable (the padding id comes from the tokenizer)");
  r.Double("dropout", &m->dropout());
  r.Double("attention_dropout", &m->attention_dropout());
  r.Double("activation_dropout", &m->activation_dropout());
  r.Enum("activation", &m->activation(), {model::Activation::kRelu, model::Activation::kGelu},
         [](model::Activation a) { return model::ToString(a); });
  r.Int("max_positions", &m->max_positions());
  r.Bool("share_all_embeddings", &m->share_all_embeddings());
  r.Bool("share_decoder_input_output", &m->share_decoder_input_output());
  r.Enum("norm", &m->norm(),
         {model::NormVariant::kDeepNorm, model::NormVariant::kPostLn, model::NormVariant::kPreLn,
          model::NormVariant::kPostLnInit, model::NormVariant::kDeepNormPreLn},
         [](model::NormVariant n) { return model::ToString(n); });
  r.Double("layer_norm_eps", &m->layer_norm_eps());
  r.Enum("init", &m->init(), {model::InitScheme::kPaper, model::InitScheme::kScaledDefault},
         [](model::InitScheme i) { return model::ToString(i); });
  r.Enum("positions", &m->positions(),
         {model::PositionKind::kSinusoidal, model::PositionKind::kLearned},
         [](model::PositionKind p) { return model::ToString(p); });
  r.Finish();
}

void ReadData(YamlMapReader r, DataConfig* d) {
  r.String("source", &d->source);
  r.String("shard_dir", &d->shard_dir);
  YamlMapReader synthetic = r.Section("synthetic");
  synthetic.StringList("languages", &d->synthetic.languages);
  synthetic.Int("pairs_per_language", &d->synthetic.pairs_per_language);
  synthetic.Int("min_words", &d->synthetic.min_words);
  synthetic.Int("max_words", &d->synthetic.max_words);
  synthetic.Uint("seed", &d->synthetic.seed);
  synthetic.Finish();
  YamlMapReader random = r.Section("random_tokens");
  random.Int("vocab_size", &d->random_tokens.vocab_size);
  random.Int("pairs", &d->random_tokens.pairs);
  random.Int("min_len", &d->random_tokens.min_len);
  random.Int("max_len", &d->random_tokens.max_len);
  random.String("target", &d->random_tokens.target);
  random.Uint("seed", &d->random_tokens.seed);
  random.Finish();
  r.String("train_path", &d->train_path);
  r.String("valid_path", &d->valid_path);
  r.String("src_lang", &d->src_lang);
  r.String("tgt_lang", &d->tgt_lang);
  r.Double("valid_fraction", &d->valid_fraction);
  r.String("tokenizer", &d->tokenizer);
  r.Int("max_tokens", &d->max_tokens);
  r.Int("max_sentences", &d->max_sentences);
  r.Int("max_len", &d->max_len);
  r.Double("temperature", &d->temperature);
  r.Int("prefetch", &d->prefetch);
  r.Finish();
}

void ReadOptim(YamlMapReader r, OptimConfig* o) {
  r.Double("lr", &o->lr);
  r.DoubleTuple("betas", {&o->beta1, &o->beta2});
  r.Double("eps", &o->eps);
  r.Double("weight_decay", &o->weight_decay);
  r.Int("warmup_steps", &o->warmup_steps);
  r.Double("warmup_init_lr", &o->warmup_init_lr);
  r.Double("clip_norm", &o->clip_norm);
  r.Int("accum_steps", &o->accum_steps);
  r.Double("label_smoothing", &o->label_smoothing);
  r.Finish();
}

void ReadTrain(YamlMapReader r, TrainConfig* t) {
  r.Int("max_steps", &t->max_steps);
  r.Double("max_minutes", &t->max_minutes);
  r.Uint("seed", &t->seed);
  r.Int("log_every", &t->log_every);
  r.Int("probe_every", &t->probe_every);
  r.Int("probe_sentences", &t->probe_sentences);
  r.String("probe_schedule", &t->probe_schedule);
  r.String("probe_file", &t->probe_file);
  r.Int("diagnostics_every", &t->diagnostics_every);
  r.Int("valid_every", &t->valid_every);
  r.Int("valid_max_pairs", &t->valid_max_pairs);
  r.Finish();
}

void ReadJob(const YAML::Node& root, JobConfig* c, ConfigProblems* problems) {
  YamlMapReader top(root, "", problems);
  top.String("name", &c->name);
  ReadModel(top.Section("model"), &c->model);
  ReadData(top.Section("data"), &c->data);
  ReadOptim(top.Section("optim"), &c->optim);
  ReadTrain(top.Section("train"), &c->train);
  YamlMapReader checkpoint = top.Section("checkpoint");
  checkpoint.String("dir", &c->checkpoint.dir);
  checkpoint.Int("every_steps", &c->checkpoint.every_steps);
  checkpoint.Int("keep_last", &c->checkpoint.keep_last);
  checkpoint.Bool("resume", &c->checkpoint.resume);
  checkpoint.Finish();
  YamlMapReader runtime = top.Section("runtime");
  runtime.Int("blas_threads", &c->runtime.blas_threads);
  runtime.Int("intra_op_threads", &c->runtime.intra_op_threads);
  runtime.String("device", &c->runtime.device);
  runtime.String("attention", &c->runtime.attention);
  runtime.String("recompute", &c->runtime.recompute);
  runtime.String("precision", &c->runtime.precision);
  runtime.String("grad_reduce", &c->runtime.grad_reduce);
  runtime.Finish();
  YamlMapReader parallel = top.Section("parallel");
  parallel.Int("pipeline_stages", &c->parallel.pipeline_stages);
  parallel.Int("data_parallel", &c->parallel.data_parallel);
  parallel.Int("micro_batches", &c->parallel.micro_batches);
  parallel.String("schedule", &c->parallel.schedule);
  parallel.String("backend", &c->parallel.backend);
  parallel.Double("timeout_s", &c->parallel.timeout_s);
  parallel.String("rendezvous", &c->parallel.rendezvous);
  parallel.Double("bucket_mb", &c->parallel.bucket_mb);
  parallel.String("partition", &c->parallel.partition);
  parallel.Finish();
  YamlMapReader scheduling = top.Section("scheduling");
  scheduling.Int("priority", &c->scheduling.priority);
  scheduling.Int("max_restarts", &c->scheduling.max_restarts);
  scheduling.Double("hang_timeout_s", &c->scheduling.hang_timeout_s);
  scheduling.Double("start_timeout_s", &c->scheduling.start_timeout_s);
  scheduling.StringMap("labels", &c->scheduling.labels);
  scheduling.String("team", &c->scheduling.team);
  scheduling.Finish();
  ReadGuard(top.Section("guard"), &c->guard);
  top.Finish();
}

// Range checks on the parsed values. A value that failed to parse kept its (valid) default,
// so only the cross-field checks need to skip it.
class RangeChecker {
 public:
  explicit RangeChecker(ConfigProblems* problems) : problems_(problems) {}

  void AtLeast(const std::string& path, int64_t v, int64_t min) {
    if (v < min) problems_->Add(path, absl::StrCat("must be >= ", min, " (got ", v, ")"));
  }
  void AtMost(const std::string& path, int64_t v, int64_t max) {
    if (v > max) problems_->Add(path, absl::StrCat("must be <= ", max, " (got ", v, ")"));
  }
  void AtMost(const std::string& path, double v, double max) {
    if (v > max) {
      problems_->Add(
          path, absl::StrCat("must be <= ", ShortestDouble(max), " (got ", ShortestDouble(v), ")"));
    }
  }
  void Positive(const std::string& path, int64_t v) {
    if (v <= 0) problems_->Add(path, absl::StrCat("must be > 0 (got ", v, ")"));
  }
  void Positive(const std::string& path, double v) {
    if (!(v > 0)) problems_->Add(path, absl::StrCat("must be > 0 (got ", ShortestDouble(v), ")"));
  }
  void NonNegative(const std::string& path, double v) {
    if (!(v >= 0)) problems_->Add(path, absl::StrCat("must be >= 0 (got ", ShortestDouble(v), ")"));
  }
  // Seconds in (0, kMaxTimeoutSeconds], or [0, ...] when `zero_allowed`; NaN and inf fail.
  void Timeout(const std::string& path, double v, bool zero_allowed) {
    if ((zero_allowed ? v >= 0 : v > 0) && v <= kMaxTimeoutSeconds) return;
    problems_->Add(path, absl::StrCat("must be in ", zero_allowed ? "[" : "(", "0, ",
                                      ShortestDouble(kMaxTimeoutSeconds),
                                      "] s (at most 30 days; got ", ShortestDouble(v), ")"));
  }
  // [lo, hi) or, with `hi_inclusive`, [lo, hi].
  void InRange(const std::string& path, double v, double lo, double hi, bool hi_inclusive) {
    if (v >= lo && (hi_inclusive ? v <= hi : v < hi)) return;
    problems_->Add(path, absl::StrCat("must be in [", ShortestDouble(lo), ", ", ShortestDouble(hi),
                                      hi_inclusive ? "]" : ")", " (got ", ShortestDouble(v), ")"));
  }
  void OneOf(const std::string& path, const std::string& v,
             std::initializer_list<const char*> allowed) {
    for (const char* a : allowed) {
      if (v == a) return;
    }
    problems_->Add(
        path, absl::StrCat("must be one of ", absl::StrJoin(allowed, ", "), " (got '", v, "')"));
  }
  bool AnyBad(std::initializer_list<const char*> paths) const {
    for (const char* p : paths) {
      if (problems_->Bad(p)) return true;
    }
    return false;
  }

 private:
  ConfigProblems* problems_;
};

constexpr int64_t kMaxRanks = SpecCaps::kRanks;
constexpr size_t kMaxLabelKeyLength = 63;
constexpr size_t kMaxLabelValueLength = 256;

bool IsValidLabelKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxLabelKeyLength) return false;
  return std::all_of(key.begin(), key.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
           ch == '-';
  });
}

bool IsValidDevice(const std::string& device) {
  if (device == "cpu" || device == "cuda") return true;
  const std::string_view prefix = "cuda:";
  if (device.size() <= prefix.size() || device.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  return std::all_of(device.begin() + prefix.size(), device.end(),
                     [](char ch) { return ch >= '0' && ch <= '9'; });
}

void Validate(const JobConfig& c, ConfigProblems* problems) {
  RangeChecker check(problems);
  const model::DeepNetConfig& m = c.model;
  check.AtLeast("model.encoder_layers", m.encoder_layers(), 0);
  check.AtLeast("model.decoder_layers", m.decoder_layers(), 0);
  check.AtMost("model.encoder_layers", m.encoder_layers(), SpecCaps::kLayers);
  check.AtMost("model.decoder_layers", m.decoder_layers(), SpecCaps::kLayers);
  check.AtMost("model.d_model", m.d_model(), SpecCaps::kDModel);
  check.AtMost("model.heads", m.heads(), SpecCaps::kHeads);
  check.AtMost("model.ffn_dim", m.ffn_dim(), SpecCaps::kFfnDim);
  check.AtMost("model.vocab_size", m.vocab_size(), SpecCaps::kVocab);
  check.AtMost("model.max_positions", m.max_positions(), SpecCaps::kPositions);
  check.AtMost("model.layer_norm_eps", m.layer_norm_eps(), 1.0);
  if (m.encoder_layers() == 0 && m.decoder_layers() == 0) {
    problems->Add("model.encoder_layers",
                  "model.encoder_layers and model.decoder_layers cannot both be 0");
  }
  check.Positive("model.d_model", m.d_model());
  check.Positive("model.heads", m.heads());
  if (m.d_model() > 0 && m.heads() > 0 && m.d_model() % m.heads() != 0 &&
      !check.AnyBad({"model.d_model", "model.heads"})) {
    problems->Add("model.d_model", absl::StrCat("must be divisible by model.heads (", m.d_model(),
                                                " % ", m.heads(), " != 0)"));
  }
  check.Positive("model.ffn_dim", m.ffn_dim());
  check.AtLeast("model.vocab_size", m.vocab_size(), 0);
  check.InRange("model.dropout", m.dropout(), 0, 1, false);
  check.InRange("model.attention_dropout", m.attention_dropout(), 0, 1, false);
  check.InRange("model.activation_dropout", m.activation_dropout(), 0, 1, false);
  check.Positive("model.max_positions", m.max_positions());
  check.Positive("model.layer_norm_eps", m.layer_norm_eps());

  const DataConfig& d = c.data;
  check.OneOf("data.source", d.source, {"synthetic", "tsv", "shards", "random_tokens"});
  if (d.source == "tsv" && d.train_path.empty()) {
    problems->Add("data.train_path", "must be set when data.source is tsv");
  }
  if (d.source == "shards" && d.shard_dir.empty()) {
    problems->Add("data.shard_dir", "must be set when data.source is shards");
  }
  check.Positive("data.temperature", d.temperature);
  if (!problems->Bad("data.temperature") &&
      !(d.temperature >= SpecCaps::kTemperatureMin && d.temperature <= SpecCaps::kTemperatureMax)) {
    check.InRange("data.temperature", d.temperature, SpecCaps::kTemperatureMin,
                  SpecCaps::kTemperatureMax, true);
  }
  check.AtMost("data.prefetch", d.prefetch, SpecCaps::kPrefetch);
  check.AtMost("data.synthetic.pairs_per_language", d.synthetic.pairs_per_language,
               SpecCaps::kPairsPerLanguage);
  check.AtMost("data.synthetic.min_words", d.synthetic.min_words, SpecCaps::kWords);
  check.AtMost("data.synthetic.max_words", d.synthetic.max_words, SpecCaps::kWords);
  check.AtLeast("data.prefetch", d.prefetch, 1);
  if (absl::Status s = ValidateSyntheticData(d.synthetic); !s.ok()) {
    problems->Add("", absl::StrCat("data.synthetic.", s.message()));
  }
  if (absl::Status s = ValidateRandomTokens(d.random_tokens); !s.ok()) {
    problems->Add("", absl::StrCat("data.random_tokens.", s.message()));
  } else if (d.source == "random_tokens" && d.max_len > 0 &&
             d.random_tokens.max_len + 2 > d.max_len) {
    problems->Add("data.random_tokens.max_len",
                  absl::StrCat("must be <= data.max_len - 2 (tag and EOS): ",
                               d.random_tokens.max_len, " + 2 > ", d.max_len));
  }
  check.InRange("data.valid_fraction", d.valid_fraction, 0, 0.5, true);
  check.OneOf("data.tokenizer", d.tokenizer, {"byte"});
  check.AtLeast("data.max_tokens", d.max_tokens, 1);
  check.AtLeast("data.max_sentences", d.max_sentences, 0);
  check.AtLeast("data.max_len", d.max_len, 0);
  check.AtMost("data.max_tokens", d.max_tokens, SpecCaps::kMaxTokens);
  check.AtMost("data.max_sentences", d.max_sentences, SpecCaps::kMaxSentences);
  check.AtMost("data.max_len", d.max_len, SpecCaps::kPositions);
  // Every kept example must fit the sinusoidal position table.
  if (d.max_len > m.max_positions() && m.max_positions() > 0 &&
      !check.AnyBad({"data.max_len", "model.max_positions"})) {
    problems->Add("data.max_len", absl::StrCat("must be <= model.max_positions (", d.max_len, " > ",
                                               m.max_positions(), ")"));
  }

  const OptimConfig& o = c.optim;
  check.Positive("optim.lr", o.lr);
  check.AtMost("optim.lr", o.lr, SpecCaps::kRealMax);
  check.AtMost("optim.eps", o.eps, SpecCaps::kRealMax);
  check.AtMost("optim.weight_decay", o.weight_decay, SpecCaps::kRealMax);
  check.AtMost("optim.clip_norm", o.clip_norm, SpecCaps::kRealMax);
  check.AtMost("optim.warmup_steps", o.warmup_steps, SpecCaps::kSteps);
  check.AtMost("optim.accum_steps", o.accum_steps, SpecCaps::kBatches);
  check.InRange("optim.betas[0]", o.beta1, 0, 1, false);
  check.InRange("optim.betas[1]", o.beta2, 0, 1, false);
  check.Positive("optim.eps", o.eps);
  check.NonNegative("optim.weight_decay", o.weight_decay);
  check.AtLeast("optim.warmup_steps", o.warmup_steps, 0);
  check.NonNegative("optim.warmup_init_lr", o.warmup_init_lr);
  if (o.warmup_init_lr > o.lr && !check.AnyBad({"optim.warmup_init_lr", "optim.lr"})) {
    problems->Add("optim.warmup_init_lr",
                  absl::StrCat("must be <= optim.lr (", ShortestDouble(o.warmup_init_lr), " > ",
                               ShortestDouble(o.lr), ")"));
  }
  check.NonNegative("optim.clip_norm", o.clip_norm);
  check.AtLeast("optim.accum_steps", o.accum_steps, 1);
  check.InRange("optim.label_smoothing", o.label_smoothing, 0, 1, false);

  const TrainConfig& t = c.train;
  check.AtLeast("train.max_steps", t.max_steps, 1);
  check.NonNegative("train.max_minutes", t.max_minutes);
  check.AtLeast("train.log_every", t.log_every, 1);
  check.AtLeast("train.probe_every", t.probe_every, 0);
  check.AtLeast("train.probe_sentences", t.probe_sentences, 1);
  check.AtLeast("train.valid_every", t.valid_every, 0);
  check.AtLeast("train.valid_max_pairs", t.valid_max_pairs, 0);
  check.AtMost("train.max_steps", t.max_steps, SpecCaps::kSteps);
  check.AtMost("train.max_minutes", t.max_minutes, SpecCaps::kMaxMinutes);
  check.AtMost("train.log_every", t.log_every, SpecCaps::kSteps);
  check.AtMost("train.probe_every", t.probe_every, SpecCaps::kSteps);
  check.AtMost("train.probe_sentences", t.probe_sentences, SpecCaps::kProbeSentences);
  check.AtLeast("train.diagnostics_every", t.diagnostics_every, 0);
  check.AtMost("train.diagnostics_every", t.diagnostics_every, SpecCaps::kSteps);
  if (auto schedule = ProbeSchedule::Parse(t.probe_schedule, ""); !schedule.ok()) {
    problems->Add("train.probe_schedule", std::string(schedule.status().message()));
  }
  check.AtMost("train.valid_every", t.valid_every, SpecCaps::kSteps);
  check.AtMost("train.valid_max_pairs", t.valid_max_pairs, SpecCaps::kValidPairs);

  check.AtLeast("checkpoint.every_steps", c.checkpoint.every_steps, 0);
  check.AtLeast("checkpoint.keep_last", c.checkpoint.keep_last, 0);
  check.AtMost("checkpoint.every_steps", c.checkpoint.every_steps, SpecCaps::kSteps);
  check.AtMost("checkpoint.keep_last", c.checkpoint.keep_last, SpecCaps::kKeepLast);

  check.AtLeast("runtime.blas_threads", c.runtime.blas_threads, 0);
  check.AtLeast("runtime.intra_op_threads", c.runtime.intra_op_threads, 1);
  check.AtMost("runtime.blas_threads", c.runtime.blas_threads, SpecCaps::kThreads);
  check.AtMost("runtime.intra_op_threads", c.runtime.intra_op_threads, SpecCaps::kThreads);
  if (!IsValidDevice(c.runtime.device)) {
    problems->Add("runtime.device",
                  absl::StrCat("must be cpu, cuda or cuda:N (got '", c.runtime.device, "')"));
  }
  check.OneOf("runtime.attention", c.runtime.attention, {"auto", "sdpa", "reference"});
  check.OneOf("runtime.recompute", c.runtime.recompute, {"none", "layer"});
  check.OneOf("runtime.precision", c.runtime.precision, {"auto", "fp32", "bf16", "tf32"});
  check.OneOf("runtime.grad_reduce", c.runtime.grad_reduce, {"fp32", "bf16"});

  const ParallelConfig& par = c.parallel;
  check.AtLeast("parallel.pipeline_stages", par.pipeline_stages, 1);
  check.AtLeast("parallel.data_parallel", par.data_parallel, 1);
  check.AtLeast("parallel.micro_batches", par.micro_batches, 1);
  check.AtMost("parallel.micro_batches", par.micro_batches, SpecCaps::kBatches);
  // PartitionStages (pipeline/stage_partition.h) splits the layers into any P in [1, layers]
  // and refuses every other P; the launchers count ranks in 32 bits.
  check.AtMost("parallel.pipeline_stages", par.pipeline_stages, kMaxRanks);
  check.AtMost("parallel.data_parallel", par.data_parallel, kMaxRanks);
  int64_t layers = 0;
  const bool layers_known =
      !check.AnyBad({"model.encoder_layers", "model.decoder_layers"}) &&
      !__builtin_add_overflow(m.encoder_layers(), m.decoder_layers(), &layers) && layers > 0;
  if (layers_known && par.pipeline_stages > layers &&
      !check.AnyBad({"parallel.pipeline_stages"})) {
    problems->Add("parallel.pipeline_stages",
                  absl::StrCat("must be <= the model's ", layers, " layers (got ",
                               par.pipeline_stages, ")"));
  }
  if (!check.AnyBad({"parallel.pipeline_stages", "parallel.data_parallel"}) &&
      par.pipeline_stages > kMaxRanks / par.data_parallel) {
    problems->Add("parallel.data_parallel",
                  absl::StrCat("parallel.pipeline_stages x parallel.data_parallel must be <= ",
                               kMaxRanks, " ranks (got ", par.pipeline_stages, " x ",
                               par.data_parallel, ")"));
  }
  if (par.schedule != "1f1b" && par.schedule != "gpipe") {
    problems->Add("parallel.schedule", absl::StrCat("must be 1f1b or gpipe (got '", par.schedule, "')"));
  }
  if (par.backend != "gloo" && par.backend != "mpi" && par.backend != "nccl") {
    problems->Add("parallel.backend",
                  absl::StrCat("must be gloo, mpi or nccl (got '", par.backend, "')"));
  } else if (par.backend == "nccl" && c.runtime.device.rfind("cuda", 0) != 0) {
    problems->Add("parallel.backend", "nccl moves CUDA tensors: set runtime.device to cuda");
  }
  // gloo and mpi with runtime.device cuda stage tensors through host memory (pinned buffers for
  // pipeline messages, comm::HostStagedCommunicator for the rest): slower than nccl, but it lets
  // several ranks share one GPU, which NCCL refuses.
  check.Timeout("parallel.timeout_s", par.timeout_s, /*zero_allowed=*/false);
  if (!(par.bucket_mb > 0)) {
    problems->Add("parallel.bucket_mb", absl::StrCat("must be > 0 (got ", ShortestDouble(par.bucket_mb), ")"));
  }
  check.AtMost("parallel.bucket_mb", par.bucket_mb, SpecCaps::kBucketMb);
  if (par.partition != "flops" && par.partition != "measured") {
    problems->Add("parallel.partition",
                  absl::StrCat("must be flops or measured (got '", par.partition, "')"));
  }
  if (!par.rendezvous.empty() && par.rendezvous.rfind("tcp://", 0) != 0 &&
      par.rendezvous.rfind("file://", 0) != 0 && par.rendezvous.rfind("grpc://", 0) != 0) {
    problems->Add("parallel.rendezvous",
                  absl::StrCat("must start with tcp://, file:// or grpc:// (got '",
                               par.rendezvous, "')"));
  }

  ValidateGuard(c.guard, problems);

  const SchedulingConfig& sched = c.scheduling;
  check.AtLeast("scheduling.priority", sched.priority, std::numeric_limits<int32_t>::min());
  check.AtMost("scheduling.priority", sched.priority, std::numeric_limits<int32_t>::max());
  check.AtLeast("scheduling.max_restarts", sched.max_restarts, 0);
  check.AtMost("scheduling.max_restarts", sched.max_restarts, SpecCaps::kRestarts);
  check.Timeout("scheduling.hang_timeout_s", sched.hang_timeout_s, /*zero_allowed=*/true);
  check.Timeout("scheduling.start_timeout_s", sched.start_timeout_s, /*zero_allowed=*/false);
  if (sched.labels.size() > static_cast<size_t>(SpecCaps::kLabels)) {
    problems->Add("scheduling.labels", absl::StrCat("at most ", SpecCaps::kLabels, " labels (got ",
                                                    sched.labels.size(), ")"));
  }
  if (c.name.size() > SpecCaps::kNameBytes) {
    problems->Add("name", absl::StrCat("must be at most ", SpecCaps::kNameBytes, " bytes (got ",
                                       c.name.size(), ")"));
  }
  for (const auto& [key, value] : sched.labels) {
    if (!IsValidLabelKey(key)) {
      problems->Add("scheduling.labels",
                    absl::StrCat("key '", key, "' must match [a-z0-9_.-]{1,", kMaxLabelKeyLength,
                                 "}"));
    }
    if (value.size() > kMaxLabelValueLength) {
      problems->Add(absl::StrCat("scheduling.labels.", key),
                    absl::StrCat("must be at most ", kMaxLabelValueLength, " characters (got ",
                                 value.size(), ")"));
    }
  }
}

// Sets `dotted.key=value` in `root` (a map), creating intermediate maps. Unknown keys are left
// for the reader to report, with the same message as in the file.
void ApplyOverride(const std::string& override_text, YAML::Node root, ConfigProblems* problems) {
  const std::string where = absl::StrCat("override '", override_text, "'");
  const size_t eq = override_text.find('=');
  if (eq == std::string::npos) {
    problems->Add(where, "expected dotted.key=value, e.g. train.max_steps=100");
    return;
  }
  const absl::string_view key =
      absl::StripAsciiWhitespace(absl::string_view(override_text).substr(0, eq));
  std::vector<std::string> parts = absl::StrSplit(key, '.');
  for (const std::string& part : parts) {
    if (part.empty()) {
      problems->Add(where, "empty key name in the dotted path");
      return;
    }
  }
  YAML::Node value;
  if (absl::Status limits = CheckYamlLimits(override_text.substr(eq + 1)); !limits.ok()) {
    problems->Add(where, std::string(limits.message()));
    return;
  }
  try {
    value = YAML::Load(override_text.substr(eq + 1));
  } catch (const YAML::ParserException& e) {
    problems->Add(where, absl::StrCat("value is not valid YAML: ", e.msg));
    return;
  }
  // Node assignment rebinds the referenced node inside the tree; walk with reset() instead.
  YAML::Node cur;
  cur.reset(root);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = cur[parts[i]];
    if (!child.IsDefined() || child.IsNull()) {
      child = YAML::Node(YAML::NodeType::Map);
    } else if (!child.IsMap()) {
      problems->Add(where, absl::StrCat(absl::StrJoin(parts.begin(), parts.begin() + i + 1, "."),
                                        " is not a map (got ", DescribeYaml(child), ")"));
      return;
    }
    cur.reset(child);
  }
  cur[parts.back()] = value;
}

}  // namespace

absl::StatusOr<JobConfig> ParseJobConfig(const std::string& yaml_text,
                                         const std::vector<std::string>& overrides,
                                         const std::string& source_name) {
  return ParseJobConfig(yaml_text, overrides, source_name, JobConfigCheck());
}

absl::StatusOr<JobConfig> ParseJobConfig(const std::string& yaml_text,
                                         const std::vector<std::string>& overrides,
                                         const std::string& source_name,
                                         const JobConfigCheck& extra_check) {
  try {
    ConfigProblems problems;
    if (absl::Status limits = CheckYamlLimits(yaml_text); !limits.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", limits.message()));
    }
    std::vector<YAML::Node> documents;
    try {
      documents = YAML::LoadAll(yaml_text);
    } catch (const YAML::ParserException& e) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": YAML syntax error at line ",
                                                     e.mark.line + 1, ", column ",
                                                     e.mark.column + 1, ": ", e.msg));
    }
    if (documents.size() > 1) {
      problems.Add("", absl::StrCat("expected one YAML document (got ", documents.size(), ")"));
    }
    // An empty file (or a lone `~`) is a job with every default.
    YAML::Node root(YAML::NodeType::Map);
    if (!documents.empty() && !documents[0].IsNull()) root.reset(documents[0]);
    if (!root.IsMap()) {
      problems.Add("",
                   absl::StrCat("expected a map of sections (name, model, data, optim, "
                                "train, checkpoint, runtime, parallel, scheduling, guard) at the "
                                "top level (got ",
                                DescribeYaml(root), ")"));
      return problems.ToStatus(source_name);
    }
    for (const std::string& override_text : overrides) {
      ApplyOverride(override_text, root, &problems);
    }
    JobConfig config;
    ReadJob(root, &config, &problems);
    Validate(config, &problems);
    if (extra_check) extra_check(config, &problems);
    if (!problems.empty()) return problems.ToStatus(source_name);
    return config;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(source_name, ": reading the job config: ", e.what()));
  }
}

absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path,
                                        const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("job config ", path, ": no such file"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("job config ", path, ": is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("job config ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("job config ", path, ": read failed"));
  }
  return ParseJobConfig(text.str(), overrides, path);
}

std::string EffectivePrecision(const RuntimeConfig& runtime) {
  if (runtime.precision != "auto") return runtime.precision;
  return runtime.device.rfind("cuda", 0) == 0 ? "bf16" : "fp32";
}

std::vector<std::string> SyntheticDataLanguages() { return {"rev", "cap", "gr", "pig", "cp"}; }

absl::Status ValidateSyntheticData(const SyntheticDataConfig& options) {
  const std::vector<std::string> known = SyntheticDataLanguages();
  for (size_t i = 0; i < options.languages.size(); ++i) {
    const std::string& lang = options.languages[i];
    if (std::find(known.begin(), known.end(), lang) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "languages: unknown language '", lang, "' (allowed: ", absl::StrJoin(known, ", "), ")"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (options.languages[j] == lang) {
        return absl::InvalidArgumentError(
            absl::StrCat("languages: '", lang, "' is listed more than once"));
      }
    }
  }
  if (options.pairs_per_language <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pairs_per_language: must be > 0 (got ", options.pairs_per_language, ")"));
  }
  if (options.min_words < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_words: must be >= 1 (got ", options.min_words, ")"));
  }
  if (options.max_words < options.min_words) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_words/max_words: min_words must be <= max_words (got ", options.min_words,
                     " > ", options.max_words, ")"));
  }
  return absl::OkStatus();
}

}  // namespace deepnet::job
