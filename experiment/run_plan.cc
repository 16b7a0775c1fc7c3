#include "experiment/run_plan.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "job/job_config.h"

namespace deepnet::experiment {
namespace {

std::string Sanitize(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    out += keep ? c : '_';
  }
  return out.empty() ? "_" : out;
}

std::string ShortName(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

}  // namespace

absl::StatusOr<std::vector<PlannedRun>> ExpandPlan(const SweepSpec& spec) {
  // Axis names in ids: the key's last part unless two axes share it.
  std::map<std::string, int> short_count;
  for (const SweepAxis& axis : spec.axes) ++short_count[ShortName(axis.key)];
  std::vector<std::string> names;
  for (const SweepAxis& axis : spec.axes) {
    names.push_back(short_count[ShortName(axis.key)] > 1 ? axis.key : ShortName(axis.key));
  }
  int64_t total = 1;
  for (const SweepAxis& axis : spec.axes) total *= static_cast<int64_t>(axis.values.size());
  std::vector<PlannedRun> runs;
  std::set<std::string> ids;
  std::vector<size_t> index(spec.axes.size(), 0);
  for (int64_t n = 0; n < total; ++n) {
    PlannedRun run;
    run.overrides = spec.set;
    for (size_t a = 0; a < spec.axes.size(); ++a) {
      const SweepAxis& axis = spec.axes[a];
      const std::string& value = axis.values[index[a]];
      run.axis_values.emplace_back(axis.key, value);
      if (axis.key == "depth") {
        run.overrides.push_back("model.encoder_layers=" + value);
        run.overrides.push_back("model.decoder_layers=" + value);
      } else {
        run.overrides.push_back(axis.key + "=" + value);
      }
      absl::StrAppend(&run.id, a ? "_" : "", Sanitize(names[a]), "-", Sanitize(value));
    }
    if (run.id.empty()) run.id = "run";
    // Two values that sanitise alike ("a/b", "a_b") still get distinct folders.
    if (!ids.insert(run.id).second) {
      run.id += "_" + std::to_string(n);
      ids.insert(run.id);
    }
    auto config = job::ParseJobConfig(spec.job_yaml, run.overrides,
                                      absl::StrCat(spec.job_source, " (run ", run.id, ")"));
    if (!config.ok()) return config.status();
    run.config_yaml = job::DumpJobConfig(*config);
    run.seed = config->train.seed;
    run.max_steps = config->train.max_steps;
    run.max_minutes = config->train.max_minutes;
    runs.push_back(std::move(run));
    // The last axis varies fastest.
    for (size_t a = spec.axes.size(); a-- > 0;) {
      if (++index[a] < spec.axes[a].values.size()) break;
      index[a] = 0;
    }
  }
  return runs;
}

}  // namespace deepnet::experiment
