#include "experiment/results.h"

#include <fcntl.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace deepnet::experiment {
namespace {

nlohmann::json NodeToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& item : node) j[item.first.Scalar()] = NodeToJson(item.second);
    return j;
  }
  if (node.IsSequence()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& item : node) j.push_back(NodeToJson(item));
    return j;
  }
  if (node.IsScalar()) {
    if (node.Tag() == "!") return node.Scalar();  // Quoted: a string.
    return ScalarToJson(node.Scalar());
  }
  return nullptr;
}

}  // namespace

nlohmann::json ScalarToJson(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  if (s.empty() || s == "~" || s == "null")
    return s.empty() ? nlohmann::json("") : nlohmann::json(nullptr);
  int64_t i = 0;
  if (absl::SimpleAtoi(s, &i)) return i;
  double d = 0;
  const bool numeric_text = s.find_first_not_of("0123456789.eE+-") == std::string::npos;
  if (numeric_text && absl::SimpleAtod(s, &d)) return d;
  return s;
}

nlohmann::json YamlToJson(const std::string& yaml_text) {
  try {
    return NodeToJson(YAML::Load(yaml_text));
  } catch (const YAML::Exception&) {
    return yaml_text;
  }
}

absl::StatusOr<ResultsFile> ReadResults(const std::string& path) {
  ResultsFile file;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return file;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("results file ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object() || !row.contains("run_id") || !row["run_id"].is_string()) {
      ++file.bad_lines;
      continue;
    }
    file.rows.push_back(std::move(row));
  }
  if (in.bad())
    return absl::InvalidArgumentError(absl::StrCat("results file ", path, ": read failed"));
  return file;
}

absl::Status AppendResult(const std::string& path, const nlohmann::json& row) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("results file ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::string text = row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, size - 1) == 1 && last != '\n') text = "\n" + text;
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return absl::InternalError(absl::StrCat("results file ", path, ": write failed: ", why));
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  return absl::OkStatus();
}

std::map<std::string, nlohmann::json> LatestRows(const std::vector<nlohmann::json>& rows) {
  std::map<std::string, nlohmann::json> latest;
  for (const auto& row : rows) latest[row["run_id"].get<std::string>()] = row;
  return latest;
}

bool IsFinalStatus(const std::string& status) {
  return status == "ok" || status == "diverged" || status == "plateau" || status == "failed";
}

bool IsFinished(const nlohmann::json& row, const nlohmann::json& config) {
  return row.is_object() && row.value("status", "") != "" &&
         IsFinalStatus(row.value("status", "")) && row.contains("config") &&
         row["config"] == config;
}

}  // namespace deepnet::experiment
