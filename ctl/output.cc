#include "ctl/output.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ctl/format.h"

namespace deepnet::ctl {
namespace {

// True when `text` can be written as a plain YAML scalar and reads back as the same string
// (not as a number, bool or null, and with no character YAML gives a meaning).
bool SafePlainScalar(const std::string& text) {
  if (text.empty()) return false;
  const char first = text[0];
  if (!absl::ascii_isalpha(static_cast<unsigned char>(first)) && first != '_' && first != '/') {
    return false;
  }
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (!absl::ascii_isalnum(u) && c != '_' && c != '-' && c != '.' && c != '/') return false;
  }
  static constexpr const char* kReserved[] = {"true", "false", "null", "yes", "no", "on",
                                              "off",  "y",     "n",    "nan", "inf"};
  const std::string lower = absl::AsciiStrToLower(text);
  for (const char* word : kReserved) {
    if (lower == word) return false;
  }
  return true;
}

// A multi-line string that a literal block (`|`, clip chomping) reproduces exactly.
bool FitsLiteralBlock(const std::string& text) {
  if (text.size() < 2 || text.back() != '\n' || text[text.size() - 2] == '\n') return false;
  if (text[0] == ' ' || text[0] == '\t' || text[0] == '\n') return false;
  for (char c : text) {
    if (c == '\r' || (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')) {
      return false;
    }
  }
  // Trailing spaces on a line survive; a line of only spaces before the end might not.
  return text.find(" \n") == std::string::npos;
}

void EmitJson(const nlohmann::ordered_json& value, YAML::Emitter& out) {
  if (value.is_object()) {
    if (value.empty()) {
      out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
      return;
    }
    out << YAML::BeginMap;
    for (auto it = value.begin(); it != value.end(); ++it) {
      out << YAML::Key;
      EmitJson(nlohmann::ordered_json(it.key()), out);
      out << YAML::Value;
      EmitJson(it.value(), out);
    }
    out << YAML::EndMap;
  } else if (value.is_array()) {
    if (value.empty()) {
      out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
      return;
    }
    out << YAML::BeginSeq;
    for (const auto& item : value) EmitJson(item, out);
    out << YAML::EndSeq;
  } else if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (SafePlainScalar(text)) {
      out << text;
    } else if (FitsLiteralBlock(text)) {
      out << YAML::Literal << text;
    } else {
      out << YAML::DoubleQuoted << text;
    }
  } else if (value.is_null()) {
    out << YAML::Null;
  } else {
    out << value.dump();  // Numbers and booleans: JSON's spelling reads back the same in YAML.
  }
}

std::string Progress(const v1::Job& job) {
  if (job.spec().max_steps() > 0) return absl::StrCat(job.step(), "/", job.spec().max_steps());
  return absl::StrCat(job.step());
}

std::string StateText(const v1::Job& job) {
  std::string text = StateName(job.state());
  if (job.state() == v1::JOB_STATE_RECOVERING && job.recovery_cause() != 0) {
    absl::StrAppend(&text, " (", CauseName(job.recovery_cause()), ")");
  }
  return text;
}

std::string Runtime(const v1::Job& job, int64_t now_s) {
  if (!IsSet(job.start_time())) return "-";
  google::protobuf::Timestamp end = job.end_time();
  if (!IsSet(end)) end.set_seconds(now_s);
  return FormatDuration(SecondsBetween(job.start_time(), end));
}

}  // namespace

std::optional<OutputFormat> ParseOutputFormat(const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "table") return OutputFormat::kTable;
  if (lower == "json") return OutputFormat::kJson;
  if (lower == "yaml") return OutputFormat::kYaml;
  return std::nullopt;
}

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // Fails only for messages that cannot be represented (e.g. invalid Timestamp values).
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return nlohmann::ordered_json({{"error", std::string(status.message())}}).dump();
  }
  if (pretty && (json.empty() || json.back() != '\n')) json.push_back('\n');
  return json;
}

std::string JsonToYaml(const std::string& json) {
  YAML::Emitter out;
  EmitJson(nlohmann::ordered_json::parse(json), out);
  std::string text = out.c_str();
  text.push_back('\n');
  return text;
}

void PrintStructured(const google::protobuf::Message& message, OutputFormat format,
                     std::ostream& out) {
  const std::string json = ToJson(message, /*pretty=*/true);
  out << (format == OutputFormat::kYaml ? JsonToYaml(json) : json);
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (row.size() > widths.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << '\n';
  }
}

void PrintJobTable(const std::vector<const v1::Job*>& jobs, int64_t now_s, std::ostream& out) {
  Table table({"JOB ID", "NAME", "OWNER", "STATE", "REASON", "STEP", "ATTEMPT", "CREATED",
               "RUNTIME"});
  for (const v1::Job* job : jobs) {
    const std::string reason = PendingCodeName(job->pending_code());
    table.AddRow({job->job_id(), job->spec().name().empty() ? "-" : job->spec().name(),
                  job->owner(), StateText(*job), reason.empty() ? "-" : reason, Progress(*job),
                  absl::StrCat(job->attempt()), FormatTimestamp(job->create_time()),
                  Runtime(*job, now_s)});
  }
  table.Print(out);
}

