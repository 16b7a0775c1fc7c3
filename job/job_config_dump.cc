// DumpJobConfig: the effective job configuration as YAML (job/job_config.h).
#include <yaml-cpp/yaml.h>

#include <string>
#include <type_traits>

#include "job/guard_config.h"
#include "job/job_config.h"
#include "job/yaml_reader.h"

namespace deepnet::job {
namespace {

void EmitDouble(YAML::Emitter& out, const char* key, double v) {
  out << YAML::Key << key << YAML::Value << FormatDouble(v);
}

template <typename T>
void Emit(YAML::Emitter& out, const char* key, const T& v) {
  static_assert(!std::is_floating_point_v<T>, "use EmitDouble");
  out << YAML::Key << key << YAML::Value << v;
}

}  // namespace

std::string DumpJobConfig(const JobConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  Emit(out, "name", c.name);

  const model::DeepNetConfig& m = c.model;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  Emit(out, "encoder_layers", m.encoder_layers());
  Emit(out, "decoder_layers", m.decoder_layers());
  Emit(out, "d_model", m.d_model());
  Emit(out, "heads", m.heads());
  Emit(out, "ffn_dim", m.ffn_dim());
  Emit(out, "vocab_size", m.vocab_size());
  EmitDouble(out, "dropout", m.dropout());
  EmitDouble(out, "attention_dropout", m.attention_dropout());
  EmitDouble(out, "activation_dropout", m.activation_dropout());
  Emit(out, "activation", std::string(model::ToString(m.activation())));
  Emit(out, "max_positions", m.max_positions());
  Emit(out, "share_all_embeddings", m.share_all_embeddings());
  Emit(out, "share_decoder_input_output", m.share_decoder_input_output());
  Emit(out, "norm", std::string(model::ToString(m.norm())));
  EmitDouble(out, "layer_norm_eps", m.layer_norm_eps());
  Emit(out, "init", std::string(model::ToString(m.init())));
  Emit(out, "positions", std::string(model::ToString(m.positions())));
  out << YAML::EndMap;

  const DataConfig& d = c.data;
  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  Emit(out, "source", d.source);
  Emit(out, "shard_dir", d.shard_dir);
  out << YAML::Key << "synthetic" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "languages" << YAML::Value << YAML::Flow << d.synthetic.languages;
  Emit(out, "pairs_per_language", d.synthetic.pairs_per_language);
  Emit(out, "min_words", d.synthetic.min_words);
  Emit(out, "max_words", d.synthetic.max_words);
  Emit(out, "seed", d.synthetic.seed);
  out << YAML::EndMap;
  out << YAML::Key << "random_tokens" << YAML::Value << YAML::BeginMap;
  Emit(out, "vocab_size", d.random_tokens.vocab_size);
  Emit(out, "pairs", d.random_tokens.pairs);
  Emit(out, "min_len", d.random_tokens.min_len);
  Emit(out, "max_len", d.random_tokens.max_len);
  Emit(out, "target", d.random_tokens.target);
  Emit(out, "seed", d.random_tokens.seed);
  out << YAML::EndMap;
  Emit(out, "train_path", d.train_path);
  Emit(out, "valid_path", d.valid_path);
  Emit(out, "src_lang", d.src_lang);
  Emit(out, "tgt_lang", d.tgt_lang);
  EmitDouble(out, "valid_fraction", d.valid_fraction);
  Emit(out, "tokenizer", d.tokenizer);
  Emit(out, "max_tokens", d.max_tokens);
  Emit(out, "max_sentences", d.max_sentences);
  Emit(out, "max_len", d.max_len);
  EmitDouble(out, "temperature", d.temperature);
  Emit(out, "prefetch", d.prefetch);
  out << YAML::EndMap;

  const OptimConfig& o = c.optim;
  out << YAML::Key << "optim" << YAML::Value << YAML::BeginMap;
  EmitDouble(out, "lr", o.lr);
  out << YAML::Key << "betas" << YAML::Value << YAML::Flow << YAML::BeginSeq
      << FormatDouble(o.beta1) << FormatDouble(o.beta2) << YAML::EndSeq;
  EmitDouble(out, "eps", o.eps);
  EmitDouble(out, "weight_decay", o.weight_decay);
  Emit(out, "warmup_steps", o.warmup_steps);
  EmitDouble(out, "warmup_init_lr", o.warmup_init_lr);
  EmitDouble(out, "clip_norm", o.clip_norm);
  Emit(out, "accum_steps", o.accum_steps);
  EmitDouble(out, "label_smoothing", o.label_smoothing);
  out << YAML::EndMap;

  const TrainConfig& t = c.train;
  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  Emit(out, "max_steps", t.max_steps);
  EmitDouble(out, "max_minutes", t.max_minutes);
  Emit(out, "seed", t.seed);
  Emit(out, "log_every", t.log_every);
  Emit(out, "probe_every", t.probe_every);
  Emit(out, "probe_sentences", t.probe_sentences);
  Emit(out, "probe_schedule", t.probe_schedule);
  Emit(out, "probe_file", t.probe_file);
  Emit(out, "diagnostics_every", t.diagnostics_every);
  Emit(out, "valid_every", t.valid_every);
  Emit(out, "valid_max_pairs", t.valid_max_pairs);
  out << YAML::EndMap;

  out << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  Emit(out, "dir", c.checkpoint.dir);
  Emit(out, "every_steps", c.checkpoint.every_steps);
  Emit(out, "keep_last", c.checkpoint.keep_last);
  Emit(out, "resume", c.checkpoint.resume);
  out << YAML::EndMap;

  out << YAML::Key << "runtime" << YAML::Value << YAML::BeginMap;
  Emit(out, "blas_threads", c.runtime.blas_threads);
  Emit(out, "intra_op_threads", c.runtime.intra_op_threads);
  Emit(out, "device", c.runtime.device);
  Emit(out, "attention", c.runtime.attention);
  Emit(out, "recompute", c.runtime.recompute);
  Emit(out, "precision", c.runtime.precision);
  Emit(out, "grad_reduce", c.runtime.grad_reduce);
  out << YAML::EndMap;

  out << YAML::Key << "parallel" << YAML::Value << YAML::BeginMap;
  Emit(out, "pipeline_stages", c.parallel.pipeline_stages);
  Emit(out, "data_parallel", c.parallel.data_parallel);
  Emit(out, "micro_batches", c.parallel.micro_batches);
  Emit(out, "schedule", c.parallel.schedule);
  Emit(out, "backend", c.parallel.backend);
  EmitDouble(out, "timeout_s", c.parallel.timeout_s);
  Emit(out, "rendezvous", c.parallel.rendezvous);
  EmitDouble(out, "bucket_mb", c.parallel.bucket_mb);
  Emit(out, "partition", c.parallel.partition);
  out << YAML::EndMap;

  const SchedulingConfig& sched = c.scheduling;
  out << YAML::Key << "scheduling" << YAML::Value << YAML::BeginMap;
  Emit(out, "priority", sched.priority);
  Emit(out, "max_restarts", sched.max_restarts);
  EmitDouble(out, "hang_timeout_s", sched.hang_timeout_s);
  EmitDouble(out, "start_timeout_s", sched.start_timeout_s);
  out << YAML::Key << "labels" << YAML::Value;
  if (sched.labels.empty()) out << YAML::Flow;  // "labels: {}" rather than a lone "{}" line.
  out << YAML::BeginMap;
  for (const auto& [key, value] : sched.labels) out << YAML::Key << key << YAML::Value << value;
  out << YAML::EndMap;
  if (!sched.team.empty()) Emit(out, "team", sched.team);
  out << YAML::EndMap;
  EmitGuard(out, c.guard);

  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace deepnet::job
