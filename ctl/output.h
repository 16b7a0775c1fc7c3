#pragma once
// deepnetctl's three output formats. `json` is the proto3 JSON mapping of the response message
// (google::protobuf::util::MessageToJsonString, proto field names, default values included);
// `yaml` is the same structure in YAML block style; `table` is for people: aligned columns,
// local times, human-readable durations. Pure functions of their inputs; thread-safe.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "deepnet/v1/job_service.pb.h"

namespace deepnet::ctl {

enum class OutputFormat { kTable, kJson, kYaml };

// "table", "json" or "yaml"; nullopt otherwise.
std::optional<OutputFormat> ParseOutputFormat(const std::string& text);

// JSON of `message`: pretty-printed when `pretty`, else one line (for JSON-lines streams).
std::string ToJson(const google::protobuf::Message& message, bool pretty);

// The YAML form of a JSON document (block style; strings that would read back as another type
// are quoted, multi-line strings become literal blocks). Ends with a newline.
std::string JsonToYaml(const std::string& json);

// Prints `message` as JSON or YAML (one document). Not for kTable.
void PrintStructured(const google::protobuf::Message& message, OutputFormat format,
                     std::ostream& out);

// Left-aligned columns separated by two spaces; the last column is not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// Jobs as a table (one row per job); REASON is a queued job's pending code ("-" otherwise);
// `now_s` (Unix seconds) ends the RUNTIME of running jobs.
void PrintJobTable(const std::vector<const v1::Job*>& jobs, int64_t now_s, std::ostream& out);
// One job, field by field, with its placement.
void PrintJobDetail(const v1::Job& job, int64_t now_s, std::ostream& out);
void PrintCheckpointTable(const v1::ListCheckpointsResponse& response, std::ostream& out);

// Fixed-width metric rows, so that a stream can print them as they come.
std::string MetricHeaderRow();
std::string MetricRow(const v1::MetricPoint& point);

}  // namespace deepnet::ctl