void PrintJobDetail(const v1::Job& job, int64_t now_s, std::ostream& out) {
  const v1::JobSpec& spec = job.spec();
  Table fields({"Job:", job.job_id()});
  fields.AddRow({"Name:", spec.name().empty() ? "-" : spec.name()});
  fields.AddRow({"Owner:", job.owner()});
  fields.AddRow({"State:", StateText(job)});
  if (!job.pending_reason().empty()) {
    const std::string code = PendingCodeName(job.pending_code());
    fields.AddRow({"Pending:", code.empty() ? job.pending_reason()
                                            : absl::StrCat(job.pending_reason(), " (", code, ")")});
  }
  if (!job.message().empty()) fields.AddRow({"Message:", job.message()});
  if (job.recovery_cause() != 0 && job.state() != v1::JOB_STATE_RECOVERING) {
    fields.AddRow({"Last recovery:", CauseName(job.recovery_cause())});
  }
  fields.AddRow({"Step:", Progress(job)});
  fields.AddRow({"Checkpoint:", job.latest_checkpoint_step() > 0
                                    ? absl::StrCat("step ", job.latest_checkpoint_step())
                                    : "-"});
  fields.AddRow({"Attempt:", absl::StrCat(job.attempt(), " (restarts ", job.restarts(), "/",
                                          spec.max_restarts(), ")")});
  std::string layout =
      absl::StrCat(spec.pipeline_stages(), " stages x ", spec.data_parallel(), " replicas");
  if (spec.device() != 0) absl::StrAppend(&layout, " (", DeviceName(spec.device()), ")");
  fields.AddRow({"Layout:", layout});
  if (job.memory_per_rank_bytes() > 0) {
    const std::string bytes = job.memory_per_rank_bytes() == INT64_MAX
                                  ? std::string("more than 8 EiB")
                                  : FormatBytes(job.memory_per_rank_bytes());
    fields.AddRow({"Memory/rank:", absl::StrCat(bytes, " estimated (biggest part: ",
                                                job.memory_biggest_part(), ")")});
  }
  fields.AddRow({"Priority:", absl::StrCat(spec.priority())});
  if (!spec.labels().empty()) {
    std::vector<std::string> labels;
    for (const auto& [key, value] : spec.labels()) labels.push_back(absl::StrCat(key, "=", value));
    std::sort(labels.begin(), labels.end());
    fields.AddRow({"Labels:", absl::StrJoin(labels, ", ")});
  }
  if (!spec.checkpoint_dir().empty()) fields.AddRow({"Checkpoint dir:", spec.checkpoint_dir()});
  if (!job.idempotency_key().empty()) fields.AddRow({"Idempotency key:", job.idempotency_key()});
  fields.AddRow({"Created:", FormatTimestamp(job.create_time())});
  fields.AddRow({"Started:", FormatTimestamp(job.start_time())});
  if (IsSet(job.end_time())) fields.AddRow({"Ended:", FormatTimestamp(job.end_time())});
  fields.AddRow({"Runtime:", Runtime(job, now_s)});
  fields.Print(out);
  if (job.placement_size() > 0) {
    out << "Placement:\n";
    Table placement({"  RANK", "STAGE", "REPLICA", "WORKER", "SLOT"});
    for (const v1::RankPlacement& p : job.placement()) {
      placement.AddRow({absl::StrCat("  ", p.rank()), absl::StrCat(p.stage()),
                        absl::StrCat(p.replica()), p.worker_id(), absl::StrCat(p.slot_index())});
    }
    placement.Print(out);
  }
}

void PrintCheckpointTable(const v1::ListCheckpointsResponse& response, std::ostream& out) {
  Table table({"STEP", "LATEST", "ATTEMPT", "SIZE", "TIME", "PATH"});
  for (const v1::Checkpoint& c : response.checkpoints()) {
    table.AddRow({absl::StrCat(c.step()), c.latest() ? "*" : "", absl::StrCat(c.attempt()),
                  FormatBytes(c.size_bytes()), FormatTimestamp(c.time()), c.path()});
  }
  table.Print(out);
}

std::string MetricHeaderRow() {
  return absl::StrFormat("%9s  %9s  %9s  %10s  %9s  %9s  %9s  %10s  %10s  %10s  %10s  %7s  %s",
                         "STEP", "LOSS", "NLL", "LR", "GRAD_NORM", "TOKENS/S", "UPD_NORM", "MEMORY",
                         "GPU_ALLOC", "GPU_RESV", "GPU_PEAK", "ATTEMPT", "TIME");
}

std::string MetricRow(const v1::MetricPoint& p) {
  auto bytes = [](int64_t n) { return n > 0 ? FormatBytes(n) : std::string("-"); };
  return absl::StrFormat(
      "%9d  %9.4f  %9.4f  %10.3e  %9.3f  %9s  %9.4f  %10s  %10s  %10s  %10s  %7d  %s", p.step(),
      p.loss(), p.nll(), p.lr(), p.grad_norm(), FormatCount(p.tokens_per_s()), p.update_norm(),
      bytes(p.memory_bytes()), bytes(p.gpu_allocated_bytes()), bytes(p.gpu_reserved_bytes()),
      bytes(p.gpu_peak_allocated_bytes()), p.attempt(), FormatTimestamp(p.time()));
}

}  // namespace deepnet::ctl
