#include "experiment/sweep_spec.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "job/job_config.h"
#include "job/yaml_limits.h"
#include "job/yaml_reader.h"

namespace deepnet::experiment {
namespace {

using job::ConfigProblems;
using job::DescribeYaml;

constexpr int64_t kMaxAxisValues = 1000;
constexpr int64_t kMaxRuns = 100000;

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(what, " ", path, ": no such file"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// An axis key: `depth`, or a dotted job key of plain names ("model.norm").
std::optional<std::string> CheckAxisKey(const std::string& key) {
  if (key == "depth") return std::nullopt;
  if (key.empty() || key.front() == '.' || key.back() == '.' || !absl::StrContains(key, '.') ||
      absl::StrContains(key, "..")) {
    return "an axis is `depth` or a dotted job-config key such as model.norm or optim.lr";
  }
  for (char c : key) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) {
      return "an axis key holds letters, digits, '_' and '.' only";
    }
  }
  return std::nullopt;
}

void ReadAxisValues(const YAML::Node& node, const std::string& path, SweepAxis* axis,
                    ConfigProblems* problems) {
  if (!node.IsSequence() || node.size() == 0) {
    problems->Add(path, absl::StrCat("expected a non-empty list of values, e.g. [6, 18] (got ",
                                     DescribeYaml(node), ")"));
    return;
  }
  if (static_cast<int64_t>(node.size()) > kMaxAxisValues) {
    problems->Add(path,
                  absl::StrCat("at most ", kMaxAxisValues, " values (got ", node.size(), ")"));
    return;
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) {
      problems->Add(absl::StrCat(path, "[", i, "]"),
                    absl::StrCat("expected a scalar (got ", DescribeYaml(node[i]), ")"));
      continue;
    }
    std::string value = node[i].Scalar();
    if (std::optional<std::string> bad = job::CheckPlainText(value)) {
      problems->Add(absl::StrCat(path, "[", i, "]"), *bad);
      continue;
    }
    if (!seen.insert(value).second) {
      problems->Add(absl::StrCat(path, "[", i, "]"), absl::StrCat("duplicate value '", value, "'"));
      continue;
    }
    if (axis->key == "depth") {
      int64_t layers = 0;
      if (auto error = job::YamlToInt64(node[i], &layers); error || layers < 1) {
        problems->Add(absl::StrCat(path, "[", i, "]"),
                      absl::StrCat("depth is a layer count >= 1 (got '", value, "')"));
        continue;
      }
    }
    axis->values.push_back(value);
  }
}

void ReadAxes(const YAML::Node& node, SweepSpec* spec, ConfigProblems* problems) {
  if (!node.IsMap()) {
    problems->Add("axes", absl::StrCat("expected a map of axis key to values, e.g. "
                                       "{model.norm: [post_ln, deepnorm], depth: [6, 18]} (got ",
                                       DescribeYaml(node), ")"));
    return;
  }
  std::set<std::string> keys;
  for (const auto& item : node) {
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
    const std::string path = absl::StrCat("axes.", key);
    if (std::optional<std::string> bad = CheckAxisKey(key)) {
      problems->Add(path, *bad);
      continue;
    }
    if (!keys.insert(key).second) {
      problems->Add(path, "duplicate axis");
      continue;
    }
    SweepAxis axis;
    axis.key = key;
    ReadAxisValues(item.second, path, &axis, problems);
    if (!axis.values.empty()) spec->axes.push_back(std::move(axis));
  }
  if (keys.count("depth") &&
      (keys.count("model.encoder_layers") || keys.count("model.decoder_layers"))) {
    problems->Add("axes.depth",
                  "sets model.encoder_layers and model.decoder_layers; do not "
                  "sweep them as axes of their own too");
  }
}

