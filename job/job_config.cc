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
#include "job/job_schema.h"
#include "job/world_size.h"
#include "job/yaml_reader.h"

namespace deepnet::job {
namespace {

// Reads the keys the schema declares (job/job_schema.h) from one YAML map: the visitor that
// VisitJob walks to parse a job file.
class SchemaReader {
 public:
  explicit SchemaReader(YamlMapReader reader) : r_(std::move(reader)) {}

  void Int(const char* key, int64_t& field, IntBounds) { r_.Int(key, &field); }
  void Uint(const char* key, uint64_t& field) { r_.Uint(key, &field); }
  void Real(const char* key, double& field, RealBounds) { r_.Double(key, &field); }
  void Bool(const char* key, bool& field) { r_.Bool(key, &field); }
  void String(const char* key, std::string& field, Omit) { r_.String(key, &field); }
  void Path(const char* key, std::string& field, JobPathUse) { r_.String(key, &field); }
  void StringList(const char* key, std::vector<std::string>& field) {
    r_.StringList(key, &field);
  }
  void StringMap(const char* key, std::map<std::string, std::string>& field) {
    r_.StringMap(key, &field);
  }
  void RealPair(const char* key, double& first, double& second) {
    r_.DoubleTuple(key, {&first, &second});
  }
  template <typename E>
  void Choice(const char* key, E& field) {
    r_.Named(
        key, &field, [](std::string_view name) { return ParseChoice<E>(name); },
        AllowedChoices<E>());
  }
  void Device(const char* key, job::Device& field) {
    r_.Named(key, &field, ParseDevice, "cpu, cuda or cuda:N");
  }
  template <typename Fn>
  void Section(const char* key, Fn visit) {
    SchemaReader section(r_.Section(key));
    visit(section);
    section.Finish();
  }
  void Forbid(const char* key, const std::string& why) { r_.Forbid(key, why); }
  void Finish() { r_.Finish(); }

 private:
  YamlMapReader r_;
};

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
  bool AnyBad(std::initializer_list<const char*> paths) const {
    for (const char* p : paths) {
      if (problems_->Bad(p)) return true;
    }
    return false;
  }

 private:
  ConfigProblems* problems_;
};

constexpr size_t kMaxLabelKeyLength = 63;
constexpr size_t kMaxLabelValueLength = 256;

bool IsValidLabelKey(const std::string& key) {
  if (key.empty() || key.size() > kMaxLabelKeyLength) return false;
  return std::all_of(key.begin(), key.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
           ch == '-';
  });
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
  if (d.source == DataSource::kTsv && d.train_path.empty()) {
    problems->Add("data.train_path", "must be set when data.source is tsv");
  }
  if (d.source == DataSource::kShards && d.shard_dir.empty()) {
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
  } else if (d.source == DataSource::kRandomTokens && d.max_len > 0 &&
             d.random_tokens.max_len + 2 > d.max_len) {
    problems->Add("data.random_tokens.max_len",
                  absl::StrCat("must be <= data.max_len - 2 (tag and EOS): ",
                               d.random_tokens.max_len, " + 2 > ", d.max_len));
  }
  check.InRange("data.valid_fraction", d.valid_fraction, 0, 0.5, true);
  check.AtLeast("data.max_tokens", d.max_tokens, 1);
  check.AtLeast("data.max_sentences", d.max_sentences, 0);
  check.AtLeast("data.max_len", d.max_len, 0);
  check.AtMost("data.max_tokens", d.max_tokens, SpecCaps::kMaxTokens);
  check.AtMost("data.max_sentences", d.max_sentences, SpecCaps::kMaxSentences);
  check.AtMost("data.max_len", d.max_len, SpecCaps::kPositions);
  check.AtLeast("data.pack_tokens", d.pack_tokens, 0);
  check.AtMost("data.pack_tokens", d.pack_tokens, SpecCaps::kPositions);
  // A packed row is as long as its pairs together: it must fit the position tables.
  if (d.pack_tokens > m.max_positions() && m.max_positions() > 0 &&
      !check.AnyBad({"data.pack_tokens", "model.max_positions"})) {
    problems->Add("data.pack_tokens", absl::StrCat("must be <= model.max_positions (",
                                                   d.pack_tokens, " > ", m.max_positions(), ")"));
  }
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

  const ParallelConfig& par = c.parallel;
  check.AtLeast("parallel.pipeline_stages", par.pipeline_stages, 1);
  check.AtLeast("parallel.data_parallel", par.data_parallel, 1);
  check.AtLeast("parallel.micro_batches", par.micro_batches, 1);
  check.AtMost("parallel.micro_batches", par.micro_batches, SpecCaps::kBatches);
  // PartitionStages (pipeline/stage_partition.h) splits the layers into any P in [1, layers]
  // and refuses every other P; the launchers count ranks in 32 bits.
  check.AtMost("parallel.pipeline_stages", par.pipeline_stages, SpecCaps::kRanks);
  check.AtMost("parallel.data_parallel", par.data_parallel, SpecCaps::kRanks);
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
      !WithinRankCap(par.pipeline_stages, par.data_parallel)) {
    problems->Add("parallel.data_parallel",
                  absl::StrCat("parallel.pipeline_stages x parallel.data_parallel must be <= ",
                               SpecCaps::kRanks, " ranks (got ", par.pipeline_stages, " x ",
                               par.data_parallel, ")"));
  }
  if (par.backend == Backend::kNccl && !c.runtime.device.is_cuda() &&
      !check.AnyBad({"parallel.backend", "runtime.device"})) {
    problems->Add("parallel.backend", "nccl moves CUDA tensors: set runtime.device to cuda");
  }
  // gloo and mpi with runtime.device cuda stage tensors through host memory (pinned buffers for
  // pipeline messages, comm::StagedCommunicator for the rest): slower than nccl, but it lets
  // several ranks share one GPU, which NCCL refuses.
  check.Timeout("parallel.timeout_s", par.timeout_s, /*zero_allowed=*/false);
  if (!(par.bucket_mb > 0)) {
    problems->Add("parallel.bucket_mb", absl::StrCat("must be > 0 (got ", ShortestDouble(par.bucket_mb), ")"));
  }
  check.AtMost("parallel.bucket_mb", par.bucket_mb, SpecCaps::kBucketMb);
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
    SchemaReader top(YamlMapReader(root, "", &problems));
    VisitJob(config, top);
    top.Finish();
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

PrecisionChoice EffectivePrecision(const RuntimeConfig& runtime) {
  if (runtime.precision != PrecisionChoice::kAuto) return runtime.precision;
  return runtime.device.is_cuda() ? PrecisionChoice::kBf16 : PrecisionChoice::kFp32;
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
