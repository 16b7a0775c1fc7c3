// The schema's one declaration (job/job_schema.h) against what uses it: every key is declared
// once and dumped once, every field survives a dump and a read, Validate refuses every value
// outside the declared bounds, and docs/CONFIG.md's tables list every key with its type,
// default, choices and bounds.
#include "job/job_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "job/job_config.h"
#include "job/job_paths.h"
#include "job/yaml_reader.h"

namespace deepnet::job {
namespace {

using ::testing::HasSubstr;

enum class SchemaKind {
  kSection, kInt, kUint, kReal, kBool, kString, kStringList, kStringMap, kRealPair, kChoice,
  kDevice, kForbidden
};

// One declared key, as the schema visits it on a default config.
struct DeclaredKey {
  std::string path;
  SchemaKind kind = SchemaKind::kInt;
  std::optional<IntBounds> int_bounds;
  std::optional<RealBounds> real_bounds;
  std::string default_text;          // As the dump writes it.
  std::vector<std::string> choices;  // kChoice: the names in table order.
  bool omitted_when_empty = false;
  std::optional<JobPathUse> path_use;  // Declared with Path.
};

// Collects every key of the schema with its type, bounds and default.
class SchemaCollector {
 public:
  std::vector<DeclaredKey> keys;

  void Int(const char* key, const int64_t& v, IntBounds b) {
    Add(key, SchemaKind::kInt, std::to_string(v)).int_bounds = b;
  }
  void Uint(const char* key, const uint64_t& v) { Add(key, SchemaKind::kUint, std::to_string(v)); }
  void Real(const char* key, const double& v, RealBounds b) {
    Add(key, SchemaKind::kReal, FormatDouble(v)).real_bounds = b;
  }
  void Bool(const char* key, const bool& v) { Add(key, SchemaKind::kBool, v ? "true" : "false"); }
  void String(const char* key, const std::string& v, Omit omit) {
    Add(key, SchemaKind::kString, v).omitted_when_empty = omit == Omit::kWhenEmpty;
  }
  // A path is a string in the file and the docs; `path_use` tells it apart.
  void Path(const char* key, const std::string& v, JobPathUse use) {
    Add(key, SchemaKind::kString, v).path_use = use;
  }
  void StringList(const char* key, const std::vector<std::string>& v) {
    Add(key, SchemaKind::kStringList, absl::StrCat("[", absl::StrJoin(v, ", "), "]"));
  }
  void StringMap(const char* key, const std::map<std::string, std::string>& v) {
    Add(key, SchemaKind::kStringMap, v.empty() ? "{}" : "?");
  }
  void RealPair(const char* key, const double& a, const double& b) {
    Add(key, SchemaKind::kRealPair, absl::StrCat("[", FormatDouble(a), ", ", FormatDouble(b), "]"));
  }
  template <typename E>
  void Choice(const char* key, const E& v) {
    DeclaredKey& k = Add(key, SchemaKind::kChoice, std::string(ToString(v)));
    for (const auto& [value, name] : ChoicesOf(v).names) k.choices.emplace_back(name);
  }
  void Device(const char* key, const job::Device& v) {
    Add(key, SchemaKind::kDevice, ToString(v));
  }
  template <typename Fn>
  void Section(const char* key, Fn visit) {
    Add(key, SchemaKind::kSection, "");
    prefix_.push_back(key);
    visit(*this);
    prefix_.pop_back();
  }
  void Forbid(const char* key, const std::string&) { Add(key, SchemaKind::kForbidden, ""); }

 private:
  DeclaredKey& Add(const char* key, SchemaKind kind, std::string default_text) {
    std::vector<std::string> parts = prefix_;
    parts.emplace_back(key);
    DeclaredKey k;
    k.path = absl::StrJoin(parts, ".");
    k.kind = kind;
    k.default_text = std::move(default_text);
    keys.push_back(std::move(k));
    return keys.back();
  }

  std::vector<std::string> prefix_;
};

std::vector<DeclaredKey> DeclaredKeys() {
  const JobConfig defaults;
  SchemaCollector collector;
  VisitJob(defaults, collector);
  return collector.keys;
}

// Sets the field at `path` to its `attempt`-th value other than the current one, if it has one.
class SchemaMutator {
 public:
  SchemaMutator(std::string path, size_t attempt) : path_(std::move(path)), attempt_(attempt) {}
  bool applied = false;

