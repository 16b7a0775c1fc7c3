#pragma once
// The results file of a sweep, <out>/results.jsonl: one JSON object per line, one line per
// finished (or budget-stopped) run, appended as runs end. The latest row of a run id wins, so a
// resumed sweep appends rather than rewrites; a torn last line (a crash mid-write) is skipped.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace deepnet::experiment {

struct ResultsFile {
  std::vector<nlohmann::json> rows;  // In file order.
  int64_t bad_lines = 0;             // Lines that are not JSON objects with a run_id.
};

/// Reads `path`; a missing file is an empty result.
absl::StatusOr<ResultsFile> ReadResults(const std::string& path);

/// Appends one row as one line and flushes it to disk. Starts a new line first when the file
/// ends in a torn line.
absl::Status AppendResult(const std::string& path, const nlohmann::json& row);

/// The last row of each run id.
std::map<std::string, nlohmann::json> LatestRows(const std::vector<nlohmann::json>& rows);

/// Whether a run need not run again: its latest row finished (ok, diverged, plateau or failed;
/// not budget) with the same effective config.
bool IsFinished(const nlohmann::json& row, const nlohmann::json& config);

/// The statuses that end a run for good.
bool IsFinalStatus(const std::string& status);

/// A YAML document as JSON: maps, lists, and scalars as numbers or booleans where they read as
/// such (quoted scalars stay strings). Used for the effective config and the axis values.
nlohmann::json YamlToJson(const std::string& yaml_text);
nlohmann::json ScalarToJson(const std::string& scalar);

}  // namespace deepnet::experiment
