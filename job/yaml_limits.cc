#include "job/yaml_limits.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <exception>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace deepnet::job {
namespace {

// Thrown by the counter to stop the parse at the first limit exceeded.
struct LimitExceeded {
  std::string message;
};

class LimitCounter : public YAML::EventHandler {
 public:
  explicit LimitCounter(const YamlLimits& limits) : limits_(limits) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override { anchor_sizes_.clear(); }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    Leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchor_sizes_.find(anchor);
    if (it == anchor_sizes_.end()) {
      throw LimitExceeded{absl::StrCat("YAML alias at line ", mark.line + 1,
                                       " refers to an anchor that contains it (recursive)")};
    }
    Add(mark, it->second);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  void Add(const YAML::Mark& mark, int64_t count) {
    nodes_ += count;
    if (nodes_ > limits_.max_nodes) {
      throw LimitExceeded{absl::StrCat("YAML too large: more than ", limits_.max_nodes,
                                       " nodes (aliases counted expanded) at line ",
                                       mark.line + 1)};
    }
  }
  void Anchor(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor == YAML::NullAnchor) return;
    if (++anchors_ > limits_.max_anchors) {
      throw LimitExceeded{absl::StrCat("YAML too large: more than ", limits_.max_anchors,
                                       " anchors at line ", mark.line + 1)};
    }
  }
  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Anchor(mark, anchor);
    Add(mark, 1);
    if (anchor != YAML::NullAnchor) anchor_sizes_[anchor] = 1;
  }
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Anchor(mark, anchor);
    Add(mark, 1);
    if (static_cast<int>(open_.size()) >= limits_.max_depth) {
      throw LimitExceeded{absl::StrCat("YAML nested too deeply: more than ", limits_.max_depth,
                                       " levels of lists and maps at line ", mark.line + 1)};
    }
    open_.emplace_back(anchor, nodes_ - 1);
  }
  void Close() {
    if (open_.empty()) return;
    const auto [anchor, start] = open_.back();
    open_.pop_back();
    if (anchor != YAML::NullAnchor) anchor_sizes_[anchor] = nodes_ - start;
  }

  const YamlLimits& limits_;
  int64_t nodes_ = 0;
  int64_t anchors_ = 0;
  std::vector<std::pair<YAML::anchor_t, int64_t>> open_;      // (anchor, nodes_ before it)
  std::unordered_map<YAML::anchor_t, int64_t> anchor_sizes_;  // Completed anchors only.
};

// yaml-cpp's scanner queues the tokens of nested flow collections before its parser emits the
// first event (1 MB of '[' costs it ~140 MB), so the raw text is checked first: '[' and '{'
// where a value may start (line start or after ':', ',', '[', '{', '-', '?' and blanks), skipping
// quoted scalars and comments. It may overcount only for 8x the depth limit of brackets in a
// block scalar, and never counts brackets inside plain scalars like "a[b".
std::optional<int> RawFlowDepthExceeded(const std::string& text, int max_depth) {
  int depth = 0;
  int line = 1;
  bool value_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      value_start = true;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      // Blanks keep the position's kind.
    } else if (c == '#' &&
               (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n')) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (value_start && (c == '"' || c == '\'')) {
      for (++i; i < text.size() && text[i] != c; ++i) {
        if (text[i] == '\n') ++line;
        if (c == '"' && text[i] == '\\') ++i;
      }
      value_start = false;
    } else if (value_start && (c == '[' || c == '{')) {
      if (++depth > max_depth) return line;
    } else if (c == ']' || c == '}') {
      depth = depth > 0 ? depth - 1 : 0;
      value_start = false;
    } else {
      value_start = c == ':' || c == ',' || c == '-' || c == '?';
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status CheckYamlLimits(const std::string& text, const YamlLimits& limits) {
  if (std::optional<int> line = RawFlowDepthExceeded(text, 8 * limits.max_depth)) {
    return absl::InvalidArgumentError(absl::StrCat("YAML nested too deeply: more than ",
                                                   limits.max_depth,
                                                   " levels of lists and maps at line ", *line));
  }
  std::istringstream in(text);
  LimitCounter counter(limits);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const LimitExceeded& e) {
    return absl::InvalidArgumentError(e.message);
  } catch (const YAML::Exception&) {
    // A syntax error: the loader reports it with its position.
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("YAML cannot be read: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace deepnet::job