void CheckBudget(const SweepSpec& spec, ConfigProblems* problems) {
  if (!problems->Bad("budget.minutes") &&
      (spec.budget.minutes < 0 || spec.budget.minutes > job::SpecCaps::kMaxMinutes)) {
    problems->Add("budget.minutes", absl::StrCat("must be in [0, ", job::SpecCaps::kMaxMinutes,
                                                 "] (0: no limit; got ", spec.budget.minutes, ")"));
  }
  if (!problems->Bad("budget.max_runs") &&
      (spec.budget.max_runs < 0 || spec.budget.max_runs > kMaxRuns)) {
    problems->Add("budget.max_runs",
                  absl::StrCat("must be in [0, ", kMaxRuns, "] (0: all runs; got ",
                               spec.budget.max_runs, ")"));
  }
  const PlateauRule& p = spec.plateau;
  if (!problems->Bad("plateau.fraction") && !(p.fraction > 0 && p.fraction <= 1)) {
    problems->Add("plateau.fraction", absl::StrCat("must be in (0, 1] (got ", p.fraction, ")"));
  }
  if (!problems->Bad("plateau.window") && !(p.window > 0 && p.window <= 1)) {
    problems->Add("plateau.window", absl::StrCat("must be in (0, 1] (got ", p.window, ")"));
  }
  if (!problems->Bad("plateau.min_improvement") &&
      !(p.min_improvement >= 0 && p.min_improvement < 1)) {
    problems->Add("plateau.min_improvement",
                  absl::StrCat("must be in [0, 1) (got ", p.min_improvement, ")"));
  }
  int64_t runs = 1;
  for (const SweepAxis& axis : spec.axes) {
    runs *= static_cast<int64_t>(axis.values.size());
    if (runs > kMaxRuns) {
      problems->Add("axes", absl::StrCat("the plan has more than ", kMaxRuns, " runs"));
      break;
    }
  }
}

void CheckSetItem(const std::string& item, const std::string& path, ConfigProblems* problems) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0) {
    problems->Add(path, absl::StrCat("expected dotted.key=value, e.g. train.max_steps=100 (got '",
                                     job::ShortenForMessage(item, 80), "')"));
  }
}

}  // namespace

absl::StatusOr<SweepSpec> ParseSweepSpec(const std::string& yaml_text,
                                         const std::string& source_name,
                                         const std::string& base_dir) {
  if (absl::Status limits = job::CheckYamlLimits(yaml_text); !limits.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", limits.message()));
  }
  try {
    YAML::Node root;
    try {
      root = YAML::Load(yaml_text);
    } catch (const YAML::ParserException& e) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": YAML syntax error at line ",
                                                     e.mark.line + 1, ", column ",
                                                     e.mark.column + 1, ": ", e.msg));
    }
    ConfigProblems problems;
    SweepSpec spec;
    if (!root.IsMap()) {
      problems.Add("", absl::StrCat("expected a map (name, base or job, set, axes, budget, "
                                    "plateau, out) at the top level (got ",
                                    DescribeYaml(root), ")"));
      return problems.ToStatus(source_name);
    }
    const YAML::Node& map = root;  // The const operator[] does not insert keys.
    job::YamlMapReader r(root, "", &problems);
    r.String("name", &spec.name);
    r.String("description", &spec.description);
    std::string base;
    r.String("base", &base);
    r.Section("job");   // Read as a whole below; this marks the key as known.
    r.Section("axes");  // Likewise.
    r.StringList("set", &spec.set);
    job::YamlMapReader budget = r.Section("budget");
    budget.Double("minutes", &spec.budget.minutes);
    budget.Int("max_runs", &spec.budget.max_runs);
    budget.Finish();
    job::YamlMapReader plateau = r.Section("plateau");
    plateau.Double("fraction", &spec.plateau.fraction);
    plateau.Double("window", &spec.plateau.window);
    plateau.Double("min_improvement", &spec.plateau.min_improvement);
    plateau.Finish();
    r.String("out", &spec.out);
    r.Finish();

    if (spec.name.empty() || spec.name.size() > job::SpecCaps::kNameBytes) {
      problems.Add("name", "must be 1 to 256 characters");
    }
    const YAML::Node job_node = map["job"];
    if (job_node.IsDefined() && !base.empty()) {
      problems.Add("job", "give either `base` (a job file) or `job` (an inline job), not both");
    } else if (job_node.IsDefined()) {
      if (job_node.IsMap()) {
        YAML::Emitter emitter;
        emitter << job_node;
        spec.job_yaml = emitter.c_str();
        spec.job_source = source_name + ": job";
      }
    } else if (!base.empty()) {
      std::filesystem::path path(base);
      if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
      auto text = ReadFile(path.string(), "job file");
      if (!text.ok()) {
        problems.Add("base", std::string(text.status().message()));
      } else {
        spec.job_yaml = *text;
        spec.job_source = path.string();
      }
    } else if (!problems.Bad("base")) {
      problems.Add("base",
                   "missing: name a job file (`base: job.yaml`) or give an inline `job:` map");
    }
    const YAML::Node axes = map["axes"];
    if (axes.IsDefined() && !axes.IsNull() && axes.IsMap()) ReadAxes(axes, &spec, &problems);
    for (size_t i = 0; i < spec.set.size(); ++i) {
      CheckSetItem(spec.set[i], absl::StrCat("set[", i, "]"), &problems);
    }
    CheckBudget(spec, &problems);
    if (!problems.empty()) return problems.ToStatus(source_name);
    return spec;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", e.what()));
  }
}