  void Int(const char* key, int64_t& v, IntBounds b) {
    std::vector<int64_t> candidates;
    for (int64_t c : {v + 1, v - 1, v * 2, v / 2, b.min, b.max}) {
      if (c != v && c >= b.min && c <= b.max) candidates.push_back(c);
    }
    Pick(key, &v, candidates);
  }
  void Uint(const char* key, uint64_t& v) { Pick(key, &v, std::vector<uint64_t>{v + 1}); }
  void Real(const char* key, double& v, RealBounds b) {
    std::vector<double> candidates;
    for (double c : {v * 2, v / 2, v + 0.5, v + 1, (b.min + b.max) / 2}) {
      if (c != v && std::isfinite(c) && c >= b.min && c <= b.max) candidates.push_back(c);
    }
    Pick(key, &v, candidates);
  }
  void Bool(const char* key, bool& v) { Pick(key, &v, std::vector<bool>{!v}); }
  void String(const char* key, std::string& v, Omit) {
    Pick(key, &v, std::vector<std::string>{"x", "tcp://host:1", "1-3"});
  }
  void Path(const char* key, std::string& v, JobPathUse) {
    Pick(key, &v, std::vector<std::string>{"x", "/data/x"});
  }
  void StringList(const char* key, std::vector<std::string>& v) {
    Pick(key, &v, std::vector<std::vector<std::string>>{{"rev"}});
  }
  void StringMap(const char* key, std::map<std::string, std::string>& v) {
    Pick(key, &v, std::vector<std::map<std::string, std::string>>{{{"a", "b"}}});
  }
  void RealPair(const char* key, double& a, double& b) {
    if (!Here(key) || attempt_ > 0) return;
    a = 0.8;
    b = 0.9;
    applied = true;
  }
  template <typename E>
  void Choice(const char* key, E& v) {
    std::vector<E> others;
    for (const auto& [value, name] : ChoicesOf(v).names) {
      if (value != v) others.push_back(value);
    }
    Pick(key, &v, others);
  }
  void Device(const char* key, job::Device& v) {
    Pick(key, &v, std::vector<job::Device>{*ParseDevice("cuda"), *ParseDevice("cuda:1")});
  }
  template <typename Fn>
  void Section(const char* key, Fn visit) {
    prefix_.push_back(key);
    visit(*this);
    prefix_.pop_back();
  }
  void Forbid(const char*, const std::string&) {}

 private:
  bool Here(const char* key) const {
    std::vector<std::string> parts = prefix_;
    parts.emplace_back(key);
    return absl::StrJoin(parts, ".") == path_;
  }
  template <typename T>
  void Pick(const char* key, T* field, const std::vector<T>& candidates) {
    if (!Here(key) || attempt_ >= candidates.size()) return;
    *field = candidates[attempt_];
    applied = true;
  }

