#include "job/job_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "job/yaml_reader.h"

namespace deepnet::job {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// The error text of a config that must fail to parse.
std::string ParseError(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(yaml, overrides, "job.yaml");
  EXPECT_FALSE(config.ok()) << "parsed unexpectedly:\n" << yaml;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

JobConfig ParseOk(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  absl::StatusOr<JobConfig> config = ParseJobConfig(yaml, overrides, "job.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : JobConfig();
}

int CountLines(const std::string& text) {
  return text.empty() ? 0 : 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Field by field, so that a field the dumper or parser forgets is named in the failure.
void ExpectSameConfig(const JobConfig& a, const JobConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.model.encoder_layers(), b.model.encoder_layers());
  EXPECT_EQ(a.model.decoder_layers(), b.model.decoder_layers());
  EXPECT_EQ(a.model.d_model(), b.model.d_model());
  EXPECT_EQ(a.model.heads(), b.model.heads());
  EXPECT_EQ(a.model.ffn_dim(), b.model.ffn_dim());
  EXPECT_EQ(a.model.vocab_size(), b.model.vocab_size());
  EXPECT_EQ(a.model.pad_id(), b.model.pad_id());
  EXPECT_EQ(a.model.dropout(), b.model.dropout());
  EXPECT_EQ(a.model.attention_dropout(), b.model.attention_dropout());
  EXPECT_EQ(a.model.activation_dropout(), b.model.activation_dropout());
  EXPECT_EQ(a.model.activation(), b.model.activation());
  EXPECT_EQ(a.model.max_positions(), b.model.max_positions());
  EXPECT_EQ(a.model.share_all_embeddings(), b.model.share_all_embeddings());
  EXPECT_EQ(a.model.share_decoder_input_output(), b.model.share_decoder_input_output());
  EXPECT_EQ(a.model.norm(), b.model.norm());
  EXPECT_EQ(a.model.layer_norm_eps(), b.model.layer_norm_eps());
  EXPECT_EQ(a.model.init(), b.model.init());
  EXPECT_EQ(a.model.positions(), b.model.positions());
  EXPECT_EQ(a.data.source, b.data.source);
  EXPECT_EQ(a.data.synthetic.languages, b.data.synthetic.languages);
  EXPECT_EQ(a.data.synthetic.pairs_per_language, b.data.synthetic.pairs_per_language);
  EXPECT_EQ(a.data.synthetic.min_words, b.data.synthetic.min_words);
  EXPECT_EQ(a.data.synthetic.max_words, b.data.synthetic.max_words);
  EXPECT_EQ(a.data.synthetic.seed, b.data.synthetic.seed);
  EXPECT_EQ(a.data.train_path, b.data.train_path);
  EXPECT_EQ(a.data.valid_path, b.data.valid_path);
  EXPECT_EQ(a.data.src_lang, b.data.src_lang);
  EXPECT_EQ(a.data.tgt_lang, b.data.tgt_lang);
  EXPECT_EQ(a.data.valid_fraction, b.data.valid_fraction);
  EXPECT_EQ(a.data.tokenizer, b.data.tokenizer);
  EXPECT_EQ(a.data.max_tokens, b.data.max_tokens);
  EXPECT_EQ(a.data.max_sentences, b.data.max_sentences);
  EXPECT_EQ(a.data.max_len, b.data.max_len);
  EXPECT_EQ(a.optim.lr, b.optim.lr);
  EXPECT_EQ(a.optim.beta1, b.optim.beta1);
  EXPECT_EQ(a.optim.beta2, b.optim.beta2);
  EXPECT_EQ(a.optim.eps, b.optim.eps);
  EXPECT_EQ(a.optim.weight_decay, b.optim.weight_decay);
  EXPECT_EQ(a.optim.warmup_steps, b.optim.warmup_steps);
  EXPECT_EQ(a.optim.warmup_init_lr, b.optim.warmup_init_lr);
  EXPECT_EQ(a.optim.clip_norm, b.optim.clip_norm);
  EXPECT_EQ(a.optim.accum_steps, b.optim.accum_steps);
  EXPECT_EQ(a.optim.label_smoothing, b.optim.label_smoothing);
  EXPECT_EQ(a.train.max_steps, b.train.max_steps);
  EXPECT_EQ(a.train.max_minutes, b.train.max_minutes);
  EXPECT_EQ(a.train.seed, b.train.seed);
  EXPECT_EQ(a.train.log_every, b.train.log_every);
  EXPECT_EQ(a.train.probe_every, b.train.probe_every);
  EXPECT_EQ(a.train.probe_sentences, b.train.probe_sentences);
  EXPECT_EQ(a.train.valid_every, b.train.valid_every);
  EXPECT_EQ(a.checkpoint.dir, b.checkpoint.dir);
  EXPECT_EQ(a.checkpoint.every_steps, b.checkpoint.every_steps);
  EXPECT_EQ(a.checkpoint.keep_last, b.checkpoint.keep_last);
  EXPECT_EQ(a.checkpoint.resume, b.checkpoint.resume);
  EXPECT_EQ(a.runtime.blas_threads, b.runtime.blas_threads);
  EXPECT_EQ(a.runtime.intra_op_threads, b.runtime.intra_op_threads);
  EXPECT_EQ(a.runtime.device, b.runtime.device);
  EXPECT_EQ(a.runtime.attention, b.runtime.attention);
  EXPECT_EQ(a.runtime.recompute, b.runtime.recompute);
  EXPECT_EQ(a.runtime.precision, b.runtime.precision);
  EXPECT_EQ(a.runtime.grad_reduce, b.runtime.grad_reduce);
  EXPECT_EQ(a.scheduling.priority, b.scheduling.priority);
  EXPECT_EQ(a.scheduling.max_restarts, b.scheduling.max_restarts);
  EXPECT_EQ(a.scheduling.hang_timeout_s, b.scheduling.hang_timeout_s);
  EXPECT_EQ(a.scheduling.start_timeout_s, b.scheduling.start_timeout_s);
  EXPECT_EQ(a.scheduling.labels, b.scheduling.labels);
}

// Every section, every user-settable field different from its default.
constexpr char kFullJob[] = R"yaml(
name: wmt-deep
model:
  encoder_layers: 100
  decoder_layers: 0
  d_model: 96
  heads: 12
  ffn_dim: 384
  vocab_size: 300
  dropout: 0.25
  attention_dropout: 0.05
  activation_dropout: 0.125
  activation: gelu
  max_positions: 512
  share_all_embeddings: false
  share_decoder_input_output: false
  norm: pre_ln
  layer_norm_eps: 1.0e-6
data:
  source: tsv
  synthetic:
    languages: [rev, gr]
    pairs_per_language: 50
    min_words: 3
    max_words: 5
    seed: 18446744073709551615
  train_path: corpora/train.tsv
  valid_path: corpora/valid.tsv
  src_lang: de
  tgt_lang: fr
  valid_fraction: 0.5
  tokenizer: byte
  max_tokens: 2048
  max_sentences: 64
  max_len: 128
optim:
  lr: 0.001
  betas: [0.8, 0.999]
  eps: 1e-6
  weight_decay: 0.01
  warmup_steps: 0
  warmup_init_lr: 0
  clip_norm: 1.5
  accum_steps: 4
  label_smoothing: 0
train:
  max_steps: 50000
  max_minutes: 90.5
  seed: 42
  log_every: 1
  probe_every: 0
  probe_sentences: 16
  valid_every: 250
checkpoint:
  dir: /tmp/ckpt dir
  every_steps: 0
  keep_last: 0
  resume: false
runtime:
  blas_threads: 2
  intra_op_threads: 3
  device: cuda:1
  attention: reference
  recompute: layer
scheduling:
  priority: -3
  max_restarts: 5
  hang_timeout_s: 120.5
  start_timeout_s: 60
  labels:
    team: mt
    exp.id: "42"
    note: "a: #b"
)yaml";

TEST(JobConfigTest, EmptyTextGivesDefaults) {
  for (const char* text : {"", "# nothing but a comment\n", "~\n", "---\n"}) {
    SCOPED_TRACE(text);
    ExpectSameConfig(ParseOk(text), JobConfig());
  }
  JobConfig defaults = ParseOk("");
  EXPECT_EQ(defaults.model.vocab_size(), 0);  // From the tokenizer.
  EXPECT_EQ(ToString(defaults.data.source), "synthetic");
  EXPECT_EQ(defaults.checkpoint.dir, "");
}

TEST(JobConfigTest, EmptySectionsGiveDefaults) {
  ExpectSameConfig(ParseOk("model:\ndata:\n  synthetic:\noptim: {}\ntrain:\n"), JobConfig());
}

TEST(JobConfigTest, ParsesEverySection) {
  JobConfig c = ParseOk(kFullJob);
  EXPECT_EQ(c.name, "wmt-deep");
  EXPECT_EQ(c.model.encoder_layers(), 100);
  EXPECT_EQ(c.model.decoder_layers(), 0);
  EXPECT_EQ(c.model.d_model(), 96);
  EXPECT_EQ(c.model.heads(), 12);
  EXPECT_EQ(c.model.ffn_dim(), 384);
  EXPECT_EQ(c.model.vocab_size(), 300);
  EXPECT_EQ(c.model.dropout(), 0.25);
  EXPECT_EQ(c.model.attention_dropout(), 0.05);
  EXPECT_EQ(c.model.activation_dropout(), 0.125);
  EXPECT_EQ(c.model.activation(), model::Activation::kGelu);
  EXPECT_EQ(c.model.max_positions(), 512);
  EXPECT_FALSE(c.model.share_all_embeddings());
  EXPECT_FALSE(c.model.share_decoder_input_output());
  EXPECT_EQ(c.model.norm(), model::NormVariant::kPreLn);
  EXPECT_EQ(c.model.layer_norm_eps(), 1e-6);
  EXPECT_EQ(ToString(c.data.source), "tsv");
  EXPECT_EQ(c.data.synthetic.languages, (std::vector<std::string>{"rev", "gr"}));
  EXPECT_EQ(c.data.synthetic.pairs_per_language, 50);
  EXPECT_EQ(c.data.synthetic.min_words, 3);
  EXPECT_EQ(c.data.synthetic.max_words, 5);
  EXPECT_EQ(c.data.synthetic.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(c.data.train_path, "corpora/train.tsv");
  EXPECT_EQ(c.data.valid_path, "corpora/valid.tsv");
  EXPECT_EQ(c.data.src_lang, "de");
  EXPECT_EQ(c.data.tgt_lang, "fr");
  EXPECT_EQ(c.data.valid_fraction, 0.5);
  EXPECT_EQ(c.data.max_tokens, 2048);
  EXPECT_EQ(c.data.max_sentences, 64);
  EXPECT_EQ(c.data.max_len, 128);
  EXPECT_EQ(c.optim.lr, 0.001);
  EXPECT_EQ(c.optim.beta1, 0.8);
  EXPECT_EQ(c.optim.beta2, 0.999);
  EXPECT_EQ(c.optim.eps, 1e-6);
  EXPECT_EQ(c.optim.weight_decay, 0.01);
  EXPECT_EQ(c.optim.warmup_steps, 0);
  EXPECT_EQ(c.optim.warmup_init_lr, 0.0);
  EXPECT_EQ(c.optim.clip_norm, 1.5);
  EXPECT_EQ(c.optim.accum_steps, 4);
  EXPECT_EQ(c.optim.label_smoothing, 0.0);
  EXPECT_EQ(c.train.max_steps, 50000);
  EXPECT_EQ(c.train.max_minutes, 90.5);
  EXPECT_EQ(c.train.seed, 42u);
  EXPECT_EQ(c.train.log_every, 1);
  EXPECT_EQ(c.train.probe_every, 0);
  EXPECT_EQ(c.train.probe_sentences, 16);
  EXPECT_EQ(c.train.valid_every, 250);
  EXPECT_EQ(c.checkpoint.dir, "/tmp/ckpt dir");
  EXPECT_EQ(c.checkpoint.every_steps, 0);
  EXPECT_EQ(c.checkpoint.keep_last, 0);
  EXPECT_FALSE(c.checkpoint.resume);
  EXPECT_EQ(c.runtime.blas_threads, 2);
  EXPECT_EQ(c.runtime.intra_op_threads, 3);
  EXPECT_EQ(ToString(c.runtime.device), "cuda:1");
  EXPECT_EQ(ToString(c.runtime.attention), "reference");
  EXPECT_EQ(ToString(c.runtime.recompute), "layer");
  EXPECT_EQ(c.scheduling.priority, -3);
  EXPECT_EQ(c.scheduling.max_restarts, 5);
  EXPECT_EQ(c.scheduling.hang_timeout_s, 120.5);
  EXPECT_EQ(c.scheduling.start_timeout_s, 60.0);
  EXPECT_EQ(c.scheduling.labels, (std::map<std::string, std::string>{
                                     {"team", "mt"}, {"exp.id", "42"}, {"note", "a: #b"}}));
}

TEST(JobConfigTest, UnknownKeyIsNamedWithFullPathAndAllowedKeys) {
  EXPECT_THAT(ParseError("model:\n  nrom: deepnorm\n"),
              HasSubstr("job.yaml: model.nrom: unknown key (allowed: encoder_layers, "
                        "decoder_layers, d_model, heads, ffn_dim, vocab_size, dropout, "));
  EXPECT_THAT(ParseError("data:\n  synthetic:\n    langs: [rev]\n"),
              HasSubstr("job.yaml: data.synthetic.langs: unknown key (allowed: languages, "));
  EXPECT_THAT(ParseError("optimizer:\n  lr: 1\n"),
              HasSubstr("job.yaml: optimizer: unknown key (allowed: name, model, data, optim, "
                        "train, checkpoint, runtime, parallel, scheduling, guard)"));
}

TEST(JobConfigTest, PadIdIsNotUserSettable) {
  const std::string error = ParseError("model:\n  pad_id: 3\n");
  EXPECT_THAT(error, HasSubstr("job.yaml: model.pad_id: not user-settable"));
  EXPECT_THAT(error, Not(HasSubstr("unknown key")));
  // Nor is it offered in the list of allowed keys.
  EXPECT_THAT(ParseError("model:\n  x: 1\n"), Not(HasSubstr("pad_id")));
}

TEST(JobConfigTest, DuplicateKeyIsReported) {
  EXPECT_THAT(ParseError("train:\n  max_steps: 10\n  max_steps: 20\n"),
              HasSubstr("job.yaml: train.max_steps: duplicate key"));
}

TEST(JobConfigTest, OutOfRangeValueIsNamedWithItsRange) {
  EXPECT_EQ(ParseError("optim:\n  lr: -1\n"), "job.yaml: optim.lr: must be > 0 (got -1)");
  EXPECT_EQ(ParseError("model:\n  dropout: 1\n"),
            "job.yaml: model.dropout: must be in [0, 1) (got 1)");
  EXPECT_EQ(ParseError("data:\n  valid_fraction: 0.6\n"),
            "job.yaml: data.valid_fraction: must be in [0, 0.5] (got 0.6)");
  EXPECT_EQ(ParseError("optim:\n  accum_steps: 0\n"),
            "job.yaml: optim.accum_steps: must be >= 1 (got 0)");
  EXPECT_EQ(ParseError("optim:\n  betas: [0.9, 1.0]\n"),
            "job.yaml: optim.betas[1]: must be in [0, 1) (got 1)");
  EXPECT_EQ(ParseError("optim:\n  lr: 0.001\n  warmup_init_lr: 0.01\n"),
            "job.yaml: optim.warmup_init_lr: must be <= optim.lr (0.01 > 0.001)");
  EXPECT_EQ(ParseError("model:\n  encoder_layers: 0\n  decoder_layers: 0\n"),
            "job.yaml: model.encoder_layers: model.encoder_layers and model.decoder_layers "
            "cannot both be 0");
  EXPECT_EQ(ParseError("runtime:\n  intra_op_threads: 0\n"),
            "job.yaml: runtime.intra_op_threads: must be >= 1 (got 0)");
  EXPECT_EQ(ParseError("data:\n  max_len: 2000\n"),
            "job.yaml: data.max_len: must be <= model.max_positions (2000 > 1024)");
  EXPECT_EQ(ParseError("data:\n  pack_tokens: 2048\n"),
            "job.yaml: data.pack_tokens: must be <= model.max_positions (2048 > 1024)");
  EXPECT_EQ(ParseError("data:\n  pack_tokens: -1\n"),
            "job.yaml: data.pack_tokens: must be >= 0 (got -1)");
  EXPECT_EQ(ParseOk("data:\n  pack_tokens: 512\n").data.pack_tokens, 512);
}

TEST(JobConfigTest, PrecisionFieldsParseResolveAndNameBadValues) {
  const JobConfig defaults = ParseOk("");
  EXPECT_EQ(ToString(defaults.runtime.precision), "auto");
  EXPECT_EQ(ToString(defaults.runtime.grad_reduce), "fp32");
  EXPECT_EQ(ToString(EffectivePrecision(defaults.runtime)), "fp32");  // auto on cpu
  for (const char* p : {"fp32", "bf16", "tf32"}) {
    const JobConfig c = ParseOk(std::string("runtime:\n  precision: ") + p + "\n");
    EXPECT_EQ(ToString(c.runtime.precision), p);
    EXPECT_EQ(ToString(EffectivePrecision(c.runtime)), p);
  }
  JobConfig cuda = ParseOk("runtime:\n  device: cuda\n  grad_reduce: bf16\n");
  EXPECT_EQ(ToString(EffectivePrecision(cuda.runtime)), "bf16");  // auto on cuda
  EXPECT_EQ(ToString(cuda.runtime.grad_reduce), "bf16");
  EXPECT_EQ(ToString(ParseOk("", {"runtime.precision=bf16"}).runtime.precision), "bf16");
  EXPECT_EQ(ParseError("runtime:\n  precision: fp16\n"),
            "job.yaml: runtime.precision: must be one of auto, fp32, bf16, tf32 (got 'fp16')");
  EXPECT_EQ(ParseError("runtime:\n  grad_reduce: fp8\n"),
            "job.yaml: runtime.grad_reduce: must be one of fp32, bf16 (got 'fp8')");
}

TEST(JobConfigTest, EnumeratedValuesListTheAllowedOnes) {
  EXPECT_EQ(ParseError("model:\n  norm: postln\n"),
            "job.yaml: model.norm: must be one of deepnorm, post_ln, pre_ln, post_ln_init, "
            "deepnorm_preln (got 'postln')");
  EXPECT_EQ(ParseError("model:\n  activation: swish\n"),
            "job.yaml: model.activation: must be one of relu, gelu (got 'swish')");
  EXPECT_EQ(ParseError("data:\n  tokenizer: spm\n"),
            "job.yaml: data.tokenizer: must be one of byte (got 'spm')");
  EXPECT_EQ(ParseError("data:\n  source: parquet\n"),
            "job.yaml: data.source: must be one of synthetic, tsv, shards, random_tokens (got "
            "'parquet')");
  EXPECT_EQ(ParseError("runtime:\n  attention: flash\n"),
            "job.yaml: runtime.attention: must be one of auto, sdpa, reference (got 'flash')");
  EXPECT_EQ(ParseError("runtime:\n  recompute: full\n"),
            "job.yaml: runtime.recompute: must be one of none, layer (got 'full')");
}

TEST(JobConfigTest, AttentionAndRecomputeDefaults) {
  const JobConfig c = ParseOk("");
  EXPECT_EQ(ToString(c.runtime.attention), "auto");
  EXPECT_EQ(ToString(c.runtime.recompute), "none");
  EXPECT_EQ(ToString(ParseOk("", {"runtime.attention=sdpa"}).runtime.attention), "sdpa");
}

TEST(JobConfigTest, DeviceMustBeCpuOrCuda) {
  for (const char* device : {"cpu", "cuda", "cuda:0", "cuda:15"}) {
    EXPECT_EQ(ToString(ParseOk(std::string("runtime:\n  device: ") + device + "\n").runtime.device),
              device);
  }
  for (const char* device :
       {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:1x", "CPU", ""}) {
    EXPECT_THAT(ParseError(std::string("runtime:\n  device: '") + device + "'\n"),
                HasSubstr("job.yaml: runtime.device: must be cpu, cuda or cuda:N (got '"));
  }
}

TEST(JobConfigTest, ReportsEveryProblemAtOnce) {
  const std::string error = ParseError(R"yaml(
model:
  nrom: deepnorm
  heads: eight
  dropout: 1.5
optim:
  lr: -1
train:
  max_steps: 0
runtime:
  device: gpu
)yaml");
  EXPECT_THAT(error, AllOf(HasSubstr("job.yaml: model.nrom: unknown key"),
                           HasSubstr("job.yaml: model.heads: expected an integer (got 'eight')"),
                           HasSubstr("job.yaml: model.dropout: must be in [0, 1) (got 1.5)"),
                           HasSubstr("job.yaml: optim.lr: must be > 0 (got -1)"),
                           HasSubstr("job.yaml: train.max_steps: must be >= 1 (got 0)"),
                           HasSubstr("job.yaml: runtime.device: must be cpu, cuda or cuda:N")));
  EXPECT_EQ(CountLines(error), 6) << error;
}

TEST(JobConfigTest, ReportsTypeErrors) {
  EXPECT_EQ(ParseError("model:\n  heads: eight\n"),
            "job.yaml: model.heads: expected an integer (got 'eight')");
  EXPECT_EQ(ParseError("train:\n  max_steps: 1.5\n"),
            "job.yaml: train.max_steps: expected an integer (got '1.5')");
  EXPECT_THAT(ParseError("train:\n  max_steps: 99999999999999999999\n"),
              HasSubstr("job.yaml: train.max_steps: integer out of range"));
  EXPECT_THAT(ParseError("train:\n  seed: -1\n"),
              HasSubstr("job.yaml: train.seed: expected an integer in [0, 18446744073709551615]"));
  EXPECT_THAT(ParseError("train:\n  seed: 18446744073709551616\n"),
              HasSubstr("job.yaml: train.seed: expected an integer in [0, "));
  EXPECT_EQ(ParseError("checkpoint:\n  resume: yes\n"),
            "job.yaml: checkpoint.resume: expected true or false (got 'yes')");
  EXPECT_EQ(ParseError("checkpoint:\n  resume: 1\n"),
            "job.yaml: checkpoint.resume: expected true or false (got '1')");
  EXPECT_EQ(ParseError("optim:\n  lr: {value: 1}\n"),
            "job.yaml: optim.lr: expected a finite number (got a map)");
  EXPECT_EQ(ParseError("optim:\n  lr: .inf\n"),
            "job.yaml: optim.lr: expected a finite number (got '.inf')");
  EXPECT_EQ(ParseError("optim:\n  lr:\n"),
            "job.yaml: optim.lr: expected a finite number (got nothing)");
  EXPECT_EQ(ParseError("name: [a, b]\n"), "job.yaml: name: expected a string (got a list)");
  EXPECT_EQ(ParseError("model: 6\n"), "job.yaml: model: expected a map (got '6')");
  EXPECT_EQ(ParseError("optim:\n  betas: 0.9\n"),
            "job.yaml: optim.betas: expected a list of 2 numbers (got '0.9')");
  EXPECT_EQ(ParseError("optim:\n  betas: [0.9, 0.98, 0.999]\n"),
            "job.yaml: optim.betas: expected a list of 2 numbers (got a list)");
  EXPECT_EQ(ParseError("optim:\n  betas: [0.9, high]\n"),
            "job.yaml: optim.betas[1]: expected a finite number (got 'high')");
  EXPECT_EQ(ParseError("data:\n  synthetic:\n    languages: rev\n"),
            "job.yaml: data.synthetic.languages: expected a list of strings (got 'rev')");
  EXPECT_EQ(ParseError("data:\n  synthetic:\n    languages: [rev, [gr]]\n"),
            "job.yaml: data.synthetic.languages[1]: expected a string (got a list)");
}

TEST(JobConfigTest, NumbersAcceptYamlSpellings) {
  JobConfig c = ParseOk(
      "optim:\n  lr: +5E-4\n  warmup_init_lr: 1e-7\n  clip_norm: 1\n"
      "train:\n  max_steps: +20\n");
  EXPECT_EQ(c.optim.lr, 5e-4);
  EXPECT_EQ(c.optim.clip_norm, 1.0);
  EXPECT_EQ(c.train.max_steps, 20);
}

TEST(JobConfigTest, TopLevelMustBeAMap) {
  EXPECT_THAT(ParseError("- model\n- data\n"),
              HasSubstr("job.yaml: expected a map of sections (name, model, data, optim, train, "
                        "checkpoint, runtime, parallel, scheduling, guard) at the top level (got a "
                        "list)"));
  EXPECT_THAT(ParseError("just text\n"), HasSubstr("at the top level (got 'just text')"));
  EXPECT_THAT(ParseError("name: a\n---\nname: b\n"),
              HasSubstr("job.yaml: expected one YAML document (got 2)"));
}

TEST(JobConfigTest, SyntaxErrorNamesLineAndColumn) {
  const std::string error = ParseError("model:\n  d_model: 64\n bad: 1\n");
  EXPECT_THAT(error, HasSubstr("job.yaml: YAML syntax error at line 3, column 2"));
  EXPECT_THAT(ParseError("name: x\noptim:\n  betas: [0.9, 0.98\n"),
              HasSubstr("job.yaml: YAML syntax error at line 4"));
}

TEST(JobConfigTest, TsvSourceRequiresTrainPath) {
  EXPECT_EQ(ParseError("data:\n  source: tsv\n"),
            "job.yaml: data.train_path: must be set when data.source is tsv");
  EXPECT_EQ(ParseOk("data:\n  source: tsv\n  train_path: a.tsv\n").data.train_path, "a.tsv");
}

TEST(JobConfigTest, DModelMustBeDivisibleByHeads) {
  EXPECT_EQ(ParseError("model:\n  d_model: 512\n  heads: 3\n"),
            "job.yaml: model.d_model: must be divisible by model.heads (512 % 3 != 0)");
  // A heads value that failed to parse does not add a divisibility error on top.
  EXPECT_EQ(CountLines(ParseError("model:\n  d_model: 100\n  heads: x\n")), 1);
  EXPECT_EQ(ParseError("model:\n  heads: 0\n"), "job.yaml: model.heads: must be > 0 (got 0)");
}

TEST(JobConfigTest, SyntheticOptionsAreValidated) {
  EXPECT_THAT(ParseError("data:\n  synthetic:\n    languages: [rev, klingon]\n"),
              HasSubstr("job.yaml: data.synthetic.languages: unknown language 'klingon'"));
  EXPECT_THAT(ParseError("data:\n  synthetic:\n    pairs_per_language: 0\n"),
              HasSubstr("job.yaml: data.synthetic.pairs_per_language: "));
}

TEST(JobConfigTest, AppliesOverrides) {
  JobConfig c = ParseOk("train:\n  max_steps: 500\n",
                        {"train.max_steps=10", "optim.betas=[0.9, 0.99]", "model.norm = post_ln",
                         "checkpoint.dir=runs/x", "data.synthetic.languages=[cp]", "name=a=b"});
  EXPECT_EQ(c.train.max_steps, 10);
  EXPECT_EQ(c.optim.beta1, 0.9);
  EXPECT_EQ(c.optim.beta2, 0.99);
  EXPECT_EQ(c.model.norm(), model::NormVariant::kPostLn);
  EXPECT_EQ(c.checkpoint.dir, "runs/x");
  EXPECT_EQ(c.data.synthetic.languages, std::vector<std::string>{"cp"});
  EXPECT_EQ(c.name, "a=b");
  // The last override of a key wins; an empty value empties a string.
  c = ParseOk("checkpoint:\n  dir: runs/y\n",
              {"train.max_steps=3", "train.max_steps=4", "checkpoint.dir="});
  EXPECT_EQ(c.train.max_steps, 4);
  EXPECT_EQ(c.checkpoint.dir, "");
  // Overrides on an empty file.
  EXPECT_EQ(ToString(ParseOk("", {"runtime.device=cuda"}).runtime.device), "cuda");
}

TEST(JobConfigTest, BadOverridesAreReported) {
  EXPECT_EQ(ParseError("", {"train.max_steps"}),
            "job.yaml: override 'train.max_steps': expected dotted.key=value, e.g. "
            "train.max_steps=100");
  EXPECT_THAT(ParseError("", {"model.nrom=pre_ln"}),
              HasSubstr("job.yaml: model.nrom: unknown key (allowed: "));
  EXPECT_EQ(ParseError("", {"train.max_steps=ten"}),
            "job.yaml: train.max_steps: expected an integer (got 'ten')");
  EXPECT_EQ(ParseError("optim:\n  lr: 0.1\n", {"optim.lr.peak=1"}),
            "job.yaml: override 'optim.lr.peak=1': optim.lr is not a map (got '0.1')");
  // Without a value in the file the override makes optim.lr a map, which the reader rejects.
  EXPECT_EQ(ParseError("", {"optim.lr.peak=1"}),
            "job.yaml: optim.lr: expected a finite number (got a map)");
  EXPECT_THAT(ParseError("", {"optim..lr=1"}), HasSubstr("override 'optim..lr=1': empty key"));
  EXPECT_THAT(ParseError("", {"optim.betas=[0.9"}),
              HasSubstr("override 'optim.betas=[0.9': value is not valid YAML"));
  // Several bad overrides and a bad file value, all in one message.
  EXPECT_EQ(CountLines(ParseError("optim:\n  lr: -1\n", {"x", "y"})), 3);
}

TEST(JobConfigTest, DumpThenParseRoundTripsEveryField) {
  JobConfig original = ParseOk(kFullJob);
  // Values that need all 17 significant digits, and strings that need quoting.
  original.name = "true";
  original.model.dropout(0.1 + 0.2);
  original.optim.lr = 1.0 / 3.0;
  original.optim.warmup_init_lr = 1e-300;
  original.train.max_minutes = 1e5 / 3;
  original.data.src_lang = "~";
  original.data.tgt_lang = "a: #b";
  original.data.valid_path = "";
  original.checkpoint.dir = "runs/\xC3\xA9t\xC3\xA9 \"q\" #";
  original.scheduling.hang_timeout_s = 0.1 + 0.2;
  original.scheduling.labels["yes"] = "true";
  original.scheduling.labels["empty"] = "";
  original.model.init(model::InitScheme::kScaledDefault);
  original.model.positions(model::PositionKind::kLearned);
  const std::string dumped = DumpJobConfig(original);
  absl::StatusOr<JobConfig> parsed = ParseJobConfig(dumped, {}, "dump");
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << dumped;
  ExpectSameConfig(*parsed, original);
  // And the dump of the parsed config is the same text.
  EXPECT_EQ(DumpJobConfig(*parsed), dumped);
}

TEST(JobConfigTest, DumpOfDefaultsListsEveryKeyAndRoundTrips) {
  const std::string dumped = DumpJobConfig(JobConfig());
  for (const char* key :
       {"name:", "model:", "encoder_layers:", "layer_norm_eps:", "synthetic:", "languages: []",
        "max_len:", "betas: [0.9, 0.98]", "label_smoothing:", "valid_every:", "checkpoint:",
        "resume: true", "runtime:", "device: cpu", "scheduling:", "priority: 0",
        "max_restarts: 2", "hang_timeout_s: 0.0", "start_timeout_s: 300.0", "labels: {}",
        "attention: auto", "recompute: none"}) {
    EXPECT_THAT(dumped, HasSubstr(key));
  }
  EXPECT_THAT(dumped, Not(HasSubstr("pad_id")));
  ExpectSameConfig(ParseOk(dumped), JobConfig());
}

TEST(JobConfigTest, ExampleJobsParse) {
  absl::StatusOr<JobConfig> small =
      LoadJobConfig(std::string(DEEPNET_SOURCE_DIR) + "/examples/synthetic_small.yaml");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->model.encoder_layers(), 6);
  EXPECT_EQ(small->model.decoder_layers(), 6);
  EXPECT_EQ(small->model.d_model(), 128);
  EXPECT_EQ(small->model.heads(), 4);
  EXPECT_EQ(small->model.ffn_dim(), 512);
  EXPECT_EQ(small->model.norm(), model::NormVariant::kDeepNorm);
  EXPECT_EQ(ToString(small->data.source), "synthetic");
  EXPECT_EQ(small->checkpoint.dir, "runs/synthetic_small/checkpoints");

  absl::StatusOr<JobConfig> tsv =
      LoadJobConfig(std::string(DEEPNET_SOURCE_DIR) + "/examples/tsv_job.yaml");
  ASSERT_TRUE(tsv.ok()) << tsv.status();
  EXPECT_EQ(ToString(tsv->data.source), "tsv");
  EXPECT_FALSE(tsv->data.train_path.empty());

  absl::StatusOr<JobConfig> parallel =
      LoadJobConfig(std::string(DEEPNET_SOURCE_DIR) + "/examples/parallel_2x2.yaml");
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  EXPECT_EQ(parallel->parallel.world_size(), 4);
  EXPECT_EQ(ToString(parallel->parallel.backend), "mpi");
}

TEST(JobConfigTest, LoadJobConfigNamesAMissingFile) {
  const std::string path = ::testing::TempDir() + "/no_such_job.yaml";
  absl::StatusOr<JobConfig> config = LoadJobConfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(path));

  config = LoadJobConfig(::testing::TempDir());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobConfigTest, LoadJobConfigPrefixesErrorsWithThePath) {
  const std::string path = ::testing::TempDir() + "/job_config_test_bad.yaml";
  {
    std::ofstream out(path);
    out << "optim:\n  lr: 0\n";
  }
  absl::StatusOr<JobConfig> config = LoadJobConfig(path, {"train.max_steps=7"});
  std::filesystem::remove(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), path + ": optim.lr: must be > 0 (got 0)");
}

}  // namespace
TEST(JobConfigTest, ParallelSectionIsParsedAndChecked) {
  auto ok = ParseJobConfig(
      "model: {encoder_layers: 4, decoder_layers: 4}\n"
      "parallel: {pipeline_stages: 4, data_parallel: 2, micro_batches: 8, schedule: gpipe,\n"
      "           backend: mpi, timeout_s: 30, rendezvous: 'tcp://node0:29500', bucket_mb: 8,\n"
      "           partition: measured}\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->parallel.world_size(), 8);
  EXPECT_EQ(ToString(ok->parallel.schedule), "gpipe");
  EXPECT_EQ(ok->parallel.rendezvous, "tcp://node0:29500");
  EXPECT_EQ(ToString(ok->parallel.partition), "measured");
  auto again = ParseJobConfig(DumpJobConfig(*ok));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(DumpJobConfig(*again), DumpJobConfig(*ok));

  auto bad = ParseJobConfig(
      "model: {encoder_layers: 2, decoder_layers: 1}\n"
      "parallel: {pipeline_stages: 4, data_parallel: 0, schedule: zigzag, backend: nccl,\n"
      "           timeout_s: 0, rendezvous: 'http://x', bucket_mb: -1, partition: magic}\n",
      {}, "job.yaml");
  ASSERT_FALSE(bad.ok());
  const std::string message(bad.status().message());
  for (const char* expected :
       {"job.yaml: parallel.pipeline_stages: must be <= the model's 3 layers (got 4)",
        "job.yaml: parallel.data_parallel: must be >= 1 (got 0)",
        "job.yaml: parallel.schedule: must be 1f1b or gpipe (got 'zigzag')",
        "job.yaml: parallel.backend: nccl moves CUDA tensors: set runtime.device to cuda",
        "job.yaml: parallel.timeout_s: must be in (0, 2592000] s (at most 30 days; got 0)",
        "job.yaml: parallel.rendezvous: must start with tcp://, file:// or grpc:// (got "
        "'http://x')",
        "job.yaml: parallel.bucket_mb: must be > 0 (got -1)",
        "job.yaml: parallel.partition: must be flops or measured (got 'magic')"}) {
    EXPECT_NE(message.find(expected), std::string::npos) << expected << "\n" << message;
  }
}

TEST(JobConfigTest, SchedulingSectionHasDefaultsAndIsChecked) {
  const JobConfig defaults = ParseOk("scheduling:\n");
  EXPECT_EQ(defaults.scheduling.priority, 0);
  EXPECT_EQ(defaults.scheduling.max_restarts, 2);
  EXPECT_EQ(defaults.scheduling.hang_timeout_s, 0.0);
  EXPECT_EQ(defaults.scheduling.start_timeout_s, 300.0);
  EXPECT_TRUE(defaults.scheduling.labels.empty());
  EXPECT_TRUE(ParseOk("scheduling:\n  labels:\n").scheduling.labels.empty());
  EXPECT_EQ(ParseOk("scheduling: {priority: 2147483647}\n").scheduling.priority, 2147483647);
  EXPECT_EQ(ParseOk("", {"scheduling.labels.team=x"}).scheduling.labels.at("team"), "x");
  // Keys with dots are set through the whole map, since an override's key path splits at dots.
  EXPECT_EQ(ParseOk("", {"scheduling.labels={a-b_c.9: y}"}).scheduling.labels.at("a-b_c.9"), "y");
  EXPECT_EQ(ParseOk("scheduling: {labels: {k: " + std::string(256, 'v') + "}}\n")
                .scheduling.labels.at("k")
                .size(),
            256u);
  EXPECT_EQ(ParseOk("scheduling: {labels: {" + std::string(63, 'k') + ": v}}\n")
                .scheduling.labels.size(),
            1u);

  EXPECT_EQ(ParseError("scheduling:\n  foo: 1\n"),
            "job.yaml: scheduling.foo: unknown key (allowed: priority, max_restarts, "
            "hang_timeout_s, start_timeout_s, labels, team)");
  EXPECT_EQ(ParseError("scheduling: {priority: 2147483648}\n"),
            "job.yaml: scheduling.priority: must be <= 2147483647 (got 2147483648)");
  EXPECT_EQ(ParseError("scheduling: {priority: -2147483649}\n"),
            "job.yaml: scheduling.priority: must be >= -2147483648 (got -2147483649)");
  EXPECT_EQ(ParseError("scheduling: {priority: high}\n"),
            "job.yaml: scheduling.priority: expected an integer (got 'high')");
  EXPECT_EQ(ParseError("scheduling: {max_restarts: -1}\n"),
            "job.yaml: scheduling.max_restarts: must be >= 0 (got -1)");
  EXPECT_EQ(ParseError("scheduling: {max_restarts: 1001}\n"),
            "job.yaml: scheduling.max_restarts: must be <= 1000 (got 1001)");
  EXPECT_EQ(ParseError("scheduling: {hang_timeout_s: -1}\n"),
            "job.yaml: scheduling.hang_timeout_s: must be in [0, 2592000] s (at most 30 days; "
            "got -1)");
  // Timeouts far beyond a protobuf Duration (or an int64 of milliseconds) once crashed the
  // coordinator when the job was placed; they are refused at submission.
  for (const char* huge : {"2592000.5", "3.16e11", "1e12", "1e308"}) {
    SCOPED_TRACE(huge);
    for (const char* field : {"hang_timeout_s", "start_timeout_s"}) {
      EXPECT_THAT(ParseError(std::string("scheduling: {") + field + ": " + huge + "}\n"),
                  HasSubstr(std::string("scheduling.") + field + ": must be in "));
    }
    EXPECT_THAT(ParseError(std::string("parallel: {timeout_s: ") + huge + "}\n"),
                HasSubstr("parallel.timeout_s: must be in (0, 2592000] s"));
  }
  EXPECT_EQ(ParseOk("scheduling: {hang_timeout_s: 2592000, start_timeout_s: 2592000}\n")
                .scheduling.start_timeout_s,
            2592000.0);
  EXPECT_EQ(ParseError("scheduling: {hang_timeout_s: .inf}\n"),
            "job.yaml: scheduling.hang_timeout_s: expected a finite number (got '.inf')");
  EXPECT_EQ(ParseError("scheduling: {start_timeout_s: 0}\n"),
            "job.yaml: scheduling.start_timeout_s: must be in (0, 2592000] s (at most 30 days; "
            "got 0)");
  EXPECT_EQ(ParseError("scheduling: 3\n"), "job.yaml: scheduling: expected a map (got '3')");
}

TEST(JobConfigTest, SchedulingLabelsAreChecked) {
  for (const std::string& key :
       std::vector<std::string>{"Team", "a b", "x/y", "", std::string(64, 'k')}) {
    SCOPED_TRACE(key);
    EXPECT_EQ(ParseError("scheduling:\n  labels: {'" + key + "': v}\n"),
              "job.yaml: scheduling.labels: key '" + key + "' must match [a-z0-9_.-]{1,63}");
  }
  EXPECT_EQ(ParseError("scheduling: {labels: {team: " + std::string(257, 'v') + "}}\n"),
            "job.yaml: scheduling.labels.team: must be at most 256 characters (got 257)");
  EXPECT_EQ(ParseError("scheduling: {labels: [a, b]}\n"),
            "job.yaml: scheduling.labels: expected a map of strings (got a list)");
  EXPECT_EQ(ParseError("scheduling: {labels: {team: [a]}}\n"),
            "job.yaml: scheduling.labels.team: expected a string (got a list)");
  EXPECT_EQ(ParseError("scheduling: {labels: {[a]: b}}\n"),
            "job.yaml: scheduling.labels: keys must be plain names (got a list)");
  EXPECT_EQ(ParseError("scheduling:\n  labels:\n    team: a\n    team: b\n"),
            "job.yaml: scheduling.labels.team: duplicate key");
  // A null value is the empty string, as for every string field.
  EXPECT_EQ(ParseOk("scheduling:\n  labels:\n    team:\n").scheduling.labels.at("team"), "");
}

TEST(JobConfigTest, WorldSizeIsCapped) {
  EXPECT_EQ(ParseError("model: {encoder_layers: 3000000000}\n"
                       "parallel: {pipeline_stages: 2147483648}\n"),
            "job.yaml: model.encoder_layers: must be <= 2000 (got 3000000000)\n"
            "job.yaml: parallel.pipeline_stages: must be <= 65536 (got 2147483648)");
  // Above both bounds: reported once.
  EXPECT_EQ(ParseError("parallel: {pipeline_stages: 10000000000}\n"),
            "job.yaml: parallel.pipeline_stages: must be <= 65536 (got 10000000000)");
  EXPECT_EQ(ParseError("parallel: {data_parallel: 65537}\n"),
            "job.yaml: parallel.data_parallel: must be <= 65536 (got 65537)");
  EXPECT_EQ(ParseError("model: {encoder_layers: 6}\nparallel: {pipeline_stages: 4, "
                       "data_parallel: 16385}\n"),
            "job.yaml: parallel.data_parallel: parallel.pipeline_stages x "
            "parallel.data_parallel must be <= 65536 ranks (got 4 x 16385)");
  EXPECT_EQ(ParseOk("parallel: {pipeline_stages: 2, data_parallel: 32768}\n").parallel.world_size(),
            65536);
}

TEST(JobConfigTest, ExtraCheckAddsItsProblemsToTheSchemasOnes) {
  int calls = 0;
  const JobConfigCheck check = [&calls](const JobConfig& c, ConfigProblems* problems) {
    ++calls;
    // A field the schema already reported is flagged as bad.
    EXPECT_TRUE(problems->Bad("optim.lr"));
    EXPECT_FALSE(problems->Bad("name"));
    if (c.name != "allowed") problems->Add("name", "must be 'allowed' (got '" + c.name + "')");
  };
  absl::StatusOr<JobConfig> config =
      ParseJobConfig("name: x\noptim: {lr: 0}\n", {}, "spec", check);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "spec: optim.lr: must be > 0 (got 0)\nspec: name: must be 'allowed' (got 'x')");
  EXPECT_EQ(calls, 1);
  // A syntax error stops before any check.
  EXPECT_FALSE(ParseJobConfig("a: [\n", {}, "spec", check).ok());
  EXPECT_EQ(calls, 1);
}

}  // namespace deepnet::job
