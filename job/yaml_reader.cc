#include "job/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace deepnet::job {
namespace {

// std::from_chars over the whole scalar, after an optional '+' (which from_chars refuses).
// Returns the errc, with errc::invalid_argument when characters are left over.
template <typename T>
std::errc ParseWhole(const YAML::Node& node, T* out) {
  std::string_view s = node.Scalar();
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::errc::invalid_argument;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (ec == std::errc() && end != s.data() + s.size()) return std::errc::invalid_argument;
  return ec;
}

}  // namespace

std::string ShortestDouble(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

std::string FormatDouble(double v) {
  std::string text = ShortestDouble(v);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

namespace {

// Length of the UTF-8 sequence starting at s[i] (1-4), or 0 when it is not valid there.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto byte = [&s](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n = 0;
  unsigned min = 0;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, min = 0x80;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, min = 0x800;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  unsigned cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7F; }

}  // namespace

std::string ShortenForMessage(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const size_t n = Utf8Length(text, i);
    std::string piece;
    if (n == 0 || IsControl(c)) {
      static constexpr char kHex[] = "0123456789abcdef";
      piece = {'\\', 'x', kHex[c >> 4], kHex[c & 0xF]};
    } else {
      piece.assign(text.substr(i, n));
    }
    if (out.size() + piece.size() > max_bytes) return out + "...";
    out += piece;
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::optional<std::string> CheckPlainText(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Length(text, i);
    if (n == 0) return absl::StrCat("must be valid UTF-8 (bad byte at offset ", i, ")");
    if (IsControl(static_cast<unsigned char>(text[i]))) {
      return absl::StrCat("must not contain control characters (",
                          ShortenForMessage(text.substr(i, 1), 8), " at offset ", i, ")");
    }
    i += n;
  }
  return std::nullopt;
}

std::string DescribeYaml(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return absl::StrCat("'", ShortenForMessage(node.Scalar(), 57), "'");
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

// yaml-cpp's own as<T>() is not used: it throws on mismatch and accepts more than we want.
std::optional<std::string> YamlToInt64(const YAML::Node& node, int64_t* out) {
  int64_t v = 0;
  const std::errc ec = node.IsScalar() ? ParseWhole(node, &v) : std::errc::invalid_argument;
  if (ec == std::errc::result_out_of_range) {
    return absl::StrCat("integer out of range [", INT64_MIN, ", ", INT64_MAX, "] (got ",
                        DescribeYaml(node), ")");
  }
  if (ec != std::errc()) return absl::StrCat("expected an integer (got ", DescribeYaml(node), ")");
  *out = v;
  return std::nullopt;
}

std::optional<std::string> YamlToUint64(const YAML::Node& node, uint64_t* out) {
  uint64_t v = 0;
  if (!node.IsScalar() || ParseWhole(node, &v) != std::errc()) {
    return absl::StrCat("expected an integer in [0, ", UINT64_MAX, "] (got ", DescribeYaml(node),
                        ")");
  }
  *out = v;
  return std::nullopt;
}

std::optional<std::string> YamlToDouble(const YAML::Node& node, double* out) {
  double v = 0;
  if (!node.IsScalar() || ParseWhole(node, &v) != std::errc() || !std::isfinite(v)) {
    return absl::StrCat("expected a finite number (got ", DescribeYaml(node), ")");
  }
  *out = v;
  return std::nullopt;
}

std::optional<std::string> YamlToBool(const YAML::Node& node, bool* out) {
  if (node.IsScalar() && (node.Scalar() == "true" || node.Scalar() == "false")) {
    *out = node.Scalar() == "true";
    return std::nullopt;
  }
  return absl::StrCat("expected true or false (got ", DescribeYaml(node), ")");
}

// A key left empty (`dir:`) reads as the empty string, which is what an empty string field
// means everywhere in our configs.
std::optional<std::string> YamlToString(const YAML::Node& node, std::string* out) {
  if (node.IsNull()) {
    out->clear();
    return std::nullopt;
  }
  if (!node.IsScalar()) return absl::StrCat("expected a string (got ", DescribeYaml(node), ")");
  if (node.Scalar().size() > kMaxStringBytes) {
    return absl::StrCat("must be at most ", kMaxStringBytes, " bytes (got ", node.Scalar().size(),
                        ")");
  }
  if (std::optional<std::string> error = CheckPlainText(node.Scalar())) {
    return absl::StrCat(*error, " (got ", DescribeYaml(node), ")");
  }
  *out = node.Scalar();
  return std::nullopt;
}

void ConfigProblems::Add(const std::string& path, const std::string& message) {
  ++count_;
  bad_paths_.insert(path);
  if (lines_.size() >= kMaxListed) return;
  lines_.push_back(
      ShortenForMessage(path.empty() ? message : absl::StrCat(path, ": ", message), kMaxLineBytes));
}

absl::Status ConfigProblems::ToStatus(const std::string& source_name) const {
  if (count_ == 0) return absl::OkStatus();
  const std::string prefix = ShortenForMessage(source_name, 200);
  std::string text;
  size_t listed = 0;
  for (const std::string& line : lines_) {
    const std::string entry = absl::StrCat(listed > 0 ? "\n" : "", prefix, ": ", line);
    if (listed > 0 && text.size() + entry.size() > kMaxBytes) break;
    text += entry;
    ++listed;
  }
  if (listed < count_) {
    absl::StrAppend(&text, "\n", prefix, ": ... and ", count_ - listed, " more problem",
                    count_ - listed == 1 ? "" : "s");
  }
  return absl::InvalidArgumentError(text);
}

YamlMapReader::YamlMapReader(YAML::Node node, std::string path, ConfigProblems* problems)
    : node_(std::move(node)), path_(std::move(path)), problems_(problems) {}

void YamlMapReader::StringList(const char* key, std::vector<std::string>* out) {
  std::optional<YAML::Node> node = Get(key);
  if (!node) return;
  if (node->IsNull()) {
    out->clear();
    return;
  }
  if (!node->IsSequence()) {
    problems_->Add(PathOf(key),
                   absl::StrCat("expected a list of strings (got ", DescribeYaml(*node), ")"));
    return;
  }
  std::vector<std::string> values;
  for (size_t i = 0; i < node->size(); ++i) {
    const YAML::Node item = (*node)[i];
    std::string value;
    if (!item.IsScalar()) {
      problems_->Add(absl::StrCat(PathOf(key), "[", i, "]"),
                     absl::StrCat("expected a string (got ", DescribeYaml(item), ")"));
    } else if (std::optional<std::string> error = YamlToString(item, &value)) {
      problems_->Add(absl::StrCat(PathOf(key), "[", i, "]"), *error);
    } else {
      values.push_back(std::move(value));
    }
  }
  if (values.size() == node->size()) *out = std::move(values);
}

void YamlMapReader::StringMap(const char* key, std::map<std::string, std::string>* out) {
  std::optional<YAML::Node> node = Get(key);
  if (!node) return;
  if (node->IsNull()) {
    out->clear();
    return;
  }
  if (!node->IsMap()) {
    problems_->Add(PathOf(key),
                   absl::StrCat("expected a map of strings (got ", DescribeYaml(*node), ")"));
    return;
  }
  std::map<std::string, std::string> values;
  bool ok = true;
  for (const auto& entry : *node) {
    if (!entry.first.IsScalar()) {
      problems_->Add(PathOf(key), absl::StrCat("keys must be plain names (got ",
                                               DescribeYaml(entry.first), ")"));
      ok = false;
      continue;
    }
    const std::string path = absl::StrCat(PathOf(key), ".", entry.first.Scalar());
    std::string value;
    if (std::optional<std::string> error = YamlToString(entry.second, &value)) {
      problems_->Add(path, *error);
      ok = false;
    } else if (!values.emplace(entry.first.Scalar(), std::move(value)).second) {
      problems_->Add(path, "duplicate key");
      ok = false;
    }
  }
  if (ok) *out = std::move(values);
}

void YamlMapReader::DoubleTuple(const char* key, std::initializer_list<double*> outs) {
  std::optional<YAML::Node> node = Get(key);
  if (!node) return;
  if (!node->IsSequence() || node->size() != outs.size()) {
    problems_->Add(PathOf(key), absl::StrCat("expected a list of ", outs.size(), " numbers (got ",
                                             DescribeYaml(*node), ")"));
    return;
  }
  std::vector<double> values(outs.size());
  bool ok = true;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (std::optional<std::string> error = YamlToDouble((*node)[i], &values[i])) {
      problems_->Add(absl::StrCat(PathOf(key), "[", i, "]"), *error);
      ok = false;
    }
  }
  if (!ok) return;
  for (size_t i = 0; i < outs.size(); ++i) *outs.begin()[i] = values[i];
}

YamlMapReader YamlMapReader::Section(const char* key) {
  std::optional<YAML::Node> node = Get(key);
  if (node && !node->IsNull() && !node->IsMap()) {
    problems_->Add(PathOf(key), absl::StrCat("expected a map (got ", DescribeYaml(*node), ")"));
    node.reset();
  }
  return YamlMapReader(node ? *node : YAML::Node(), PathOf(key), problems_);
}

void YamlMapReader::Forbid(const char* key, const std::string& why) {
  forbidden_.emplace_back(key);
  const YAML::Node& map = node_;  // The const operator[] does not insert the key.
  if (map.IsMap() && map[key].IsDefined()) problems_->Add(PathOf(key), why);
}

void YamlMapReader::Finish() {
  if (!node_.IsMap()) return;
  std::set<std::string> seen;
  for (const auto& entry : node_) {
    if (!entry.first.IsScalar()) {
      problems_->Add(
          path_.empty() ? "top level" : path_,
          absl::StrCat("keys must be plain names (got ", DescribeYaml(entry.first), ")"));
      continue;
    }
    const std::string& key = entry.first.Scalar();
    const bool allowed = std::find(known_.begin(), known_.end(), key) != known_.end() ||
                         std::find(forbidden_.begin(), forbidden_.end(), key) != forbidden_.end();
    if (!seen.insert(key).second) {
      problems_->Add(PathOf(key), "duplicate key");
    } else if (!allowed) {
      problems_->Add(PathOf(key),
                     absl::StrCat("unknown key (allowed: ", absl::StrJoin(known_, ", "), ")"));
    }
  }
}

std::string YamlMapReader::PathOf(const std::string& key) const {
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

std::optional<YAML::Node> YamlMapReader::Get(const char* key) {
  known_.emplace_back(key);
  if (!node_.IsMap()) return std::nullopt;
  const YAML::Node& map = node_;  // The const operator[] does not insert the key.
  YAML::Node value = map[key];
  if (!value.IsDefined()) return std::nullopt;
  return value;
}

void YamlMapReader::ReportUnknownName(const char* key, const std::string& allowed,
                                      const std::string& name) {
  problems_->Add(PathOf(key), absl::StrCat("must be ", allowed, " (got '", name, "')"));
}

}  // namespace deepnet::job
