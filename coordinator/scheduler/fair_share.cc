#include "coordinator/scheduler/fair_share.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/auth/auth.h"
#include "job/yaml_reader.h"

namespace deepnet::coordinator {
namespace {

using job::ConfigProblems;
using job::DescribeYaml;
using job::YamlMapReader;

constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();

// One field of an entry at `path` ("users.alice"): unset, or a value within [lo, hi].
void ReadLimit(YamlMapReader& reader, const std::string& path, const char* key, int64_t lo,
               int64_t hi, ConfigProblems* problems, std::optional<Limit>* out) {
  int64_t value = kUnset;
  reader.Int(key, &value);
  if (value == kUnset) return;
  const std::string field = absl::StrCat(path, ".", key);
  if (value < lo || value > hi) {
    problems->Add(field, absl::StrCat("must be in [", lo, ", ", hi, "] (got ", value, ")"));
    return;
  }
  *out = Limit{value, field};
}

ShareLimits ReadEntry(const YAML::Node& node, const std::string& path, ConfigProblems* problems) {
  ShareLimits limits;
  if (node.IsNull()) return limits;  // `alice:` alone: the defaults
  if (!node.IsMap()) {
    problems->Add(path, absl::StrCat("expected a map of limits (got ", DescribeYaml(node), ")"));
    return limits;
  }
  YamlMapReader reader(node, path, problems);
  ReadLimit(reader, path, "max_priority", kInt32Min, kInt32Max, problems, &limits.max_priority);
  ReadLimit(reader, path, "max_running_ranks", 0, kInt32Max, problems, &limits.max_running_ranks);
  ReadLimit(reader, path, "max_queued_jobs", 0, kInt32Max, problems, &limits.max_queued_jobs);
  reader.Finish();
  return limits;
}

// `users:` or `teams:`: a map of principal names to entries.
void ReadEntries(const YAML::Node& node, const std::string& path, ConfigProblems* problems,
                 std::map<std::string, ShareLimits>* out) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    problems->Add(path,
                  absl::StrCat("expected a map of names to limits (got ", DescribeYaml(node), ")"));
    return;
  }
  for (const auto& entry : node) {
    const std::string name = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
    if (!IsValidPrincipalName(name)) {
      problems->Add(path,
                    absl::StrCat("not a valid name: ", DescribeYaml(entry.first),
                                 " (1 to 64 of A-Z a-z 0-9 . _ -, not starting with . or -)"));
      continue;
    }
    const std::string entry_path = absl::StrCat(path, ".", name);
    if (out->count(name) > 0) {
      problems->Add(entry_path, "duplicate entry");
      continue;
    }
    (*out)[name] = ReadEntry(entry.second, entry_path, problems);
  }
}

void Fill(std::optional<Limit>* field, const std::optional<Limit>& fallback) {
  if (!field->has_value()) *field = fallback;
}

}  // namespace

ShareLimits LimitsConfig::ForUser(const std::string& user, bool admin) const {
  ShareLimits limits;
  auto it = users.find(user);
  if (it != users.end()) limits = it->second;
  if (admin) return limits;
  Fill(&limits.max_priority, defaults.max_priority);
  Fill(&limits.max_running_ranks, defaults.max_running_ranks);
  Fill(&limits.max_queued_jobs, defaults.max_queued_jobs);
  return limits;
}

ShareLimits LimitsConfig::ForTeam(const std::string& team) const {
  auto it = teams.find(team);
  return it == teams.end() ? ShareLimits() : it->second;
}

absl::StatusOr<LimitsConfig> ParseLimits(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.what()));
  }
  LimitsConfig config;
  config.source = source;
  if (root.IsNull()) return config;  // an empty file: no limits
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": expected a map with default, users and teams (got ", DescribeYaml(root), ")"));
  }
  ConfigProblems problems;
  std::map<std::string, int> seen;
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
    if (++seen[key] > 1) {
      problems.Add(key, "duplicate key");
    } else if (key == "default") {
      config.defaults = ReadEntry(entry.second, "default", &problems);
    } else if (key == "users") {
      ReadEntries(entry.second, "users", &problems, &config.users);
    } else if (key == "teams") {
      ReadEntries(entry.second, "teams", &problems, &config.teams);
    } else {
      problems.Add(key.empty() ? DescribeYaml(entry.first) : key,
                   "unknown key (allowed: default, users, teams)");
    }
  }
  if (!problems.empty()) return problems.ToStatus(source);
  return config;
}

absl::StatusOr<LimitsConfig> LoadLimitsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the limits file"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read it"));
  return ParseLimits(text.str(), path);
}

}  // namespace deepnet::coordinator
