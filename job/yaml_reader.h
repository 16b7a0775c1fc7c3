#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace deepnet::job {

/// Shortest decimal text that parses back to exactly `v` ("0.1", "5e-04", "-1").
std::string ShortestDouble(double v);

/// ShortestDouble with ".0" appended to integral values, so a YAML dump shows a real number.
std::string FormatDouble(double v);

/// How a node looks in an error's "(got ...)": the scalar quoted (and shortened), "a list",
/// "a map" or "nothing".
std::string DescribeYaml(const YAML::Node& node);

/// `text` fit for an error message: control characters written as \xNN, and cut to at most
/// `max_bytes` (plus "...") on a UTF-8 character boundary.
std::string ShortenForMessage(std::string_view text, size_t max_bytes);

/// Why `text` cannot be a string value of a config (a name, path or label), or nullopt: it must
/// be valid UTF-8 without control characters (NUL, newline, tab, DEL, ...).
std::optional<std::string> CheckPlainText(std::string_view text);

/// Strict scalar conversions; each returns the error message, or nullopt after setting *out.
/// Integers take optional sign and decimal digits only, and reject fractions and overflow.
/// Numbers must be finite. Booleans are `true` or `false`. An empty (null) value is the empty
/// string; strings must pass CheckPlainText and have at most kMaxStringBytes (PATH_MAX).
inline constexpr size_t kMaxStringBytes = 4096;
std::optional<std::string> YamlToInt64(const YAML::Node& node, int64_t* out);
std::optional<std::string> YamlToUint64(const YAML::Node& node, uint64_t* out);
std::optional<std::string> YamlToDouble(const YAML::Node& node, double* out);
std::optional<std::string> YamlToBool(const YAML::Node& node, bool* out);
std::optional<std::string> YamlToString(const YAML::Node& node, std::string* out);

/// Every problem found in a config, as "dotted.path: message" lines, so that one run reports
/// all of them. Remembers which paths are bad so cross-field checks can skip them. The error
/// stays short whatever the input (docs/OPERATIONS.md, "Error sizes"): each line is cut to
/// kMaxLineBytes, and ToStatus lists at most kMaxListed lines and kMaxBytes in all, then
/// "... and N more problems".
class ConfigProblems {
 public:
  static constexpr size_t kMaxListed = 20;
  static constexpr size_t kMaxLineBytes = 400;
  static constexpr size_t kMaxBytes = 3000;

  // An empty `path` adds `message` alone.
  void Add(const std::string& path, const std::string& message);
  bool Bad(const std::string& path) const { return bad_paths_.count(path) > 0; }
  bool empty() const { return count_ == 0; }
  size_t count() const { return count_; }
  // InvalidArgument with one line per problem, each prefixed by "source_name: ".
  absl::Status ToStatus(const std::string& source_name) const;

 private:
  std::vector<std::string> lines_;  // The first kMaxListed, shortened.
  size_t count_ = 0;
  std::set<std::string> bad_paths_;
};

/// Reads the keys of one YAML map at a dotted `path` ("" for the top level) into typed fields.
/// A key that is absent leaves its field alone; a bad value is reported to `problems` and
/// leaves the field alone. Finish() reports every key no reader asked for (listing the allowed
/// ones) and duplicated keys, which yaml-cpp keeps silently. Never throws YAML exceptions.
/// Example: YamlMapReader r(node, "optim", &problems); r.Double("lr", &lr); r.Finish();
class YamlMapReader {
 public:
  YamlMapReader(YAML::Node node, std::string path, ConfigProblems* problems);

  void Int(const char* key, int64_t* out) { Read(key, out, YamlToInt64); }
  void Uint(const char* key, uint64_t* out) { Read(key, out, YamlToUint64); }
  void Double(const char* key, double* out) { Read(key, out, YamlToDouble); }
  void Bool(const char* key, bool* out) { Read(key, out, YamlToBool); }
  // True when `key` was present and read into *out.
  bool String(const char* key, std::string* out) { return Read(key, out, YamlToString); }
  // A list of strings; an empty value is the empty list.
  void StringList(const char* key, std::vector<std::string>* out);
  // A map of names to strings, e.g. `labels: {team: mt}`; an empty value is the empty map.
  // Keys must be plain scalars and unique; a null value is the empty string.
  void StringMap(const char* key, std::map<std::string, std::string>* out);
  // A list of exactly outs.size() numbers, e.g. `betas: [0.9, 0.98]`.
  void DoubleTuple(const char* key, std::initializer_list<double*> outs);

  // A named choice: the string at `key` through `parse` (std::optional<T>(std::string_view)).
  // A name `parse` does not know is reported as "must be <allowed> (got '<name>')".
  template <typename T, typename Parse>
  void Named(const char* key, T* out, Parse parse, const std::string& allowed) {
    std::string name;
    if (!String(key, &name)) return;
    if (std::optional<T> value = parse(name)) {
      *out = *value;
    } else {
      ReportUnknownName(key, allowed, name);
    }
  }

  // The nested map at `key`; absent or empty gives a reader with no keys (all defaults).
  YamlMapReader Section(const char* key);
  // A key users may not set; reported with `why` (where the value comes from) when present.
  void Forbid(const char* key, const std::string& why);
  // Reports unknown and duplicated keys; call after every field was read.
  void Finish();

 private:
  std::string PathOf(const std::string& key) const;
  // The value of `key`, or nullopt when absent; marks the key as known either way.
  std::optional<YAML::Node> Get(const char* key);
  void ReportUnknownName(const char* key, const std::string& allowed, const std::string& name);

  template <typename T, typename Convert>
  bool Read(const char* key, T* out, Convert convert) {
    std::optional<YAML::Node> node = Get(key);
    if (!node) return false;
    if (std::optional<std::string> error = convert(*node, out)) {
      problems_->Add(PathOf(key), *error);
      return false;
    }
    return true;
  }

  YAML::Node node_;
  std::string path_;
  ConfigProblems* problems_;
  std::vector<std::string> known_;  // In schema order, for the "allowed:" list.
  std::vector<std::string> forbidden_;
};

}  // namespace deepnet::job