  std::string path_;
  size_t attempt_;
  std::vector<std::string> prefix_;
};

bool IsField(const DeclaredKey& k) {
  return k.kind != SchemaKind::kSection && k.kind != SchemaKind::kForbidden;
}

// Every map key of a YAML document, as dotted paths in document order.
void CollectYamlKeys(const YAML::Node& node, const std::string& prefix,
                     std::vector<std::string>* out) {
  if (!node.IsMap()) return;
  for (const auto& entry : node) {
    const std::string path =
        prefix.empty() ? entry.first.Scalar() : absl::StrCat(prefix, ".", entry.first.Scalar());
    out->push_back(path);
    CollectYamlKeys(entry.second, path, out);
  }
}

TEST(JobSchemaTest, EveryKeyIsDeclaredOnceAndDumpedOnce) {
  std::set<std::string> seen;
  std::vector<std::string> expected;
  for (const DeclaredKey& k : DeclaredKeys()) {
    EXPECT_TRUE(seen.insert(k.path).second) << k.path << " is declared twice";
    const bool dumped = k.kind != SchemaKind::kForbidden &&
                        !(k.omitted_when_empty && k.default_text.empty());
    if (dumped) expected.push_back(k.path);
  }
  std::vector<std::string> dumped;
  CollectYamlKeys(YAML::Load(DumpJobConfig(JobConfig())), "", &dumped);
  EXPECT_EQ(dumped, expected);
}

// A key named like a path is declared with Path, so that JobPaths lists it and the coordinator
// and the worker check it against the storage policy: a new one cannot be forgotten.
TEST(JobSchemaTest, EveryKeyNamedLikeAPathIsDeclaredAsAPath) {
  int paths = 0;
  for (const DeclaredKey& k : DeclaredKeys()) {
    const std::string name = k.path.substr(k.path.rfind('.') + 1);
    const bool looks_like_a_path = absl::EndsWith(name, "_path") || absl::EndsWith(name, "_dir") ||
                                   absl::EndsWith(name, "_file") || name == "dir";
    if (k.kind == SchemaKind::kString && looks_like_a_path) {
      EXPECT_TRUE(k.path_use.has_value()) << k.path << " is a path declared as a plain String";
    }
    paths += k.path_use.has_value() ? 1 : 0;
  }
  EXPECT_GE(paths, 5);
}

// JobPaths is exactly the keys declared with Path, each with its dotted name and use.
TEST(JobSchemaTest, JobPathsListsEveryPathKeyOfTheSchema) {
  JobConfig config;
  std::map<std::string, JobPathUse> declared;
  for (const DeclaredKey& k : DeclaredKeys()) {
    if (!k.path_use) continue;
    declared[k.path] = *k.path_use;
    SchemaMutator mutator(k.path, /*attempt=*/1);  // "/data/x"
    VisitJob(config, mutator);
    ASSERT_TRUE(mutator.applied) << k.path;
  }
  const std::vector<JobPath> paths = JobPaths(config);
  ASSERT_EQ(paths.size(), declared.size());
  for (const JobPath& p : paths) {
    ASSERT_EQ(declared.count(p.field), 1u) << p.field;
    EXPECT_EQ(p.use, declared[p.field]) << p.field;
    EXPECT_EQ(p.value, "/data/x") << p.field;
  }
  EXPECT_EQ(declared.count("train.probe_file"), 1u);
  EXPECT_EQ(declared["checkpoint.dir"], JobPathUse::kWriteDir);
  EXPECT_EQ(declared["data.shard_dir"], JobPathUse::kReadDir);
  // An empty path is no path: the default config's empty fields are not listed.
  for (const JobPath& p : JobPaths(JobConfig())) EXPECT_FALSE(p.value.empty()) << p.field;
}

TEST(JobSchemaTest, EveryFieldSurvivesADumpAndARead) {
  const std::string default_dump = DumpJobConfig(JobConfig());
  int mutated = 0;
  for (const DeclaredKey& k : DeclaredKeys()) {
    if (!IsField(k)) continue;
    SCOPED_TRACE(k.path);
    bool round_tripped = false;
    bool had_candidate = false;
    for (size_t attempt = 0; !round_tripped; ++attempt) {
      JobConfig config;
      SchemaMutator mutator(k.path, attempt);
      VisitJob(config, mutator);
      if (!mutator.applied) break;
      had_candidate = true;
      const std::string dump = DumpJobConfig(config);
      absl::StatusOr<JobConfig> read = ParseJobConfig(dump, {}, "dump");
      if (!read.ok()) continue;  // Refused by a cross-field rule: try the next value.
      EXPECT_NE(dump, default_dump) << "the dump does not write the field";
      EXPECT_EQ(DumpJobConfig(*read), dump) << "the reader does not read the field back";
      round_tripped = true;
    }
    // A choice of one value (data.tokenizer) has nothing to change to.
    if (k.kind == SchemaKind::kChoice && k.choices.size() == 1) continue;
    EXPECT_TRUE(had_candidate) << "no other value to try";
    EXPECT_TRUE(round_tripped) << "no other value parses";
    mutated += round_tripped ? 1 : 0;
  }
  EXPECT_GE(mutated, 90);
}

TEST(JobSchemaTest, ValidateRefusesValuesOutsideTheDeclaredBounds) {
  for (const DeclaredKey& k : DeclaredKeys()) {
    std::vector<std::string> outside;
    if (k.int_bounds) {
      const IntBounds b = *k.int_bounds;
      if (b.min > INT64_MIN) outside.push_back(std::to_string(b.min - 1));
      if (b.max < INT64_MAX) outside.push_back(std::to_string(b.max + 1));
    }
    if (k.real_bounds) {
      const RealBounds b = *k.real_bounds;
      if (std::isfinite(b.min)) {
        outside.push_back(ShortestDouble(b.min_open ? b.min : std::nextafter(b.min, -INFINITY)));
      }
      if (std::isfinite(b.max)) {
        outside.push_back(ShortestDouble(b.max_open ? b.max : std::nextafter(b.max, INFINITY)));
      }
    }
    // The error names the field ("data.synthetic.max_words" may share a line with min_words).
    const size_t dot = k.path.rfind('.');
    const std::string section = dot == std::string::npos ? "" : k.path.substr(0, dot + 1);
    const std::string key = k.path.substr(section.size());
    for (const std::string& value : outside) {
      const std::string set = absl::StrCat(k.path, "=", value);
      SCOPED_TRACE(set);
      absl::StatusOr<JobConfig> config = ParseJobConfig("", {set}, "job.yaml");
      ASSERT_FALSE(config.ok());
      const std::string message(config.status().message());
      EXPECT_THAT(message, HasSubstr("job.yaml: " + section));
      EXPECT_THAT(message, HasSubstr(key));
    }
  }
}

TEST(JobSchemaTest, ChoiceErrorsListTheAcceptedNames) {
  for (const DeclaredKey& k : DeclaredKeys()) {
    if (k.kind != SchemaKind::kChoice && k.kind != SchemaKind::kDevice) continue;
    SCOPED_TRACE(k.path);
    absl::StatusOr<JobConfig> config =
        ParseJobConfig("", {absl::StrCat(k.path, "=no_such_choice")}, "job.yaml");
    ASSERT_FALSE(config.ok());
    const std::string message(config.status().message());
    EXPECT_THAT(message, HasSubstr(absl::StrCat(k.path, ": must be ")));
    EXPECT_THAT(message, HasSubstr("(got 'no_such_choice')"));
    for (const std::string& name : k.choices) EXPECT_THAT(message, HasSubstr(name));
  }
}

// ---- docs/CONFIG.md ------------------------------------------------------------------------

struct DocRow {
  std::string type;
  std::string default_text;
  std::string allowed;
};

std::string Unquote(absl::string_view cell) {
  cell = absl::StripAsciiWhitespace(cell);
  if (cell.size() >= 2 && cell.front() == '`' && cell.back() == '`') {
    cell = cell.substr(1, cell.size() - 2);
  }
  return std::string(cell);
}

// The cells of a table row "| a | b |", stripped.
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  for (absl::string_view cell : absl::StrSplit(line, '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(cell));
  }
  // The empty strings before the first and after the last '|'.
  if (!cells.empty()) cells.erase(cells.begin());
  if (!cells.empty() && cells.back().empty()) cells.pop_back();
  return cells;
}

std::string ReadConfigMd() {
  std::ifstream in(std::string(DEEPNET_SOURCE_DIR) + "/docs/CONFIG.md");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The key tables of docs/CONFIG.md: dotted path -> row, in document order; `ranges` gets the
// "Ranges" table (each listed path -> its range).
std::vector<std::pair<std::string, DocRow>> DocKeyTables(std::map<std::string, std::string>* ranges) {
  std::vector<std::pair<std::string, DocRow>> rows;
  std::string section;  // Heading in backticks; "" outside a key section.
  bool in_ranges = false;
  const std::vector<std::string> lines = absl::StrSplit(ReadConfigMd(), '\n');
  for (const std::string& line : lines) {
    if (absl::StartsWith(line, "#")) {
      // A key section's heading is the section in backticks alone: "## `model`".
      const std::string title(absl::StripLeadingAsciiWhitespace(line.substr(line.find(' '))));
      const bool keys = title.size() > 2 && title.front() == '`' && title.back() == '`';
      section = keys ? title.substr(1, title.size() - 2) : std::string();
      in_ranges = line == "## Ranges";
      continue;
    }
    if (!absl::StartsWith(line, "| `")) continue;
    const std::vector<std::string> cells = Cells(line);
    if (in_ranges && cells.size() >= 2) {
      std::string first_section;
      for (absl::string_view name : absl::StrSplit(cells[0], ", ")) {
        std::string path = Unquote(name);
        if (path.find('.') == std::string::npos) {
          path = absl::StrCat(first_section, ".", path);
        } else if (first_section.empty()) {
          first_section = path.substr(0, path.rfind('.'));
        }
        (*ranges)[path] = cells[1];
      }
      continue;
    }
    if (section.empty() || cells.size() < 5) continue;
    const std::string key = Unquote(cells[0]);
    const std::string path = section == "name" ? key : absl::StrCat(section, ".", key);
    rows.push_back({path, DocRow{cells[1], cells[2], cells[3]}});
  }
  return rows;
}

// "2000", "0.5", "10^12", "2^31 − 1", "−2^31"; nullopt for anything else (`model.max_positions`).
std::optional<double> DocNumber(std::string text) {
  text = std::string(absl::StripAsciiWhitespace(text));
  for (const char* minus : {"−", "-"}) {
    if (absl::StartsWith(text, minus)) {
      std::optional<double> v = DocNumber(text.substr(std::string(minus).size()));
      return v ? std::optional<double>(-*v) : std::nullopt;
    }
  }
  double offset = 0;
  for (const char* suffix : {" − 1", " - 1"}) {
    if (absl::EndsWith(text, suffix)) {
      offset = -1;
      text = text.substr(0, text.size() - std::string(suffix).size());
    }
  }
  const std::vector<std::string> power = absl::StrSplit(text, '^');
  char* end = nullptr;
  const double base = std::strtod(power[0].c_str(), &end);
  if (power[0].empty() || *end != '\0') return std::nullopt;
  if (power.size() == 1) return base + offset;
  const double exponent = std::strtod(power[1].c_str(), &end);
  if (power.size() != 2 || power[1].empty() || *end != '\0') return std::nullopt;
  return std::pow(base, exponent) + offset;
}

// A documented interval at the start of `text`: "[0, 2000], not both 0", "(0, 1]", "0 … 1000".
struct DocInterval {
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;
};
std::optional<DocInterval> LeadingInterval(const std::string& text) {
  if (text.empty()) return std::nullopt;
  DocInterval interval;
  if (text[0] == '[' || text[0] == '(') {
    const size_t close = text.find_first_of("])");
    const size_t comma = text.find(", ");
    if (close == std::string::npos || comma == std::string::npos || comma > close) {
      return std::nullopt;
    }
    interval.lo_open = text[0] == '(';
    interval.hi_open = text[close] == ')';
    interval.lo = DocNumber(text.substr(1, comma - 1));
    interval.hi = DocNumber(text.substr(comma + 2, close - comma - 2));
    return interval;
  }
  const size_t dots = text.find(" … ");
  if (dots == std::string::npos) return std::nullopt;
  interval.lo = DocNumber(text.substr(0, dots));
  const size_t stop = text.find_first_of(",(", dots);
  interval.hi = DocNumber(text.substr(dots + 5, stop == std::string::npos ? std::string::npos
                                                                           : stop - dots - 5));
  return interval;
}

std::string DocType(SchemaKind kind) {
  switch (kind) {
    case SchemaKind::kInt: return "int";
    case SchemaKind::kUint: return "unsigned int";
    case SchemaKind::kReal: return "number";
    case SchemaKind::kBool: return "bool";
    case SchemaKind::kString: return "string";
    case SchemaKind::kStringList: return "list of strings";
    case SchemaKind::kStringMap: return "map of string → string";
    case SchemaKind::kRealPair: return "list of 2 numbers";
    case SchemaKind::kChoice: return "string";
    case SchemaKind::kDevice: return "string";
    case SchemaKind::kSection: return "map";
    case SchemaKind::kForbidden: return "";
  }
  return "";
}

// The default as the docs write it, compared by value: `5e-4` is 0.0005, `300` is 300.0.
bool SameDefault(const DeclaredKey& k, const std::string& doc) {
  std::string text = Unquote(doc);
  if (text == "\"\"") text.clear();
  if (k.kind == SchemaKind::kReal) {
    std::optional<double> v = DocNumber(text);
    return v && *v == std::strtod(k.default_text.c_str(), nullptr);
  }
  if (k.kind == SchemaKind::kRealPair) {
    return absl::StrReplaceAll(text, {{" ", ""}}) ==
           absl::StrReplaceAll(k.default_text, {{" ", ""}});
  }
  return text == k.default_text;
}

TEST(JobSchemaTest, ConfigMdTablesListEveryKeyWithItsTypeDefaultAndChoices) {
  std::map<std::string, std::string> ranges;
  const std::vector<std::pair<std::string, DocRow>> rows = DocKeyTables(&ranges);
  std::map<std::string, DocRow> by_path(rows.begin(), rows.end());
  // Each table's keys in order, by the section that holds them ("" for name, "data" for its
  // own keys and the rows of its nested maps).
  const auto parent = [](const std::string& path) {
    const size_t dot = path.rfind('.');
    return dot == std::string::npos ? std::string() : path.substr(0, dot);
  };
  std::map<std::string, std::vector<std::string>> documented;
  for (const auto& [path, row] : rows) documented[parent(path)].push_back(path);

  std::map<std::string, std::vector<std::string>> declared;
  for (const DeclaredKey& k : DeclaredKeys()) {
    if (k.kind == SchemaKind::kForbidden) continue;
    // Top-level sections have headings, not rows; data's nested maps have both.
    if (k.kind == SchemaKind::kSection && k.path.find('.') == std::string::npos) continue;
    declared[parent(k.path)].push_back(k.path);
    SCOPED_TRACE(k.path);
    auto row = by_path.find(k.path);
    if (row == by_path.end()) continue;  // Reported by the list comparison below.
    const DocRow& doc = row->second;
    EXPECT_TRUE(absl::StartsWith(doc.type, DocType(k.kind))) << doc.type;
    if (k.kind == SchemaKind::kSection) continue;
    if (k.kind != SchemaKind::kStringMap) {
      EXPECT_TRUE(SameDefault(k, doc.default_text)) << doc.default_text << " vs " << k.default_text;
    }
    if (k.kind == SchemaKind::kChoice) {
      std::vector<std::string> quoted;
      for (const std::string& name : k.choices) quoted.push_back(absl::StrCat("`", name, "`"));
      EXPECT_EQ(doc.allowed, absl::StrJoin(quoted, ", "));
    }
    std::vector<std::string> bound_texts = {doc.allowed};
    if (auto r = ranges.find(k.path); r != ranges.end()) bound_texts.push_back(r->second);
    bool documented_max = false;
    for (const std::string& text : bound_texts) {
      const std::optional<DocInterval> interval = LeadingInterval(text);
      if (!interval) continue;
      if (k.int_bounds) {
        if (interval->lo) {
          EXPECT_EQ(*interval->lo, static_cast<double>(k.int_bounds->min)) << text;
        }
        if (interval->hi) {
          EXPECT_EQ(*interval->hi, static_cast<double>(k.int_bounds->max)) << text;
          documented_max = true;
        }
      }
      if (k.real_bounds) {
        if (interval->lo) {
          EXPECT_EQ(*interval->lo, k.real_bounds->min) << text;
          EXPECT_EQ(interval->lo_open, k.real_bounds->min_open) << text;
        }
        if (interval->hi) {
          EXPECT_EQ(*interval->hi, k.real_bounds->max) << text;
          EXPECT_EQ(interval->hi_open, k.real_bounds->max_open) << text;
          documented_max = true;
        }
      }
    }
    if ((k.int_bounds && k.int_bounds->max < INT64_MAX) ||
        (k.real_bounds && std::isfinite(k.real_bounds->max))) {
      EXPECT_TRUE(documented_max) << "the upper bound is in neither its row nor under Ranges";
    }
  }
  EXPECT_EQ(documented, declared);
}

}  // namespace
}  // namespace deepnet::job
