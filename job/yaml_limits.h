#pragma once
// Bounds on a YAML document checked before it is loaded into yaml-cpp nodes, so that a small
// text cannot make the reader build a huge tree: aliases are counted as the nodes they stand for
// ("billion laughs"), and nesting is bounded before yaml-cpp's recursive parser goes deep.

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace deepnet::job {

struct YamlLimits {
  // Scalars, lists and maps in all documents, every alias counted as the nodes it repeats.
  int64_t max_nodes = 20000;
  // Lists and maps nested inside each other.
  int max_depth = 32;
  // Anchors (&name) in all documents.
  int64_t max_anchors = 1000;
};

/// The limits of a job spec or `deepnet train --config` file (docs/CONFIG.md, "YAML limits").
inline constexpr YamlLimits kJobYamlLimits{};

/// Scans `text` with yaml-cpp's event parser, building no nodes, and stops at the first limit
/// exceeded: INVALID_ARGUMENT naming the limit and where the text crossed it, e.g.
/// "YAML too large: more than 20000 nodes (aliases counted expanded) at line 7". Also refuses an
/// alias to an anchor that is still open (a recursive structure). Syntax errors are left for the
/// loader to report (OK here). Never throws.
[[nodiscard]] absl::Status CheckYamlLimits(const std::string& text,
                                           const YamlLimits& limits = kJobYamlLimits);

}  // namespace deepnet::job