absl::StatusOr<SweepSpec> LoadSweepSpec(const std::string& path) {
  auto text = ReadFile(path, "sweep spec");
  if (!text.ok()) return text.status();
  return ParseSweepSpec(*text, path, std::filesystem::path(path).parent_path().string());
}

absl::Status ApplySpecOverrides(const std::vector<std::string>& items, SweepSpec* spec) {
  ConfigProblems problems;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    const std::string where = absl::StrCat("--set ", job::ShortenForMessage(item, 80));
    if (eq == std::string::npos || eq == 0) {
      problems.Add(where, "expected key=value, e.g. axes.depth=[6,18] or train.max_steps=20");
      continue;
    }
    const std::string key = item.substr(0, eq);
    const std::string text = item.substr(eq + 1);
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      problems.Add(key, absl::StrCat("value is not valid YAML: ", e.what()));
      continue;
    }
    if (absl::StartsWith(key, "axes.")) {
      SweepAxis axis;
      axis.key = key.substr(5);
      if (std::optional<std::string> bad = CheckAxisKey(axis.key)) {
        problems.Add(key, *bad);
        continue;
      }
      YAML::Node values = value;
      if (value.IsScalar()) {  // One value: `--set axes.depth=6`.
        // A fresh node: assigning to `value` would write through into the list itself.
        values.reset(YAML::Node(YAML::NodeType::Sequence));
        values.push_back(value.Scalar());
      }
      ReadAxisValues(values, key, &axis, &problems);
      if (axis.values.empty()) continue;
      bool replaced = false;
      for (SweepAxis& existing : spec->axes) {
        if (existing.key == axis.key) {
          existing = axis;
          replaced = true;
        }
      }
      if (!replaced) spec->axes.push_back(std::move(axis));
    } else if (key == "budget.minutes" || key == "plateau.fraction" || key == "plateau.window" ||
               key == "plateau.min_improvement") {
      double* out = key == "budget.minutes"     ? &spec->budget.minutes
                    : key == "plateau.fraction" ? &spec->plateau.fraction
                    : key == "plateau.window"   ? &spec->plateau.window
                                                : &spec->plateau.min_improvement;
      if (auto error = job::YamlToDouble(value, out)) problems.Add(key, *error);
    } else if (key == "budget.max_runs") {
      if (auto error = job::YamlToInt64(value, &spec->budget.max_runs)) problems.Add(key, *error);
    } else if (key == "out" || key == "name") {
      if (auto error = job::YamlToString(value, key == "out" ? &spec->out : &spec->name)) {
        problems.Add(key, *error);
      }
    } else if (absl::StartsWith(key, "budget.") || absl::StartsWith(key, "plateau.")) {
      problems.Add(key,
                   "unknown key (allowed: budget.minutes, budget.max_runs, "
                   "plateau.fraction, plateau.window, plateau.min_improvement)");
    } else {
      spec->set.push_back(item);  // A job override for every run.
    }
  }
  CheckBudget(*spec, &problems);
  if (!problems.empty()) return problems.ToStatus("deepnet experiment");
  return absl::OkStatus();
}

std::string DumpSweepSpec(const SweepSpec& spec) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "name" << YAML::Value << spec.name;
  if (!spec.description.empty()) e << YAML::Key << "description" << YAML::Value << spec.description;
  e << YAML::Key << "set" << YAML::Value << YAML::BeginSeq;
  for (const std::string& s : spec.set) e << s;
  e << YAML::EndSeq;
  e << YAML::Key << "axes" << YAML::Value << YAML::BeginMap;
  for (const SweepAxis& axis : spec.axes) {
    e << YAML::Key << axis.key << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& v : axis.values) e << v;
    e << YAML::EndSeq;
  }
  e << YAML::EndMap;
  e << YAML::Key << "budget" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "minutes" << YAML::Value << spec.budget.minutes;
  e << YAML::Key << "max_runs" << YAML::Value << spec.budget.max_runs;
  e << YAML::EndMap;
  e << YAML::Key << "plateau" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "fraction" << YAML::Value << spec.plateau.fraction;
  e << YAML::Key << "window" << YAML::Value << spec.plateau.window;
  e << YAML::Key << "min_improvement" << YAML::Value << spec.plateau.min_improvement;
  e << YAML::EndMap;
  e << YAML::Key << "out" << YAML::Value << spec.out;
  e << YAML::Key << "job" << YAML::Value
    << YAML::Load(spec.job_yaml.empty() ? "{}" : spec.job_yaml);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace deepnet::experiment
